"""Preloaded into the process backend's forkserver: it ends the moment the pool's process does.

multiprocessing's forkserver exits only once every worker has closed its copy of the "alive"
pipe, and then through a full interpreter shutdown (seconds, with sympy and torch loaded); a
worker still starting (forked, not yet in ``worker_main``) waits on it. So the forkserver watches
its parent, the pool's process, through a pidfd and leaves with ``os._exit`` when it is gone:
its workers, which hold the parent-death signal (``worker.tie_to_owner``), go with it at once.
When it ends the ordinary way (every client gone), it skips the interpreter's teardown too.
A child whose client went before sending the process to run (the pool's process exiting while
a worker starts) finds end of file where that process should be: it exits with status 1 and
no traceback on the stderr it shares with the pool's process.
Importing this module anywhere but in ``multiprocessing.forkserver.main`` does nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import sys
import threading
from pathlib import Path


def _in_forkserver_main() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and Path(code.co_filename).name == "forkserver.py" and \
                Path(code.co_filename).parent.name == "multiprocessing":
            return True
        frame = frame.f_back
    return False


def _remove_listener() -> None:
    """The forkserver's socket and its directory (multiprocessing's temp dir of the pool's
    process, which that process would have removed at its exit)."""
    forkserver = sys.modules.get("multiprocessing.forkserver")
    address = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_address", None)
    if isinstance(address, str) and address:
        with contextlib.suppress(OSError):
            os.unlink(address)
        parent = os.path.dirname(address)
        if os.path.basename(parent).startswith("pymp-"):
            with contextlib.suppress(OSError):
                os.rmdir(parent)


#: How long the forkserver waits, after its clients are gone, for its parent to be gone too.
_PARENT_EXIT_S = 2.0


def _tie() -> None:
    try:
        pidfd = os.pidfd_open(os.getppid())
    except OSError:
        return  # the parent is already gone: the alive pipe's end of file ends us

    def watch() -> None:
        select.select([pidfd], [], [])
        _remove_listener()
        os._exit(0)

    def at_exit() -> None:
        # the alive pipe's end of file may come first (the workers went, then the parent's
        # pipe end): a shutdown then stops the thread above before it could tidy up. The pool
        # never closes its end while it lives, so the end of file means the parent is exiting:
        # its descriptors close before it is gone (seconds apart on a loaded host), so wait for
        # that, briefly, rather than look once and leave its temp dir behind
        if select.select([pidfd], [], [], _PARENT_EXIT_S)[0]:
            _remove_listener()
        # every client is gone (that is what the end of file says): skip the interpreter's
        # teardown of everything preloaded, seconds on a loaded host
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):  # closed, or None
                stream.flush()
        os._exit(0)

    atexit.register(at_exit)
    threading.Thread(target=watch, name="proofgym-forkserver-tie", daemon=True).start()


def _quiet_when_the_client_is_gone() -> None:
    """Wrap the forked child's entry: an ``EOFError`` out of it can only come from reading the
    preparation data or the process object (``_bootstrap`` reports the process's own errors
    itself), that is, from a client that went before writing them: nothing to run or report."""
    from multiprocessing import spawn

    serve = spawn._main

    def main(fd: int, parent_sentinel: int) -> int:
        try:
            return serve(fd, parent_sentinel)
        except EOFError:
            return 1

    spawn._main = main


if _in_forkserver_main():
    _quiet_when_the_client_is_gone()
    _tie()
