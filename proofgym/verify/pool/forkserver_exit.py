"""Imported into a ``process`` pool's forkserver only (its preload): when the pool's owner exits,
the server leaves at once instead of tearing down an interpreter that holds sympy and the graders
(a few hundred milliseconds of CPU). It shares the owner's stdout and stderr, so a caller reading
a ``proofgym`` command's output to its end would wait for that teardown.

Workers fork from the server but never run its ``atexit`` handlers (a multiprocessing child ends
with ``os._exit``), so this changes nothing for them.
"""

import atexit
import os

atexit.register(os._exit, 0)  # registered first, so it runs last: after every other handler
