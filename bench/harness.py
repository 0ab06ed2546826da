"""The one harness of proofgym's benches: fresh state per row, wall and CPU, load with every table.

A bench script declares *probes* (a function that measures something and returns one or more
values) and *rows* (a value of a probe, or one derived from other rows, against a target), then
calls :meth:`Bench.main`. Every probe runs in a fresh interpreter (the same script, ``--probe KEY``):
a new env, pool, server and sandbox spawner, no cache warmed by an earlier row, the same for
both sides of a comparison. The 1-minute load average is read before and after each probe, and a
row whose probe saw a load above :data:`LOAD_LIMIT` is marked as not a valid measurement, whether
it met its target or not.

CPU time is the whole process tree's, sandboxes included (bench/cputime.py).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from cputime import CpuClock, remove_cgroup, timed  # noqa: F401 - timed: for the benches

#: A probe that saw a 1-minute load average above this (2 cores) did not measure this code alone.
LOAD_LIMIT = 1.5
INVALID = f"load>{LOAD_LIMIT:g}: not a valid measurement"
#: The line a probe process prints its values on (the rest of its output is free-form).
RESULT_PREFIX = "BENCH-PROBE-RESULT "
ROOT = Path(__file__).resolve().parents[1]


def load1() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# ----------------------------------------------------------------------------- rows and targets
@dataclass(frozen=True)
class Target:
    """``measured op value``, e.g. ``Target("<=", 20, "ms")``."""

    op: Literal["<=", ">="]
    value: float
    unit: str

    def met(self, measured: float) -> bool:
        if math.isnan(measured):
            return False
        return measured <= self.value if self.op == "<=" else measured >= self.value

    def __str__(self) -> str:
        unit = self.unit if self.unit.endswith("%") else f" {self.unit}"
        return f"{self.op} {'+' if self.unit == '+%' else ''}{self.value:g}{unit.lstrip('+')}"


def fmt(value: float, unit: str) -> str:
    if math.isnan(value):
        return "-"
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "+%":
        return f"{value:+.1f}%"
    digits = 3 if abs(value) < 1 else 2 if abs(value) < 100 else 0
    return f"{value:.{digits}f} {unit}"


@dataclass(frozen=True)
class Value:
    """One value a probe measured, with its unit and a free-form detail for the table."""

    value: float
    unit: str
    detail: str = ""


Probe = Callable[[argparse.Namespace], Mapping[str, Value]]


@dataclass(frozen=True)
class Row:
    """A table row: ``probe``'s value ``key`` (or ``derive`` of other rows) against ``target``
    (``None``: reported without one)."""

    key: str
    title: str
    target: Target | None
    probe: str = ""
    derive: Callable[[Mapping[str, Result]], Value] | None = None
    needs: tuple[str, ...] = ()


@dataclass
class ProbeRun:
    values: dict[str, Value]
    load_start: float
    load_end: float
    wall_s: float
    cpu_source: str = ""
    error: str | None = None


@dataclass
class Result:
    row: Row
    value: Value | None
    load_start: float = math.nan
    load_end: float = math.nan
    error: str | None = None
    skipped: str | None = None

    @property
    def valid(self) -> bool:
        """Measured on a machine quiet enough to hold against a target."""
        return max(self.load_start, self.load_end) <= LOAD_LIMIT

    @property
    def met(self) -> bool | None:
        if self.row.target is None or self.value is None:
            return None
        return self.row.target.met(self.value.value)


def verdict(result: Result) -> str:
    """The ``met?`` cell: yes / NO / - (no target), and the load mark."""
    if result.skipped:
        return "not run"
    if result.error or result.value is None:
        return "NO (failed)"
    met = result.met
    text = "-" if met is None else ("yes" if met else "NO")
    return text if result.valid else f"{text}; {INVALID}"


def load_cell(result: Result) -> str:
    if math.isnan(result.load_start):
        return "-"
    return f"{result.load_start:.2f} -> {result.load_end:.2f}"


COLUMNS = ("row", "measured", "target", "met?", "load 1-min (start -> end)", "detail")


def render_table(results: Sequence[Result], *, title: str) -> str:
    """A Markdown table of ``results``: every row, its value against its target, the load its
    probe ran at (rows above :data:`LOAD_LIMIT` marked), and a line with the machine's load."""
    lines = [f"## {title}", "", "| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join("---" for _ in COLUMNS) + "|"]
    for r in results:
        if r.skipped:
            measured, detail = "-", r.skipped
        elif r.error or r.value is None:
            measured, detail = "-", (r.error or "no value").replace("\n", " ")[-300:]
        else:
            measured, detail = fmt(r.value.value, r.value.unit), r.value.detail
        cells = [r.row.title, measured, str(r.row.target) if r.row.target else "(reported)",
                 verdict(r), load_cell(r), detail.replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    invalid = sum(1 for r in results if not r.skipped and not math.isnan(r.load_start) and not r.valid)
    lines += ["", f"machine: {os.cpu_count()} cores, python {sys.version.split()[0]}, load average "
                  f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min) now; "
                  f"{invalid} row(s) measured at load > {LOAD_LIMIT:g}."]
    return "\n".join(lines)


def load_line(since: float | None = None) -> str:
    """The load average now (and at ``since``, a load read when the table's runs began), with
    the mark when it is above :data:`LOAD_LIMIT`: printed under every table of a bench."""
    now = load1()
    start = f"{since:.2f} at start, " if since is not None else ""
    high = max(now, since if since is not None else now) > LOAD_LIMIT
    return (f"load 1-min: {start}{now:.2f} now on {os.cpu_count()} cores"
            + (f" ({INVALID})" if high else ""))


def in_one_run(entries: Sequence[tuple[str, Value, Target | None]], load_start: float,
               load_end: float) -> list[Result]:
    """Rows a bench measured together in one process (not each in a fresh one), every row with
    the load of the whole run, for :func:`render_table`."""
    return [Result(Row(title, title, target), value, load_start, load_end)
            for title, value, target in entries]


# ------------------------------------------------------------------------------------- running
def run_probe(script: Path, key: str, passthrough: Sequence[str], timeout_s: float) -> ProbeRun:
    """Probe ``key`` of ``script`` in a fresh interpreter; its values and the load around it."""
    load_start, started = load1(), time.perf_counter()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(script), "--probe", key, *passthrough],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        remove_cgroup(proc.pid)
        return ProbeRun({}, load_start, load1(), time.perf_counter() - started,
                        error=f"probe {key} took over {timeout_s:.0f} s")
    wall = time.perf_counter() - started
    remove_cgroup(proc.pid)
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(RESULT_PREFIX)), None)
    if proc.returncode != 0 or line is None:
        tail = (stderr or stdout).strip().splitlines()[-6:]
        return ProbeRun({}, load_start, load1(), wall,
                        error=f"probe {key} exited {proc.returncode}: {' / '.join(tail)}")
    data = json.loads(line[len(RESULT_PREFIX):])
    values = {k: Value(**v) for k, v in data["values"].items()}
    return ProbeRun(values, load_start, load1(), wall, cpu_source=data.get("cpu_source", ""))


def _probe_main(probes: Mapping[str, Probe], key: str, args: argparse.Namespace) -> None:
    if key not in probes:
        raise SystemExit(f"unknown probe {key!r}; probes: {', '.join(probes)}")
    values = probes[key](args)
    print(RESULT_PREFIX + json.dumps({"values": {k: asdict(v) for k, v in values.items()},
                                      "cpu_source": getattr(args, "cpu_source", "")}), flush=True)


def collect(rows: Sequence[Row], runs: Mapping[str, ProbeRun], only: set[str] | None) -> list[Result]:
    """The rows' results from the probes that ran (derived rows last, from those results)."""
    results: dict[str, Result] = {}
    for row in rows:
        if row.derive is not None:
            continue
        run = runs.get(row.probe)
        if run is None:  # a row of a probe that ran is shown even when --only did not name it
            results[row.key] = Result(row, None, skipped="not selected (--only)" if only is not None
                                      else "probe not run")
        elif run.error or row.key not in run.values:
            results[row.key] = Result(row, None, run.load_start, run.load_end,
                                      error=run.error or f"probe {row.probe} gave no {row.key}")
        else:
            results[row.key] = Result(row, run.values[row.key], run.load_start, run.load_end)
    for row in rows:
        if row.derive is None:
            continue
        parts = [results.get(k) for k in row.needs]
        if any(p is None or p.skipped for p in parts):
            results[row.key] = Result(row, None, skipped=f"needs {', '.join(row.needs)}")
            continue
        if any(p.error or p.value is None for p in parts):  # type: ignore[union-attr]
            results[row.key] = Result(row, None, error=f"a row it needs failed ({', '.join(row.needs)})")
            continue
        value = row.derive(results)
        results[row.key] = Result(row, value, max(p.load_start for p in parts),  # type: ignore[union-attr]
                                  max(p.load_end for p in parts))  # type: ignore[union-attr]
    return [results[row.key] for row in rows]


@dataclass
class Bench:
    """A bench script: its probes and rows. ``configure`` adds the script's own options."""

    title: str
    probes: Mapping[str, Probe]
    rows: Sequence[Row]
    configure: Callable[[argparse.ArgumentParser], None] = lambda parser: None
    description: str = ""
    timeout_s: float = 3600.0
    passthrough: list[str] = field(default_factory=list)

    def parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(description=self.description,
                                         formatter_class=argparse.RawDescriptionHelpFormatter)
        parser.add_argument("--quick", action="store_true", help="a small smoke size of every row")
        parser.add_argument("--only", default=None,
                            help="comma-separated row keys to measure (the table still lists every row)")
        parser.add_argument("--json", type=Path, default=None, help="also write the results here")
        parser.add_argument("--list", action="store_true", help="print the row keys and exit")
        parser.add_argument("--probe", default=None, help=argparse.SUPPRESS)
        self.configure(parser)
        return parser

    def main(self, script: str, argv: Sequence[str] | None = None) -> list[Result]:
        parser = self.parser()
        args = parser.parse_args(argv)
        if args.probe is not None:
            clock = CpuClock()
            args.clock, args.cpu_source = clock, clock.source
            try:
                _probe_main(self.probes, args.probe, args)
            finally:
                clock.close()
            return []
        if args.list:
            for row in self.rows:
                print(f"{row.key}\t{row.title}")
            return []
        only = set(args.only.split(",")) if args.only else None
        if only is not None:
            unknown = only - {row.key for row in self.rows}
            if unknown:
                parser.error(f"unknown row(s) {', '.join(sorted(unknown))}; see --list")
            # a derived row needs the rows it is computed from
            only |= {k for row in self.rows if row.key in only for k in row.needs}
        wanted = [row for row in self.rows if row.derive is None and (only is None or row.key in only)]
        passthrough = [a for a in (argv if argv is not None else sys.argv[1:])
                       if a not in ("--list",)]
        passthrough = _strip_options(passthrough, ("--only", "--json"))
        runs: dict[str, ProbeRun] = {}
        sources: set[str] = set()
        for probe in dict.fromkeys(row.probe for row in wanted):
            print(f"[bench] probe {probe} (load {load1():.2f}) ...", file=sys.stderr, flush=True)
            runs[probe] = run_probe(Path(script).resolve(), probe, passthrough, self.timeout_s)
            if runs[probe].cpu_source:
                sources.add(runs[probe].cpu_source)
        results = collect(self.rows, runs, only)
        size = "--quick (smoke size: not the targets' sizes)" if args.quick else "full size"
        title = f"{self.title}, {size}; CPU from {', '.join(sorted(sources)) or '-'}"
        print(render_table(results, title=title))
        if args.json is not None:
            args.json.write_text(json.dumps([{
                "row": r.row.key, "title": r.row.title, "target": str(r.row.target or ""),
                "value": None if r.value is None else r.value.value,
                "unit": None if r.value is None else r.value.unit, "met": r.met, "valid": r.valid,
                "load_start": r.load_start, "load_end": r.load_end, "error": r.error,
                "skipped": r.skipped} for r in results], indent=1))
        return results


def _strip_options(argv: Sequence[str], names: Sequence[str]) -> list[str]:
    """``argv`` without the options ``names`` (``--x V`` and ``--x=V``): a probe gets the rest."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in names:
            skip = True
            continue
        if any(a.startswith(n + "=") for n in names):
            continue
        out.append(a)
    return out
