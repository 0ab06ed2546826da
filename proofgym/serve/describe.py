"""What the server says about its env: tools, limits, runtime settings, task ids and splits.

Enough for :class:`~proofgym.remote.RemoteEnv` to stand in for the env (the same rollout
contract, so the same trajectory ids as a local run), and never what a grader keeps: no answers,
tests or references. ``/describe`` and ``/tasks`` show tasks as id, content hash, split and
grader version; ``/prompts`` the specs the agent is shown anyway (prompt, metadata), for
training datasets built on the client.
"""

from __future__ import annotations

from typing import Any

from proofgym.core import Task
from proofgym.serve.session import EnvSource
from proofgym.version import __version__
from proofgym.wire import Described, ServedTask


def _template(source: EnvSource) -> Any:
    if source.template is None:
        source.build().close()  # builds the template (and the shared task set) once
    return source.template


def describe_env(source: EnvSource) -> dict[str, Any]:
    env = _template(source)
    taskset, tasks = None, []
    if env.tasks is not None:
        ts = env.tasks
        taskset = {"name": ts.name, "content_hash": ts.content_hash, "manifest": ts.manifest.to_dict()}
        for task in ts:
            rubric = task.rubric()
            tasks.append(ServedTask(
                task.id, task.content_hash, f"{type(task).__module__}.{type(task).__qualname__}",
                str(task.verifier_version), type(task).on_turn_complete is not Task.on_turn_complete,
                rubric.describe() if rubric is not None else None))
    return Described(source.env_id, source.env_kwargs, __version__, env.runtime.tools.schemas(),
                     env.runtime.config(), env.limits.to_dict(), env.metadata.get("render_modes", []),
                     taskset, tasks).to_dict()


def tasks_payload(source: EnvSource) -> dict[str, Any]:
    env = _template(source)
    if env.tasks is None:
        return {"tasks": []}
    ts = env.tasks
    return {"taskset": ts.name, "tasks": [{"task_id": t.id, "split": ts.split_of(t.id),
                                           "content_hash": t.content_hash} for t in ts]}


def splits_payload(source: EnvSource) -> dict[str, Any]:
    env = _template(source)
    if env.tasks is None:
        return {"counts": {}, "burned": {}, "burns": []}
    manifest = env.tasks.manifest
    return {"taskset": env.tasks.name, "digest": manifest.digest, "counts": manifest.counts(),
            "burned": manifest.burned, "burns": list(source.burns)}


def prompts_payload(source: EnvSource) -> dict[str, Any]:
    """Each task's spec as the agent is shown it (its prompt and metadata: what a reset on it
    returns, nothing a grader keeps), for building training datasets on the client."""
    env = _template(source)
    if env.tasks is None:
        return {"prompts": {}}
    out = {}
    for task in env.tasks:
        spec = task.get_spec()
        out[task.id] = {"prompt": spec.prompt, "metadata": spec.metadata or {}}
    return {"prompts": out}


def schema_payload(source: EnvSource) -> dict[str, Any]:
    """OpenEnv's ``GET /schema`` (its ``SchemaResponse``): JSON schemas of the actions (a call of
    one of the env's tools, or the end of the turn), the observations and the state."""
    env = _template(source)
    names = [t["function"]["name"] for t in env.runtime.tools.schemas()]
    call = {"type": "object", "required": ["tool_name"], "properties": {
        "tool_name": {"type": "string", **({"enum": names} if names else {})},
        "tool_input": {"type": "object", "description": "the tool's arguments (see its schema in "
                                                        "the reset's info.tools)"}}}
    turn = {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}}
    observation = {"type": "object", "required": ["turn", "observation", "type"], "properties": {
        "turn": {"type": "integer"}, "observation": {"type": "string"},
        "type": {"enum": ["turn_init", "tool_output", "tool_error", "turn_transition", "episode_end"]}}}
    state = {"type": "object", "properties": {
        "episode_id": {"type": ["string", "null"]}, "step_count": {"type": "integer"},
        "session_id": {"type": "string"}, "task_id": {"type": ["string", "null"]},
        "done": {"type": "boolean"}, "verdict_status": {"type": ["string", "null"]}}}
    return {"action": {"anyOf": [call, turn]}, "observation": observation, "state": state}


def metadata_payload(source: EnvSource) -> dict[str, Any]:
    """OpenEnv's ``GET /metadata`` (its ``EnvironmentMetadata``)."""
    env = _template(source)
    return {"name": source.env_id, "description": (type(env).__doc__ or "").strip().split("\n")[0],
            "version": __version__, "readme_content": None, "author": None,
            "documentation_url": None}
