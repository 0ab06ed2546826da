"""The shared rich console of the CLI."""

from rich.console import Console

console = Console()
#: Errors go to stderr, so a command's output stays clean to pipe.
err_console = Console(stderr=True)
