"""``--env-arg KEY=VALUE``: keyword arguments for an environment's factory, typed by its signature.

A value becomes the type the factory's parameter declares: ``int``, ``float``, ``bool``
(``true``/``false``/``1``/``0``/``yes``/``no``), ``str`` or ``Path``; ``X | None`` also takes
``none``/``null``; any other annotation (lists, dicts, ...) and an unannotated parameter take JSON
(an unannotated value that is not JSON stays a string). An unknown key or a value that does not
fit is a usage error (exit 2) naming the parameter, its type and the accepted keys.
"""

from __future__ import annotations

import inspect
import types
import typing
from pathlib import Path
from typing import Any

import orjson

from proofgym.core.errors import EnvArgError as EnvArgError
from proofgym.make import env_factory

_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}
#: Gymnasium's own keyword, not the factory's: never offered as an env arg.
_HIDDEN = {"render_mode"}


def parse_env_args(env_id: str, pairs: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` strings as the factory's keyword arguments (see the module docstring)."""
    if not pairs:
        return {}
    factory = env_factory(env_id)
    label = getattr(factory, "__qualname__", None) or type(factory).__name__
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        raise EnvArgError(f"{env_id!r}: cannot read the signature of its factory {label}, so "
                          "--env-arg cannot be typed") from None
    try:
        hints = typing.get_type_hints(factory)
    except Exception:  # unresolvable annotations: fall back to JSON for every parameter
        hints = {}
    params = {n: p for n, p in signature.parameters.items() if n not in _HIDDEN
              and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    open_ended = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise EnvArgError(f"--env-arg {pair!r}: expected KEY=VALUE, e.g. --env-arg max_tool_calls=10")
        if key in out:
            raise EnvArgError(f"--env-arg {key} is given twice")
        if key not in params and not open_ended:
            accepted = ", ".join(params) or "none"
            raise EnvArgError(f"--env-arg {key}: {env_id} has no such parameter; its factory "
                              f"{label} accepts: {accepted}")
        out[key] = convert(key, raw, hints.get(key, inspect.Parameter.empty))
    return out


def convert(key: str, raw: str, annotation: Any) -> Any:
    """``raw`` as a value of ``annotation`` (see the module docstring)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    options = _union(annotation)
    if options is not None:
        if type(None) in options and raw.strip().lower() in ("none", "null"):
            return None
        real = [o for o in options if o is not type(None)]
        if len(real) == 1:  # X | None: X's own message
            return convert(key, raw, real[0])
        for option in real:
            try:
                return convert(key, raw, option)
            except EnvArgError:
                continue
        raise EnvArgError(f"--env-arg {key}={raw!r}: expected {_name(annotation)}")
    if annotation is bool:
        word = raw.strip().lower()
        if word in _TRUE | _FALSE:
            return word in _TRUE
        raise EnvArgError(f"--env-arg {key}={raw!r}: expected a bool (true/false/1/0/yes/no)")
    if annotation in (int, float):
        try:
            return annotation(raw)
        except ValueError:
            raise EnvArgError(f"--env-arg {key}={raw!r}: expected {annotation.__name__}") from None
    if annotation is str:
        return raw
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return Path(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise EnvArgError(f"--env-arg {key}={raw!r}: {key} is {_name(annotation)}, given as JSON "
                          f"(e.g. [1, 2] or {{\"a\": 1}}); not valid JSON: {exc}") from None


def _union(annotation: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return None


def _name(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) if isinstance(annotation, type) else str(annotation)
