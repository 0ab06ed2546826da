"""The agent's tools in a sandbox: ``bash``, ``read_file``, ``write_file``, ``str_replace`` and
``list_dir`` (the defaults), and the :class:`Sandbox` handle through which a tool of one's own
(``@tool``) runs in the sandbox. ``bash`` runs in a fresh shell inside the sandbox; the file
tools are done by the sandbox's trusted supervisor (the program
``proofgym/programs/supervisor.py``), which resolves every path inside the sandbox's
own mount namespace, component by component without following symlinks, and never through
the agent's shell. Their logic is here."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from proofgym.core.errors import UnknownToolError as UnknownToolError
from proofgym.runtimes.sandbox.bwrap import WORKSPACE
from proofgym.tools import Injected, Tool, ToolError

if TYPE_CHECKING:
    from proofgym.runtimes.sandbox.runtime import SandboxRuntime


#: The tools a :class:`SandboxRuntime` offers when ``tools`` is not given, in this order.
DEFAULT_TOOLS = ("bash", "read_file", "write_file", "str_replace", "list_dir")


class Sandbox(Injected):
    """What a tool of one's own sees of the sandbox it runs in: give the tool function a
    parameter typed ``Sandbox`` (it is filled in by the runtime, not by the agent)::

        @tool
        def run_python(code: str, sandbox: Sandbox) -> str:
            \"\"\"Run a Python program and return its output.

            Args:
                code: The program.
            \"\"\"
            return sandbox.run_bash("python -c " + shlex.quote(code))

    The methods are the default tools' own logic, with their limits; their failures are
    :class:`~proofgym.tools.ToolError` (the agent reads the message).
    """

    def __init__(self, runtime: SandboxRuntime, tools: dict[str, Tool]) -> None:
        self.runtime = runtime
        self._tools = tools

    def run_bash(self, command: str) -> str:
        """Run ``command`` in a fresh shell in the workspace: its output, and ``[exit code N]``
        when it is not 0 (like the ``bash`` tool)."""
        return self.runtime.run_bash(command)

    def read_file(self, path: str) -> str:
        """The text of a workspace file (like the ``read_file`` tool)."""
        return self._tools["read_file"].fn(path)

    def write_file(self, path: str, content: str) -> None:
        """Create or overwrite a workspace file (like the ``write_file`` tool)."""
        self._tools["write_file"].fn(path, content)


def select_tools(rt: SandboxRuntime, tools: Sequence[str | Tool] | None) -> tuple[Sandbox, list[Tool]]:
    """The runtime's tools from ``tools`` (see :class:`SandboxRuntime`): ``None`` is
    :data:`DEFAULT_TOOLS`; a name picks that default tool; a :class:`Tool` is added as it is
    (with the name of a default tool it replaces that tool, which must then not be named too).
    The order given is the order of the schemas. Also returns the runtime's :class:`Sandbox`."""
    defaults = {t.name: t for t in make_tools(rt)}
    sandbox = Sandbox(rt, defaults)
    if tools is None:
        return sandbox, list(defaults.values())
    if isinstance(tools, (str, Tool)):
        raise UnknownToolError("tools= takes a sequence of tool names and Tool objects, e.g. "
                               "[\"bash\", \"read_file\", run_python]")
    chosen: list[Tool] = []
    for item in tools:
        if isinstance(item, str):
            if item not in defaults:
                raise UnknownToolError(f"unknown sandbox tool {item!r}; the default tools are "
                                       f"{', '.join(DEFAULT_TOOLS)} (pass your own as @tool "
                                       "functions)")
            item = defaults[item]
        elif not isinstance(item, Tool):
            raise UnknownToolError(f"tools= items are default tool names or Tool objects (made "
                                   f"with @tool); got {type(item).__name__}")
        else:
            other = [k.__name__ for k in item.injected if not issubclass(Sandbox, k)]
            if other:
                raise UnknownToolError(f"tool {item.name!r} needs {', '.join(other)}, which a "
                                       "SandboxRuntime does not provide (it provides Sandbox)")
        if any(t.name == item.name for t in chosen):
            raise UnknownToolError(f"two tools are named {item.name!r}; tool names must be unique")
        chosen.append(item)
    if not chosen:
        raise UnknownToolError("tools= is empty; a sandbox needs at least one tool")
    return sandbox, chosen


def workspace_path(path: str) -> str:
    """``path`` (relative to the workspace, or absolute inside it) as an absolute path; anything
    outside the workspace is ``denied``."""
    if not path or "\x00" in path:
        raise ToolError("path must be a non-empty string without NUL bytes", "invalid_arguments")
    if len(path) > 4096:
        raise ToolError(f"path has {len(path)} characters; paths are at most 4096",
                        "invalid_arguments")
    full = posixpath.normpath(posixpath.join(WORKSPACE, path))
    if full != WORKSPACE and not full.startswith(WORKSPACE + "/"):
        raise ToolError(f"{path!r} is outside the workspace {WORKSPACE}; file tools only work "
                        "inside it", "denied")
    return full


def _relative(full: str) -> bytes:
    return os.fsencode(full[len(WORKSPACE):].lstrip("/"))


def _failure(path: str, reply: dict[str, Any], limit: int) -> ToolError:
    """The agent-facing error for a supervisor's file error reply."""
    kind = reply["error"]
    message = {
        "missing": f"{path} does not exist",
        "isdir": f"{path} is a directory; use list_dir",
        "notdir": f"a parent of {path} is not a directory",
        "notreg": f"{path} is not a regular file",
        "symlink": f"{path} is (or passes through) a symbolic link; file tools do not follow "
                   "links: use bash (for example cat FILE) or the link's target",
        "big": f"{path} has {reply.get('size', '?')} bytes, more than the limit of {limit}; read "
               "parts of it with bash (for example sed -n '100,200p' FILE)",
    }.get(kind, f"{path}: {reply.get('msg') or kind}")
    return ToolError(message, "execution_error")


def make_tools(rt: SandboxRuntime) -> list[Tool]:
    """The tools bound to one runtime (the schemas are the same for every runtime)."""
    limit = rt.limits.max_file_bytes

    def read_bytes(path: str) -> bytes:
        full = workspace_path(path)
        reply = rt.file_request({"op": "read", "path": _relative(full), "max": limit})
        if "error" in reply:
            raise _failure(path, reply, limit)
        return reply["data"]

    def write_bytes(path: str, data: bytes) -> None:
        full = workspace_path(path)
        if full == WORKSPACE:
            raise ToolError("give a file path, not the workspace itself", "invalid_arguments")
        if len(data) > limit:
            raise ToolError(f"content has {len(data)} bytes, more than the limit of {limit}; write "
                            "large files in parts or generate them with bash", "invalid_arguments")
        reply = rt.file_request({"op": "write", "path": _relative(full), "data": data})
        if "error" in reply:
            raise _failure(path, reply, limit)

    def bash(command: str) -> str:
        """Run a bash command in the workspace and return its output (stdout and stderr).

        Each call runs in a fresh shell; the working directory and exported variables carry
        over between calls (shell functions and aliases do not). There is no network. Each
        command has a time limit; long output is cut; processes still running when the
        command returns are stopped (an error).

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
        if len(content) > limit:  # before encoding: a huge argument costs no more memory
            raise ToolError(f"content has {len(content)} characters, more than the limit of "
                            f"{limit} bytes; write large files in parts or generate them with bash",
                            "invalid_arguments")
        data = content.encode("utf-8", "surrogateescape")
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
        if len(old_str) + len(new_str) > limit:
            raise ToolError(f"old_str and new_str have {len(old_str) + len(new_str)} characters, "
                            f"more than the limit of {limit}", "invalid_arguments")
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
        reply = rt.file_request({"op": "list", "path": _relative(workspace_path(path))})
        if "error" in reply:
            raise _failure(path, reply, limit)
        return "".join(os.fsdecode(name).encode("utf-8", "replace").decode() + ("/" if is_dir else "")
                       + "\n" for name, is_dir in reply["entries"])

    return [Tool(f) for f in (bash, read_file, write_file, str_replace, list_dir)]
