"""``proofgym.remote``: use a served env (``proofgym serve``) as if it were local.

:class:`RemoteEnv` is a Gymnasium env over a server's HTTP session (see
:mod:`proofgym.remote.env`); importing this package registers it as ``Remote-v0``, so
``gymnasium.make_vec("proofgym.remote:Remote-v0", num_envs=N, vectorization_mode="sync", url=URL)``
builds N sessions.
"""

import gymnasium

from proofgym.remote.env import RemoteEnv
from proofgym.remote.served import RemoteError, RemoteRuntime, RemoteTask, fetch_verdict, http_base

gymnasium.register("Remote-v0", entry_point=RemoteEnv)

__all__ = ["RemoteEnv", "RemoteError", "RemoteRuntime", "RemoteTask", "fetch_verdict", "http_base"]
