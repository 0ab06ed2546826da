"""The ``proofgym`` command line: thin, it parses and calls the library.

Each command lives in its own module; this file wires them into one app and is the one place
that turns a :class:`~proofgym.core.ProofgymError` into a short message and an exit code (2 for
a usage error, 1 for a failed run), never a traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import gc
import os
import sys
import threading

import typer

import proofgym  # noqa: F401 - registers the bundled environments with Gymnasium
from proofgym.cli.audit_cmd import audit_command
from proofgym.cli.compare_cmd import compare_command
from proofgym.cli.contract_cmd import contract_app
from proofgym.cli.envs_cmd import envs_command
from proofgym.cli.eval_cmd import eval_command
from proofgym.cli.export_cmd import export_command
from proofgym.cli.image_cmd import image_app
from proofgym.cli.parity_cmd import parity_command
from proofgym.cli.report_cmd import report_command
from proofgym.cli.serve_cmd import serve_command
from proofgym.cli.serve_scripted_cmd import serve_scripted_command
from proofgym.cli.show_cmd import show_command
from proofgym.cli.splits_cmd import splits_app
from proofgym.cli.tasks_cmd import tasks_app
from proofgym.cli.validate_cmd import validate_command
from proofgym.cli.verify_cmd import verify_command

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Verifiable RL environments for LLM agents.")
app.command("eval")(eval_command)
app.command("envs")(envs_command)
app.add_typer(contract_app, name="contract")
app.command("verify")(verify_command)
app.add_typer(splits_app, name="splits")
app.add_typer(tasks_app, name="tasks")
app.add_typer(image_app, name="image")
app.command("validate")(validate_command)
app.command("export")(export_command)
app.command("report")(report_command)
app.command("compare")(compare_command)
app.command("serve-scripted")(serve_scripted_command)
app.command("serve")(serve_command)
app.command("parity")(parity_command)
app.command("show")(show_command)
app.command("audit")(audit_command)


def main() -> None:
    """The ``proofgym`` command: run it, then leave without tearing the interpreter down."""
    # the imports' objects live as long as the process: the cyclic collector need not walk them
    # again and again while episodes allocate
    gc.freeze()
    try:
        _run()
    except SystemExit as exc:
        _leave(exc.code)
    _leave(0)


def _leave(code: object) -> None:
    """Exit as the interpreter would (non-daemon threads joined, ``atexit`` handlers run, the
    streams flushed) but skip its teardown: freeing every module and object of a run (numpy,
    pydantic, the episodes) takes a few hundred milliseconds of CPU at the end of every command,
    and a command's process has nothing left to clean up in memory."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    if code is not None and not isinstance(code, int):  # sys.exit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a reader that went away (`proofgym ... | head`): nothing left to tell it
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code or 0)


def _run() -> None:
    from rich.markup import escape

    from proofgym.cli.console import err_console
    from proofgym.core import ProofgymError

    try:
        app()
    except ProofgymError as exc:  # escaped: a message may hold brackets ("proofgym[ray]")
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a path that cannot be written or read: name it, no traceback
        where = f" {exc.filename}" if exc.filename else ""
        # a path the user gave that cannot be used is a usage error (2); a full disk is not (1)
        usage = exc.filename is not None and exc.errno in _PATH_ERRNOS
        hint = "; choose a path you can write (or create its directory)" if usage else ""
        err_console.print(f"[bold red]error:[/]{where}: {exc.strerror or exc}{hint}", highlight=False,
                          soft_wrap=True)
        sys.exit(2 if usage else 1)


_PATH_ERRNOS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR,
                errno.EEXIST, errno.ENAMETOOLONG}


if __name__ == "__main__":
    main()
