"""``environment_factory``: any proofgym env as the class TRL's ``GRPOTrainer`` pools and resets.

TRL 1.16 (``GRPOTrainer(environment_factory=...)``) calls the factory with no arguments, calls
``reset(**row)`` before each rollout, exposes every public method as a tool (the schema comes from
the method's signature and Google-style docstring) and hands the instances to reward functions as
``environments=``. The class built here generates one method per runtime tool from the tool
registry itself, so the model is shown what ``proofgym eval`` shows it, and routes each call
through ``env.step(ToolCallAction)``: budgets, error observations and sandboxes are the env's own.

Nothing here imports TRL.
"""

from __future__ import annotations

import atexit
import copy
import copyreg
import inspect
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from proofgym.core import (
    EpisodeStateError,
    Task,
    ToolCallAction,
    TraceStep,
    TurnCompleteAction,
    Verdict,
)
from proofgym.core.errors import ConfigError
from proofgym.core.errors import MultiTurnNotSupported as MultiTurnNotSupported
from proofgym.env import UniversalVerifiableEnv, VerificationJob
from proofgym.make import EnvSource, make_env
from proofgym.rollout.recorder import EpisodeRecorder
from proofgym.rollout.recording import Recording
from proofgym.tools import Tool

#: Names TRL gives a meaning to (or that the adapter uses); a tool may not take them.
_RESERVED = frozenset({"reset", "get_reward"})


def is_multi_turn(env: UniversalVerifiableEnv) -> bool:
    """True when a task of ``env`` can answer a finished turn with a new message."""
    if env.max_turns <= 1 or env.tasks is None:
        return False
    # a served task (proofgym.remote) says so itself: its class is the client's stand-in
    return any(t.multi_turn if t.multi_turn is not None
               else type(t).on_turn_complete is not Task.on_turn_complete for t in env.tasks)


# --------------------------------------------------------------- the generated class
class _AdapterMeta(type):
    """Metaclass of generated adapter classes: it lets them pickle *by reference* to
    ``environment_factory(source, **options)`` (registered with :mod:`copyreg` below), which is
    how TRL's async trainer ships the factory to its spawned rollout process."""

    _pg_spec: tuple[EnvSource, dict[str, Any], bool, str | None]


def _reduce_class(cls: _AdapterMeta) -> Any:
    if "_pg_spec" not in vars(cls):  # the base class itself: an ordinary module global
        return cls.__qualname__
    return _rebuild_class, cls._pg_spec


def _rebuild_class(source: EnvSource, options: dict[str, Any], heldout: bool,
                   record_dir: str | None = None) -> type:
    return environment_factory(source, allow_heldout=heldout, record_dir=record_dir, **options)


copyreg.pickle(_AdapterMeta, _reduce_class)  # type: ignore[arg-type]

_CLASSES: dict[tuple[Any, ...], type] = {}
_CLASSES_LOCK = threading.Lock()
_LIVE: weakref.WeakSet[ProofgymEnvironment] = weakref.WeakSet()
#: One recording per class (ids: the next attempt at a task) and per run directory (one writer).
_RECORDINGS: dict[Any, Recording] = {}
_RECORDINGS_LOCK = threading.Lock()

#: The contract's policy entry for a TRL run: the policy is the trainer's model, versioned by
#: the trainer's optimiser step (each trajectory records the step it was sampled at).
TRL_POLICY = {"name": "trl", "trainer": "GRPOTrainer", "versioned_by": "trainer.state.global_step"}


def recording_for(instance: ProofgymEnvironment, record_dir: str | Path | None) -> Recording:
    """The recording ``instance``'s episodes go through: the run directory ``record_dir`` (made
    on first use, its contract from this env), else one without a sink (ids only)."""
    key: Any = str(Path(record_dir).resolve()) if record_dir is not None else type(instance)
    with _RECORDINGS_LOCK:
        recording = _RECORDINGS.get(key)
        if recording is None:
            source, options, _heldout, _dir = instance._pg_spec
            env_id = _describe(source)
            if record_dir is None:
                recording = Recording(env_id=env_id, policy=TRL_POLICY)
            else:
                recording = Recording.to_run_dir(record_dir, instance.env, env_id=env_id, policy=TRL_POLICY,
                                                 env_kwargs=options)
            _RECORDINGS[key] = recording
        return recording


@atexit.register
def close_all() -> None:
    """Close every adapter instance still open (their sandboxes and mounts), as the process exits."""
    for instance in list(_LIVE):
        instance._close()
    with _RECORDINGS_LOCK:
        recordings = list(_RECORDINGS.values())
        _RECORDINGS.clear()
    for recording in recordings:
        recording.close()


class ProofgymEnvironment(metaclass=_AdapterMeta):
    """Base of the classes :func:`environment_factory` builds; one instance = one proofgym env.

    The instance owns a :class:`UniversalVerifiableEnv` for its whole life (for a sandboxed env,
    one sandbox reused across resets) and the trace of the current episode. Its only public
    methods are ``reset`` and the generated tools, because TRL exposes every other public method
    to the model as a tool; the rest is underscored or a property.
    """

    # (source, options, allow_heldout, record_dir); a tuple so a function source is not bound
    _pg_spec: tuple[EnvSource, dict[str, Any], bool, str | None]
    _pg_tool_names: tuple[str, ...] = ()

    def __init__(self) -> None:
        source, options, self._pg_heldout, self._pg_record_dir = self._pg_spec
        self._env = make_env(source, **options)
        self._recorder: EpisodeRecorder | None = None
        self._recording: Recording | None = None
        self._closed = False
        _LIVE.add(self)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A pickled instance is a fresh one (its own env, no episode): live runtimes do not travel.
        return type(self), ()

    # --------------------------------------------------------------- TRL's API
    def reset(self, **row: Any) -> str | None:
        """Start the episode of ``row["task_id"]`` (TRL passes the dataset row).

        Returns what TRL appends to the row's last user message: nothing when the row already
        carries the task's prompt (rows from :func:`~proofgym.integrations.trl.dataset`), the
        task's prompt when the row has no ``prompt`` (an env-driven dataset).
        """
        env = self._env
        task_id = row.get("task_id")
        if task_id is None:
            raise ConfigError("the dataset row has no 'task_id': build the training dataset with "
                              "proofgym.integrations.trl.dataset(env) so each row names its task")
        if env.tasks is not None and not self._pg_heldout:
            env.tasks.manifest.check_training([str(task_id)])
        _obs, info = env.reset(options={"task_id": task_id})
        self._recording = recording_for(self, self._pg_record_dir)
        self._recorder = self._recording.begin(env, info)
        assert env.current_spec is not None
        prompt = env.current_spec.prompt
        if "prompt" not in row:
            return prompt
        shown = _last_user_text(row["prompt"])
        if shown != prompt:
            raise ConfigError(
                f"the row's prompt for task {task_id!r} is not the task's prompt; the model must "
                "see exactly what the env's graders assume: build rows with "
                "proofgym.integrations.trl.dataset(env)")
        return None

    # ------------------------------------------------------------ proofgym side
    @property
    def env(self) -> UniversalVerifiableEnv:
        """The proofgym env behind this instance."""
        return self._env

    @property
    def trace_steps(self) -> list[TraceStep]:
        """The current episode's steps so far (actions and the observations they got)."""
        return list(self._recorder.trace()) if self._recorder is not None else []

    @property
    def episode_id(self) -> str | None:
        """The episode's trajectory id (from :mod:`proofgym.record.ids`)."""
        return self._recorder.trajectory_id if self._recorder is not None else None

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if self._env.current_task is None:
            raise EpisodeStateError(f"tool {name!r} called before reset()")
        if self._env.episode_over:
            return ("[the episode has ended; the call was not run. Reply with your final answer]")
        action = ToolCallAction(name, dict(arguments))
        obs, _reward, terminated, truncated, info = self._env.step(action)
        assert self._recorder is not None
        self._recorder.step(action, obs, terminated, truncated, info)
        return str(obs["observation"])

    def _finish(self, final_message: str | None) -> VerificationJob:
        """End the episode with the model's final message (``None``: it never finished its turn)
        and freeze it for grading."""
        if self._env.current_task is None:
            raise EpisodeStateError("no episode to grade: reset() was never called")
        assert self._recorder is not None
        if final_message is not None and not self._env.episode_over:
            action = TurnCompleteAction(final_message)
            obs, _reward, terminated, truncated, info = self._env.step(action)
            self._recorder.step(action, obs, terminated, truncated, info)
        return self._env.verification_job(self._recorder.trace())

    def _record_in(self, record_dir: str | Path) -> None:
        """Move the current episode to the recording of ``record_dir`` (the reward's recording
        option): its id is re-derived under that run's contract, before it is graded."""
        recording = recording_for(self, record_dir)
        if recording is self._recording or self._recorder is None:
            return
        self._recording = recording
        plan = recording.plan(self._recorder.trajectory.task_id)
        self._recorder.stamp(recording.contract_id, plan.attempt)

    def _record(self, verdict: Verdict, job: VerificationJob, *, policy_version: int | None,
                verifier: dict[str, Any], tokens: dict[str, Any] | None = None) -> None:
        """Deliver the graded episode through this instance's recording (its run directory, if
        one was asked for), with the trainer's policy version."""
        recorder, recording = self._recorder, self._recording
        if recorder is None or recording is None:
            raise EpisodeStateError("no episode to record: reset() was never called")
        recording.note_version(policy_version)
        recorder.policy_version(policy_version)
        if tokens is not None and recorder.trajectory.steps:
            recorder.trajectory.steps[-1].usage["tokens"] = tokens
        recording.deliver(recorder, verdict, artifact=job.artifact.to_dict(), verifier=verifier)

    def _close(self) -> None:
        """Close the env (its runtime: for a sandbox, its processes and mounts). Idempotent.
        Underscored, like everything but ``reset`` and the tools: TRL shows public methods to
        the model as tools. :func:`close_all` runs at exit."""
        if not self._closed:
            self._closed = True
            self._env.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(tools={list(self._pg_tool_names)})"


def close_environment(instance: ProofgymEnvironment) -> None:
    """Close one instance of an :func:`environment_factory` class now (its env; for a sandbox,
    its processes and mounts). Idempotent. A function, not a method: TRL offers every public
    method of the class to the model as a tool. Instances still open are closed at exit."""
    instance._close()


def environment_factory(env: EnvSource, *, allow_heldout: bool = False, record_dir: str | Path | None = None,
                        **options: Any) -> type[ProofgymEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)`` running the proofgym env ``env``.

    Args:
        env: A registered env id (``"proofgym/Arith-v0"``) or a module-level callable returning a
            :class:`UniversalVerifiableEnv` (it must be importable, so the class pickles).
        allow_heldout: Let ``reset`` start held-out and dev tasks (by default it refuses them,
            like :func:`~proofgym.integrations.trl.dataset`).
        record_dir: Record every graded episode in this run directory (made on the first
            episode; ``proofgym show``, ``audit`` and ``export`` read it): ids from the run's
            contract, the trainer's step as each trajectory's policy version.
        **options: Passed to :func:`proofgym.make.make_env` (the one env builder), e.g. ``n_tasks=64``.

    The class has a zero-argument constructor (one env per instance, built once and reset per
    rollout), ``reset(**row)``, and one method per runtime tool whose signature and docstring give
    the same name, description, parameter descriptions and types as the env's ``TaskSpec.tools``.
    It pickles by reference (the same call rebuilds it in another process). The same arguments
    give the same class.

    Raises:
        MultiTurnNotSupported: the env's tasks answer turns with new user messages.
        ValueError: a tool's name or parameters cannot be expressed as a TRL tool method.
    """
    try:
        record = str(record_dir) if record_dir is not None else None
        key = (env, tuple(sorted(options.items())), allow_heldout, record)
        hash(key)
    except TypeError:
        raise TypeError("environment_factory options must be hashable (numbers, strings, tuples) so "
                        "the class can be rebuilt by reference in another process") from None
    with _CLASSES_LOCK:
        if key in _CLASSES:
            return _CLASSES[key]  # type: ignore[return-value]
        cls = _make_class(env, dict(options), allow_heldout, record)
        _CLASSES[key] = cls
        return cls


def _make_class(source: EnvSource, options: dict[str, Any], heldout: bool,
                record_dir: str | None) -> type[ProofgymEnvironment]:
    probe = make_env(source, **options)
    try:
        if is_multi_turn(probe):
            raise MultiTurnNotSupported(
                f"{_describe(source)} is multi-turn: its tasks answer a finished turn with a new "
                "user message, and TRL's GRPOTrainer ends a rollout at the first reply without "
                "tool calls, so the task would never get to answer. Train it on trajectories "
                "from `proofgym eval` exported with `proofgym export` (SFT/DPO), or give the task "
                "its dialogue as a tool.")
        tools = list(probe.runtime.tools)
    finally:
        probe.close()
    namespace: dict[str, Any] = {
        "_pg_spec": (source, options, heldout, record_dir),
        "_pg_tool_names": tuple(t.name for t in tools), "__module__": __name__,
    }
    name = _class_name(source)
    for t in tools:
        namespace[t.name] = _tool_method(t, name)
    cls = _AdapterMeta(name, (ProofgymEnvironment,), namespace)
    tool_list = ", ".join(namespace["_pg_tool_names"]) or "none"
    cls.__doc__ = f"TRL environment for {_describe(source)} (tools: {tool_list})."
    return cls  # type: ignore[return-value]


def _tool_method(t: Tool, owner: str) -> Callable[..., str]:
    """A method that TRL reads as ``t``: same name, docstring, parameters and types; the call
    goes to ``env.step`` with whatever arguments the model sent (bad ones get the env's error
    observation, as in ``proofgym eval``)."""
    if t.name in _RESERVED or t.name.startswith("_") or not t.name.isidentifier():
        raise ConfigError(f"tool {t.name!r} cannot be a TRL tool method: TRL calls tools by Python "
                          "method name, so it must be an identifier, not start with '_' and not be "
                          f"one of {sorted(_RESERVED)}")
    name = t.name

    def method(self: ProofgymEnvironment, **arguments: Any) -> str:
        return self._call_tool(name, arguments)

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    for pname, field in t.model.model_fields.items():
        default = inspect.Parameter.empty if field.is_required() else field.default
        params.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=field.annotation))
        annotations[pname] = field.annotation
    method.__name__ = name
    method.__qualname__ = f"{owner}.{name}"
    method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    method.__annotations__ = annotations  # no "return": TRL would add it to the schema
    method.__doc__ = t.docstring()
    return method


def trl_view(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A proofgym tool schema as TRL's schema language can state it (what
    ``transformers.utils.get_json_schema`` derives from a method).

    Dropped: ``additionalProperties: false`` and ``default`` (TRL has no way to say them; the env
    still enforces them: an extra argument gets an ``invalid_arguments`` observation).
    Rewritten: ``anyOf: [T, null]`` as ``T`` with ``nullable: true``; whitespace in parameter
    descriptions collapsed to single spaces (docstring arguments are one line each).
    """
    out = copy.deepcopy(dict(schema))
    params = out["function"]["parameters"]
    params.pop("additionalProperties", None)
    props = params.get("properties", {})
    for pname, prop in props.items():
        prop.pop("default", None)
        if "description" in prop:
            prop["description"] = " ".join(str(prop["description"]).split())
        variants = prop.get("anyOf")
        if variants and {"type": "null"} in variants:
            rest = [v for v in variants if v != {"type": "null"}]
            prop.pop("anyOf")
            if len(rest) == 1:
                prop.update(rest[0])
            else:
                prop["anyOf"] = rest
            prop["nullable"] = True
        props[pname] = dict(sorted(prop.items()))
    out["function"]["parameters"] = {k: params[k] for k in ("type", "properties", "required")
                                     if k in params and params[k] != []}
    return out


def _last_user_text(prompt: Any) -> str | None:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        for message in reversed(prompt):
            if isinstance(message, Mapping) and message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else None
    return None


def _describe(source: EnvSource) -> str:
    return source if isinstance(source, str) else getattr(source, "__qualname__", repr(source))


def _class_name(source: EnvSource) -> str:
    text = source.rsplit("/", 1)[-1] if isinstance(source, str) else _describe(source)
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in text)
    return f"{cleaned}Environment"
