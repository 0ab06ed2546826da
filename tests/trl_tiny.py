"""A tiny, randomly initialised Qwen3 for real ``GRPOTrainer`` runs on CPU, and scripted generation.

Nothing is downloaded: a byte-level tokenizer (256 byte tokens plus Qwen3's special tokens, and
byte-pair merges learned from a corpus when given one) with TRL's own ``qwen3.jinja`` chat
template, and a 2-layer Qwen3 of width 16. Its ``generate`` is
replaced by :class:`ScriptedGenerate`, which answers each prompt with the text a script chooses
(tool calls in Qwen3's ``<tool_call>`` format), so a test controls what the "model" does while
the trainer's own tokenisation, tool loop, parsing, loss and optimiser all run for real.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import orjson

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
from trl.chat_template_utils import qwen3_chat_template

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKUP = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]


def tiny_tokenizer(corpus: Iterable[str] = (), merges: int = 1024) -> PreTrainedTokenizerFast:
    """Byte-level; with a ``corpus``, also up to ``merges`` byte-pair merges learned from it, so
    long prompts are fewer tokens (CodeRepair's, some 4,100 bytes with the tool schemas: about
    420) and the trainer's passes over them (attention: quadratic in the length) cost seconds,
    not half a minute. Every byte stays in the vocabulary: any text encodes and decodes exactly."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    corpus = list(corpus)
    if corpus:
        core.train_from_iterator(corpus, trainers.BpeTrainer(
            vocab_size=len(alphabet) + merges, initial_alphabet=alphabet, show_progress=False))
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", padding_side="left")
    tok.add_special_tokens({"additional_special_tokens": SPECIAL})
    tok.add_tokens(MARKUP)
    tok.chat_template = qwen3_chat_template
    return tok


def rendered_prompts(rows: Iterable[dict[str, Any]], factory: type) -> list[str]:
    """The rows' prompts as the trainer renders them with the tools of ``factory`` (an
    ``environment_factory`` class: its public methods but ``reset``), a corpus for
    :func:`tiny_tokenizer`."""
    tools = [getattr(factory, name) for name in dir(factory)
             if not name.startswith("_") and name != "reset" and callable(getattr(factory, name))]
    render = tiny_tokenizer().apply_chat_template
    return [render(row["prompt"], tools=tools, add_generation_prompt=True, tokenize=False)
            for row in rows]


def tiny_model(tokenizer: PreTrainedTokenizerFast, *, seed: int = 0,
               max_positions: int = 16384) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=8, max_position_embeddings=max_positions,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, tie_word_embeddings=True)
    return Qwen3ForCausalLM(config)


def tool_call(name: str, arguments: Any) -> str:
    return (f"<tool_call>\n{orjson.dumps({'name': name, 'arguments': arguments}).decode()}\n"
            "</tool_call>")


class ScriptedGenerate:
    """Stands in for ``model.generate``: ``script(prompt_text, row_index) -> completion text``.

    ``row_index`` is the row's position in this ``generate`` call (TRL repeats each prompt
    ``num_generations`` times in a row, so it tells the group's completions apart).
    """

    def __init__(self, tokenizer: PreTrainedTokenizerFast,
                 script: Callable[[str, int], str]) -> None:
        self.tokenizer, self.script = tokenizer, script
        self.calls: list[list[str]] = []

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 **_: Any) -> torch.Tensor:
        tok = self.tokenizer
        texts = [tok.decode(row[mask.bool()] if attention_mask is not None else row,
                            skip_special_tokens=False)
                 for row, mask in zip(input_ids, attention_mask if attention_mask is not None
                                      else input_ids, strict=True)]
        outs = [self.script(text, i) + tok.eos_token for i, text in enumerate(texts)]
        self.calls.append(outs)
        ids = [tok(o, add_special_tokens=False)["input_ids"] for o in outs]
        width = max(map(len, ids))
        padded = [seq + [tok.pad_token_id] * (width - len(seq)) for seq in ids]
        completion = torch.tensor(padded, dtype=input_ids.dtype, device=input_ids.device)
        return torch.cat([input_ids, completion], dim=1)
