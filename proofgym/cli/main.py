"""The ``proofgym`` command line: thin, it parses and calls the library.

Each command lives in its own module; this file only wires them into one app.
"""

from __future__ import annotations

import typer

import proofgym  # noqa: F401 - registers the bundled environments with Gymnasium
from proofgym.cli.envs_cmd import envs_command
from proofgym.cli.eval_cmd import eval_command
from proofgym.cli.serve_scripted_cmd import serve_scripted_command

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Verifiable RL environments for LLM agents.")
app.command("eval")(eval_command)
app.command("envs")(envs_command)
app.command("serve-scripted")(serve_scripted_command)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
