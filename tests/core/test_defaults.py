"""Run defaults are decided once (``proofgym.core.defaults.DEFAULTS``): the CLI, ``evaluate()``,
``validate()``, the orchestrator, the verifier pool, the OpenAI client and Ray slots agree."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import os
from collections.abc import Callable
from typing import Any

import pytest
from typer.testing import CliRunner

from proofgym.cli.eval_cmd import eval_command
from proofgym.cli.main import app
from proofgym.cli.validate_cmd import validate_command
from proofgym.cli.verify_cmd import verify_command
from proofgym.core.defaults import DEFAULTS, RunDefaults
from proofgym.eval import evaluate, validate
from proofgym.rollout import Orchestrator
from proofgym.rollout.openai_policy import OpenAIPolicy
from proofgym.rollout.ray_slots import RaySlots
from proofgym.verify import regrade
from proofgym.verify.graders.judge import LLMJudge
from proofgym.verify.pool import VerifierPool

validate_module = importlib.import_module("proofgym.eval.validate")


def _default(fn: Callable[..., Any], name: str) -> Any:
    return inspect.signature(fn).parameters[name].default


# (where, parameter, the DEFAULTS field it must equal)
CLI = [
    (eval_command, "seed", "seed"), (eval_command, "concurrency", "concurrency"),
    (eval_command, "repeats", "repeats"), (eval_command, "grader_timeout", "grader_timeout_s"),
    (eval_command, "max_error_rate", "max_error_rate"),
    (eval_command, "client_timeout", "client_timeout_s"),
    (eval_command, "policy_version", "policy_version"),
    (eval_command, "cpus_per_slot", "cpus_per_slot"),
    (validate_command, "grader_timeout", "grader_timeout_s"),
    (validate_command, "concurrency", "validate_concurrency"),
    (verify_command, "grader_timeout", "grader_timeout_s"),
]
LIBRARY = [
    (evaluate, "seed", "seed"), (evaluate, "repeats", "repeats"),
    (evaluate, "concurrency", "concurrency"), (Orchestrator, "concurrency", "concurrency"),
    (validate, "concurrency", "validate_concurrency"),
    (VerifierPool, "timeout_s", "grader_timeout_s"),
    (OpenAIPolicy, "timeout_s", "client_timeout_s"), (OpenAIPolicy, "version", "policy_version"),
    (OpenAIPolicy, "max_retries", "client_max_retries"), (OpenAIPolicy, "backoff_s", "client_backoff_s"),
    (OpenAIPolicy, "max_backoff_s", "client_max_backoff_s"),
    (LLMJudge, "backoff_s", "client_backoff_s"), (LLMJudge, "max_backoff_s", "client_max_backoff_s"),
    (RaySlots, "cpus_per_slot", "cpus_per_slot"),
]


@pytest.mark.parametrize(("where", "name", "field"), CLI + LIBRARY,
                         ids=[f"{w.__name__}.{n}" for w, n, _ in CLI + LIBRARY])
def test_every_entry_point_reads_the_one_default(where: Callable[..., Any], name: str, field: str) -> None:
    assert _default(where, name) == getattr(DEFAULTS, field)


def test_cli_and_library_agree_value_by_value() -> None:
    # the pairs a user meets on both roads
    assert _default(eval_command, "concurrency") == _default(evaluate, "concurrency") == \
        _default(Orchestrator, "concurrency")
    assert _default(eval_command, "repeats") == _default(evaluate, "repeats")
    assert _default(eval_command, "seed") == _default(evaluate, "seed")
    assert _default(eval_command, "grader_timeout") == _default(VerifierPool, "timeout_s") == \
        _default(validate_command, "grader_timeout") == _default(verify_command, "grader_timeout") == \
        validate_module.GRADER_TIMEOUT_S == regrade.GRADER_TIMEOUT_S
    assert _default(eval_command, "client_timeout") == _default(OpenAIPolicy, "timeout_s")
    assert _default(eval_command, "cpus_per_slot") == _default(RaySlots, "cpus_per_slot")
    assert DEFAULTS.validate_workers() == (os.cpu_count() or 1) and DEFAULTS.validate_workers(3) == 3


def test_defaults_are_frozen_and_shown_by_the_cli() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.concurrency = 4  # type: ignore[misc]
    assert RunDefaults() == DEFAULTS
    shown = " ".join(CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "300"}).output.split())
    assert f"[default: {DEFAULTS.grader_timeout_s}]" in shown
    assert f"[default: {DEFAULTS.client_timeout_s}]" in shown
