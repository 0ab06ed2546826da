"""Issue 24: the bad inputs that still gave tracebacks, hangs or silent garbage are one-line usage
errors (exit 2) naming the fix; NaN and out-of-range numbers are refused when parsed."""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import pytest
from conftest import run_cli

from proofgym.eval import evaluate
from proofgym.rollout import ReferencePolicy

ARITH = "proofgym/Arith-v0"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A finished run ``run``, a copy ``listrun`` whose contract.json is a JSON list, and a text file."""
    tmp = tmp_path_factory.mktemp("bad-input-24")
    evaluate(ARITH, ReferencePolicy(), episodes=2, out=tmp / "run", verifier="inline")
    shutil.copytree(tmp / "run", tmp / "listrun")
    (tmp / "listrun" / "contract.json").write_text("[1, 2]")
    (tmp / "afile.txt").write_text("some notes, not a run\n")
    return tmp


CASES = [
    # a contract.json that is a JSON list: refused by every command that reads it
    (["verify", "{tmp}/listrun"], "a rollout contract is a JSON object"),
    (["contract", "show", "{tmp}/listrun"], "a rollout contract is a JSON object"),
    (["eval", ARITH, "--resume", "{tmp}/listrun"], "a rollout contract is a JSON object"),
    # a file that is not a run
    (["report", "{tmp}/afile.txt"], "holds no trajectory record"),
    (["export", "{tmp}/afile.txt"], "holds no trajectory record"),
    # NaN and out-of-range numbers, at parse time
    (["compare", "{tmp}/run", "{tmp}/run", "--threshold", "nan", "-o", "{out}"], "not a finite number"),
    (["compare", "{tmp}/run", "{tmp}/run", "--confidence", "nan", "-o", "{out}"], "in [0.5, 0.999]"),
    (["compare", "{tmp}/run", "{tmp}/run", "--confidence", "2", "-o", "{out}"], "out of range"),
    (["export", "{tmp}/run", "--min-reward", "nan", "-o", "{out}.jsonl"], "not a finite number"),
    (["eval", ARITH, "-n", "1", "--max-error-rate", "nan", "--out", "{out}"], "in [0, 1]"),
    (["eval", ARITH, "-n", "1", "--grader-timeout", "nan", "--out", "{out}"], "not a finite number"),
    (["eval", ARITH, "-n", "1", "--backend", "ray", "--cpus-per-slot", "nan", "--out", "{out}"],
     "not a finite number"),
    (["splits", "freeze", ARITH, "--out", "{out}.json", "--ratios", "nan,0,0"], "finite numbers"),
    (["splits", "freeze", ARITH, "--out", "{out}.json", "--ratios", "inf,0,0"], "finite numbers"),
    # a breakdown key no task has: an error listing the keys there are, not a table of "missing"
    (["compare", "{tmp}/run", "{tmp}/run", "--by", "no_such_key", "-o", "{out}"], "one of: level"),
    # unwritable paths: a usage error (2), not a failed run (1)
    (["export", "{tmp}/run", "-o", "/proc/x.jsonl"], "choose a path you can write"),
    (["export", "{tmp}/run", "-o", "/sys/x.jsonl"], "choose a path you can write"),
    (["compare", "{tmp}/run", "{tmp}/run", "-o", "/proc/cmp"], "choose a path you can write"),
    (["splits", "freeze", ARITH, "--out", "/proc/s.json"], "choose a path you can write"),
    # env arguments the factory rejects, and one that would build 1e10 tasks in memory
    (["eval", "proofgym/SearchQA-v0", "-n", "1", "--env-arg", "faults=bogus", "--out", "{out}"],
     "unknown fault profile 'bogus'"),
    (["eval", ARITH, "-n", "1", "--env-arg", "n_tasks=10000000000", "--out", "{out}"],
     "more than the 1000000"),
    (["validate", ARITH, "--env-arg", "n_tasks=10000000000"], "more than the 1000000"),
    (["eval", ARITH, "-n", "1", "--env-arg", "n_tasks=-3", "--out", "{out}"], "whole number >= 1"),
    (["eval", "nosuchmodule:Foo-v0", "--out", "{out}"], "cannot import module 'nosuchmodule'"),
    # a Ray address where nothing answers: a message at once, not minutes of silent retries
    (["eval", ARITH, "-n", "1", "--backend", "ray", "--ray-address", "127.0.0.1:1", "--out", "{out}"],
     "cannot connect to the Ray cluster at 127.0.0.1:1"),
]


@pytest.mark.parametrize(("args", "says"), CASES, ids=[" ".join(c[0])[:70] for c in CASES])
def test_bad_input_is_one_usage_error(scratch: Path, args, says) -> None:
    values = {"tmp": str(scratch), "out": str(scratch / f"out-{uuid.uuid4().hex[:8]}")}
    started = time.monotonic()
    proc = run_cli(*[a.format(**values) for a in args], check=False, timeout=90)
    out = proc.stdout + proc.stderr
    flat = " ".join(out.replace("│", " ").split())
    assert "Traceback" not in out, out
    assert proc.returncode == 2, out
    assert says in flat, out
    assert out.count("error:") + out.count("Error") <= 1, out  # one message, not a cascade
    assert time.monotonic() - started < 60, "a bad input must fail fast, not hang"


def test_a_refused_resume_leaves_the_run_untouched(scratch: Path) -> None:
    before = (scratch / "listrun" / "trajectories.jsonl").read_bytes()
    proc = run_cli("eval", ARITH, "--resume", str(scratch / "listrun"), check=False)
    assert proc.returncode == 2
    assert (scratch / "listrun" / "trajectories.jsonl").read_bytes() == before
    assert (scratch / "listrun" / "contract.json").read_text() == "[1, 2]"
