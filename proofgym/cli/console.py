"""The shared rich console of the CLI."""

from rich.console import Console

console = Console()
