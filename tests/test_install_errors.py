"""A missing piece of the sandbox (bwrap, pytest, pyseccomp) is a one-line error from the CLI that
names the install command, never a traceback. (A fresh ``pip install proofgym`` running the
README's CodeRepair command is checked by hand: see the issue 13 notes.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import tomllib

from tests.conftest import REPO, require_tool

DRIVER = ("import sys\n"
          "for name in sys.argv[1].split(','):\n"
          "    sys.modules[name] = None  # as if it were not installed\n"
          "sys.argv = ['proofgym', 'eval', 'proofgym/CodeRepair-v0', '-n', '1', '--out', sys.argv[2]]\n"
          "from proofgym.cli.main import main\n"
          "main()\n")


def run(tmp_path, hidden: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "400"}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-c", DRIVER, hidden, str(tmp_path / "run")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("hidden", "path", "command"), [
    ("nothing_hidden", "/nonexistent", "apt-get install -y bubblewrap"),
    ("pytest", None, "pip install 'proofgym[sandbox]'"),
    ("pyseccomp", None, "pip install 'proofgym[sandbox]'"),
])
def test_a_missing_piece_is_one_line_naming_the_install_command(tmp_path, hidden, path, command):
    require_tool("bwrap")
    proc = run(tmp_path, hidden, path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and command in lines[0], proc.stderr


def test_the_base_install_brings_what_the_sandbox_needs():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = {d.split(">")[0].split("=")[0].split(";")[0].strip() for d in project["dependencies"]}
    assert {"pytest", "pyseccomp"} <= base
    assert {d.split(">")[0] for d in project["optional-dependencies"]["sandbox"]} == {"pytest", "pyseccomp"}
