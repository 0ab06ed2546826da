"""Connecting to a Ray cluster, shared by the Ray backends of the verifier pool and the
orchestrator (kept here, below ``rollout/``, so both may import it).

Ray is an optional dependency (``pip install 'proofgym[ray]'``): nothing imports it until a Ray
backend is asked for, and asking without it installed is a :class:`~proofgym.core.ConfigError`.
"""

from __future__ import annotations

import os
import socket
from types import ModuleType
from typing import Any

from proofgym.core import ConfigError

INSTALL_HINT = "pip install 'proofgym[ray]'"

# The dashboard and usage reporting are of no use to a proofgym run and cost start-up time and
# memory; a cluster the user started (`ray start`) keeps its own settings.
_QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}
#: Seconds a cluster address may take to accept a TCP connection: ``ray.init`` itself retries
#: an address where nothing answers for minutes, with no message.
PROBE_TIMEOUT_S = 10.0


def require_ray() -> ModuleType:
    """The ``ray`` module, or a :class:`ConfigError` naming the install command."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"the ray backend needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def connect(address: str | None = None) -> ModuleType:
    """Connect this process to a Ray cluster (once): ``address`` (``ray://...`` or
    ``HOST:PORT``), else ``$RAY_ADDRESS``, else a cluster started on this machine with
    ``ray start --head``, else a new local one."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    for key, value in _QUIET_ENV.items():
        os.environ.setdefault(key, value)
    kwargs: dict[str, Any] = {"namespace": "proofgym", "log_to_driver": True}
    if address is None and not os.environ.get("RAY_ADDRESS"):
        kwargs["include_dashboard"] = False  # only used when a new local cluster is started
    target = address or os.environ.get("RAY_ADDRESS")
    if target:
        probe(target)
    try:
        ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = address or os.environ.get("RAY_ADDRESS") or "this machine"
        raise ConfigError(f"cannot connect to the Ray cluster at {where}: {first_line(exc)}. Start one "
                          "with `ray start --head` (see docs/scaling-out.md) or pass --ray-address") from None
    return ray


def probe(address: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Fail within ``timeout_s`` with a :class:`ConfigError` when nothing accepts a connection at
    ``address`` (``HOST:PORT`` or ``ray://HOST:PORT``); ``auto`` and ``local`` are Ray's own
    look-ups and are not probed."""
    bare = address.removeprefix("ray://")
    if bare in ("auto", "local") or ":" not in bare:
        return
    host, _, port_text = bare.rpartition(":")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"--ray-address {address!r}: expected HOST:PORT or ray://HOST:PORT") from None
    try:
        socket.create_connection((host.strip("[]"), port), timeout=timeout_s).close()
    except OSError as exc:
        reason = (f"no answer within {timeout_s:g} s" if isinstance(exc, TimeoutError)
                  else (exc.strerror or str(exc)).lower())
        raise ConfigError(f"cannot connect to the Ray cluster at {address}: {reason}. "
                          "Is the cluster up (`ray status` on its head node)? Check --ray-address / "
                          "$RAY_ADDRESS, or drop it to start a local cluster") from None


def cluster_shape() -> dict[str, Any]:
    """The live nodes and their CPUs (recorded as the run's provenance)."""
    ray = require_ray()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    cpus = [float(n.get("Resources", {}).get("CPU", 0.0)) for n in nodes]
    return {"nodes": len(nodes), "cpus": sum(cpus), "cpus_per_node": sorted(cpus), "ray": ray.__version__}


def first_line(exc: BaseException) -> str:
    """Ray's errors span many lines (tracebacks included): the first one says what happened."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
