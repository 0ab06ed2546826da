"""Environment images (issue 22): OCI images and packages images as a sandbox's system.

Real bubblewrap sandboxes, real pip, images written byte by byte in the test (no registry).
Acceptance 3: a tiny OCI image layout is built here, an agent episode and a grading run on it,
and the rollout contract records its digest (``contract diff`` names an image change).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import pytest

from proofgym import Task, TaskSet, TaskSpec, ToolCallAction, Trace, TurnCompleteAction, Verdict
from proofgym.core import ActionScript, Limits
from proofgym.env import UniversalVerifiableEnv
from proofgym.eval import evaluate
from proofgym.record import RolloutContract
from proofgym.rollout import ReferencePolicy
from proofgym.runtimes.sandbox import (
    ImageError,
    OciImage,
    PackagesImage,
    SandboxRuntime,
    WheelLock,
    list_images,
    lock_packages,
)
from proofgym.runtimes.sandbox.images import layers
from proofgym.verify.sandboxed import run_program, run_pytest
from tests.conftest import IN_CI, REPO, require_tool
from tests.runtimes.sandbox.image_helpers import (
    entry,
    layer_tar,
    release_layer,
    sha,
    system_layer,
    write_docker_save,
    write_layout,
    write_wheel,
)
from tests.sandbox_helpers import FAST_LIMITS, bash

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Iterator[Path]:
    """A cache of this module's own (every process it starts inherits it)."""
    require_tool("bwrap")
    root = tmp_path_factory.mktemp("image-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROOFGYM_CACHE", str(root))
        yield root


@pytest.fixture(scope="module")
def layouts(cache, tmp_path_factory) -> dict[str, tuple[Path, str]]:
    """Two tiny images that differ in one file (``/etc/image-release``): ``A`` and ``B``."""
    out = {}
    for name in ("A", "B"):
        dest = tmp_path_factory.mktemp(f"layout-{name}")
        out[name] = (dest, write_layout(dest, [system_layer(), release_layer(f"tiny {name}\n")],
                                        gzip_layers=[1]))
    return out


# ------------------------------------------------------------------ acceptance 3
HIDDEN_TEST = b"""
def test_answer_names_the_image():
    with open('/etc/image-release') as f:
        assert open('answer.txt').read() == f.read()
"""


@dataclass(frozen=True)
class ImageTask(Task):
    """Write the image's release line to answer.txt; graded by pytest on the same image."""

    layout: str

    @property
    def id(self) -> str:
        return "image-release"

    def get_spec(self) -> TaskSpec:
        return TaskSpec("Copy /etc/image-release into answer.txt.")

    def verify(self, trace: Trace, runtime: Any) -> Verdict:
        files = runtime.artifact.files
        run = run_pytest({"README": "x\n"}, files, tests=["test_hidden.py"],
                         hidden={"test_hidden.py": HIDDEN_TEST}, image=OciImage(self.layout),
                         limits=FAST_LIMITS)
        return Verdict(1.0 if run.results.get("test_hidden.py::test_answer_names_the_image")
                       == "passed" else 0.0)

    def reference_solution(self) -> ActionScript:
        return [ToolCallAction("bash", {"command": "cat /etc/image-release | tee answer.txt"}),
                TurnCompleteAction("done")]

    def content(self) -> Mapping[str, Any]:
        return {"layout": self.layout}


def make_image_env(layout: str) -> UniversalVerifiableEnv:
    runtime = SandboxRuntime(image=OciImage(layout), limits=FAST_LIMITS)
    return UniversalVerifiableEnv(runtime, max_turns=1, tasks=TaskSet([ImageTask(layout)], name="img"),
                                  limits=Limits(max_turns=1, max_tool_calls=4))


gymnasium.register("proofgym-test/Image-v0", entry_point=make_image_env)


def test_episode_and_grading_on_an_oci_layout_record_its_digest(layouts, tmp_path):
    runs = {}
    for name, (layout, digest) in layouts.items():
        out = tmp_path / name
        trajs, summary = evaluate("proofgym-test/Image-v0", ReferencePolicy(), out=out,
                                  env_kwargs={"layout": str(layout)})
        (traj,) = trajs
        assert traj.reward == 1.0 and summary["episodes"] == 1, traj
        record = json.loads((out / "trajectories.jsonl").read_text().splitlines()[0])
        assert f"tiny {name}" in json.dumps(record)  # the bash call showed the image's file
        assert record["artifact"]["meta"]["image"] == digest  # the trajectory records it
        contract = RolloutContract.load(out)
        assert contract["runtime"]["image"]["digest"] == digest
        assert contract["runtime"]["image"]["kind"] == "oci"
        runs[name] = out
    proc = subprocess.run([sys.executable, "-m", "proofgym", "contract", "diff", str(runs["A"]),
                           str(runs["B"])], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[runtime]" in proc.stdout and "runtime.image.digest" in proc.stdout
    assert layouts["A"][1] in proc.stdout and layouts["B"][1] in proc.stdout


def test_default_runtime_config_has_no_image(cache):
    rt = SandboxRuntime(limits=FAST_LIMITS, prestart=False)
    try:
        assert "image" not in rt.config() and rt.config()["packages"]
    finally:
        rt.close()


def test_a_runtime_switches_images_between_episodes(layouts, tmp_path):
    """Per-task images: spares booted on one image never serve an episode on another."""
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "f.txt").write_text("task\n")
    image_a, image_b = (OciImage(str(layouts[n][0])) for n in "AB")
    rt = SandboxRuntime(limits=FAST_LIMITS)  # prestart: a spare is always booting
    try:
        seen = []
        for image in (image_a, image_b, image_b, None, image_a):
            rt.use_snapshot(snap, image=image)
            rt.reset()
            seen.append(bash(rt, "cat f.txt /etc/image-release 2>/dev/null; true").output)
            assert rt.config().get("image", {}).get("digest") == (image.digest if image else None)
        assert seen == ["task\ntiny A", "task\ntiny B", "task\ntiny B", "task", "task\ntiny A"]
        rt.use_image(image_b)
        assert bash(rt, "cat /etc/image-release").output == "tiny B"
        assert rt.snapshot().meta["image"] == image_b.digest
    finally:
        rt.close()


# ------------------------------------------------------------------ OCI images
def test_oci_image_runs_with_the_images_path_and_layers(layouts, tmp_path, monkeypatch):
    upper = layer_tar([entry("etc/", kind=tarfile.DIRTYPE, mode=0o755),
                       entry("etc/.wh.image-release"),  # deleted by the upper layer
                       entry("opt/extra/", kind=tarfile.DIRTYPE, mode=0o755),
                       entry("opt/extra/.wh..wh..opq"),  # opaque: the lower's files hidden
                       entry("opt/extra/new.txt", b"upper\n"),
                       entry("opt/tool", b"#!/bin/sh\necho tool ran\n", mode=0o755),
                       entry("opt/tool-link", kind=tarfile.LNKTYPE, link="opt/tool")])
    lower = layer_tar([entry("opt/extra/", kind=tarfile.DIRTYPE, mode=0o755),
                       entry("opt/extra/old.txt", b"lower\n")])
    dest = tmp_path / "layout"
    digest = write_layout(dest, [system_layer(), release_layer("tiny\n"), lower, upper],
                          env=["PATH=/opt:/opt/python/bin:/usr/bin", "LD_LIBRARY_PATH=/opt/python/lib"],
                          gzip_layers=[2, 3])
    monkeypatch.setattr(layers, "PROGRESS_BYTES", 1)  # a progress line per entry
    lines: list[str] = []
    image = OciImage(str(dest)).build(progress=lines.append)
    assert image.digest == digest and image.path.startswith("/opt:")
    assert lines[0].startswith("layer 1/4") and lines[-1] == f"ready: {digest}"
    assert any(line.startswith("layer 4/4") for line in lines)
    assert any("MiB of blobs/sha256/" in line for line in lines), lines
    rt = SandboxRuntime(image=image, limits=FAST_LIMITS, prestart=False)
    try:
        r = bash(rt, "ls /opt/extra; tool-link; echo $PATH; test -e /etc/image-release || echo gone")
        assert r.output.split("\n") == ["new.txt", "tool ran", "/opt:/opt/python/bin:/usr/bin",
                                        "gone"], r.output
    finally:
        rt.close()


def test_docker_save_tarball_is_an_image(cache, tmp_path):
    tarball = tmp_path / "saved.tar"
    digest = write_docker_save(tarball, [system_layer(), release_layer("saved\n")])
    image = OciImage(str(tarball), ref="tiny:latest").build()
    assert image.digest == digest
    run = run_program({"a.py": "print(open('/etc/image-release').read().strip())"}, {},
                      argv=["python3", "a.py"], image=image, proof=True, limits=FAST_LIMITS)
    assert run.ok and run.stdout_text == "saved\n", run
    with pytest.raises(ImageError, match="has no image 'other:1'"):
        OciImage(str(tarball), ref="other:1")


def test_oci_archive_tarball_with_private_dirs_and_top_level_files(cache, tmp_path):
    """``podman save --format oci-archive``: a layout in a tar. A directory only its owner may
    enter stays closed to the sandbox's user, as in a container run as a non-root user."""
    layout = tmp_path / "layout"
    extra = layer_tar([entry("root/", kind=tarfile.DIRTYPE, mode=0o700),
                       entry("root/secret", b"s3cret\n", mode=0o600),
                       entry("VERSION", b"v1\n")])
    digest = write_layout(layout, [system_layer(), extra], gzip_layers=[1])
    archive = tmp_path / "image.oci.tar"
    with tarfile.open(archive, "w") as tar:
        for p in sorted(layout.rglob("*")):
            tar.add(p, arcname=p.relative_to(layout).as_posix(), recursive=False)
    image = OciImage(str(archive)).build()
    assert image.digest == digest
    rt = SandboxRuntime(image=image, limits=FAST_LIMITS, prestart=False)
    try:
        r = bash(rt, "cat /VERSION; cat /root/secret 2>/dev/null || echo closed")
        want = "v1\nclosed" if os.geteuid() == 0 else "v1\ns3cret"  # without root: the owner
        assert r.output == want, r.output
    finally:
        rt.close()


def test_concurrent_builders_share_one_cache_entry(cache, tmp_path):
    """Three processes building the same image at once all finish with it; the cache holds one
    entry per layer and no temporary leftover (a failed build leaves nothing: see the tampered
    layer tests)."""
    layout = tmp_path / "layout"
    layers_ = [release_layer(f"line {i}\n" * 20000) for i in range(3)]
    digest = write_layout(layout, layers_, gzip_layers=[0, 2])
    fresh = tmp_path / "fresh-cache"
    code = ("import sys; from proofgym.runtimes.sandbox import OciImage; "
            "print(OciImage(sys.argv[1]).build().digest)")
    env = {**os.environ, "PROOFGYM_CACHE": str(fresh), "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(layout)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [o.strip() for o, _ in outs] == [digest] * 3, outs
    names = sorted(p.name for p in (fresh / "images" / "layers").iterdir())
    mode = "root" if os.geteuid() == 0 else "user"
    assert names == sorted({f"{sha(t).split(':')[1]}.{mode}" for t in layers_}), names


def test_the_images_interpreter_is_looked_up_inside_the_image_only(cache, tmp_path):
    """Links resolve in the image (never on the host); whiteouts and opaque directories of
    upper layers hide what lies below, as the overlay will."""
    base = layer_tar([entry("usr/local/lib/py/bin/python3.9", b"\x7fELF", mode=0o755),
                      entry("usr/local/lib/py/bin/python3", kind=tarfile.SYMTYPE, link="python3.9"),
                      entry("usr/local/bin", kind=tarfile.SYMTYPE, link="/usr/local/lib/py/bin"),
                      entry("opt/hostbin", kind=tarfile.SYMTYPE, link="/usr/bin")])
    cases = [([], "/usr/local/bin", None),
             ([], "/opt/hostbin", "no 'python3'"),  # the host's /usr/bin/python3 is not the image's
             ([entry("usr/local/lib/py/bin/.wh.python3.9")], "/usr/local/bin", "no 'python3'"),
             ([entry("usr/local/lib/py/.wh..wh..opq")], "/usr/local/bin", "no 'python3'")]
    assert Path("/usr/bin/python3").exists()
    for n, (upper, path, error) in enumerate(cases):
        dest = tmp_path / f"layout{n}"
        write_layout(dest, [base, *([layer_tar(upper)] if upper else [])], env=[f"PATH={path}"])
        image = OciImage(str(dest)).build()
        if error is None:
            image.check()
        else:
            with pytest.raises(ImageError, match=error):
                image.check()
            with pytest.raises(ImageError, match=error):  # before any sandbox boots on it
                SandboxRuntime(image=OciImage(str(dest)), limits=FAST_LIMITS, prestart=False)


def test_a_tampered_layer_is_refused(cache, tmp_path):
    dest = tmp_path / "layout"
    write_layout(dest, [release_layer("tampered?\n")])
    manifest = json.loads((dest / "index.json").read_text())["manifests"][0]["digest"]
    layer = json.loads((dest / "blobs/sha256" / manifest.split(":")[1]).read_text())["layers"][0]
    blob = dest / "blobs/sha256" / layer["digest"].split(":")[1]
    blob.write_bytes(blob.read_bytes().replace(b"tampered?", b"tampered!"))
    with pytest.raises(ImageError, match="does not match its digest"):
        OciImage(str(dest)).build()
    assert not any(p.name.startswith(layer["digest"].split(":")[1][:10])
                   for p in (cache / "images" / "layers").iterdir())


def test_bad_image_sources_are_refused_with_a_reason(cache, tmp_path):
    with pytest.raises(ImageError, match="does not exist"):
        OciImage(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImageError, match="neither an OCI image layout"):
        OciImage(str(tmp_path / "empty"))
    (tmp_path / "junk.tar").write_bytes(b"not a tar")
    with pytest.raises(ImageError, match="not a tar archive"):
        OciImage(str(tmp_path / "junk.tar"))


# ------------------------------------------------------------------ packages images
def test_packages_image_installs_pinned_wheels_and_nothing_of_the_host(cache, tmp_path):
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "pgdemo", "1.0", {"pgdemo/__init__.py": "VALUE = 'one'\n"})
    lock = lock_packages(["pgdemo"], find_links=[wheels])
    assert lock.names() == ["pgdemo==1.0"] and WheelLock.parse(lock.to_text()) == lock
    image = PackagesImage(lock, (str(wheels),)).build()
    rt = SandboxRuntime(image=image, limits=FAST_LIMITS, prestart=False)
    try:
        r = bash(rt, "python3 -c 'import pgdemo; print(pgdemo.VALUE)'; "
                     "python3 -c 'import pytest' 2>&1 | tail -1; ls /opt/python/lib/python3*/site-packages")
        lines = r.output.split("\n")
        assert lines[0] == "one" and "No module named 'pytest'" in lines[1], r.output
        assert "proofgym" not in r.output and "pgdemo" in lines[2:]
        assert rt.config()["image"]["packages"] == ["pgdemo==1.0"]
        assert rt.snapshot().meta["image"] == image.digest
    finally:
        rt.close()
    write_wheel(wheels, "pgdemo", "2.0", {"pgdemo/__init__.py": "VALUE = 'two'\n"})
    newer = PackagesImage(lock_packages(["pgdemo==2.0"], find_links=[wheels]), (str(wheels),))
    assert newer.digest != image.digest
    assert {r["digest"] for r in list_images()} >= {image.digest}


def test_a_wheel_that_does_not_match_its_pin_is_refused(cache, tmp_path):
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "pgbad", "1.0", {"pgbad/__init__.py": "X = 1\n"})
    lock = WheelLock.parse(f"pgbad==1.0 --hash=sha256:{'0' * 64}\n")
    with pytest.raises(ImageError, match="pip exit"):
        PackagesImage(lock, (str(wheels),)).build()
    with pytest.raises(ImageError, match="line 1"):
        WheelLock.parse("pgbad>=1.0\n")


def test_an_image_installing_the_projects_module_is_refused(cache, tmp_path):
    """A user's project ``pgdate`` whose test dependency pulls in a distribution of another name
    that installs module ``pgdate`` (as freezegun pulls in python-dateutil): refused when the
    wheels are locked, and when the image is built, even from a tree another build cached."""
    wheels = tmp_path / "wheels"
    write_wheel(wheels, "pgdate_util", "1.0", {"pgdate/__init__.py": "X = 1\n"})
    write_wheel(wheels, "pgfreeze", "1.0", {"pgfreeze.py": "import pgdate\n"})
    lock = lock_packages(["pgfreeze", "pgdate-util"], find_links=[wheels])
    refusal = r"project 'pgdate': .* installs module\(s\) \['pgdate'\] \(pgdate[-_]util==1.0\).*drop"
    with pytest.raises(ImageError, match=refusal):
        PackagesImage(lock, (str(wheels),), project="pgdate", modules=("pgdate",)).check_wheels()
    with pytest.raises(ImageError, match=refusal):
        PackagesImage(lock, (str(wheels),), project="pgdate", modules=("pgdate",)).build()
    PackagesImage(lock, (str(wheels),)).build()  # the same tree, cached by a build for no project
    with pytest.raises(ImageError, match=r"the image \(its installed tree\) installs module\(s\) "
                                         r"\['pgdate'\] \(pgdate_util==1.0\)"):
        PackagesImage(lock, (str(wheels),), project="pgdate", modules=("pgdate",)).build()
    with pytest.raises(ImageError, match=r"pins the project itself \(pgfreeze==1.0\)"):
        PackagesImage(lock, (str(wheels),), project="PGFreeze", modules=("other",)).build()
    ok = PackagesImage(lock, (str(wheels),), project="pgother", modules=("pgother",)).build()
    assert ok.root is not None


def test_pytest_from_pinned_pypi_wheels_grades_in_the_image(cache, tmp_path):
    """Real pip against PyPI: one small pinned wheel (iniconfig) plus pytest's closure."""
    pins = {"iniconfig==2.0.0": ["b6a85871a79d2e3b22d2d1b94ac2824226a63c6b741c88f7ae975f18b6778374"]}
    try:
        lock = lock_packages(["pytest==8.3.3", "iniconfig==2.0.0"])
    except ImageError as exc:
        if IN_CI:
            raise
        pytest.skip(f"PyPI is not reachable here: {exc}")
    assert lock.pins[[p.name for p in lock.pins].index("iniconfig")].sha256 == tuple(pins["iniconfig==2.0.0"])
    image = PackagesImage(lock).build()
    test = "import iniconfig\n\ndef test_it():\n    assert iniconfig.__name__ == 'iniconfig'\n"
    run = run_pytest({"test_it.py": test}, {}, tests=["test_it.py"], image=image, mutants=False,
                     limits=FAST_LIMITS)
    assert run.results == {"test_it.py::test_it": "passed"}, run


# ------------------------------------------------------------------ CLI
def test_cli_builds_lists_and_refuses_bad_input(layouts, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "proofgym", "image", *args], env=env,
                              capture_output=True, text=True, timeout=300)

    layout, digest = layouts["A"]
    built = cli("build", "--oci", str(layout))
    assert built.returncode == 0 and built.stdout.strip() == digest, built.stderr
    assert "layer 2/2" in built.stderr and "ready:" in built.stderr
    listed = cli("ls")
    assert listed.returncode == 0 and digest[:19] in listed.stdout
    for args, words in [((), "--lock"), (("--oci", str(tmp_path / "nope")), "does not exist"),
                        (("--lock", str(tmp_path / "nope.txt")), "does not exist")]:
        bad = cli("build", *args)
        assert bad.returncode == 2 and words in bad.stderr, bad.stderr
        assert "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
