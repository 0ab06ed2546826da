"""``proofgym parity A B``: the same probes, per tool, sent to two deployments of one env.

A deployment is an env id (built here, ``proofgym/SearchQA-v0``) or a server's URL
(``ws://HOST:PORT``, through :class:`~proofgym.remote.RemoteEnv`). Both are reset with the same
seed and task; then every tool gets the same probe calls, made from its schema (never from a
task's hidden data):

* ``success``: plausible arguments (a word of the prompt for text, the minimum or 0 for numbers);
* ``empty``: arguments that match nothing;
* ``malformed``: arguments that are not JSON;
* ``denied``: out-of-bounds arguments (a path outside the workspace, negative numbers);
* ``timeout``: the success call repeated (up to :data:`TIMEOUT_TRIES` times) until side A meets
  a ``timeout``, B the same number of times.

The two sides' tool schemas, and each probe's observation type, error kind and observation text,
are compared; differences are :class:`~proofgym.record.contract.Difference` s under the paths
``tools.TOOL...`` and ``probes.TOOL.PROBE...``, and a parity file allows some, exactly as in
``proofgym contract diff`` (``[[allow]] path = ... reason = ...``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from proofgym.core import ConfigError, ToolCallAction
from proofgym.env import UniversalVerifiableEnv
from proofgym.make import make_env
from proofgym.record.contract import Difference, ParityRule, apply_parity
from proofgym.remote.env import RemoteEnv

PROBES = ("success", "empty", "malformed", "denied", "timeout")
TIMEOUT_TRIES = 8
NOTHING = "zzqx-matches-nothing-7f3a"
_BRACKETED = re.compile(r"\[([A-Za-z0-9][\w.+-]{1,80})\]")


def open_deployment(where: str, token: str | None = None) -> UniversalVerifiableEnv:
    """``where``: an env id or a server URL (see the module docstring)."""
    if where.startswith(("ws://", "wss://", "http://", "https://")):
        return RemoteEnv(where, token=token)
    return make_env(where)


def _value(schema: Mapping[str, Any], kind: str, word: str, key: str = "",
           ids: list[str] | None = None) -> Any:
    types = schema.get("type")
    kind_of = types[0] if isinstance(types, list) and types else types
    if kind_of in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        if kind == "denied":
            return -10**6
        value = low + (1 if "exclusiveMinimum" in schema else 0)
        return int(value) if kind_of == "integer" else float(value) or 1.0
    if kind_of == "boolean":
        return kind != "denied"
    if kind_of == "array":
        return []
    if kind == "denied":
        return "/../../../../etc/shadow"
    if kind == "empty":
        return NOTHING
    if key.endswith("id") and ids:  # an id the env itself showed earlier ("[debian-policy]")
        return ids[0]
    return word


def probe_call(schema: Mapping[str, Any], kind: str, word: str,
               ids: list[str] | None = None) -> ToolCallAction:
    """The ``kind`` probe of a tool with this (OpenAI function) schema; ``ids``: bracketed ids
    earlier outputs showed, for arguments named ``*id``."""
    function = schema.get("function", schema)
    name = function["name"]
    if kind == "malformed":
        return ToolCallAction(name, '{"not json": ')
    params = function.get("parameters", {})
    props = params.get("properties", {})
    args = {key: _value(sub, "success" if kind == "timeout" else kind, word, key, ids)
            for key, sub in props.items() if key in params.get("required", props)}
    return ToolCallAction(name, args)


@dataclass
class Side:
    """One deployment during a parity run."""

    env: UniversalVerifiableEnv
    info: dict[str, Any]
    word: str
    ids: list[str] = field(default_factory=list)

    def call(self, action: ToolCallAction) -> dict[str, Any]:
        obs, _r, terminated, truncated, info = self.env.step(action)
        self.ids += [i for i in _BRACKETED.findall(str(obs["observation"])) if i not in self.ids]
        return {"type": obs["type"], "error_kind": info.get("error_kind"), "observation": obs["observation"],
                "ended": bool(terminated or truncated)}


def _prompt_word(prompt: str) -> str:
    words = [w.strip(".,:;?!()'\"`") for w in prompt.split()]
    long = [w for w in words if len(w) >= 5 and w.isalpha()]
    return long[0] if long else "the"


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and value:
        for key, sub in value.items():
            _flatten(sub, f"{prefix}.{key}", out)
    else:
        out[prefix] = value


def _diff(category: str, prefix: str, a: Any, b: Any) -> list[Difference]:
    fa: dict[str, Any] = {}
    fb: dict[str, Any] = {}
    _flatten(a, prefix, fa)
    _flatten(b, prefix, fb)
    return [Difference(category, path, fa.get(path, "<missing>"), fb.get(path, "<missing>"))
            for path in sorted(set(fa) | set(fb)) if fa.get(path, "<missing>") != fb.get(path, "<missing>")]


def run_parity(a: str, b: str, *, seed: int = 0, task_id: str | None = None,
               rules: list[ParityRule] | None = None, token_a: str | None = None,
               token_b: str | None = None) -> tuple[list[Difference], dict[str, Any]]:
    """The differences between deployments ``a`` and ``b`` (parity ``rules`` applied) and the
    probe results of each side."""
    envs = [open_deployment(a, token_a), open_deployment(b, token_b)]
    try:
        sides = []
        for env in envs:
            if env.tasks is None:
                raise ConfigError("parity needs envs with task sets (to reset both on the same task)")
        chosen = task_id or next((t for t in envs[0].tasks.ids  # type: ignore[union-attr]
                                  if envs[0].tasks.split_of(t) == "train"), envs[0].tasks.ids[0])  # type: ignore[union-attr]
        for env in envs:
            obs, info = env.reset(seed=seed, options={"task_id": chosen})
            sides.append(Side(env, info, _prompt_word(obs["observation"])))
        diffs = _diff("tools", "tools", _schemas(sides[0].info), _schemas(sides[1].info))
        results: dict[str, Any] = {"task_id": chosen, "seed": seed, "a": {}, "b": {}}
        for schema in sides[0].info["tools"]:
            name = schema.get("function", schema)["name"]
            for kind in PROBES:
                action = probe_call(schema, kind, sides[0].word, sides[0].ids)
                got = [_probe(side, action, kind, limit=None) for side in sides[:1]]
                tries = len(got[0])
                got.append(_probe(sides[1], action, kind, limit=tries))
                results["a"][f"{name}.{kind}"], results["b"][f"{name}.{kind}"] = got
                diffs += _diff("probes", f"probes.{name}.{kind}", _keyed(got[0]), _keyed(got[1]))
                if any(r["ended"] for r in got[0] + got[1]):  # a budget ran out: a fresh episode
                    for side in sides:
                        side.env.reset(seed=seed, options={"task_id": chosen})
        return apply_parity(diffs, rules or []), results
    finally:
        for env in envs:
            env.close()


def _schemas(info: Mapping[str, Any]) -> dict[str, Any]:
    return {s.get("function", s)["name"]: s for s in info["tools"]}


def _keyed(calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {str(i): {k: v for k, v in c.items() if k != "ended"} for i, c in enumerate(calls)}


def _probe(side: Side, action: ToolCallAction, kind: str, *, limit: int | None) -> list[dict[str, Any]]:
    """One probe: a single call, or for ``timeout`` repeated calls (until a timeout on side A,
    ``limit`` times on side B)."""
    if kind != "timeout":
        return [side.call(action)]
    out = []
    for _ in range(limit if limit is not None else TIMEOUT_TRIES):
        out.append(side.call(action))
        if limit is None and (out[-1]["error_kind"] == "timeout" or out[-1]["ended"]):
            break
        if out[-1]["ended"]:
            break
    return out
