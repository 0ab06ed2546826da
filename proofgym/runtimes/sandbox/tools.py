"""The agent's tools in a sandbox: ``bash``, ``read_file``, ``write_file``, ``str_replace`` and
``list_dir``. File tools do their I/O inside the sandbox through its shell (so every path is
resolved by the sandbox's own mount namespace, never on the host), and their logic here."""

from __future__ import annotations

import base64
import posixpath
from typing import TYPE_CHECKING

from proofgym.runtimes.sandbox.bwrap import WORKSPACE
from proofgym.runtimes.sandbox.shell import ansi_c_quote
from proofgym.tools import Tool, ToolError

if TYPE_CHECKING:
    from proofgym.runtimes.sandbox.runtime import SandboxRuntime

_MAX_FILE_BYTES = 4 << 20


def workspace_path(path: str) -> str:
    """``path`` (relative to the workspace, or absolute inside it) as an absolute path; anything
    outside the workspace is ``denied``."""
    if not path or "\x00" in path:
        raise ToolError("path must be a non-empty string without NUL bytes", "invalid_arguments")
    full = posixpath.normpath(posixpath.join(WORKSPACE, path))
    if full != WORKSPACE and not full.startswith(WORKSPACE + "/"):
        raise ToolError(f"{path!r} is outside the workspace {WORKSPACE}; file tools only work "
                        "inside it", "denied")
    return full


def make_tools(rt: SandboxRuntime) -> list[Tool]:
    """The tools bound to one runtime (the schemas are the same for every runtime)."""

    def read_bytes(path: str) -> bytes:
        full = workspace_path(path)
        out = rt.internal(
            f"( p={ansi_c_quote(full)}; [ -d \"$p\" ] && exit 3; [ -f \"$p\" ] || exit 4; "
            f"[ \"$(stat -c %s -- \"$p\")\" -le {_MAX_FILE_BYTES} ] || exit 5; base64 -w0 -- \"$p\" )",
            errors={3: f"{path} is a directory; use list_dir",
                    4: f"{path} does not exist (or is not a regular file)",
                    5: f"{path} is larger than {_MAX_FILE_BYTES} bytes; read parts of it with bash "
                       "(for example sed -n '100,200p' FILE)"})
        return base64.b64decode(out)

    def write_bytes(path: str, data: bytes) -> None:
        full = workspace_path(path)
        if full == WORKSPACE:
            raise ToolError("give a file path, not the workspace itself", "invalid_arguments")
        if len(data) > _MAX_FILE_BYTES:
            raise ToolError(f"content has {len(data)} bytes, more than {_MAX_FILE_BYTES}; write "
                            "large files in parts or generate them with bash", "invalid_arguments")
        q = ansi_c_quote(full)
        b64 = base64.b64encode(data).decode()
        rt.internal(f"( p={q}; mkdir -p -- \"$(dirname -- \"$p\")\" && "
                    f"base64 -d > \"$p\" <<< '{b64}' )")

    def bash(command: str) -> str:
        """Run a bash command in the workspace and return its output (stdout and stderr).

        The shell persists for the episode: the working directory and exported variables carry
        over between calls. There is no network. Each command has a time limit; long output is
        cut; processes still running when the command returns are stopped (an error).

        Args:
            command: The command line, for example "python -m pytest -q".
        """
        return rt.run_bash(command)

    def read_file(path: str, start_line: int | None = None, end_line: int | None = None) -> str:
        """Read a text file of the workspace, whole or a range of lines.

        Args:
            path: File path relative to the workspace root, for example "src/app.py".
            start_line: First line to return (1-based, inclusive); default the first line.
            end_line: Last line to return (1-based, inclusive); default the last line.
        """
        if start_line is not None and start_line < 1:
            raise ToolError("start_line must be >= 1", "invalid_arguments")
        if end_line is not None and start_line is not None and end_line < start_line:
            raise ToolError("end_line must be >= start_line", "invalid_arguments")
        text = read_bytes(path).decode("utf-8", errors="replace")
        if start_line is None and end_line is None:
            return text
        lines = text.splitlines(keepends=True)
        return "".join(lines[(start_line or 1) - 1: end_line])

    def write_file(path: str, content: str) -> str:
        """Create or overwrite a file in the workspace with the given content.

        Args:
            path: File path relative to the workspace root; missing directories are created.
            content: The complete new content of the file.
        """
        data = content.encode("utf-8")
        write_bytes(path, data)
        return f"wrote {len(data)} bytes to {path}"

    def str_replace(path: str, old_str: str, new_str: str) -> str:
        """Replace one exact occurrence of a string in a workspace file.

        Args:
            path: File path relative to the workspace root.
            old_str: The exact text to replace; it must occur exactly once in the file.
            new_str: The text to put in its place.
        """
        if not old_str:
            raise ToolError("old_str must not be empty", "invalid_arguments")
        text = read_bytes(path).decode("utf-8", errors="surrogateescape")
        count = text.count(old_str)
        if count != 1:
            raise ToolError(f"old_str occurs {count} times in {path}; it must occur exactly once "
                            "(include more surrounding lines to make it unique)", "execution_error")
        write_bytes(path, text.replace(old_str, new_str).encode("utf-8", errors="surrogateescape"))
        return f"replaced 1 occurrence in {path}"

    def list_dir(path: str = ".") -> str:
        """List a workspace directory: one entry per line, directories end with "/".

        Args:
            path: Directory relative to the workspace root; default the root.
        """
        q = ansi_c_quote(workspace_path(path))
        return rt.internal(f"( ls -1Ap -- {q} )").decode("utf-8", errors="replace")

    return [Tool(f) for f in (bash, read_file, write_file, str_replace, list_dir)]
