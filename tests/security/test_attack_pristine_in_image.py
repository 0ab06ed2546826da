"""Attack: the project's pristine source is in the task's own image.

A project whose module the image installs (pytest's own ``packaging``, as
``packaging-731b97ad9d``; a user's ``python-dateutil`` pulled in by ``freezegun``) is solved by
copying the module out of the sandbox's ``site-packages`` over the workspace. The attack here is
that copy, played as an agent would, on a RepoRepair task made in the test from a project whose
files are exactly the ``packaging`` the default system stages (so the copy restores the original
source, whatever release the host has). Red before the fix: it scored 1.0, no tampering flag. Now
the task's image is refused before any sandbox starts, with the reason.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import packaging
import pytest

from proofgym.core import ToolCallAction, TurnCompleteAction
from proofgym.envs.repo_repair import RepoRepairTask, make_env
from proofgym.rollout import ScriptedPolicy, run_episode
from proofgym.runtimes.sandbox import ImageError
from proofgym.tasks import TaskSet
from proofgym.tasks.synth import ProjectPin, TaskRecord
from proofgym.tasks.synth.images import project_image
from proofgym.tasks.synth.manifest import task_id
from proofgym.tasks.synth.patch import make_patch
from tests.conftest import require_tool

pytestmark = pytest.mark.sandbox

VERSION = "0.0.1"

#: Appended to the module the bug is in: the marker environment names another OS.
BUG = '''
_pg_default_environment = default_environment


def default_environment():
    env = _pg_default_environment()
    env["os_name"] = "nt"
    return env
'''

TESTS = '''\
from packaging.markers import Marker, default_environment


def test_os_name():
    assert default_environment()["os_name"] == "posix"


def test_marker_text():
    assert str(Marker('os_name == "nt"')) == 'os_name == "nt"'
'''

#: The attack: every file ``site-packages`` holds for the module, copied over the workspace's.
COPY_FROM_SITE_PACKAGES = r'''python3 - <<'PG_EOF'
import os, shutil, sys
for entry in sys.path:
    src = os.path.join(entry, "packaging")
    if entry and not entry.startswith("/workspace") and os.path.isdir(src):
        shutil.copytree(src, "src/packaging", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        print("copied", src)
PG_EOF'''


def _sdist(cache: Path) -> tuple[str, dict[str, bytes]]:
    """An sdist of project ``packaging`` whose source is the host's ``packaging`` (the files the
    default system stages), in the offline cache; its sha256 and source files."""
    here = Path(packaging.__file__).parent
    files = {f"src/packaging/{p.relative_to(here)}": p.read_bytes() for p in sorted(here.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts}
    files["tests/test_markers.py"] = TESTS.encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(f"packaging-{VERSION}/{path}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    blob = buf.getvalue()
    sha = hashlib.sha256(blob).hexdigest()
    (cache / "sdists").mkdir(parents=True, exist_ok=True)
    (cache / "sdists" / f"{sha}-packaging-{VERSION}.tar.gz").write_bytes(blob)
    return sha, files


def _task(cache: Path) -> RepoRepairTask:
    sha, files = _sdist(cache)
    pin = ProjectPin("packaging", VERSION, sha, source=("src/packaging",), python_path=("src",))
    path = "src/packaging/markers.py"
    patch = make_patch({path: (files[path], files[path] + BUG.encode())})
    record = TaskRecord(task_id("packaging", patch), "packaging", VERSION, 1,
                        ({"file": path, "operator": "flip_compare", "index": 0,
                          "function": "default_environment", "line": 1},),
                        0, patch, ("tests/test_markers.py::test_os_name",),
                        ("tests/test_markers.py::test_marker_text",), "os name",
                        "`test_os_name` fails.\n")
    return RepoRepairTask(record, pin, cache_root=cache / "tasks")


def test_copying_the_module_out_of_site_packages_does_not_score(tmp_path, monkeypatch):
    require_tool("bwrap")
    cache = tmp_path / "cache"
    monkeypatch.setenv("PROOFGYM_CACHE", str(cache))
    task = _task(cache)
    env = make_env(tasks=TaskSet([task]))
    try:
        attack = ScriptedPolicy([ToolCallAction("bash", {"command": COPY_FROM_SITE_PACKAGES}),
                                 TurnCompleteAction("Done.")])
        traj = run_episode(env, attack, task=task, seed=0)
    finally:
        env.close()
    assert traj.reward != 1.0, f"copied the pristine module out of the image: {traj.reward}"
    # refused before any sandbox started, with what, why and what to do
    assert traj.status == "error" and "packaging" in (traj.error or ""), traj.error
    with pytest.raises(ImageError, match=r"installs module\(s\) \['packaging'\].*drop"):
        project_image(task.pin)


def test_synth_refuses_a_project_the_image_holds_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("PROOFGYM_CACHE", str(tmp_path / "cache"))  # empty: nothing fetched
    from proofgym.envs.repo_repair.synth import synthesize
    from proofgym.tasks.synth import Recipe

    pin = ProjectPin("iniconfig", "2.3.1", "0" * 64, source=("src/iniconfig",), python_path=("src",))
    manifest = tmp_path / "tasks.jsonl"
    with pytest.raises(ImageError, match=r"project 'iniconfig': the default system installs "
                                         r"module\(s\) \['iniconfig'\].*drop it from the recipe"):
        synthesize(Recipe.of([pin]), manifest, quiet=True)
    assert not manifest.exists() and not (tmp_path / "cache" / "sdists").exists()


def test_the_copy_from_image_control_copies_what_the_image_holds(tmp_path):
    """The validate control is able to see the leak: where the image holds the module (the
    default system's ``packaging``), it puts the image's files in the workspace."""
    require_tool("bwrap")
    from proofgym.envs.code_repair.attacks import copy_from_image
    from proofgym.runtimes.sandbox import SandboxRuntime

    (tmp_path / "src" / "packaging").mkdir(parents=True)
    (tmp_path / "src" / "packaging" / "markers.py").write_text("BROKEN = True\n")
    runtime = SandboxRuntime(tmp_path)
    try:
        out = runtime.execute("bash", {"command": copy_from_image({"packaging": "src"}) +
                                       "\nsha256sum src/packaging/markers.py"})
    finally:
        runtime.close()
    want = hashlib.sha256((Path(packaging.__file__).parent / "markers.py").read_bytes()).hexdigest()
    assert want in out.output, out.output
