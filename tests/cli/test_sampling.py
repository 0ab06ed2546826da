"""Issue 24, acceptance 1: ``eval``'s sampling flags reach the model server and the contract."""

from __future__ import annotations

import orjson
import pytest
from conftest import run_cli

from proofgym.eval import make_env
from proofgym.testing import ReferenceScript, ScriptedServer

ARITH = "proofgym/Arith-v0"


def test_sampling_flags_reach_the_server_and_the_contract(tmp_path) -> None:
    settings = tmp_path / "sampling.json"
    settings.write_bytes(orjson.dumps({"presence_penalty": 0.5, "temperature": 0.1}))
    tasks = make_env(ARITH).tasks
    with ScriptedServer(ReferenceScript(tasks), record_requests=True) as server:
        run_cli("eval", ARITH, "-n", "3", "--policy", "openai:scripted", "--base-url", server.base_url,
                "--temperature", "0.7", "--max-tokens", "256", "--top-p", "0.9",
                "--sampling", "seed=7", "--sampling", 'stop=["###"]', "--sampling-file", str(settings),
                "--out", str(tmp_path / "run"))
        received = list(server.received)
    assert len(received) >= 3
    for body in received:  # every request, not only the first; the flag beats the file
        assert body["temperature"] == 0.7 and body["max_tokens"] == 256 and body["top_p"] == 0.9
        assert body["seed"] == 7 and body["stop"] == ["###"] and body["presence_penalty"] == 0.5
    contract = orjson.loads((tmp_path / "run" / "contract.json").read_bytes())
    assert contract["policy"]["sampling"] == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 256,
                                              "seed": 7, "stop": ["###"], "presence_penalty": 0.5}


def test_no_sampling_flag_sends_no_sampling_key(tmp_path) -> None:
    tasks = make_env(ARITH).tasks
    with ScriptedServer(ReferenceScript(tasks), record_requests=True) as server:
        run_cli("eval", ARITH, "-n", "1", "--policy", "openai:scripted", "--base-url", server.base_url,
                "--out", str(tmp_path / "run"))
        received = list(server.received)
    assert received and all("temperature" not in b and "max_tokens" not in b for b in received)
    contract = orjson.loads((tmp_path / "run" / "contract.json").read_bytes())
    assert contract["policy"]["sampling"] == {}


OPENAI = ["--policy", "openai:m", "--base-url", "http://127.0.0.1:9/v1"]
BAD = [
    (["--temperature", "nan", *OPENAI], "not a finite number"),
    (["--temperature", "-0.5", *OPENAI], "out of range"),
    (["--top-p", "0", *OPENAI], "in (0, 1]"),
    (["--top-p", "1.5", *OPENAI], "in (0, 1]"),
    (["--max-tokens", "0", *OPENAI], "--max-tokens"),
    (["--sampling", "temperature=nan", *OPENAI], "expected a number >= 0"),
    (["--sampling", "max_tokens=1.5", *OPENAI], "expected an integer"),
    (["--sampling", "n=4", *OPENAI], "-G/--repeats"),
    (["--sampling", "model=x", *OPENAI], "--policy openai:MODEL"),
    (["--sampling", "seed", *OPENAI], "expected KEY=VALUE"),
    (["--temperature", "0.5", "--sampling", "temperature=0.2", *OPENAI], "keep one"),
    (["--sampling-file", "{tmp}/list.json", *OPENAI], "must be an object"),
    (["--sampling-file", "{tmp}/bad.json", *OPENAI], "not valid JSON"),
    (["--sampling-file", "{tmp}/nan.toml", *OPENAI], "not a finite number"),
    (["--sampling-file", "{tmp}/missing.json", *OPENAI], "does not exist"),
    (["--temperature", "0"], "--policy openai:MODEL"),  # the reference policy samples nothing
]


@pytest.mark.parametrize(("args", "says"), BAD, ids=[" ".join(a)[:50] for a, _ in BAD])
def test_bad_sampling_input_is_a_usage_error(tmp_path, args, says) -> None:
    (tmp_path / "list.json").write_text("[0.7]")
    (tmp_path / "bad.json").write_text("{temperature: 0.7")
    (tmp_path / "nan.toml").write_text("temperature = nan\n")
    proc = run_cli("eval", ARITH, "-n", "1", "--out", str(tmp_path / "run"),
                   *[a.format(tmp=tmp_path) for a in args], check=False, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "Traceback" not in out, out
    assert says in " ".join(out.replace("│", " ").split()), out
    assert not (tmp_path / "run").exists()  # refused before anything was written
