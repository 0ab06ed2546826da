"""Attack: carry loader and interpreter hooks from one ``bash`` call to the next.

Exported variables persist between calls as data, and the next call's shell is started as soon as
the previous call ends (it waits for its command). A variable the dynamic loader or an interpreter
honours at start-up (``LD_LIBRARY_PATH``, ``PYTHONPATH``, ``PERL5OPT``, ...) would make that shell,
or the next command's programs, load code the agent wrote: agent code running between calls, and
inside commands that are not the agent's (a ``python3 -c`` that imports the agent's
``sitecustomize``). Such names keep the sandbox's own value (or stay unset) from call to call.
"""

from __future__ import annotations

import base64
import subprocess
import time

import pytest

from tests.conftest import require_tool
from tests.security.conftest import bash

pytestmark = pytest.mark.sandbox

#: Names the next call's shell (or a program it starts) would run agent code through.
HOOKS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT", "LD_BIND_NOW", "LD_DEBUG_OUTPUT",
         "GCONV_PATH", "GLIBC_TUNABLES", "MALLOC_CHECK_", "LOCPATH",
         "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "PYTHONINSPECT", "PYTHONWARNINGS",
         "PYTHONBREAKPOINT", "PYTHONUSERBASE", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE",
         "PYTHONUNBUFFERED", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
         "PERL5OPT", "PERL5LIB", "RUBYOPT", "NODE_OPTIONS", "JAVA_TOOL_OPTIONS", "POSIXLY_CORRECT")

_CONSTRUCTOR = r"""
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void ran(void) {
    int fd = open("/workspace/AGENT-CODE-RAN", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { write(fd, "x", 1); close(fd); }
}
"""


def _value(rt, name: str) -> str:
    return bash(rt, f"printf '%s' \"${{{name}-<unset>}}\"").output


@pytest.mark.parametrize("name", HOOKS)
def test_a_hook_variable_keeps_the_sandboxs_own_value(rt, name):
    own = _value(rt, name)
    r = bash(rt, f"export {name}=/workspace/agent:1; printf '%s' \"${name}\"")
    assert r.output == "/workspace/agent:1", r  # set within the call: the agent's own command
    assert _value(rt, name) == own, f"{name} carried to the next call"


def test_a_plain_variable_still_carries_over(rt):
    bash(rt, "export PROJECT_MODE=debug PATH=/workspace/bin:$PATH")
    assert _value(rt, "PROJECT_MODE") == "debug"
    assert _value(rt, "PATH").startswith("/workspace/bin:")


def test_a_library_on_ld_library_path_does_not_run_in_the_next_shell(rt, tmp_path):
    """A library named like one bash needs (an ELF filter passing every symbol on to the real
    one), with a constructor: bash loads it as it starts, before it has its command."""
    gcc = require_tool("gcc")
    probe = bash(rt, "grep -o '/[^ ]*libtinfo.so[^ ]*' /proc/$$/maps | head -1").output.strip()
    assert probe, "the sandbox's bash loads no libtinfo: pick another library it needs"
    src = tmp_path / "evil.c"
    src.write_text(_CONSTRUCTOR)
    lib = tmp_path / "libtinfo.so.6"
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(lib), str(src), "-Wl,-soname,libtinfo.so.6",
                    f"-Wl,--filter={probe}"], check=True, capture_output=True)
    blob = base64.b64encode(lib.read_bytes()).decode()
    r = bash(rt, f"mkdir -p /workspace/lib && echo {blob} | base64 -d > /workspace/lib/libtinfo.so.6"
                 " && LD_LIBRARY_PATH=/workspace/lib bash -c true && cat /workspace/AGENT-CODE-RAN")
    assert r.output.endswith("x"), f"the library does not run when loaded: the test proves nothing ({r})"
    bash(rt, "rm -f /workspace/AGENT-CODE-RAN; export LD_LIBRARY_PATH=/workspace/lib")
    time.sleep(1)  # the next call's shell is up, waiting for its command
    r = bash(rt, "cat /workspace/AGENT-CODE-RAN 2>/dev/null || echo none")
    assert r.output == "none", f"agent code ran in the next call's shell: {r}"


def test_a_sitecustomize_on_pythonpath_does_not_run_in_the_next_calls_python(rt):
    bash(rt, "mkdir -p /workspace/hook && echo 'open(\"/workspace/AGENT-CODE-RAN\", \"a\").write(\"x\")'"
             " > /workspace/hook/sitecustomize.py && export PYTHONPATH=/workspace/hook")
    r = bash(rt, "python3 -c 'print(1)' && cat /workspace/AGENT-CODE-RAN 2>/dev/null || echo none")
    assert r.output == "1\nnone", f"agent code ran in the next call's python: {r}"


def test_a_startup_file_does_not_run_in_the_next_calls_python(rt):
    bash(rt, "echo 'open(\"/workspace/AGENT-CODE-RAN\", \"a\").write(\"x\")' > /workspace/start.py; "
             "export PYTHONSTARTUP=/workspace/start.py")
    r = bash(rt, "python3 -i </dev/null >/dev/null 2>&1; "
                 "cat /workspace/AGENT-CODE-RAN 2>/dev/null || echo none")
    assert r.output == "none", f"agent code ran in the next call's python: {r}"
