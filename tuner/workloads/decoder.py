"""The decode step of a GPT-2-style language model with a static KV cache: the workload of ``--mode decode``.

One call takes one new token per sequence, ``(batch, 1)`` ids, and gives its logits, attending to a cache of
``cache_len`` positions: the ``cache_len - 1`` before it, filled when the model is built, and its own, written at the
last slot on every call (so every call does the same work, and the same input gives the same output). The sizes
come from a Hugging Face config (``hf:gpt2``: 12 layers of 768, 12 heads, 50257 tokens), grouped key/value heads too
where it has fewer of them (``num_key_value_heads``, as Llama's and Qwen2's: the cache holds those, and attention
groups the query heads over them); the modules are tuner's own (LayerNorm, fused QKV projection,
scaled-dot-product attention over the cache, a tanh-GELU MLP, a head tied to the token embedding), not Transformers'
modeling code, whose cache API changes between releases. The cache lives
in buffers, updated in place, so it stays at one address: what CUDA graphs (``mode="reduce-overhead"``) need.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tuner.errors import WorkloadError

CACHE_SCALE = 0.5  # the prefilled keys' and values' scale: a softmax over them is neither flat nor one-hot


class _Block(nn.Module):
    def __init__(self, width: int, heads: int, kv_heads: int, batch: int, cache_len: int, gen: torch.Generator):
        super().__init__()
        self.heads, self.kv_heads, self.head = heads, kv_heads, width // heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, width + 2 * kv_heads * self.head), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        shape = (batch, kv_heads, cache_len, self.head)
        self.register_buffer("k", CACHE_SCALE * torch.randn(shape, generator=gen))
        self.register_buffer("v", CACHE_SCALE * torch.randn(shape, generator=gen))

    def forward(self, x: torch.Tensor, slot: torch.Tensor) -> torch.Tensor:
        b, _, width = x.shape
        kv = self.kv_heads * self.head
        q, k, v = self.qkv(self.ln1(x)).split(width if kv == width else (width, kv, kv), dim=-1)  # one graph as before
        q = q.view(b, 1, self.heads, self.head).transpose(1, 2)
        k, v = (t.view(b, 1, self.kv_heads, self.head).transpose(1, 2) for t in (k, v))
        self.k.index_copy_(2, slot, k)
        self.v.index_copy_(2, slot, v)
        grouped = {"enable_gqa": True} if self.kv_heads < self.heads else {}
        attended = F.scaled_dot_product_attention(
            q, self.k, self.v, **grouped
        )  # every cached position precedes the new token
        x = x + self.proj(attended.transpose(1, 2).reshape(b, 1, width))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class DecodeStep(nn.Module):
    """``(batch, 1)`` token ids to ``(batch, 1, vocab)`` logits, one step of decoding against the static cache."""

    def __init__(
        self,
        vocab: int,
        width: int,
        layers: int,
        heads: int,
        batch: int,
        cache_len: int,
        seed: int = 0,
        kv_heads: int | None = None,
    ):
        super().__init__()
        kv_heads = kv_heads or heads
        if width % heads:
            raise WorkloadError(f"--mode decode: a width of {width} does not split into {heads} heads")
        if heads % kv_heads:
            raise WorkloadError(f"--mode decode: {heads} query heads do not group over {kv_heads} key/value heads")
        gen = torch.Generator(torch.get_default_device()).manual_seed(seed)  # where the model is built
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(cache_len, width)
        self.blocks = nn.ModuleList(_Block(width, heads, kv_heads, batch, cache_len, gen) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.register_buffer("slot", torch.tensor([cache_len - 1]))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(self.slot)
        for block in self.blocks:
            x = block(x, self.slot)
        return self.ln(x) @ self.wte.weight.t()


def _size(config: Any, *names: str) -> int:
    for name in names:
        if isinstance(getattr(config, name, None), int):
            return int(getattr(config, name))
    raise WorkloadError(f"--mode decode: the model's config has none of {', '.join(names)}")


def from_config(config: Any, batch: int, cache_len: int, seed: int = 0) -> DecodeStep:
    """A decode step at the sizes of a Transformers config (GPT-2's names, or the common ``hidden_size`` ones), its
    key/value heads ``num_key_value_heads`` where the config sets them."""
    kv_heads = getattr(config, "num_key_value_heads", None)
    return DecodeStep(
        vocab=_size(config, "vocab_size"),
        width=_size(config, "n_embd", "hidden_size", "d_model"),
        layers=_size(config, "n_layer", "num_hidden_layers", "num_layers"),
        heads=_size(config, "n_head", "num_attention_heads", "num_heads"),
        batch=batch,
        cache_len=cache_len,
        seed=seed,
        kv_heads=kv_heads if isinstance(kv_heads, int) and kv_heads > 0 else None,
    )
