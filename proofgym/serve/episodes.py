"""The episode tier: whole episodes for orchestrators, against a model endpoint, with cancel.

``POST /episodes`` with ``{"task_id", "seed", "model": {"base_url", "model", "api_key",
"sampling", "system_prompt", "version", "record_tokens"}, "allow_heldout"}`` starts an episode
on the server and answers at once with its ``trajectory_id``. The episode runs in the one episode
loop (the :class:`~proofgym.rollout.Orchestrator`, at concurrency 1, its env the server's), then
is graded out of band in the server's pool: ``GET /episodes/{id}`` reports ``state``
(``running`` -> ``done``, ``cancelled`` or ``failed``), the trajectory once generated, and the
verdict record: ``pending`` -> ``scored`` or ``error`` with the reason (a cancelled or failed
episode is an ``unscored`` verdict, never a 0), keyed by trajectory id and verifier version (also
at ``/verdicts/{id}``). ``POST /episodes/{id}/cancel`` stops one.

The held-out guard holds here as in the step tier. The server calls the model URL it is given:
expose the episode tier only to clients you would let make requests from the server's host (a
token off loopback is required anyway).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from proofgym.record import trajectory_id_for
from proofgym.rollout.episode import play_plan_async
from proofgym.rollout.openai_policy import OpenAIPolicy
from proofgym.rollout.recorder import EpisodePlan, EpisodeRecorder
from proofgym.rollout.recording import Recording
from proofgym.serve.protocol import public_error
from proofgym.serve.session import SERVED_POLICY, EnvSource, held_out_guard
from proofgym.serve.verdicts import VerdictRecord, VerdictStore
from proofgym.wire import Code, ServeError, dumps, loads


class EpisodeRun:
    """One episode of the tier: its task, state, trajectory and verdict record."""

    def __init__(self, trajectory_id: str, task_id: str) -> None:
        self.trajectory_id = trajectory_id
        self.task_id = task_id
        self.state = "running"
        self.reason: str | None = None
        self.trajectory: dict[str, Any] | None = None
        self.record: VerdictRecord | None = None
        self.task: asyncio.Task[None] | None = None

    def to_dict(self) -> dict[str, Any]:
        verdict: dict[str, Any] = {"status": "pending"}
        if self.record is not None:
            verdict = self.record.to_dict()
        elif self.state in ("cancelled", "failed"):
            verdict = {"status": "unscored", "reason": self.reason}
        return {"trajectory_id": self.trajectory_id, "task_id": self.task_id, "state": self.state,
                "reason": self.reason, "verdict": verdict, "trajectory": self.trajectory}


class EpisodeTier:
    """The ``/episodes`` routes over the server's env source and verdict store."""

    def __init__(self, source: EnvSource, verdicts: VerdictStore, recording: Recording | None = None, *,
                 max_running: int = 64) -> None:
        self.source = source
        self.verdicts = verdicts
        self.recording = recording if recording is not None else Recording(env_id=source.env_id,
                                                                           policy=SERVED_POLICY)
        self.max_running = max_running
        self.runs: dict[str, EpisodeRun] = {}

    def routes(self) -> list[tuple[str, Any, list[str]]]:
        return [("/episodes", self.start, ["POST"]),
                ("/episodes/{trajectory_id:path}/cancel", self.cancel, ["POST"]),
                ("/episodes/{trajectory_id:path}", self.get, ["GET"])]

    async def start(self, request: Request) -> Response:
        body = loads(await request.body() or b"{}")
        if not isinstance(body, dict) or not isinstance(body.get("task_id"), str):
            raise ServeError(Code.VALIDATION_ERROR, "an episode needs {'task_id': ..., 'model': {'base_url': "
                             "..., 'model': ...}} (GET /tasks lists the ids)")
        model = body.get("model")
        if not isinstance(model, dict) or not model.get("base_url") or not model.get("model"):
            raise ServeError(Code.VALIDATION_ERROR, "model must give base_url and model (an OpenAI-"
                             "compatible endpoint: vLLM, SGLang, serve-scripted)")
        seed = body.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ServeError(Code.VALIDATION_ERROR, f"seed must be a non-negative integer, got {seed!r}")
        if sum(r.state == "running" for r in self.runs.values()) >= self.max_running:
            raise ServeError(Code.CAPACITY_REACHED, f"{self.max_running} episodes are running; retry later")
        planned = self.recording.plan(body["task_id"], seed)
        trajectory_id = trajectory_id_for(self.recording.contract_id, planned.task_id, planned.attempt)
        self.recording.note_version(model.get("version"))
        try:
            policy = OpenAIPolicy(
                str(model["model"]), base_url=str(model["base_url"]), api_key=model.get("api_key"),
                system_prompt=model.get("system_prompt"), sampling=model.get("sampling") or {},
                version=str(model.get("version", "0")), record_tokens=bool(model.get("record_tokens")))
        except (TypeError, ValueError) as exc:
            raise ServeError(Code.VALIDATION_ERROR, f"bad model settings: {exc}") from None
        env = await asyncio.get_running_loop().run_in_executor(None, self.source.build)
        try:
            if env.tasks is not None:  # an unknown id is refused now, not inside the episode
                env.tasks.get(body["task_id"])
            held_out_guard(env, self.source, body["task_id"], body.get("allow_heldout") is True,
                           f"episode {trajectory_id[:12]}", burn=True)
        except Exception as exc:
            env.close()
            raise public_error(exc, "starting the episode") from None
        run = EpisodeRun(trajectory_id, body["task_id"])
        self.runs[trajectory_id] = run
        run.task = asyncio.get_running_loop().create_task(
            self._play(run, env, policy, EpisodePlan(body["task_id"], planned.attempt, seed,
                                                     trajectory_id=trajectory_id)))
        return Response(dumps(run.to_dict()), 202, media_type="application/json")

    async def _play(self, run: EpisodeRun, env: Any, policy: OpenAIPolicy, planned: EpisodePlan) -> None:
        try:
            [traj] = await play_plan_async(env, policy, [planned], verifier=self.verdicts.pool, grade=False,
                                           env_id=self.source.env_id, contract_id=self.recording.contract_id)
            recorder = EpisodeRecorder(traj)
            if traj.status != "ok":
                run.state, run.reason = "failed", traj.error
                self.recording.deliver(recorder, traj.verdict)
            else:
                job = env.verification_job(recorder.trace())
                run.record = self.verdicts.submit(run.trajectory_id, job, run.task_id)
                run.record.future.add_done_callback(
                    lambda graded: self.recording.deliver(recorder, graded.result(),
                                                          artifact=job.artifact.to_dict(),
                                                          verifier=self.verdicts.pool.describe()))
                run.state = "done"
            out = traj.to_dict()
            out.pop("artifact", None)  # the final state stays on the server (it may hold task data)
            run.trajectory = out
        except asyncio.CancelledError:
            run.state, run.reason = "cancelled", "cancelled by the client"
        except Exception as exc:
            run.state, run.reason = "failed", str(public_error(exc, "the episode"))
        finally:
            await policy.aclose()
            await asyncio.get_running_loop().run_in_executor(None, env.close)

    def _run(self, request: Request) -> EpisodeRun:
        trajectory_id = request.path_params["trajectory_id"]
        run = self.runs.get(trajectory_id)
        if run is None:
            raise ServeError(Code.NOT_FOUND, f"no episode {trajectory_id!r} on this server")
        return run

    async def get(self, request: Request) -> Response:
        run = self._run(request)
        wait = float(request.query_params.get("wait", "0") or 0)
        if wait > 0 and run.task is not None and not run.task.done():
            await asyncio.wait([run.task], timeout=min(wait, 300.0))
        if wait > 0 and run.record is not None:
            await run.record.wait(min(wait, 300.0))
        return Response(dumps(run.to_dict()), media_type="application/json")

    async def cancel(self, request: Request) -> Response:
        run = self._run(request)
        if run.task is not None and not run.task.done():
            run.task.cancel()
            await asyncio.wait([run.task], timeout=30)
        return Response(dumps(run.to_dict()), media_type="application/json")

    async def shutdown(self) -> None:
        for run in self.runs.values():
            if run.task is not None and not run.task.done():
                run.task.cancel()
        pending = [r.task for r in self.runs.values() if r.task is not None and not r.task.done()]
        if pending:
            await asyncio.wait(pending, timeout=30)

