"""Attack: a second local user plants the state root's proofgym trusts.

proofgym keeps state between runs: the staged minimal system and its index, image mount roots,
the sandbox id leases, the mount points the sandbox user sees its workspace through, the
snapshot cache, scratch space. When those lived under predictable names in the host's temp
directory, any local user could create them first (after a reboot or a temp cleaner): an index
naming their own copy of the system made root's next grading run their ``sitecustomize.py``,
a symlink on the index's temporary name made root overwrite a file of its own, and a directory of
theirs at the lease or mount-point name stopped every root sandbox.

Each test runs root's proofgym in a fresh process with a fresh ``/tmp`` (a private mount
namespace: the host's real state is not touched), lets another user (``pgtest``, forked and
``setuid``) plant one name, then has root's proofgym do what it does there, and checks that
it neither used nor wrote through what was planted. The last one plants everything at once and
grades a reference fix: it still scores 1.0.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from proofgym.runtimes.sandbox.scratch import remove_tree
from tests.conftest import REPO, require_tool

pytestmark = [pytest.mark.sandbox,
              pytest.mark.skipif(os.geteuid() != 0, reason="another user's files can only be "
                                 "planted, and root's proofgym run, as root")]

ATTACKER = "pgtest"

#: Runs as root in a private mount namespace: a fresh sticky /tmp, then each step (root's in
#: this process, the other user's in a forked child that drops to their uid first).
_DRIVER = r"""
import json, os, subprocess, sys, traceback
fresh, uid, gid, source = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
subprocess.run(["mount", "--bind", fresh, "/tmp"], check=True)
steps = {}
exec(compile(source, "<steps>", "exec"), steps)
state = {}
for who, step in steps["STEPS"]:
    if who == "root":
        try:
            step(state)
        except BaseException as exc:
            state["error"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
            break
        continue
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.write(w, json.dumps(step(state)).encode())
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.close(r)
    if os.waitpid(pid, 0)[1] != 0:
        raise SystemExit(f"the other user's step {step.__name__} failed")
    state[step.__name__] = json.loads(data or b"null")
print("STATE " + json.dumps(state, default=str))
"""

#: What every step script starts with (imported before the fork: the other user may not be able
#: to read the interpreter's prefix).
_COMMON = """
import hashlib, json, os, shutil, stat, tempfile
from pathlib import Path
from proofgym.runtimes.sandbox import system
from proofgym.runtimes.sandbox.system import MinimalSystem, PYTEST_PACKAGES

def fake_system(path):
    '''A staged tree as proofgym recognises one (complete, sys/ and empty/), of the other user.'''
    for d in ("sys/usr/bin", "sys/opt/python/lib", "sys/etc", "empty"):
        Path(path, d).mkdir(parents=True)
    Path(path, "sys/opt/python/lib/sitecustomize.py").write_text("print('planted')\\n")
    Path(path, ".complete").touch()
    os.chmod(path, 0o777)

def index_name():
    '''Where the minimal system's index was kept (the host's temp dir, keyed by its inputs).'''
    key = system._inputs_key(PYTEST_PACKAGES)
    return str(Path(tempfile.gettempdir()) / f"proofgym-system-index-{key}.json")

def owned_by_root_only(path):
    '''Whether ``path`` and every directory above it are root's and no one else's to change.'''
    p = Path(path)
    for d in (p, *p.parents):
        st = os.lstat(d)
        if stat.S_ISLNK(st.st_mode) or st.st_uid != 0 or (
                st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX):
            return False
    return True
"""


def _attacker() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam(ATTACKER)
    except KeyError:  # as .ci/as-user makes it
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", ATTACKER], check=True)
        entry = pwd.getpwnam(ATTACKER)
    return entry.pw_uid, entry.pw_gid


def _run(steps: str, timeout: float = 240) -> dict:
    """The state the steps left (``error``: what root's proofgym raised)."""
    require_tool("bwrap")
    require_tool("unshare")
    uid, gid = _attacker()
    fresh = tempfile.mkdtemp(prefix="proofgym-test-tmp-", dir="/tmp")
    os.chmod(fresh, 0o1777)  # as /tmp is
    try:
        env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": "/tmp"}
        proc = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", sys.executable, "-c", _DRIVER,
             fresh, str(uid), str(gid), _COMMON + steps],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    finally:
        remove_tree(Path(fresh))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("STATE ")]
    assert proc.returncode == 0 and lines, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    state = json.loads(lines[-1][len("STATE "):])
    state["stderr"] = proc.stderr[-3000:]
    return state


def _no_error(state: dict) -> None:
    assert "error" not in state, f"root's proofgym refused to run: {state['error']}\n{state['stderr']}"


def test_a_planted_system_index_is_never_used():
    state = _run("""
def names(state):
    state["index"] = index_name()
def plant(state):
    fake_system("/tmp/planted-system")
    Path(state["index"]).write_text(json.dumps({"root": "/tmp/planted-system", "files": []}))
def use(state):
    root = MinimalSystem.default().root
    state["root"], state["trusted"] = str(root), owned_by_root_only(root)
STEPS = [("root", names), ("user", plant), ("root", use)]
""")
    _no_error(state)
    assert "planted" not in state["root"] and state["trusted"], (
        f"root's sandboxes would run the system another user planted: {state['root']}")


def test_a_planted_system_tree_is_never_used():
    state = _run("""
def names(state):
    digest = hashlib.sha256(system._LAYOUT)
    for dest, src in system._system_files(PYTEST_PACKAGES):
        st = os.stat(src)
        digest.update(f"{dest}\\0{src}\\0{st.st_size}\\0{st.st_mtime_ns}\\n".encode())
    state["tree"] = str(Path(tempfile.gettempdir()) / f"proofgym-system-{digest.hexdigest()[:20]}")
def plant(state):
    fake_system(state["tree"])
def use(state):
    root = MinimalSystem.default().root
    state["root"], state["trusted"] = str(root), owned_by_root_only(root)
STEPS = [("root", names), ("user", plant), ("root", use)]
""")
    _no_error(state)
    assert state["root"] != state["tree"] and state["trusted"], (
        f"root's sandboxes would run the system tree another user planted: {state['root']}")


def test_a_planted_image_mount_root_is_never_used():
    state = _run("""
from proofgym.runtimes.sandbox.images import cache
def lower(state):
    Path("/tmp/root-layer").mkdir(mode=0o755)
    state["planted"] = str(Path(tempfile.gettempdir()) / f"proofgym-image-probe-{os.getuid()}")
def plant(state):
    root = Path(state["planted"])
    root.mkdir()
    (root / "l0").symlink_to("/tmp/root-layer")
    (root / "evil").mkdir()
    (root / "sys").mkdir()
    (root / "empty").mkdir()
    (root / "lowerdir").write_text("l0:evil:empty")
    (root / cache.COMPLETE).touch()
def use(state):
    root = cache.mount_root("probe", [Path("/tmp/root-layer")])
    state["root"], state["trusted"] = str(root), owned_by_root_only(root)
    state["lowerdir"] = (root / "lowerdir").read_text()
STEPS = [("root", lower), ("user", plant), ("root", use)]
""")
    _no_error(state)
    assert state["root"] != state["planted"] and state["trusted"], state["root"]
    assert state["lowerdir"] == "l0:empty", f"another user's layer is in root's image: {state}"


def test_a_planted_lease_directory_stops_no_sandbox():
    """The sandbox id leases and the grading leases."""
    state = _run("""
from proofgym.runtimes import grading_lease
from proofgym.runtimes.sandbox import ids
def plant(state):
    Path("/tmp/proofgym-ids").mkdir(mode=0o777)
    os.chmod("/tmp/proofgym-ids", 0o777)
    for slot in range(8):  # whatever root creates there would be theirs to hold or replace
        Path("/tmp/proofgym-ids", str(slot)).symlink_to("/tmp/root-file")
def use(state):
    lease = ids.lease()
    state["leases"] = str(ids._lease_dir(True))
    lease.release()
    grading = grading_lease.grading_lease("0" * 32, timeout_s=30)
    grading.release()
    state["grading"] = str(grading_lease.lease_dir())
STEPS = [("user", plant), ("root", use)]
""")
    _no_error(state)
    assert not state["leases"].startswith("/tmp/"), state["leases"]
    assert not state["grading"].startswith("/tmp/"), state["grading"]


def test_a_planted_mount_point_directory_stops_no_sandbox():
    state = _run("""
from proofgym.runtimes.sandbox import SandboxRuntime
from tests.sandbox_helpers import FAST_LIMITS
def plant(state):
    for name in ("workspace", "system", "dev"):
        Path("/tmp/proofgym-mnt", name).mkdir(parents=True)
    os.chmod("/tmp/proofgym-mnt", 0o777)
def use(state):
    rt = SandboxRuntime(limits=FAST_LIMITS)
    try:
        state["output"] = rt.execute("bash", {"command": "echo inside"}).output
    finally:
        rt.close()
STEPS = [("user", plant), ("root", use)]
""")
    _no_error(state)
    assert "inside" in state["output"], state


def test_a_planted_snapshot_cache_is_never_used():
    state = _run("""
from proofgym.runtimes.sandbox import materialize
def plant(state):
    Path("/tmp/proofgym-snapshots-0").mkdir(mode=0o777)
    os.chmod("/tmp/proofgym-snapshots-0", 0o777)
def use(state):
    path = materialize({"a.txt": "root's content"})
    state["path"], state["trusted"] = str(path), owned_by_root_only(path)
STEPS = [("user", plant), ("root", use)]
""")
    _no_error(state)
    assert "proofgym-snapshots-0" not in state["path"] and state["trusted"], state["path"]


@pytest.mark.parametrize("variable", ["PROOFGYM_CACHE", "PROOFGYM_SNAPSHOT_CACHE"])
def test_a_cache_override_below_another_users_directory_is_refused(variable):
    """The override names a directory root makes, inside one the other user owns (who could
    swap it for theirs at any time): refused, not used."""
    state = _run(f"""
from proofgym.runtimes.sandbox import cache_root, materialize
def plant(state):
    Path("/tmp/shared").mkdir(mode=0o755)
def use(state):
    os.environ["{variable}"] = "/tmp/shared/cache"
    if "{variable}" == "PROOFGYM_CACHE":
        state["used"] = str(cache_root())
    else:
        state["used"] = str(materialize({{"a.txt": "x"}}))
STEPS = [("user", plant), ("root", use)]
""")
    assert "used" not in state, f"root kept its cache under another user's directory: {state}"
    assert "/tmp/shared" in state.get("error", ""), state


def test_no_write_through_a_symlink_on_the_index_temp_name():
    state = _run("""
def names(state):
    Path("/tmp/root-file").write_text("root's own")
    index = Path(index_name())
    state["tmp"] = str(index.with_suffix(f".{os.getpid()}.tmp"))
def plant(state):
    Path(state["tmp"]).symlink_to("/tmp/root-file")
def use(state):
    MinimalSystem.default()
    state["content"] = Path("/tmp/root-file").read_text()
STEPS = [("root", names), ("user", plant), ("root", use)]
""")
    _no_error(state)
    assert state["content"] == "root's own", "root wrote the index through another user's symlink"


def test_scratch_sweep_leaves_another_users_directory_alone():
    """The sweep removes scratch space of dead proofgym processes; a directory of that name
    that another user made is not root's to remove (nor to unmount, nor to follow)."""
    state = _run("""
from proofgym.runtimes.sandbox.scratch import remove_scratch, scratch_dir
def dead(state):
    state["pid"] = next(p for p in range(4_000_000, 4_100_000) if not os.path.exists(f"/proc/{p}"))
def plant(state):
    d = Path(f"/tmp/proofgym-sandbox-{state['pid']}-planted")
    d.mkdir()
    (d / "theirs").write_text("x")
def use(state):
    remove_scratch(scratch_dir("proofgym-sandbox-", 16))
    state["kept"] = Path(f"/tmp/proofgym-sandbox-{state['pid']}-planted/theirs").exists()
STEPS = [("root", dead), ("user", plant), ("root", use)]
""")
    _no_error(state)
    assert state["kept"], "root's proofgym removed a directory another user made"


def test_roots_state_is_beyond_another_users_reach():
    """Where root's proofgym keeps its state now: root's, and nothing above it another user can
    replace (a guard for the attacks above, which plant where the state used to be)."""
    state = _run("""
from proofgym.runtimes.sandbox import bwrap, cache_root, ids, snapshot_source
def use(state):
    state["dirs"] = [str(MinimalSystem.default().root), str(ids._lease_dir(True)),
                     str(bwrap._mountpoints()), str(snapshot_source.default_cache_dir()),
                     str(cache_root())]
    state["trusted"] = [d for d in state["dirs"] if owned_by_root_only(d)]
def probe(state):
    reached = []
    for d in state["dirs"]:
        try:
            Path(d, "planted-by-another-user").touch()
            reached.append(d)
        except PermissionError:
            pass
    return reached
STEPS = [("root", use), ("user", probe)]
""")
    _no_error(state)
    assert state["trusted"] == state["dirs"], state
    assert state["probe"] == [], f"another user can write into root's state: {state['probe']}"


def test_a_reference_fix_scores_one_with_everything_planted():
    state = _run("""
from proofgym import Artifact
from proofgym.core import Trace, grade
from proofgym.envs.code_repair import code_repair_tasks
def names(state):
    state["index"] = index_name()
    Path("/tmp/root-file").write_text("root's own")
    state["tmp"] = str(Path(state["index"]).with_suffix(f".{os.getpid()}.tmp"))
def plant(state):
    fake_system("/tmp/planted-system")
    Path(state["index"]).write_text(json.dumps({"root": "/tmp/planted-system", "files": []}))
    Path(state["tmp"]).symlink_to("/tmp/root-file")
    for name in ("proofgym-ids", "proofgym-mnt/workspace", "proofgym-mnt/system",
                 "proofgym-mnt/dev", "proofgym-snapshots-0"):
        Path("/tmp", name).mkdir(parents=True)
def use(state):
    task = code_repair_tasks()[0]
    verdict = grade(task, Trace([]), Artifact("sandbox", files=task.solution_files).view())
    state["verdict"] = [verdict.status, verdict.reward, verdict.reason]
    state["content"] = Path("/tmp/root-file").read_text()
STEPS = [("root", names), ("user", plant), ("root", use)]
""")
    _no_error(state)
    assert state["verdict"][:2] == ["scored", 1.0], state["verdict"]
    assert state["content"] == "root's own"
