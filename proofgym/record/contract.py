"""The rollout contract: every setting that changes behaviour, in canonical JSON, hashed.

Two runs with the same contract id ran the same policy (model, sampling, system prompt) against the
same tasks, tools, runtime, limits and graders, with the same seeds and proofgym version. Training
and production can be compared with :func:`diff_contracts`, and a parity file declares which
differences are intended (each with its reason): any other difference is a parity bug.
"""

from __future__ import annotations

import fnmatch
import hashlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from proofgym.core.errors import ContractError as ContractError
from proofgym.version import __version__

if TYPE_CHECKING:
    from proofgym.env import UniversalVerifiableEnv

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

#: The categories of a contract, in display order. Each is a top-level key of the contract.
CATEGORIES = ("proofgym", "env", "policy", "tools", "tasks", "runtime", "limits", "verifiers", "seeds")
CONTRACT_FILE = "contract.json"


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, non-JSON values by ``repr``: the bytes that are hashed."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr)


@dataclass(frozen=True)
class RolloutContract:
    """An immutable record of the behaviour-changing settings of a run.

    Invariants: ``data`` holds exactly the keys of :data:`CATEGORIES` and is JSON (it went through
    :func:`canonical_json`); ``id`` is the first 16 hex digits of the sha256 of the canonical JSON,
    so equal settings give equal ids in any process, on any machine.
    """

    data: Mapping[str, Any]

    def __post_init__(self) -> None:
        missing = [c for c in CATEGORIES if c not in self.data]
        extra = [k for k in self.data if k not in CATEGORIES]
        if missing or extra:
            raise ContractError(f"a contract has the categories {list(CATEGORIES)}; "
                                f"missing {missing}, unknown {extra}")
        object.__setattr__(self, "data", orjson.loads(canonical_json(dict(self.data))))

    @property
    def id(self) -> str:
        return hashlib.sha256(canonical_json(self.data)).hexdigest()[:16]

    def __getitem__(self, category: str) -> Any:
        return self.data[category]

    # ------------------------------------------------------------- building
    @classmethod
    def build(cls, env: UniversalVerifiableEnv, *, policy: Mapping[str, Any], env_id: str = "",
              env_kwargs: Mapping[str, Any] | None = None, split: str | None = None,
              seeds: Mapping[str, Any] | None = None,
              verifiers: Mapping[str, Any] | None = None) -> RolloutContract:
        """The contract of running ``policy`` (its ``describe()``: model, sampling, system prompt)
        in ``env``. ``split`` is the split evaluated (``None``: every task); ``seeds`` the plan's
        seeds and sizes; ``verifiers`` adds graders beyond the tasks' own (an LLM judge, ...)."""
        runtime_config = dict(env.runtime.config())
        runtime_config.pop("tools", None)  # the tools category holds them: one place to diff
        tasks: dict[str, Any] = {"name": None, "content_hash": None, "count": 0,
                                 "split_manifest": None, "split": split}
        graders: dict[str, Any] = {}
        if env.tasks is not None:
            ts = env.tasks
            tasks.update(name=ts.name, content_hash=ts.content_hash, count=len(ts),
                         split_manifest=ts.manifest.digest)
            rubrics: dict[bytes, Any] = {}
            for task in ts:
                # a served task (proofgym.remote) names the grader class the server runs
                name = task.grader_type or f"{type(task).__module__}.{type(task).__qualname__}"
                graders.setdefault(name, set()).add(str(task.verifier_version))
                # a task graded by a Rubric adds its components, so a judge's model and prompt
                # version are part of the contract too
                rubric = task.rubric()
                if rubric is not None:
                    described = rubric.describe()
                    rubrics.setdefault(canonical_json(described), described)
        graders = {name: sorted(versions) for name, versions in graders.items()}
        if env.tasks is not None and rubrics:
            graders["rubrics"] = [rubrics[k] for k in sorted(rubrics)]
        graders.update(verifiers or {})
        return cls({
            "proofgym": {"version": __version__},
            "env": {"id": env_id, "kwargs": dict(env_kwargs or {})},
            "policy": dict(policy),
            "tools": {s.get("function", s).get("name", str(i)): s
                      for i, s in enumerate(env.runtime.tools.schemas())},
            "tasks": tasks,
            "runtime": runtime_config,
            "limits": env.limits.to_dict(),
            "verifiers": graders,
            "seeds": dict(seeds or {}),
        })

    # -------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        return {"contract_id": self.id, **self.data}

    def to_json(self, *, indent: bool = True) -> bytes:
        option = orjson.OPT_SORT_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
        return orjson.dumps(self.to_dict(), option=option)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RolloutContract:
        if not isinstance(data, Mapping):
            raise ContractError(f"a rollout contract is a JSON object of settings, not a "
                                f"{type(data).__name__}: the file was edited by hand or corrupted "
                                "(restore it from a copy: `proofgym eval` writes it once, when a run starts)")
        body = {k: v for k, v in data.items() if k != "contract_id"}
        contract = cls(body)
        stated = data.get("contract_id")
        if stated is not None and stated != contract.id:
            raise ContractError(f"contract says its id is {stated} but its content hashes to "
                                f"{contract.id}: the file was edited by hand or corrupted")
        return contract

    @classmethod
    def load(cls, path: str | Path) -> RolloutContract:
        """From a ``contract.json`` file, or a run directory holding one."""
        path = Path(path)
        file = path / CONTRACT_FILE if path.is_dir() else path
        if not file.exists():
            raise ContractError(f"no rollout contract at {file}: pass a run directory (written by "
                                "`proofgym eval --out DIR`) or its contract.json")
        try:
            return cls.from_dict(orjson.loads(file.read_bytes()))
        except orjson.JSONDecodeError as exc:
            raise ContractError(f"{file}: not valid JSON ({exc})") from None
        except ContractError as exc:
            raise ContractError(f"{file}: {exc}") from None


# ------------------------------------------------------------------- diff
@dataclass(frozen=True)
class Difference:
    """One setting that differs: ``path`` is dotted (``limits.max_tool_calls``,
    ``tools.calculator.function.description``); a side lacking the setting holds ``MISSING``."""

    category: str
    path: str
    a: Any
    b: Any
    reason: str | None = None  # set when a parity file declares this difference

    @property
    def allowed(self) -> bool:
        return self.reason is not None


MISSING = "<missing>"


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):  # an empty mapping has no settings (``{}`` == absent)
        for key, sub in value.items():
            _flatten(sub, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list) and value and any(isinstance(v, (Mapping, list)) for v in value):
        for i, sub in enumerate(value):
            _flatten(sub, f"{prefix}[{i}]", out)
    else:
        out[prefix] = value


def diff_contracts(a: RolloutContract, b: RolloutContract) -> list[Difference]:
    """Every leaf setting that differs between ``a`` and ``b``, in category order."""
    diffs: list[Difference] = []
    for category in CATEGORIES:
        fa: dict[str, Any] = {}
        fb: dict[str, Any] = {}
        _flatten(a[category], category, fa)
        _flatten(b[category], category, fb)
        for path in sorted(set(fa) | set(fb)):
            va, vb = fa.get(path, MISSING), fb.get(path, MISSING)
            if va != vb:
                diffs.append(Difference(category, path, va, vb))
    return diffs


@dataclass(frozen=True)
class ParityRule:
    """An allowed difference: ``path`` is a dotted setting path, which also covers everything
    under it (``policy.sampling`` allows ``policy.sampling.temperature``), or a pattern with
    ``*`` and ``?`` wildcards (``tools.*.function.description``); brackets are literal."""

    path: str
    reason: str

    def matches(self, diff: Difference) -> bool:
        if diff.path == self.path or diff.path.startswith((self.path + ".", self.path + "[")):
            return True
        return fnmatch.fnmatchcase(diff.path, self.path.replace("[", "[[]"))


def load_parity(path: str | Path) -> list[ParityRule]:
    """Read a parity file: TOML with one ``[[allow]]`` table per allowed difference::

        [[allow]]
        path = "policy.model"
        reason = "production serves the distilled model"
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ContractError(f"parity file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ContractError(f"{path}: not valid TOML ({exc})") from None
    rules = []
    for i, entry in enumerate(data.get("allow", [])):
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise ContractError(f"{path}: [[allow]] #{i + 1} needs a string `path` "
                                "(a dotted setting such as 'limits.max_tool_calls' or a glob)")
        reason = entry.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise ContractError(f"{path}: [[allow]] {entry['path']!r} has no `reason`; every allowed "
                                "difference must say why it is allowed")
        rules.append(ParityRule(entry["path"], reason.strip()))
    unknown = set(data) - {"allow"}
    if unknown:
        raise ContractError(f"{path}: unknown top-level keys {sorted(unknown)}; use [[allow]] tables")
    return rules


def apply_parity(diffs: list[Difference], rules: list[ParityRule]) -> list[Difference]:
    """The differences with ``reason`` set where a rule allows them."""
    out = []
    for d in diffs:
        rule = next((r for r in rules if r.matches(d)), None)
        out.append(Difference(d.category, d.path, d.a, d.b, rule.reason) if rule else d)
    return out


def describe_differences(diffs: list[Difference], *, limit: int = 8) -> str:
    """A short text naming what changed, for error messages."""
    if not diffs:
        return "nothing"
    shown = "; ".join(f"{d.path}: {_short(d.a)} -> {_short(d.b)}" for d in diffs[:limit])
    more = f"; and {len(diffs) - limit} more" if len(diffs) > limit else ""
    return shown + more


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."
