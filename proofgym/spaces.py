"""Gymnasium spaces for LLM agents: free Unicode text, and tool-call actions.

Vector envs batch both as Gymnasium batches custom spaces and ``Text``: a tuple of per-env values.
Async vector envs with shared memory (Gymnasium's default) get a UTF-8 buffer per env for each
text space (registered below): Gymnasium's own ``Text`` buffer holds only characters of a finite
charset, which would crash on ``%`` or return padding for text it cannot hold. Gymnasium reads the
buffer once, when the vector env starts, and relies on what it read being a live view (true of
numpy arrays); text is read into a :class:`SharedTextView` for the same reason: it reads the
buffer on every access, and a copy of it (Gymnasium copies observations by default) is a plain
tuple of ``str``.
"""

from __future__ import annotations

import copy
import multiprocessing as mp
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import (
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from proofgym.core import AgentAction, ToolCallAction, TurnCompleteAction
from proofgym.core.errors import ConfigError

# Characters ``UnicodeText.sample`` draws from: ASCII, accents, CJK, RTL, emoji, whitespace.
_SAMPLE_ALPHABET = (
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,:;!?()[]{}<>\"'\\/+-*=_#\n\t"
    "éèüßøñçÅ中文字符日本語한국어עבריתالعربية😀🚀∑∫√"
)

OBSERVATION_TYPES = ("turn_init", "tool_output", "tool_error", "turn_transition", "episode_end")


class UnicodeText(spaces.Text):
    """Any Python ``str`` up to ``max_length`` characters.

    Gymnasium's ``Text`` needs a finite charset; LLM observations are arbitrary Unicode (code,
    CJK, emoji), so membership here is only ``isinstance(x, str)`` and the length bound.
    """

    def __init__(self, max_length: int = 1 << 20, *, min_length: int = 0,
                 sample_max_length: int = 64, seed: int | np.random.Generator | None = None):
        super().__init__(max_length, min_length=min_length, charset=_SAMPLE_ALPHABET, seed=seed)
        self.sample_max_length = min(sample_max_length, max_length)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            raise NotImplementedError("UnicodeText.sample does not support masks")
        n = int(self.np_random.integers(self.min_length, self.sample_max_length + 1))
        chars = self.np_random.choice(len(_SAMPLE_ALPHABET), size=n)
        return "".join(_SAMPLE_ALPHABET[i] for i in chars)

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, UnicodeText) and self.min_length == other.min_length
                and self.max_length == other.max_length)


class ObservationType(spaces.Text):
    """One of :data:`OBSERVATION_TYPES`."""

    def __init__(self, seed: int | np.random.Generator | None = None):
        super().__init__(max(map(len, OBSERVATION_TYPES)), min_length=1,
                         charset="abcdefghijklmnopqrstuvwxyz_", seed=seed)

    def contains(self, x: Any) -> bool:
        return x in OBSERVATION_TYPES

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return OBSERVATION_TYPES[int(self.np_random.integers(len(OBSERVATION_TYPES)))]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObservationType)


# ------------------------------------------------------------------ shared memory (async vector)
# Each env's slot: an 8-byte little-endian length, then up to 4 bytes per character of UTF-8.
_LENGTH_BYTES = 8


def _slot_size(space: spaces.Text) -> int:
    return _LENGTH_BYTES + 4 * space.max_length


@create_shared_memory.register(UnicodeText)
@create_shared_memory.register(ObservationType)
def _create_text_memory(space: spaces.Text, n: int = 1, ctx: Any = mp) -> Any:
    return ctx.Array("B", n * _slot_size(space))


class SharedTextView(Sequence[str]):
    """The ``n`` texts of a shared-memory buffer, read at each access (a live view, like the
    numpy arrays Gymnasium reads other spaces into). ``copy``/``deepcopy``/pickle give a tuple."""

    def __init__(self, space: spaces.Text, shared_memory: Any, n: int) -> None:
        self._data = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)
        self._size, self._n = _slot_size(space), n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return tuple(self)[index]
        if not -self._n <= index < self._n:
            raise IndexError(index)
        slot = self._data[(index % self._n) * self._size:(index % self._n + 1) * self._size]
        length = int.from_bytes(slot[:_LENGTH_BYTES].tobytes(), "little")
        return slot[_LENGTH_BYTES:_LENGTH_BYTES + length].tobytes().decode("utf-8", errors="surrogatepass")

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]  # a live view is not hashable

    def __copy__(self) -> tuple[str, ...]:
        return tuple(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __reduce__(self) -> Any:
        return tuple, (tuple(self),)

    def __repr__(self) -> str:
        return f"SharedTextView({tuple(self)!r})"


@read_from_shared_memory.register(UnicodeText)
@read_from_shared_memory.register(ObservationType)
def _read_text_memory(space: spaces.Text, shared_memory: Any, n: int = 1) -> SharedTextView:
    return SharedTextView(space, shared_memory, n)


@write_to_shared_memory.register(UnicodeText)
@write_to_shared_memory.register(ObservationType)
def _write_text_memory(space: spaces.Text, index: int, value: str, shared_memory: Any) -> None:
    if not space.contains(value):
        raise ConfigError(f"cannot put {type(value).__name__} of length {len(value)} in {space!r}")
    encoded = value.encode("utf-8", errors="surrogatepass")
    size = _slot_size(space)
    data = np.frombuffer(shared_memory.get_obj(), dtype=np.uint8)
    slot = data[index * size:(index + 1) * size]
    slot[:_LENGTH_BYTES] = np.frombuffer(len(encoded).to_bytes(_LENGTH_BYTES, "little"), dtype=np.uint8)
    slot[_LENGTH_BYTES:_LENGTH_BYTES + len(encoded)] = np.frombuffer(encoded, dtype=np.uint8)


def observation_space(max_turns: int, max_chars: int) -> spaces.Dict:
    """The seed's observation dict: ``{"turn": int, "observation": str, "type": str}``."""
    return spaces.Dict({
        "turn": spaces.Discrete(max_turns + 1),
        "observation": UnicodeText(max_chars),
        "type": ObservationType(),
    })


class ToolCallSpace(spaces.Space[AgentAction]):
    """Agent actions: tool calls against a fixed set of tool schemas, or turn completions.

    Membership is structural: every ``ToolCallAction`` with a string tool name is an action, even
    one naming an unknown tool or carrying bad arguments, because models emit those and the env
    must answer them with error observations. ``sample()`` is a fuzzer: it yields valid calls,
    malformed calls of every kind (unknown tool, missing/extra/mistyped arguments, non-object and
    invalid-JSON input) and turn completions.
    """

    MALFORMED_KINDS = ("unknown_tool", "missing_argument", "extra_argument", "mistyped_argument",
                       "non_object", "invalid_json")

    def __init__(self, tool_schemas: Iterable[dict[str, Any]] = (), *,
                 turn_complete_probability: float = 0.15, malformed_probability: float = 0.35,
                 seed: int | np.random.Generator | None = None) -> None:
        super().__init__(None, None, seed)
        self.tool_schemas: list[dict[str, Any]] = copy.deepcopy(list(tool_schemas))
        self.tool_names = [s["function"]["name"] for s in self.tool_schemas]
        self.turn_complete_probability = turn_complete_probability
        self.malformed_probability = malformed_probability
        self._text = UnicodeText(4096, sample_max_length=24)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def seed(self, seed: int | None = None) -> int | list[int] | dict[str, int]:
        result = super().seed(seed)
        self._text.seed(int(self.np_random.integers(2**31)))
        return result

    def contains(self, x: Any) -> bool:
        if isinstance(x, TurnCompleteAction):
            return isinstance(x.message, str)
        return isinstance(x, ToolCallAction) and isinstance(x.tool_name, str)

    def sample(self, mask: Any = None, probability: Any = None) -> AgentAction:
        if mask is not None or probability is not None:
            raise NotImplementedError("ToolCallSpace.sample does not support masks")
        rng = self.np_random
        roll = rng.random()
        if roll < self.turn_complete_probability or (not self.tool_schemas and roll < 0.5):
            return TurnCompleteAction(self._text.sample())
        if not self.tool_schemas or rng.random() < self.malformed_probability:
            return self.sample_malformed()
        schema = self.tool_schemas[int(rng.integers(len(self.tool_schemas)))]["function"]
        return ToolCallAction(schema["name"], self._sample_arguments(schema["parameters"]))

    def sample_malformed(self, kind: str | None = None) -> ToolCallAction:
        """A malformed call of ``kind`` (one of :attr:`MALFORMED_KINDS`), random by default."""
        rng = self.np_random
        kinds = self.MALFORMED_KINDS if self.tool_schemas else ("unknown_tool",)
        kind = kind or kinds[int(rng.integers(len(kinds)))]
        if kind == "unknown_tool":
            return ToolCallAction(f"no_such_tool_{int(rng.integers(1000))}", {})
        if not self.tool_schemas:
            raise ConfigError("only 'unknown_tool' calls can be made without tools")
        schema = self.tool_schemas[int(rng.integers(len(self.tool_schemas)))]["function"]
        params = schema["parameters"]
        args = self._sample_arguments(params, all_optional=True)
        props = params.get("properties", {})
        required = list(params.get("required", []))
        if kind == "missing_argument" and required:
            args.pop(required[int(rng.integers(len(required)))])
        elif kind == "mistyped_argument" and props:
            name = list(props)[int(rng.integers(len(props)))]
            args[name] = _wrong_type_value(props[name], rng)
        elif kind == "non_object":
            options: list[Any] = [[1, 2], 42, None, True]
            return ToolCallAction(schema["name"], options[int(rng.integers(len(options)))])
        elif kind == "invalid_json":
            return ToolCallAction(schema["name"], '{"unterminated": ')
        else:  # extra_argument, or a kind the schema cannot express (no required/no properties)
            args[f"unexpected_{int(rng.integers(1000))}"] = "x"
        return ToolCallAction(schema["name"], args)

    def _sample_arguments(self, params: dict[str, Any], *, all_optional: bool = False) -> dict[str, Any]:
        rng = self.np_random
        required = set(params.get("required", []))
        args: dict[str, Any] = {}
        for name, prop in params.get("properties", {}).items():
            if name in required or all_optional or rng.random() < 0.5:
                args[name] = _sample_value(prop, rng, self._text)
        return args

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCallSpace) and self.tool_schemas == other.tool_schemas

    def __repr__(self) -> str:
        return f"ToolCallSpace(tools={self.tool_names})"

    def to_jsonable(self, sample_n: Sequence[AgentAction]) -> list[dict[str, Any]]:
        return [a.to_dict() for a in sample_n]

    def from_jsonable(self, sample_n: list[dict[str, Any]]) -> list[AgentAction]:
        from proofgym.core import action_from_dict

        return [action_from_dict(d) for d in sample_n]


def _sample_value(prop: dict[str, Any], rng: np.random.Generator, text: UnicodeText) -> Any:
    kind = prop.get("type")
    if "enum" in prop:
        return prop["enum"][int(rng.integers(len(prop["enum"])))]
    if kind == "integer":
        return int(rng.integers(-100, 100))
    if kind == "number":
        return float(np.round(rng.normal(0, 50), 3))
    if kind == "boolean":
        return bool(rng.random() < 0.5)
    if kind == "array":
        return [_sample_value(prop.get("items", {"type": "string"}), rng, text)
                for _ in range(int(rng.integers(3)))]
    if kind == "object":
        return {}
    return text.sample()


def _wrong_type_value(prop: dict[str, Any], rng: np.random.Generator) -> Any:
    if prop.get("type") in ("string", None):
        return int(rng.integers(100))
    return ["not", "a", str(prop.get("type"))]
