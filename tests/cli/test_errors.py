"""Issue 11: every bad CLI input is a short message and a non-zero exit, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import REPO, run_cli

from proofgym.eval import evaluate
from proofgym.rollout import ReferencePolicy

ARITH = "proofgym/Arith-v0"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# (arguments, exit code, words the message must contain); "{tmp}" is a scratch directory
# holding a file "afile" and a finished run "run"; "{out}" a fresh directory name per case.
CASES = [
    (["eval", "proofgym/Nope-v0"], 2, "unknown environment"),
    (["eval", "proofgym/arith-v0"], 2, "proofgym/Arith-v0"),
    (["validate", "proofgym/Nope-v0"], 2, "unknown environment"),
    (["serve-scripted", "proofgym/Nope-v0", "--port", "0"], 2, "unknown environment"),
    # one env builder: the same bad env gives the same message on every command
    (["eval", "nosuchmodule:Foo-v0"], 2, "cannot import module 'nosuchmodule'"),
    (["validate", "nosuchmodule:Foo-v0"], 2, "cannot import module 'nosuchmodule'"),
    (["serve-scripted", "nosuchmodule:Foo-v0", "--port", "0"], 2, "cannot import module 'nosuchmodule'"),
    (["eval", ARITH, "--env-arg", "n_tasks=0", "--out", "{out}"], 2, "TaskSet 'arith-s0' is empty"),
    (["validate", ARITH, "--env-arg", "n_tasks=0"], 2, "TaskSet 'arith-s0' is empty"),
    (["splits", "freeze", "nosuchmodule:Foo-v0", "--out", "{out}"], 2, "cannot import module 'nosuchmodule'"),
    (["eval", ARITH, "-n", "1", "--out", "{tmp}/afile"], 2, "is a file"),
    (["eval", ARITH, "-n", "1", "--resume", "{tmp}/afile"], 2, "is a file"),
    (["eval", ARITH, "-n", "1", "--resume", "{tmp}/missing"], 2, "no such directory"),
    (["eval", ARITH, "-n", "1", "--splits", "{tmp}/missing.json", "--out", "{out}"], 2, "does not exist"),
    (["eval", ARITH, "-n", "1", "--grader-timeout", "0", "--out", "{out}"], 2, "--grader-timeout"),
    (["eval", ARITH, "-n", "1", "--client-timeout", "-1", "--out", "{out}"], 2, "--client-timeout"),
    (["eval", ARITH, "--policy", "foo", "--out", "{out}"], 2, "unknown policy"),
    (["eval", ARITH, "-n", "0", "--out", "{out}"], 2, "-n"),
    (["eval", ARITH, "-n", "2", "--out", "{tmp}/run"], 2, "already holds a run"),
    (["eval", ARITH, "-n", "2", "--policy", "control:nope", "--out", "{out}"], 1, "every episode"),
    (["eval", ARITH, "-n", "2", "--policy", "openai:m", "--base-url", "http://127.0.0.1:{dead}/v1",
      "--client-timeout", "2", "--out", "{out}"], 1, "is the model server"),
    (["report", "{tmp}/run", "--out", "{tmp}/missing/r.html"], 2, "does not exist"),
    (["export", "{tmp}/run", "--out", "{tmp}/missing/x.jsonl"], 2, "does not exist"),
    (["report", "{tmp}/missing"], 2, "not a run"),
    (["export", "{tmp}/missing"], 2, "not a run"),
    (["verify", "{tmp}/missing"], 2, "no rollout contract"),
    (["verify", "{tmp}/run", "--grader-timeout", "0"], 2, "--grader-timeout"),
    (["verify", "{tmp}/run", "--verifier", "threads"], 2, "--verifier"),
    (["validate", ARITH, "--grader-timeout", "-1"], 2, "--grader-timeout"),
    (["validate", ARITH, "--verifier", "threads"], 2, "--verifier"),
    (["serve-scripted", ARITH, "--port", "70000"], 2, "--port"),
    (["serve-scripted", ARITH, "--port", "{busy}"], 2, "in use"),
    (["serve-scripted", ARITH, "--port", "0", "--control", "nonexistent"], 2, "has the control"),
]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("bad-input")
    (tmp / "afile").write_text("not a run")
    evaluate(ARITH, ReferencePolicy(), episodes=2, out=tmp / "run", verifier="inline")
    return tmp


@pytest.mark.parametrize(("args", "code", "says"), CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_a_short_message_and_a_nonzero_exit(scratch: Path, args, code, says) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        values = {"tmp": str(scratch), "dead": str(_free_port()), "busy": str(busy.getsockname()[1]),
                  "out": str(scratch / f"out-{uuid.uuid4().hex[:8]}")}
        proc = run_cli(*[a.format(**values) for a in args], check=False, timeout=180)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out
    assert proc.returncode == code, out
    assert says in out, out
    assert out.count("error:") <= 1, out  # one message, not a cascade


def test_serve_scripted_port_zero_prints_the_real_port() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    server = subprocess.Popen([sys.executable, "-m", "proofgym", "serve-scripted", ARITH, "--port", "0"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        line = ""
        while time.monotonic() < deadline and "http://" not in line:
            line = server.stdout.readline()
        port = int(line.split("http://127.0.0.1:")[1].split("/")[0])
        assert port > 0
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # really listening there
    finally:
        server.terminate()
        server.wait(10)
