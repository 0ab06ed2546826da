"""The wire module (:mod:`proofgym.wire`): each message decodes what it encodes, and a malformed
one is a :class:`WireError` naming what is wrong, with the code the server answers it with."""

from __future__ import annotations

import re

import pytest

from proofgym import ToolCallAction, TurnCompleteAction
from proofgym.core import Verdict
from proofgym.wire import (
    Code,
    Described,
    Reset,
    ServedTask,
    ServeError,
    Step,
    StepResult,
    WireError,
    decode_error_body,
    error_body,
    loads,
    parse_frame,
    public_verdict,
)


def test_messages_round_trip():
    for reset in (Reset(), Reset(seed=3, task_id="t1", allow_heldout=True, grading="deferred")):
        assert Reset.from_dict(reset.to_dict()) == reset
    for step in (Step(ToolCallAction("calc", {"x": 1}, "c1"), tokens=12, cost=0.5),
                 Step(TurnCompleteAction("done"))):
        assert Step.from_dict(step.to_dict()) == step
    verdict = public_verdict(Verdict(0.5, reason="hidden words"))
    result = StepResult({"type": "episode_end", "observation": ""}, True, False, {"k": 1}, {"step": 2},
                        verdict)
    wire = result.to_dict()
    assert wire["reward"] == 0.5 and wire["done"] is True and "hidden words" not in str(wire)
    assert StepResult.from_dict(wire) == result
    assert result.decoded_verdict() == Verdict.from_dict(verdict)
    described = Described("proofgym/Arith-v0", {"n": 2}, "1.0", [{"type": "function"}], {"kind": "x"},
                          {"max_turns": 3}, ["ansi"], {"name": "arith", "manifest": {}},
                          [ServedTask("t1", "h1", "m.Task", "v1", True, {"components": []})])
    assert Described.from_dict(described.to_dict()) == described
    refused = ServeError(Code.HELD_OUT, "held out", kind="x")
    back = decode_error_body(error_body(refused))
    assert (back.code, str(back), back.fields) == (Code.HELD_OUT, "held out", {"kind": "x"})


@pytest.mark.parametrize(("decode", "given", "code", "says"), [
    (loads, "{nope", Code.INVALID_JSON, "invalid JSON"),
    (Reset.from_dict, [1], Code.VALIDATION_ERROR, "a reset's data is an object"),
    (Reset.from_dict, {"seed": -1}, Code.VALIDATION_ERROR, "non-negative integer"),
    (Reset.from_dict, {"options": {"task_id": 3}}, Code.VALIDATION_ERROR, "task_id must be a string"),
    (Reset.from_dict, {"grading": "later"}, Code.VALIDATION_ERROR, "grading must be 'inline'"),
    (Step.from_dict, {"tool_input": {}}, Code.VALIDATION_ERROR, "a step's action must be"),
    (Step.from_dict, {"message": "m", "charge": {"tokens": -2}}, Code.VALIDATION_ERROR, "bad charge"),
    (StepResult.from_dict, {"observation": {}, "terminated": "no"}, Code.VALIDATION_ERROR,
     "lacks or mistypes terminated, truncated, info, metadata"),
    (Described.from_dict, {"env_id": "x"}, Code.VALIDATION_ERROR,
     "a /describe answer lacks or mistypes env_kwargs"),
    (ServedTask.from_dict, {"id": "t", "content_hash": 3}, Code.VALIDATION_ERROR,
     "a served task lacks or mistypes content_hash, grader_type, verifier_version"),
    (parse_frame, '{"type": "jump"}', Code.UNKNOWN_TYPE, "unknown message type"),
    (parse_frame, '{"type": "state", "data": {}}', Code.VALIDATION_ERROR, "takes no field 'data'"),
])
def test_malformed_messages_are_clear_errors(decode, given, code, says):
    with pytest.raises(WireError, match=re.escape(says)) as raised:
        decode(given)
    assert raised.value.code == code and isinstance(raised.value, ValueError)


def test_a_body_that_is_no_error_payload_is_not_mistaken_for_one():
    assert decode_error_body({"error": "a proxy's text"}) is None
    assert decode_error_body("<html>") is None
