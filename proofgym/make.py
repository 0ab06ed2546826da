"""The one way proofgym builds an environment from an id (or a factory) and keyword arguments.

``proofgym eval``/``validate``/``splits``/``serve-scripted``/``verify``, :func:`~proofgym.eval.evaluate`,
:func:`~proofgym.eval.validate`, Ray slot actors and the TRL adapter all call :func:`make_env`,
so the same bad input gives the same :class:`~proofgym.core.EnvBuildError` everywhere, saying
what was wrong and what to do:

* an id that is not registered (:class:`~proofgym.core.EnvNotFoundError`, listing proofgym's ids);
* a ``module:Env-v0`` id whose module does not import;
* arguments the factory rejected: its own message (``TypeError``/``ValueError``/``LookupError``,
  or a :class:`~proofgym.core.ProofgymError`), and for an unknown keyword the keywords it accepts;
* a factory that returned something other than a proofgym env (:class:`~proofgym.env.VerifiableEnv`:
  a :class:`UniversalVerifiableEnv`, or a peer such as :class:`~proofgym.remote.RemoteEnv`).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
from gymnasium.envs.registration import load_env_creator

from proofgym.core import EnvBuildError, EnvNotFoundError, ProofgymError
from proofgym.env import UniversalVerifiableEnv, VerifiableEnv

#: An env id (``proofgym/Arith-v0``, ``my_module:My-v0``) or a callable returning an env.
EnvSource = str | Callable[..., UniversalVerifiableEnv]

#: Gymnasium's own keyword, not the factory's.
_GYM_KEYWORDS = frozenset({"render_mode"})

#: What a factory raises when it rejects its arguments (anything else is a bug in it: it keeps
#: its traceback).
_REJECTIONS = (TypeError, ValueError, LookupError, ProofgymError)


def make_env(source: EnvSource, /, **kwargs: Any) -> UniversalVerifiableEnv:
    """The :class:`UniversalVerifiableEnv` that ``source`` builds with ``kwargs``.

    ``source`` is a Gymnasium id (built with ``gymnasium.make``, its ``module:`` prefix imported
    first) or a callable called with ``kwargs``. Raises :class:`~proofgym.core.EnvBuildError`
    (see the module docstring).
    """
    if isinstance(source, str):
        _import_prefix(source)
        try:
            built = gymnasium.make(source, **kwargs)
        except gymnasium.error.Error as exc:  # unknown or misspelt id, bad version
            raise _not_found(source, exc) from None
        except _REJECTIONS as exc:
            raise _rejected(source, kwargs, exc) from exc
        env = built.unwrapped
    elif callable(source):
        try:
            env = source(**kwargs)
        except _REJECTIONS as exc:
            raise _rejected(source, kwargs, exc) from exc
    else:
        raise EnvBuildError(f"expected an env id (e.g. 'proofgym/Arith-v0') or a callable returning "
                            f"an env, got {type(source).__name__}")
    if not (isinstance(env, gymnasium.Env) and isinstance(env, VerifiableEnv)):
        raise EnvBuildError(f"{_label(source)} built a {type(env).__name__}, not a proofgym "
                            "UniversalVerifiableEnv; register a factory that returns one")
    return env  # type: ignore[return-value] # a peer (RemoteEnv) keeps the same protocol


def env_factory(env_id: str) -> Callable[..., Any]:
    """The callable Gymnasium calls to build ``env_id`` (through a bundled env's wrapper to its
    ``module:function``), for reading its signature."""
    _import_prefix(env_id)
    try:
        entry = gymnasium.spec(env_id.rpartition(":")[2]).entry_point
    except gymnasium.error.Error as exc:
        raise _not_found(env_id, exc) from None
    if isinstance(entry, str):
        entry = load_env_creator(entry)
    inner = getattr(entry, "entry_point", None)  # a bundled env's wrapper around module:function
    if isinstance(inner, str):
        return load_env_creator(inner)
    return entry  # type: ignore[return-value]


def takes_tasks(source: EnvSource) -> bool:
    """Whether ``source``'s factory accepts ``tasks=`` (a task set built once and shared by a
    run's envs); a factory that does not builds its own per env."""
    try:
        factory = env_factory(source) if isinstance(source, str) else source
        return "tasks" in inspect.signature(factory).parameters
    except (EnvBuildError, TypeError, ValueError, ImportError, AttributeError):
        return False


def factory_parameters(factory: Callable[..., Any]) -> list[str] | None:
    """The keyword parameters ``factory`` accepts (``None``: it takes any, or has no signature)."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return None
    return [n for n, p in signature.parameters.items() if n not in _GYM_KEYWORDS
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _import_prefix(env_id: str) -> None:
    module = env_id.rpartition(":")[0]
    if not module:
        return
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise EnvBuildError(f"cannot import module {module!r} for environment {env_id!r}: {exc}; the "
                            "part before ':' must be an importable module that registers the env "
                            "(install it, or run from its directory / put it on PYTHONPATH)") from None


def _not_found(env_id: str, exc: Exception) -> EnvNotFoundError:
    known = sorted(k for k in gymnasium.registry if k.startswith("proofgym/"))
    why = str(exc).rstrip(".")
    return EnvNotFoundError(f"unknown environment {env_id!r}: {why}. proofgym's environments: "
                            f"{', '.join(known)} (`proofgym envs` lists them)")


def _rejected(source: EnvSource, kwargs: Mapping[str, Any], exc: BaseException) -> EnvBuildError:
    # gymnasium.make re-raises a factory's TypeError with the spec's kwargs appended; quote the
    # factory's own words.
    cause = exc.__cause__ if isinstance(exc, TypeError) and isinstance(exc.__cause__, TypeError) else exc
    message = str(cause.args[0]) if isinstance(cause, KeyError) and cause.args else str(cause)
    given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) or "no arguments"
    hint = "change or drop those arguments"
    if isinstance(cause, TypeError) and "keyword argument" in message:
        try:
            accepted = factory_parameters(env_factory(source) if isinstance(source, str) else source)
        except EnvBuildError:
            accepted = None
        if accepted is not None:
            hint = f"its factory accepts: {', '.join(accepted) or 'no arguments'}"
    return EnvBuildError(f"environment {_label(source)} rejected its arguments ({given}): "
                         f"{message or type(cause).__name__}; {hint}")


def _label(source: EnvSource) -> str:
    return repr(source) if isinstance(source, str) else getattr(source, "__qualname__", repr(source))
