"""The scripted server's tokenizer: bytes as tokens, a chat template, log-probabilities.

Real enough for token-level tests, deterministic, with no model: every UTF-8 byte is a token
(ids 0-255), and the roles and the end of a message are special tokens. A message renders as
``ROLE`` + its bytes + ``END``; its bytes are the content, then each tool call as
``<tool_call>NAME ARGUMENTS</tool_call>``. A prompt is the rendered history and an open
``ASSISTANT``; a completion is the assistant message's bytes and ``END``. So a history that keeps
an assistant message as the server sent it renders to exactly the tokens the server generated
(the next prompt extends the last prompt and completion), and one that changes it does not:
the re-tokenisation drift a token-exact recorder must not paper over.

The log-probability of a token is a hash of the token and what precedes it, in ``(-7, 0)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

SPECIAL = {"system": 256, "user": 257, "assistant": 258, "tool": 259}
END = 260
NAMES = {**{v: f"<|{k}|>" for k, v in SPECIAL.items()}, END: "<|end|>"}


def message_bytes(message: Mapping[str, Any]) -> bytes:
    content = message.get("content") or ""
    if not isinstance(content, str):
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    text = content
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        text += f"<tool_call>{function.get('name', '')} {function.get('arguments', '')}</tool_call>"
    return text.encode()


def prompt_ids(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The tokens of ``messages`` and an open assistant turn."""
    ids: list[int] = []
    for message in messages:
        ids.append(SPECIAL.get(str(message.get("role")), SPECIAL["user"]))
        ids.extend(message_bytes(message))
        ids.append(END)
    ids.append(SPECIAL["assistant"])
    return ids


def completion_ids(message: Mapping[str, Any]) -> list[int]:
    return [*message_bytes(message), END]


def token_text(token: int) -> str:
    if token in NAMES:
        return NAMES[token]
    return chr(token) if 32 <= token < 127 else f"<0x{token:02X}>"


def logprobs(prompt: Sequence[int], completion: Sequence[int]) -> list[float]:
    """A deterministic log-probability for each completion token, given what precedes it."""
    digest = hashlib.blake2b(bytes(t % 256 for t in prompt[-64:]), digest_size=8).digest()
    state = int.from_bytes(digest, "big")
    out = []
    for token in completion:
        state = (state * 6364136223846793005 + token + 1442695040888963407) % (1 << 64)
        out.append(-round(((state >> 11) % 7000 + 1) / 1000, 3))
    return out


def vllm_logprobs(completion: Sequence[int], values: Sequence[float]) -> dict[str, Any]:
    """The ``choices[i].logprobs`` object vLLM returns (OpenAI's format, one entry per token)."""
    return {"content": [{"token": token_text(t), "logprob": lp, "bytes": [t] if t < 256 else [],
                         "top_logprobs": []} for t, lp in zip(completion, values, strict=True)]}
