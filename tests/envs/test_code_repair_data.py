"""The CodeRepair task data stays honest: real pytest runs on every task (see check_tasks.py)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "proofgym" / "envs" / "code_repair" / "data"
SAMPLE_TASK = "csv-quoted-fields"


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_tasks", DATA / "check_tasks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_tasks"] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


check_tasks = _load_checker()


def _copy_task(tmp_path: Path, task_id: str = SAMPLE_TASK) -> Path:
    target = tmp_path / "data" / task_id
    shutil.copytree(DATA / task_id, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.mark.slow
def test_every_task_passes_the_checker():
    reports = check_tasks.check_all()
    assert len(reports) >= 12, f"CodeRepair-v0 needs at least 12 tasks, found {len(reports)}"
    bad = {r.task_id: r.problems for r in reports if not r.ok}
    assert not bad, check_tasks.format_table(reports) + f"\nproblems: {bad}"
    for report in reports:
        assert 3 <= report.files <= 10
        assert report.f2p >= 1


def test_checker_rejects_a_solution_that_does_not_fix_the_bug(tmp_path):
    task = _copy_task(tmp_path)
    shutil.rmtree(task / "solution")
    shutil.copytree(task / "controls" / "wrong_fix", task / "solution")
    report = check_tasks.check_task(task)
    assert not report.ok
    assert any("does not pass with the solution" in p for p in report.problems), report.problems


def test_checker_rejects_a_leaked_canary_and_a_wrong_fix_that_works(tmp_path):
    task = _copy_task(tmp_path)
    readme = task / "repo" / "README.md"
    readme.write_text(readme.read_text() + "\n" + check_tasks.canary_line(SAMPLE_TASK) + "\n")
    shutil.rmtree(task / "controls" / "wrong_fix")
    shutil.copytree(task / "solution", task / "controls" / "wrong_fix")
    problems = check_tasks.check_task(task).problems
    assert any("repo/README.md contains the canary" in p for p in problems), problems
    assert any("wrong fix passes every fail_to_pass" in p for p in problems), problems


def test_checker_rejects_a_listed_test_that_does_not_exist(tmp_path):
    import json

    task = _copy_task(tmp_path)
    spec = json.loads((task / "task.json").read_text())
    spec["fail_to_pass"].append("tests/test_hidden_quotes.py::test_no_such_test")
    (task / "task.json").write_text(json.dumps(spec))
    problems = check_tasks.check_task(task).problems
    assert any("test_no_such_test is not in the JUnit report" in p for p in problems), problems


@pytest.mark.parametrize("args, code", [([SAMPLE_TASK], 0), (["no-such-task"], 1)])
def test_checker_script_exit_code(args, code):
    proc = subprocess.run([sys.executable, str(DATA / "check_tasks.py"), *args],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == code, proc.stdout + proc.stderr
    if code == 0:
        assert SAMPLE_TASK in proc.stdout and "1/1 tasks ok" in proc.stdout
    else:
        assert "unknown task ids" in proc.stderr
