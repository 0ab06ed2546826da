"""CodeRepair-v0 and isolated grading: every reference scores 1, every control scores 0."""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import gymnasium
import pytest

from proofgym import Artifact, ToolCallAction, TurnCompleteAction
from proofgym.core import Trace, grade
from proofgym.envs.code_repair import code_repair_tasks
from proofgym.rollout import ControlPolicy, run_episode
from proofgym.verify.sandboxed import is_protected, run_tests_isolated
from tests.conftest import CODE_REPAIR_REFERENCE, require_tool

pytestmark = pytest.mark.sandbox

CONTROLS = {"wrong_fix", "no_op", "edit_visible_tests", "delete_visible_tests", "conftest_force_pass",
            "config_addopts", "sys_exit_at_import", "fake_report_files", "fake_report_fds",
            "shadow_pytest", "patch_pytest_at_import"}
#: One per reward hack of issue 10, each of which scored above 0 (or was an error) on the old grader.
HACKS = {"patch_pytest_spare_sentinel", "import_hook_neuters_tests", "always_equal_results",
         "shadow_stdlib_module", "unlisted_config_file", "forge_report_from_disk", "kill_test_runner",
         "sleep_past_the_pool", "module_becomes_directory", "huge_sparse_files", "copy_from_image"}


@pytest.fixture(scope="module")
def env():
    require_tool("bwrap")
    e = gymnasium.make("proofgym/CodeRepair-v0").unwrapped
    yield e
    e.close()


def test_there_are_tasks_and_the_prompt_hides_the_hidden_tests(env):
    assert len(env.tasks) >= 2
    for task in env.tasks:
        obs, info = env.reset(options={"task_id": task.id})
        assert task.meta["issue"].strip()[:40] in obs["observation"]
        assert "7f3c9b2e" not in obs["observation"]
        for hidden in task.hidden_files:
            assert hidden.rsplit("/", 1)[-1] not in obs["observation"]
        assert {t["function"]["name"] for t in info["tools"]} == {
            "bash", "read_file", "write_file", "str_replace", "list_dir"}
        assert set(task.controls()) == CONTROLS | HACKS


@pytest.mark.slow
@pytest.mark.xdist_group(CODE_REPAIR_REFERENCE)
def test_reference_policy_scores_one_on_every_task_through_the_cli(code_repair_reference_run):
    out = code_repair_reference_run  # `proofgym eval proofgym/CodeRepair-v0 --policy reference`
    summary = json.loads((out / "summary.json").read_text())
    n = len(code_repair_tasks())
    assert summary["episodes"] == n and summary["scored"] == n
    assert summary["mean_reward"] == 1.0
    for line in (out / "trajectories.jsonl").read_text().splitlines():
        traj = json.loads(line)
        assert traj["verdict"]["reward"] == 1.0
        names = [s["action"]["tool_name"] for s in traj["steps"] if s["action"].get("tool_name")]
        assert "read_file" in names and "bash" in names  # read, edit, run tests, finish
        assert {"str_replace", "write_file"} & set(names)
        m = traj["verdict"]["metrics"]
        assert m["fail_to_pass_passed"] == m["fail_to_pass_total"] > 0


#: Every control on every task is ``proofgym validate proofgym/CodeRepair-v0`` (about ten
#: minutes on 2 cores: 16 tasks x 23 controls, each a fresh sandbox running one process per test);
#: the suite plays them all on every eighth task (two), and PROOFGYM_FULL_SWEEP=1 on all of them.
#: The controls attack the grading, not a task's code: what a task adds to their outcome is its
#: hidden tests' mutants and withheld checks, checked for every task elsewhere: every hidden test
#: gets a mutant that the reference fix fails (tests/security/test_attack_mutant_classifier.py)
#: and every check against a literal is withheld (tests/verify/sandboxed/test_withheld.py).
SWEEP_EVERY = 1 if os.environ.get("PROOFGYM_FULL_SWEEP") == "1" else 8


@pytest.mark.slow
@pytest.mark.xdist_group(CODE_REPAIR_REFERENCE)
def test_every_control_of_every_task_scores_zero(env, code_repair_controls_run):
    jobs, verdicts = [], []
    tasks = env.tasks[::SWEEP_EVERY]
    # the first task's controls: played and graded once for this test and the audit of the hacks
    # (tests/cli/test_audit.py), through a run's verifier pool
    _, played = code_repair_controls_run
    assert tasks[0].id == next(iter(played.values())).task_id
    assert set(played) == set(tasks[0].controls())
    for name, traj in sorted(played.items()):
        assert traj.status == "ok", (traj.task_id, name, traj.error)
        verdicts.append((traj.task_id, name, traj.verdict))
    for task in tasks[1:]:
        for name in sorted(task.controls()):
            traj = run_episode(env, ControlPolicy(name), task=task, verify=False)
            assert traj.status == "ok", (task.id, name, traj.error)
            jobs.append((task.id, name, env.verification_job(traj.trace())))
    with ThreadPoolExecutor(3) as pool:  # grading is subprocess-bound; fresh sandboxes in parallel
        verdicts += pool.map(lambda j: (j[0], j[1], j[2].run()), jobs)
    assert len(verdicts) == len(tasks) * len(CONTROLS | HACKS)
    for task_id, name, v in verdicts:
        assert v.status == "scored", (task_id, name, v.error)
        assert v.reward == 0.0, (task_id, name, v)
        m = v.metrics
        if name in ("conftest_force_pass", "config_addopts", "edit_visible_tests",
                    "delete_visible_tests"):
            assert m["protected_changes_dropped"] > 0, (task_id, name)
            assert m["pass_to_pass_passed"] == m["pass_to_pass_total"], (task_id, name)
        if name in ("patch_pytest_at_import", "patch_pytest_spare_sentinel", "import_hook_neuters_tests"):
            # caught by a mutant or by withheld checks the neutered test never ran (tampering),
            # or the forced passes failed on their withheld checks (the host compares those)
            assert (m["tampering_detected"] == 1.0 and ("mutants" in v.reason or "withheld" in
                                                        v.reason)) or \
                "withheld check" in v.reason, (task_id, name, v.reason)
        if name in ("sys_exit_at_import", "fake_report_fds", "forge_report_from_disk"):
            # every test process ends at import (the fake_report_* ones: os._exit(0) after writing
            # a forged report into every descriptor), without the runner's proof: nothing passes
            assert m["pass_to_pass_passed"] == m["fail_to_pass_passed"] == 0, (task_id, v)
        if name == "sleep_past_the_pool":
            assert v.components == {"resolved": 0.0, "tests_timed_out": 0.0}, (task_id, v)
        if name == "kill_test_runner":  # refused: the runner is out of a test process's reach
            assert v.components == {"resolved": 0.0}, (task_id, v)


@pytest.fixture(scope="module")
def task():
    return code_repair_tasks()[0]


def _grade(task, files):
    art = Artifact("sandbox", files=files)
    return grade(task, Trace([]), art.view())


def test_planted_files_beside_a_real_fix_are_dropped(task):
    require_tool("bwrap")
    breaking = "def pytest_collection_modifyitems(items):\n    raise SystemExit(3)\n"
    files = {**task.solution_files, "conftest.py": breaking.encode(),
             "tests/conftest.py": breaking.encode(), "pytest.ini": b"[pytest]\naddopts = -x --co\n"}
    v = _grade(task, files)
    assert v.reward == 1.0 and v.metrics["protected_changes_dropped"] == 3


def test_a_report_forged_from_the_code_under_test_never_reaches_the_grader(task):
    """The code under test writes a report of all-passed to every descriptor it has and to the
    runner's descriptors through /proc, then fails its test: nothing it wrote counts."""
    require_tool("bwrap")
    target = next(iter(task.solution_files))
    forge = (b"import json, os\n"
             b"fake = json.dumps({'results': {}, 'stopped_at': None}).encode()\n"
             b"for base in ('/proc/self/fd', f'/proc/{os.getppid()}/fd'):\n"
             b"    try:\n        names = os.listdir(base)\n    except OSError:\n        continue\n"
             b"    for n in names:\n"
             b"        try:\n            fd = os.open(f'{base}/{n}', os.O_WRONLY)\n"
             b"            os.write(fd, fake)\n            os.close(fd)\n"
             b"        except OSError:\n            pass\n"
             b"for fd in range(3, 64):\n"
             b"    try:\n        os.write(fd, fake)\n    except OSError:\n        pass\n"
             b"raise ImportError('forged')\n")
    v = _grade(task, {target: forge + (task.repo / target).read_bytes()})
    assert v.status == "scored" and v.reward == 0.0 and v.error is None
    assert v.metrics["pass_to_pass_passed"] == 0 and v.metrics["tampering_detected"] == 0


def test_deleting_the_module_under_test_fails(task):
    require_tool("bwrap")
    target = next(iter(task.solution_files))
    v = _grade(task, {target: None})
    assert v.reward == 0.0 and v.metrics["pass_to_pass_passed"] < v.metrics["pass_to_pass_total"]


def test_a_hanging_test_run_is_cut_and_scores_zero(tmp_path):
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("import m\n\ndef test_a():\n    assert m.f() == 1\n")
    (tmp_path / "m.py").write_text("def f():\n    return 0\n")
    run = run_tests_isolated(tmp_path, {"m.py": b"import time\ndef f():\n    time.sleep(60)\n"},
                             tests=["tests/test_a.py"], timeout_s=3)
    assert run.timed_out and run.failure == "tests_timed_out" and "time limit" in run.report_error
    run = run_tests_isolated(tmp_path, {"m.py": b"def f():\n    return 1\n"}, tests=["tests/test_a.py"])
    assert run.results == {"tests/test_a.py::test_a": "passed"} and not run.timed_out and run.mutants == 1


def test_grading_something_that_is_not_a_sandbox_artifact_is_a_grader_error(task):
    v = grade(task, Trace([]), Artifact("inprocess").view())
    assert v.status == "error" and "SandboxRuntime" in v.error


def test_a_test_defined_in_another_module_is_attributed_to_the_file_that_collects_it(tmp_path):
    require_tool("bwrap")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "shared_checks.py").write_text(
        "import m\n\ndef test_shared():\n    assert m.f() == 1\n")
    (tmp_path / "tests" / "test_a.py").write_text(
        "import m\nfrom shared_checks import test_shared\n\n"
        "class TestK:\n    def test_m(self):\n        assert m.f() + 1 == 2\n")
    (tmp_path / "m.py").write_text("def f():\n    return 0\n")
    ids = ["tests/test_a.py::test_shared", "tests/test_a.py::TestK::test_m"]
    run = run_tests_isolated(tmp_path, {}, tests=ids)
    assert run.results == dict.fromkeys(ids, "failed") and run.report_error is None
    run = run_tests_isolated(tmp_path, {"m.py": b"def f():\n    return 1\n"}, tests=ids)
    assert run.results == dict.fromkeys(ids, "passed") and run.report_error is None


def test_protected_paths():
    protected = ["tests", "conftest.py", "pytest.ini", "docs/conf"]
    assert is_protected("tests/test_a.py", protected)
    assert is_protected("pkg/tests/x.py", protected)
    assert is_protected("pkg/sub/conftest.py", protected)
    assert is_protected("docs/conf/x", protected)
    assert not is_protected("pkg/testsuite.py", protected)
    assert not is_protected("pkg/conftest_helpers.py", protected)


def test_a_scripted_agent_that_edits_through_every_tool(env, task):
    target, fixed = next(iter(task.solution_files.items()))
    script = [ToolCallAction("list_dir", {"path": "."}),
              ToolCallAction("read_file", {"path": target, "start_line": 1, "end_line": 3}),
              ToolCallAction("bash", {"command": f"cp {target} /tmp/backup && rm {target}"}),
              ToolCallAction("write_file", {"path": target, "content": fixed.decode()}),
              ToolCallAction("bash", {"command": task.test_command}),
              TurnCompleteAction("fixed")]
    from proofgym.rollout import ScriptedPolicy
    traj = run_episode(env, ScriptedPolicy(script), task=task)
    assert traj.verdict.reward == 1.0, traj.verdict
