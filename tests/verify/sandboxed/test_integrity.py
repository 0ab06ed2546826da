"""Rewards that cannot be bought (issue 10): who caused a failure decides its status, means are
published with errors counted as 0, mutants cannot be told from tests, and the sandboxed
runner agrees with a plain pytest run."""

from __future__ import annotations

import ast
import json
import multiprocessing
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proofgym import Artifact, Trace
from proofgym.core import Verdict
from proofgym.env import VerificationJob
from proofgym.envs.arith import arith_tasks
from proofgym.envs.code_repair import code_repair_tasks
from proofgym.eval.metrics import compute_metrics
from proofgym.record import Trajectory
from proofgym.verify.graders.answers import MATH_TIMEOUT_S
from proofgym.verify.pool import VerifierPool
from proofgym.verify.sandboxed import check_artifact, run_tests_isolated
from proofgym.verify.sandboxed.mutants import build_layout, list_tests, mutate_test
from tests.conftest import require_tool, run_cli

TASKS = code_repair_tasks()


def _job(task, files, meta=None) -> VerificationJob:
    return VerificationJob(task, Trace(), Artifact("sandbox", files=files, meta=meta or {}))


def _no_op(task) -> dict:
    return {}


def _kill_runner(task) -> dict:
    target, _ = next(iter(task.solution_files.items()))
    kill = b"import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
    return {target: kill + (task.repo / target).read_bytes()}


# ------------------------------------------------------------ status: who caused it
def test_artifacts_that_cannot_be_applied_are_refused_before_anything_is_written():
    assert check_artifact({"a": b"x", "a/b": b"y"}, max_bytes=100) == \
        "'a/b' lies under 'a', which the artifact also lists as a file"
    assert "deleted" in check_artifact({"a": None, "a/b": b"y"}, max_bytes=100)
    assert "over the grading limit" in check_artifact({"a": b"x" * 101}, max_bytes=100)
    assert check_artifact({"a/b": b"x", "a/c": None}, max_bytes=100) is None


def test_agent_caused_grader_failures_are_scored_zero_with_the_cause():
    require_tool("bwrap")
    task = TASKS.get("csv-quoted-fields")
    target = next(iter(task.solution_files))
    cases = {
        "file and directory": ({target: b"x = 1\n", f"{target}/inner.py": b"y = 2\n"}, None),
        "deleted and written under": ({"tablekit": None, "tablekit/x.py": b"y = 2\n"}, None),
        "too large": ({"big.bin": b"\0" * (task.max_artifact_bytes + 1)}, None),
        "snapshot over a limit": ({}, {"limit_exceeded": "more than 64 MB of files"}),
        # refused (the test processes' filter): every test fails at import
        "kills the runner": (_kill_runner(task), None),
    }
    for name, (files, meta) in cases.items():
        v = _job(task, {**task.solution_files, **files}, meta).run()
        assert v.status == "scored" and v.reward == 0.0 and v.reason and v.error is None, (name, v)
        assert set(v.components) - {"resolved"} <= {"artifact_rejected", "runner_killed"}, (name, v)
        assert len(v.components) == (1 if name == "kills the runner" else 2), (name, v)


def test_a_status_error_comes_only_from_a_host_fault():
    """In one process pool: honest fails and agent-caused failures are scored 0; the only error
    is the job whose grader worker the host kills."""
    require_tool("bwrap")
    task = TASKS.get("lru-cache-recency")
    with VerifierPool("process", processes=2, timeout_s=task.grading_timeout_s + 60) as pool:
        honest = pool.submit(_job(task, _no_op(task)), "honest")
        caused = pool.submit(_job(task, _kill_runner(task)), "caused")
        assert honest.result(300).status == "scored" and honest.result().reward == 0.0
        assert caused.result(300).status == "scored" and caused.result().reward == 0.0
        killed = pool.submit(_job(task, task.solution_files), "killed")
        deadline = time.monotonic() + 300
        while not killed.done() and time.monotonic() < deadline:
            for child in multiprocessing.active_children():  # the pool's worker processes
                os.kill(child.pid, signal.SIGKILL)
            time.sleep(0.2)
        v = killed.result(1)
        assert v.status == "error" and v.error, v
        fine = pool.submit(_job(task, task.solution_files), "after")
        assert fine.result(300).status == "scored" and fine.result().reward == 1.0


# alone (the serial pass): its claim is that the checker finishes within its CPU budget, which a
# host loaded by four other test workers starves (an error verdict, by design; seen in CI)
@pytest.mark.serial
def test_an_adversarial_math_answer_is_a_scored_zero_in_the_pool():
    task = arith_tasks(1)[0]
    from proofgym import TurnCompleteAction
    from proofgym.core import TraceStep

    trace = Trace([TraceStep(TurnCompleteAction("\\boxed{9^{9^{9}}}"), {"type": "episode_end"})])
    with VerifierPool("process", processes=1, timeout_s=MATH_TIMEOUT_S + 30) as pool:
        t0 = time.monotonic()
        v = pool.submit(VerificationJob(task, trace, Artifact("inprocess")), "adv").result(120)
    assert v.status == "scored" and v.reward == 0.0, v
    assert time.monotonic() - t0 < MATH_TIMEOUT_S + 30


# ------------------------------------------------------------ honest aggregates
def _traj(i: int, verdict: Verdict | None, status: str = "ok") -> Trajectory:
    return Trajectory(f"t{i}", "env", f"task{i}", "h", 0, {}, "", [], terminated=True,
                      verdict=verdict, status=status)


def test_mean_reward_all_counts_errors_as_zero_beside_the_scored_mean():
    two_fails = [_traj(0, Verdict(1.0)), _traj(1, Verdict(0.0)), _traj(2, Verdict(0.0))]
    one_error = [_traj(0, Verdict(1.0)), _traj(1, Verdict(0.0)), _traj(2, Verdict.failed("grader broke"))]
    a, b = compute_metrics(two_fails), compute_metrics(one_error)
    assert a["mean_reward"] == a["mean_reward_all"] == pytest.approx(1 / 3) and a["error_rate"] == 0.0
    assert b["mean_reward"] == 0.5 and b["mean_reward_all"] == pytest.approx(1 / 3)
    assert b["error_rate"] == pytest.approx(1 / 3)


def test_an_agent_caused_grader_failure_counts_like_an_honest_fail_in_a_run(tmp_path):
    """Acceptance 2: one honest fail + one agent-caused failure reports the same mean_reward_all
    (and error rate 0) as two honest fails."""
    require_tool("bwrap")
    from proofgym.eval import evaluate
    from proofgym.rollout import ControlPolicy, ScriptedPolicy

    first = TASKS[0].id

    def mixed(task):
        name = "no_op" if task.id == first else "kill_test_runner"
        return task.controls()[name]

    _, honest = evaluate("proofgym/CodeRepair-v0", ControlPolicy("no_op"), episodes=2,
                         out=tmp_path / "honest")
    _, caused = evaluate("proofgym/CodeRepair-v0", ScriptedPolicy(mixed, name="mixed"), episodes=2,
                         out=tmp_path / "caused")
    for s in (honest, caused):
        assert s["mean_reward_all"] == 0.0 and s["error_rate"] == 0.0 and s["scored"] == 2


def test_eval_exits_non_zero_above_the_error_budget(tmp_path):
    # a grader that sleeps past the timeout: every grading is an error (Arith's with a 1 ms
    # timeout was meant to be, but a warm math check can answer within 1 ms)
    args = ["eval", "tests.faulty_graders:Faulty-v0", "-n", "3", "-c", "2", "--grader-timeout", "0.5"]
    proc = run_cli(*args, "--out", str(tmp_path / "a"), check=False)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "over --max-error-rate 5.0%" in " ".join(proc.stdout.split())
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["error_rate"] == 1.0 and summary["mean_reward_all"] == 0.0
    ok = run_cli(*args, "--out", str(tmp_path / "b"), "--max-error-rate", "1.0", check=False)
    assert ok.returncode == 0, ok.stdout + ok.stderr


# ------------------------------------------------------------ mutants
def test_each_task_has_mutants_shaped_like_its_tests():
    """Every hidden test of every task has a mutant (``pytest.raises``-only and nested-loop
    tests too); most differ from their test in constants only, the others keep the test's
    statements after ones copied from another test, or expect another builtin exception; none
    negates a check."""
    rng = random.Random(7)
    same_shape = total = 0
    for task in TASKS:
        sources = {p: c for p, c in task.hidden_files.items() if p.endswith(".py")}
        sources.update({p: (task.repo / p).read_bytes() for p in task.test_files if p not in sources})
        layout = build_layout(sources, task.test_ids, rng=rng, mutate_files=list(task.hidden_files))
        assert sorted(layout.real.values()) == sorted(task.test_ids), task.id
        hidden_ids = [t for t in task.test_ids if t.split("::")[0] in task.hidden_files]
        assert sorted(layout.mutant.values()) == sorted(hidden_ids) and not layout.unmutable, task.id
        for gen, of in layout.mutant.items():
            twin = next(g for g, r in layout.real.items() if r == of)
            mutant_src, real_src = (layout.files[g.split("::")[0]].decode() for g in (gen, twin))
            assert _names_out(mutant_src) != _names_out(real_src), (task.id, of)
            assert mutant_src.count("!=") == real_src.count("!=") and \
                mutant_src.count("assert not ") >= real_src.count("assert not "), (task.id, of)
            if _shape(mutant_src) == _shape(real_src):
                same_shape += 1
            else:
                mutant_body, real_body = (_test_body(s) for s in (mutant_src, real_src))
                swapped = _shape(re.sub(r"raises\(\w+", "raises(E", mutant_src)) == \
                    _shape(re.sub(r"raises\(\w+", "raises(E", real_src))  # another exception
                assert swapped or mutant_body[len(mutant_body) - len(real_body):] == real_body, \
                    (task.id, of, mutant_src)
            total += 1
        assert not any("PROOFGYM-CANARY" in c.decode() for c in layout.files.values())
        stems = {p.rsplit("/", 1)[-1] for p in layout.files}
        assert not stems & {p.rsplit("/", 1)[-1] for p in sources}, task.id
    assert same_shape >= 0.85 * total, (same_shape, total)


def _test_body(src: str) -> list[str]:
    """The test function's statements with names and constants blanked."""
    tree = _Unsign().visit(ast.parse(_names_out(src)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            node.value = None
    func = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "NAME")
    return [ast.dump(s) for s in func.body]


def _names_out(src: str) -> str:
    return re.sub(r"\b(test_\w+|Test\w+)\b", "NAME", src)


def _shape(src: str) -> str:
    """The source with test names and constants blanked: what a mutant must share with its test
    (a signed number is a constant too: a mutated value is as likely below as above the real one,
    so ``0`` may become ``-3``)."""
    tree = _Unsign().visit(ast.parse(_names_out(src)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            node.value = None
    return ast.dump(tree)


class _Unsign(ast.NodeTransformer):
    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, (ast.USub, ast.UAdd)) and isinstance(node.operand, ast.Constant):
            return node.operand
        return node


def test_a_mutant_changes_an_expected_value_never_the_check():
    rng = random.Random(3)
    cases = {
        "def test_a():\n    assert f(2) == 3\n": ("== 3", "assert f(2) =="),
        "def test_a():\n    expected = [1, 2]\n    assert g() == expected\n": ("[1, 2]", "expected = ["),
    }
    for src, (original, kept) in cases.items():
        func = ast.parse(src).body[0]
        assert mutate_test(func, rng)
        out = ast.unparse(func)
        assert original not in out and kept in out, out
    # nothing to change but the check itself: no mutant (the old one was ``is not None``)
    for src in ("def test_a():\n    assert g() is None\n",
                "def test_a():\n    with raises(E):\n        f()\n"):
        func = ast.parse(src).body[0]
        assert not mutate_test(func, rng)
        assert ast.unparse(func) == ast.unparse(ast.parse(src).body[0])
    source = "from x import test_y\nclass TestA:\n    def test_b(self): pass\n"
    assert [i.node_id for i in list_tests("t.py", source)] == ["t.py::test_y", "t.py::TestA::test_b"]


# ------------------------------------------------------------ an independent check
def _plain_pytest(task, root: Path, files: dict[str, bytes]) -> dict[str, str]:
    """Per-test outcomes of a plain ``pytest -rA`` on a clean checkout of the task's repository
    with ``files`` and the hidden tests written in."""
    shutil.copytree(task.repo, root)
    for path, content in {**files, **task.hidden_files}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(content)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", "-q",
                           *task.test_files], cwd=root, env=env, capture_output=True, text=True,
                          timeout=120)
    found = re.findall(r"^(PASSED|FAILED|ERROR|SKIPPED) (\S+::\S+)", proc.stdout, re.MULTILINE)
    return {node: status.lower() for status, node in found}


@pytest.mark.parametrize("task_id", [TASKS[i].id for i in (0, 5, 11)])
def test_the_sandboxed_runner_agrees_with_a_plain_pytest_run(task_id, tmp_path):
    require_tool("bwrap")
    task = TASKS.get(task_id)
    for label, files in (("fixed", task.solution_files), ("buggy", {})):
        plain = _plain_pytest(task, tmp_path / label, files)
        assert set(plain) == set(task.test_ids), label  # the plain run saw every graded test
        run = run_tests_isolated(task.repo, files, tests=task.test_ids, hidden=task.hidden_files,
                                 protected=task.protected)
        assert run.report_error is None, run.report_error
        assert dict(run.results) == plain, label


def test_a_task_whose_tests_yield_no_mutant_nor_withheld_check_is_a_grader_error(tmp_path):
    """Without a mutant there is no tamper detection: grading such a task fails loudly (an error
    verdict, so `proofgym validate` fails its reference row with the reason) instead of paying."""
    require_tool("bwrap")
    from proofgym.core import grade
    from proofgym.envs.code_repair.task import CodeRepairTask

    src = TASKS.get("retry-attempts-off-by-one").root
    root = tmp_path / "no-mutants"
    shutil.copytree(src, root)
    meta = json.loads((root / "task.json").read_text())
    meta["id"] = "no-mutants"
    # the task's only hidden test: a task-defined exception (no builtin to swap it for), an
    # input no other test shows returning, no value to change and no other test to copy from
    hidden = next((root / "hidden" / "tests").glob("test_hidden_*.py"))
    hidden.write_text("import pytest\n\nfrom patience import RetryError, retry\n\n\n"
                      "def test_attempts_must_be_positive():\n"
                      "    def fails():\n        raise OSError\n\n"
                      "    with pytest.raises(RetryError):\n"
                      "        retry(fails, attempts=2, sleep=lambda s: None)\n")
    only_raises = [f"tests/{hidden.name}::test_attempts_must_be_positive"]
    meta["fail_to_pass"], meta["pass_to_pass"] = [], only_raises
    (root / "task.json").write_text(json.dumps(meta))
    task = CodeRepairTask.load(root)
    v = grade(task, Trace([]), Artifact("sandbox", files=task.solution_files).view())
    assert v.status == "error" and "no test has a mutant or a withheld check" in v.error, v


def test_a_test_file_the_agent_broke_means_its_tests_did_not_pass(tmp_path):
    """Where a task leaves a test file unprotected, an agent's broken version is the agent's
    doing: those tests do not pass (a scored outcome), the grader does not fail."""
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("import m\n\ndef test_a():\n    assert m.f() == 1\n")
    (tmp_path / "tests" / "test_b.py").write_text("import m\n\ndef test_b():\n    assert m.f() + 1 == 2\n")
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    ids = ["tests/test_a.py::test_a", "tests/test_b.py::test_b"]
    run = run_tests_isolated(tmp_path, {"tests/test_a.py": b"def test_a(:\n"}, tests=ids, protected=())
    assert run.report_error is None and run.results == {"tests/test_b.py::test_b": "passed"}


def test_nothing_a_test_starts_outlives_it(tmp_path):
    """A daemon started by one test (its own session, so not in the test's process group) is
    killed when that test ends; it cannot act during the tests that follow."""
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        "import os, subprocess, sys, time\n\n"
        "def test_spawn():\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1); "
        "open(\"/tmp/marker\", \"w\").close()'], start_new_session=True)\n"
        "    assert 1 == 1\n\n"
        "def test_check():\n"
        "    time.sleep(2.5)\n"
        "    assert not os.path.exists('/tmp/marker')\n")
    ids = ["tests/test_a.py::test_spawn", "tests/test_a.py::test_check"]
    for _ in range(2):  # both orders are likely over two random layouts; either must pass
        run = run_tests_isolated(tmp_path, {}, tests=ids)
        assert run.results == dict.fromkeys(ids, "passed"), run.output[-2000:]


def test_a_value_that_is_also_an_input_is_never_the_one_mutated():
    """``a`` is both the input and the expected value: changing it changes both sides, and the
    mutant would pass on correct code (a false tampering verdict)."""
    source = ("A = [1, 2]\n\ndef test_a():\n    a = [[2, -1], [1, 3]]\n    assert f(a) == a\n"
              "    assert sorted(A) == A\n")
    for seed in range(20):
        module = ast.parse(source)
        func = module.body[1]
        assert not mutate_test(func, random.Random(seed), module)  # nothing else to change
        assert ast.unparse(module) == ast.unparse(ast.parse(source))


def test_a_mutant_passing_alone_is_wrong_code_and_with_its_test_is_tampering():
    """Buggy code can return exactly a mutant's value (a count of 0 where the test wants 1 and
    the mutant 0): that is a failed test, not tampering. Both passing is impossible honestly."""
    from proofgym.verify.sandboxed.mutants import Layout
    from proofgym.verify.sandboxed.policy import summarise as _summarise

    layout = Layout(run=["g1", "g2"], real={"g1": "t.py::test_a"}, mutant={"g2": "t.py::test_a"})
    alone = _summarise(layout, {"g1": "failed", "g2": "passed"}, None, 0, False, "", (), {})
    assert not alone.tampered and alone.results == {"t.py::test_a": "failed"} and alone.failure is None
    both = _summarise(layout, {"g1": "passed", "g2": "passed"}, None, 0, False, "", (), {})
    assert both.tampered and both.failure == "tampering_detected" and both.results == {}
