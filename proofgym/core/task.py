"""The task contract: what to show, how to set up the world, how to grade."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Iterable, Mapping
from typing import Any

import orjson

from proofgym.core.actions import AgentAction
from proofgym.core.spec import TaskSpec
from proofgym.core.trace import Trace
from proofgym.core.verdict import Verdict

#: A scripted solution: a fixed sequence of actions, or a generator that receives each observation
#: dict (``gen.send(obs)``) and yields the next action, for solutions that must react (multi-turn).
ActionScript = Iterable[AgentAction] | Generator[AgentAction, Mapping[str, Any], None]


class Task(ABC):
    """A task: spec, runtime setup, and grading.

    Invariants:
        * A task holds **no per-episode state**: the same instance may run in many envs at once and
          be graded in another process. Everything an episode changes lives in the runtime.
        * ``id`` is stable across processes and versions of the task set (it names the task in
          records, splits and resumes). ``content_hash`` changes whenever what the task *is*
          changes (prompt, expected answer, tests), so a record can be traced to the exact task.
        * ``verify`` never sees the live agent runtime of an ongoing episode: it is given a frozen,
          read-only view of the episode's final state, so it can run out of band.
    """

    #: Version of this task's grading logic, recorded with each verdict.
    verifier_version: str = "1"
    #: The digest of the material its grading holds that an episode must never see (hidden
    #: tests; :func:`proofgym.runtimes.grading_lease.hidden_key_of`), or ``None`` when it holds
    #: none. A grading of the key never runs while an episode with the key is live on the host:
    #: the env holds an episode lease on it, the sandboxed grader a grading lease.
    hidden_key: str | None = None
    #: The split the task's own source assigns it (``"train"``, ``"dev"``, ``"heldout"``), which
    #: every manifest of a task set holding it keeps; ``None``: the manifest assigns it by a hash.
    split: str | None = None
    #: The group a stratified sample draws evenly across (a RepoRepair task's project), or
    #: ``None``: no grouping (:func:`proofgym.tasks.sampling.stratified_sample`).
    stratum: str | None = None
    #: The grader whose verdicts this task's are, when not the task's own class (a served task
    #: names the class the server grades with); ``None``: the task's class.
    grader_type: str | None = None
    #: Whether the task answers turns with new user messages; ``None``: it does when it
    #: overrides :meth:`on_turn_complete` (a served task states it, its class being a stand-in).
    multi_turn: bool | None = None
    #: The task's own grading time limit in seconds (its runner turns it into a scored 0), which
    #: the verifier pool's limit always exceeds; ``None``: only the pool's limit.
    grading_timeout_s: float | None = None
    #: ``True``: ``proofgym audit`` applies only :meth:`audit_rules`, not the default rules (an
    #: honest solution of this task trips one of them).
    audit_rules_replace: bool = False

    @property
    @abstractmethod
    def id(self) -> str:
        """A stable identifier, unique within its task set."""

    @abstractmethod
    def get_spec(self) -> TaskSpec:
        """What the agent is shown. Leave ``tools`` as ``None``: the env fills it from the runtime."""

    def setup_runtime(self, runtime: Any) -> None:  # noqa: B027 - optional hook, no-op by default
        """Prepare a freshly reset runtime for this task (seed files, state). Optional."""

    @abstractmethod
    def verify(self, trace: Trace, runtime: Any) -> float | Verdict:
        """Grade a finished episode from its trace and a read-only view of its final state."""

    def on_turn_complete(self, message: str, runtime: Any) -> str | None:
        """Answer the agent's turn: the next user/environment message, or ``None`` when the task
        has reached its terminal state. The default is a single-turn task: the first turn ends it."""
        return None

    def reference_solution(self) -> ActionScript | None:
        """A solution that scores 1.0, used by the ``reference`` policy and by validation."""
        return None

    def controls(self) -> Mapping[str, ActionScript]:
        """Negative controls, by name: action scripts that must score 0 (wrong answers,
        shortcuts, tampering). ``proofgym validate`` runs every one."""
        return {}

    def verifiers(self) -> Mapping[str, Callable[[Trace, Any], float | Verdict]]:
        """Earlier (or candidate) graders kept for re-grading, by verifier version. Default: none."""
        return {}

    def rubric(self) -> Any:
        """The :class:`~proofgym.verify.Rubric` grading this task, whose components (a judge's model
        and prompt) the rollout contract records; ``None`` (the default): graded without one."""
        return None

    def audit_rules(self) -> Iterable[Any]:
        """The task's own ``proofgym audit`` rules (:class:`~proofgym.eval.audit_rules.Rule`),
        added to the default ones. Default: none."""
        return ()

    def original_file(self, path: str) -> str | None:
        """A file as the task's workspace started (the audit does not hold its lines against an
        edit), or ``None`` (the default): no such file, or no workspace."""
        return None

    def content(self) -> Mapping[str, Any]:
        """Everything that defines the task, JSON-serialisable; hashed into ``content_hash``.
        Override to include what ``get_spec`` does not show (expected answers, hidden tests)."""
        spec = self.get_spec()
        return {"id": self.id, "prompt": spec.prompt, "metadata": spec.metadata or {}}

    @property
    def content_hash(self) -> str:
        payload = orjson.dumps(
            {"type": f"{type(self).__module__}.{type(self).__qualname__}", **self.content()},
            option=orjson.OPT_SORT_KEYS,
            default=str,
        )
        return hashlib.sha256(payload).hexdigest()[:16]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"
