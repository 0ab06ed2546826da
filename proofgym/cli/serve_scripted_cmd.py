"""``proofgym serve-scripted``: an OpenAI-compatible server that plays each task's reference
solution (or a control), for testing an environment and a model setup offline."""

from __future__ import annotations

import threading
from typing import Annotated, Optional

import typer

from proofgym.cli.console import console


def serve_scripted_command(
    env_id: Annotated[str, typer.Argument(metavar="ENV",
                                          help="Whose tasks to serve, e.g. proofgym/Arith-v0")],
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free port).")] = 8000,
    model: Annotated[str, typer.Option(help="Model id to serve.")] = "scripted",
    control: Annotated[Optional[str], typer.Option(  # noqa: UP045 - typer
        help="Play this negative control instead of the reference solution.")] = None,
    latency: Annotated[float, typer.Option(help="Seconds before every answer.")] = 0.0,
    fault: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
        help="Inject a fault: KIND[:RATE[:ATTEMPTS|always]], KIND in 429, 500, timeout, malformed, "
             "length (repeatable), e.g. --fault 429:0.2:1")] = None,
    tool_call_format: Annotated[str, typer.Option(
        help="native (tool_calls) | text (<tool_call>{...}</tool_call> in the content)")] = "native",
    reasoning: Annotated[bool, typer.Option(help="Add reasoning_content to answers.")] = False,
) -> None:
    """Serve ENV's reference solutions as an OpenAI-compatible chat model (Ctrl-C stops)."""
    from proofgym.make import make_env
    from proofgym.testing import Fault, ReferenceScript, ScriptedServer

    try:
        faults = [Fault.parse(f) for f in fault or []]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--fault") from None
    if tool_call_format not in ("native", "text"):
        raise typer.BadParameter("use 'native' or 'text'", param_hint="--tool-call-format")
    from proofgym.core import ConfigError

    env = make_env(env_id)
    if env.tasks is None:
        raise typer.BadParameter(f"{env_id!r} has no task set to serve", param_hint="ENV")
    solution = None
    if control is not None:
        offered = sorted({name for task in env.tasks for name in task.controls()})
        if control not in offered:  # checked now, not when the first request arrives
            raise ConfigError(f"no task of {env_id} has the control {control!r}; it offers: "
                              f"{', '.join(offered) or 'none'}")

        def solution(task):  # type: ignore[no-untyped-def]
            return task.controls().get(control)
    server = ScriptedServer(ReferenceScript(env.tasks, solution), model=model, host=host, port=port,
                            latency_s=latency, faults=faults, tool_call_format=tool_call_format,
                            reasoning=reasoning)
    try:
        server.start()  # binds now: the real port (for --port 0) is known before we print it
    except RuntimeError as exc:
        raise ConfigError(f"cannot serve on {host}:{port} ({exc.__cause__ or exc}); is the port in use? "
                          "Choose another with --port (0: any free port)") from None
    url = f"http://{host}:{server.port}/v1"
    console.print(f"serving {len(env.tasks)} tasks of {env_id} as model {model!r} on "
                  f"{url} (faults: {', '.join(fault or []) or 'none'})")
    console.print(f"try: proofgym eval {env_id} --policy openai:{model} --base-url {url}")
    try:
        threading.Event().wait()  # until Ctrl-C
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
