"""The one harness of proofgym's benches: fresh state per row, wall and CPU, load with every table.

A bench script declares *probes* (a function that measures something and returns one or more
values) and *rows* (a value of a probe, or one derived from other rows, against a target), then
calls :func:`main`. Every probe runs in a fresh interpreter (the same script, ``--probe KEY``):
a new env, pool, server and sandbox spawner, no cache warmed by an earlier row, the same for
both sides of a comparison. The 1-minute load average is read before and after each probe, and a
row whose probe saw a load above :data:`LOAD_LIMIT` is marked as not a valid measurement, whether
it met its target or not.

CPU time (:class:`CpuClock`) is the whole process tree's, sandboxes included. ``getrusage
(RUSAGE_CHILDREN)`` would miss most of it: a sandbox is forked by proofgym's spawner process,
which the probe never waits for, so the probe's reaped-children total never sees it. As root the
probe joins a ``cpuacct`` cgroup of its own (sandbox cgroups are created below the creator's, so
they are counted); otherwise the clock adds up ``/proc`` of every live descendant (their own and
their reaped children's time). That fallback misses every process that is re-parented out of
the tree before it is reaped, which is how sandboxes run (as root on this machine it counted
0.15 s of a CodeRepair grading the cgroup put at 1.1 s): it is a lower bound, and the table
names the source it used.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

#: A probe that saw a 1-minute load average above this (2 cores) did not measure this code alone.
LOAD_LIMIT = 1.5
INVALID = f"load>{LOAD_LIMIT:g}: not a valid measurement"
#: The line a probe process prints its values on (the rest of its output is free-form).
RESULT_PREFIX = "BENCH-PROBE-RESULT "
ROOT = Path(__file__).resolve().parents[1]
_CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def load1() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


# ------------------------------------------------------------------------------------------ CPU
def _proc_cpu_s(pid: int | str) -> float:
    """utime + stime + cutime + cstime of one process, in seconds (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


class CpuClock:
    """CPU seconds used by this process and every process it starts (see the module's docstring).

    ``source`` says how: ``"cpuacct cgroup"`` or ``"/proc of live descendants + getrusage"``.
    """

    def __init__(self) -> None:
        self.cgroup: Path | None = None
        # PROOFGYM_BENCH_CPU=proc: the fallback even as root (to compare the two sources)
        if (os.environ.get("PROOFGYM_BENCH_CPU") != "proc" and _CPUACCT.is_dir()
                and os.access(_CPUACCT, os.W_OK)):
            _sweep()
            d = _CPUACCT / f"proofgym-bench-{os.getpid()}"
            try:
                d.mkdir(exist_ok=True)
                (d / "cgroup.procs").write_text(str(os.getpid()))
                self.cgroup = d
            except OSError:
                with contextlib.suppress(OSError):
                    d.rmdir()
        self.source = ("cpuacct cgroup" if self.cgroup is not None
                       else "/proc of live descendants + getrusage: a LOWER BOUND (misses "
                            "sandboxes, which are not this process's children)")

    def __call__(self) -> float:
        if self.cgroup is not None:
            return int((self.cgroup / "cpuacct.usage").read_text()) / 1e9
        own = resource.getrusage(resource.RUSAGE_SELF)
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        return (own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
                + sum(_proc_cpu_s(pid) for pid in _descendants(os.getpid())))

    def close(self) -> None:
        """Leave the cgroup and remove it (a leftover sandbox still in it keeps it: the parent
        retries after this process exits, see :func:`remove_cgroup`)."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):
                (_CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
            remove_cgroup(os.getpid(), wait_s=0.0)
            self.cgroup = None


def _sweep() -> None:
    """Remove empty bench cgroups whose process is gone (a bench killed before its cleanup)."""
    for d in _CPUACCT.glob("proofgym-bench-*"):
        pid = d.name.rsplit("-", 1)[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                d.rmdir()


def remove_cgroup(pid: int, wait_s: float = 2.0) -> None:
    """Remove the cpuacct cgroup of probe ``pid`` once it is empty (waits up to ``wait_s``)."""
    d = _CPUACCT / f"proofgym-bench-{pid}"
    deadline = time.monotonic() + wait_s
    while d.is_dir():
        try:
            d.rmdir()
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.1)


@dataclass
class Timed:
    """Wall and CPU seconds of one measured block (``with timed(clock) as t: ...``)."""

    wall_s: float = 0.0
    cpu_s: float = 0.0


@contextlib.contextmanager
def timed(clock: CpuClock):  # type: ignore[no-untyped-def]
    t = Timed()
    c0, w0 = clock(), time.perf_counter()
    try:
        yield t
    finally:
        t.wall_s, t.cpu_s = time.perf_counter() - w0, clock() - c0


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
