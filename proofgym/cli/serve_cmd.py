"""``proofgym serve ENV``: serve an environment to trainers in other processes (docs/serving.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from proofgym.core.defaults import DEFAULTS


def serve_command(
    env_id: Annotated[str, typer.Argument(metavar="ENV", help="e.g. proofgym/Arith-v0")],
    host: Annotated[str, typer.Option(
        help="Interface to listen on (beyond loopback needs --token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free port).")] = 8000,
    token: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        envvar="PROOFGYM_SERVE_TOKEN", show_envvar=True,
        help="Bearer token every route but /health requires (required off loopback).")] = None,
    env_arg: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045 - typer
        "--env-arg", metavar="KEY=VALUE", help="Argument for the env's factory (repeatable).")] = None,
    max_sessions: Annotated[int, typer.Option(
        min=1, help="Sessions at once; one more gets CAPACITY_REACHED (HTTP 503).")] = 256,
    idle_timeout: Annotated[float, typer.Option(
        help="Seconds a session may sit idle before it is reaped (its env closed).")] = 600.0,
    drain: Annotated[float, typer.Option(
        help="Seconds SIGTERM waits for calls in flight and pending grades.")] = 30.0,
    threads: Annotated[int, typer.Option(min=1, help="Threads for blocking runtime calls.")] = 32,
    verifier: Annotated[str, typer.Option(
        help="Where verdicts are graded: process (crash-isolated) | inline.")] = DEFAULTS.verifier_backend(),
    split: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="Serve one split only: train (a training server: other tasks are refused) | dev | "
             "heldout. Default: every task, held-out ones only with allow_heldout (burned).")] = None,
    splits: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="Split manifest (`proofgym splits freeze`) to serve the splits of; burns of held-out "
             "tasks are written back into it.")] = None,
    record: Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer
        help="Record every graded episode in this new run directory (proofgym show, audit, "
             "export and compare read it); clients name their policy version on reset "
             "(policy_version=STEP).")] = None,
    verdict_detail: Annotated[bool, typer.Option(
        help="Send graders' reasons and error texts with verdicts (they may quote hidden tests "
             "or answers: only for clients you trust with them).")] = False,
) -> None:
    """Serve ENV: OpenEnv's WebSocket protocol on /ws, HTTP /reset and /step with a session
    header, verdicts out of band on /verdicts. SIGTERM drains."""
    from proofgym.cli.env_args import parse_env_args

    require_serve_extra()
    from proofgym.serve import ServeConfig, serve

    if verifier not in ("process", "inline"):
        raise typer.BadParameter("use 'process' or 'inline'", param_hint="--verifier")
    config = ServeConfig(env_id, parse_env_args(env_id, env_arg), host=host, port=port, token=token,
                         max_sessions=max_sessions, idle_timeout_s=idle_timeout, drain_s=drain,
                         threads=threads, verifier=verifier, verdict_detail=verdict_detail,
                         split=split, splits=splits, record=record)

    def ready(bound: int) -> None:
        # one line a supervisor (or a test) can read the port from
        print(f"proofgym serve: {env_id} on http://{host}:{bound} (ws://{host}:{bound}/ws) "
              f"pid {os.getpid()}", flush=True)
        sys.stdout.flush()

    serve(config, on_ready=ready)


def require_serve_extra() -> None:
    """A one-line usage error naming the install command when the server's stack is missing."""
    import importlib.util

    from proofgym.tasks import MissingExtraError

    missing = [m for m in ("starlette", "uvicorn", "websockets") if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError(f"proofgym serve needs {', '.join(missing)}: pip install 'proofgym[serve]'")
