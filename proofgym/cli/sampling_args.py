"""Sampling settings for ``proofgym eval --policy openai:MODEL``.

``--temperature``, ``--top-p`` and ``--max-tokens`` name the common ones; ``--sampling KEY=VALUE``
(repeatable; VALUE is JSON, else a string) passes any other ``chat.completions`` argument, and
``--sampling-file FILE`` reads a JSON (or ``.toml``) object of them. The command line overrides the
file; one key given twice on the command line is refused. The result is ``OpenAIPolicy(sampling=)``:
sent with every request and recorded in the run's ``contract.json`` (``policy.sampling``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from proofgym.core.errors import SamplingError as SamplingError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

#: Set by proofgym on every request; a sampling setting may not replace them.
RESERVED = {"model": "--policy openai:MODEL", "messages": "the environment",
            "tools": "the environment", "stream": "the client", "stream_options": "the client",
            "n": "-G/--repeats (each attempt is its own request)"}


def _number(key: str, value: Any, lo: float | None, hi: float | None, *, lo_open: bool = False,
            integer: bool = False) -> float | int:
    kind = "an integer" if integer else "a number"
    if lo is None:
        bounds = ""
    elif hi is None:
        bounds = f" >= {lo:g}"
    else:
        bounds = f" in {'(' if lo_open else '['}{lo:g}, {hi:g}]"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not math.isfinite(value):
        raise SamplingError(f"sampling {key}={value!r}: expected {kind}{bounds}")
    too_low = lo is not None and (value <= lo if lo_open else value < lo)
    if too_low or (hi is not None and value > hi):
        raise SamplingError(f"sampling {key}={value!r} is out of range; use {kind}{bounds}")
    return value


#: Checks of the common keys (the server checks the rest).
_CHECKS = {
    "temperature": lambda k, v: _number(k, v, 0.0, None),
    "top_p": lambda k, v: _number(k, v, 0.0, 1.0, lo_open=True),
    "max_tokens": lambda k, v: _number(k, v, 1, None, integer=True),
    "max_completion_tokens": lambda k, v: _number(k, v, 1, None, integer=True),
    "presence_penalty": lambda k, v: _number(k, v, -2.0, 2.0),
    "frequency_penalty": lambda k, v: _number(k, v, -2.0, 2.0),
    "seed": lambda k, v: _number(k, v, None, None, integer=True),
}


def check_sampling(settings: Mapping[str, Any], *, source: str = "sampling") -> dict[str, Any]:
    """``settings`` checked: no reserved key, the common keys in range, no NaN or infinity anywhere."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise SamplingError(f"{source}: a sampling key must be a non-empty string, got {key!r}")
        if key in RESERVED:
            raise SamplingError(f"{source}: {key!r} is set by {RESERVED[key]}, not a sampling setting")
        _finite(key, value, source)
        check = _CHECKS.get(key)
        out[key] = check(key, value) if check is not None else value
    return out


def _finite(key: str, value: Any, source: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise SamplingError(f"{source}: sampling {key}={value!r} is not a finite number")
    if isinstance(value, Mapping):
        for v in value.values():
            _finite(key, v, source)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _finite(key, v, source)


def load_sampling_file(path: Path) -> dict[str, Any]:
    """The JSON (or TOML, by a ``.toml`` suffix) object in ``path``."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise SamplingError(f"--sampling-file {path} does not exist; give a JSON file such as "
                            '{"temperature": 0.7, "max_tokens": 256}') from None
    except IsADirectoryError:
        raise SamplingError(f"--sampling-file {path} is a directory; give a JSON or .toml file") from None
    try:
        data = tomllib.loads(raw.decode()) if path.suffix == ".toml" else orjson.loads(raw)
    except (orjson.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise SamplingError(f"--sampling-file {path} is not valid {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise SamplingError(f"--sampling-file {path} holds a {type(data).__name__}; it must be an object "
                            'of settings, e.g. {"temperature": 0.7}')
    return check_sampling(data, source=f"--sampling-file {path}")


def parse_sampling(*, temperature: float | None = None, top_p: float | None = None,
                   max_tokens: int | None = None, pairs: list[str] | None = None,
                   file: Path | None = None) -> dict[str, Any]:
    """The sampling settings of the command line (see the module docstring)."""
    given: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SamplingError(f"--sampling {pair!r}: expected KEY=VALUE, e.g. --sampling seed=7")
        if key in given:
            raise SamplingError(f"--sampling {key} is given twice")
        try:
            given[key] = orjson.loads(raw)
        except orjson.JSONDecodeError:
            given[key] = raw
    for key, value in (("temperature", temperature), ("top_p", top_p), ("max_tokens", max_tokens)):
        if value is None:
            continue
        if key in given:
            raise SamplingError(f"{key} is given both as --{key.replace('_', '-')} and as --sampling "
                                f"{key}=...; keep one")
        given[key] = value
    settings = load_sampling_file(file) if file is not None else {}
    settings.update(check_sampling(given, source="--sampling"))
    return settings
