"""Attention for a few queries over a long key/value cache (a decode step's): one kernel, the keys split among programs.

A decode step attends each sequence's one new query to hundreds or thousands of cached keys and values, per head: the
work is reading the cache. cuDNN's and FlashAttention's kernels give each (batch, head) one program that walks all
the keys (gpt2's decode step, 8 sequences x 12 heads: 96 programs on 132 SMs, cuDNN 7.3 us a call where the cache
reads in ~3). Here a program's rows are the queries of the query heads that share one key/value head (one head,
without grouped heads), 16 rows at most; each such block cuts its keys into ``SPLIT`` slices, one program each, so a
key/value head is read once however many query heads group over it. Every program keeps a running softmax over its
slice (its maximum, its sum and its weighted values, in fp32), writes them to a buffer of the call's and counts
itself in; the last to count in merges the slices in split order (the same sum every call), sets the count back to
zero and writes the output, in the layout FlashAttention's and cuDNN's take (``(batch, queries, heads, head size)``
memory, seen as ``(batch, heads, queries, head size)``). The counts are the
split-K kernel's (``tuner.backend.splitk_mm``): calls must not overlap on two streams.

A mask (boolean, or added to the scores) of any shape that broadcasts to ``(batch, heads, queries, keys)`` is read
where it lies. No causal mask: with fewer queries than keys, SDPA's causal mask is aligned to the first key,
not a decode step's. :func:`takes` says which calls it runs; ``tuner::decode_attention`` is the op a graph calls.

It is an option, never a default: a sweep times it at each site beside the fused kernels and keeps the fastest. Where
query heads group over fewer key/value heads, a program takes a group's heads together and reads its keys once; a
step's values are asked for with its keys, and the merge's slices all at once.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import triton
import triton.language as tl

from tuner.backend.splitk_mm import COUNTS, COUNTS_BY_DEVICE, INTERPRETED

BLOCK_Q = 16  # the queries of a program (tl.dot's least rows): a call takes at most this many per (batch, head) ...
MAX_QUERIES = BLOCK_Q  # ... so that one block holds them
BLOCK_N = 64  # keys a loop step reads
# Warps a program: the fastest at the decode sites measured, at the split :func:`split_for` picks.
WARPS = 2
MAX_SPLIT = 16
PROGRAMS_PER_SM = 4
DTYPES = ("bfloat16", "float16")
SCHEMA = "decode_attention(Tensor q, Tensor k, Tensor v, Tensor? mask, float? scale) -> Tensor"


@triton.jit
def tuner_decode_attention(q, k, v, mask, out, ws, stats, counts, sqb, sqh, sqm, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
            smb, smh, smm, smn, sob, soh, som, sod, H, G, R, SQ, SK, D, scale, KEYS_PER_SPLIT,
            HAS_MASK: tl.constexpr, MASK_BOOL: tl.constexpr, SPLIT: tl.constexpr, FENCE: tl.constexpr,
            THREADS: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    bh, qb, s = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    b, hp = bh // (H // R), bh % (H // R)  # a sequence and its hp-th run of R query heads, whose keys are one head's
    hk = hp * R // G
    row = qb * BLOCK_Q + tl.arange(0, BLOCK_Q)  # a row: one query of one of those heads
    h, rq = (hp * R + row // SQ)[:, None], (row % SQ)[:, None]
    rd = tl.arange(0, BLOCK_D)
    q_ok = row < R * SQ
    qt = tl.load(q + b * sqb + h * sqh + rq * sqm + rd[None, :] * sqd, mask=q_ok[:, None] & (rd[None, :] < D), other=0.0)
    m_i = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_Q,), tl.float32)
    acc = tl.zeros((BLOCK_Q, BLOCK_D), tl.float32)
    start = s * KEYS_PER_SPLIT
    end = tl.minimum(start + KEYS_PER_SPLIT, SK)
    for n in range(start, end, BLOCK_N):
        rn = n + tl.arange(0, BLOCK_N)
        n_ok = rn < end
        kt = tl.load(k + b * skb + hk * skh + rn[None, :] * skn + rd[:, None] * skd, mask=n_ok[None, :] & (rd[:, None] < D), other=0.0)
        # the values asked for with the keys: one wait on memory a step, not two
        vt = tl.load(v + b * svb + hk * svh + rn[:, None] * svn + rd[None, :] * svd, mask=n_ok[:, None] & (rd[None, :] < D), other=0.0)
        sc = tl.dot(qt, kt) * scale
        ok = q_ok[:, None] & n_ok[None, :]
        if HAS_MASK:
            mv = tl.load(mask + b * smb + h * smh + rq * smm + rn[None, :] * smn, mask=ok, other=0)
            if MASK_BOOL:
                ok = ok & (mv != 0)
            else:
                sc = sc + mv.to(tl.float32)
        sc = tl.where(ok, sc, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(sc, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet: nothing to scale
        p = tl.exp(sc - m_safe[:, None])
        alpha = tl.exp(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
        m_i = m_new
    o_ok = q_ok[:, None] & (rd[None, :] < D)
    if SPLIT > 1:
        tile = bh * tl.num_programs(1) + qb
        tiles = tl.num_programs(0) * tl.num_programs(1)
        at = (s * tiles + tile) * BLOCK_Q
        tl.store(ws + (at + tl.arange(0, BLOCK_Q))[:, None] * BLOCK_D + rd[None, :], acc)
        tl.store(stats + at + tl.arange(0, BLOCK_Q), m_i)
        tl.store(stats + SPLIT * tiles * BLOCK_Q + at + tl.arange(0, BLOCK_Q), l_i)
        if FENCE:  # each thread's partials are in L2 before its tile's count goes up
            tl.inline_asm_elementwise("fence.acq_rel.gpu; mov.b32 $0, $1;", "=r,r", [tl.arange(0, THREADS)], dtype=tl.int32, is_pure=False, pack=1)
        tl.debug_barrier()
        last = tl.atomic_add(counts + tile, 1, sem="acq_rel") == SPLIT - 1
        row_last = tl.zeros((BLOCK_Q,), dtype=tl.int1) | last
        acc, l_i = _merge(stats, ws, tile, tiles, row_last, rd, SPLIT, BLOCK_Q, BLOCK_D)
        tl.store(counts + tile, 0, mask=last)
        o_ok = o_ok & row_last[:, None]
    o = acc / l_i[:, None]
    tl.store(out + b * sob + h * soh + rq * som + rd[None, :] * sod, o.to(out.dtype.element_ty), mask=o_ok)


@triton.jit
def _merge(stats, ws, tile, tiles, row_last, rd, SPLIT: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_D: tl.constexpr):
    """A tile's slices merged in split order by the last program to finish one: their weighted values and sums,
    rescaled as each slice's maximum comes in, so that every load can be asked for at once (one wait on L2)."""
    l_at = SPLIT * tiles * BLOCK_Q
    m_i = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_Q,), tl.float32)
    acc = tl.zeros((BLOCK_Q, BLOCK_D), tl.float32)
    for j in tl.static_range(SPLIT):
        at_j = (j * tiles + tile) * BLOCK_Q + tl.arange(0, BLOCK_Q)
        m_j = tl.load(stats + at_j, mask=row_last, other=float("-inf"), cache_modifier=".cg")
        l_j = tl.load(stats + l_at + at_j, mask=row_last, other=0.0, cache_modifier=".cg")
        a_j = tl.load(ws + at_j[:, None] * BLOCK_D + rd[None, :], mask=row_last[:, None], other=0.0, cache_modifier=".cg")
        m_new = tl.maximum(m_i, m_j)
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha, w = tl.exp(m_i - m_safe), tl.exp(m_j - m_safe)
        l_i = l_i * alpha + w * l_j
        acc = acc * alpha[:, None] + w[:, None] * a_j
        m_i = m_new
    return acc, l_i


def takes(q: list[int], k: list[int], dtype: str, causal: bool) -> bool:
    """Whether a call with query sizes ``q`` ``(b, h, sq, d)`` and key sizes ``k`` ``(b, hk, sk, d)`` runs here: at most
    :data:`MAX_QUERIES` queries, a head size of 16 to 256, half precision, no causal mask, and query heads a multiple
    of the key heads."""
    if len(q) != 4 or len(k) != 4 or causal or str(dtype).removeprefix("torch.") not in DTYPES:
        return False
    b, h, sq, d = q
    return 1 <= sq <= MAX_QUERIES and 16 <= d <= 256 and k[3] == d and k[0] == b and k[1] >= 1 and h % k[1] == 0 and k[2] >= 1


def tiles_for(b: int, h: int, hk: int, sq: int, grouped: bool = True) -> int:
    """The blocks of rows a call over ``b`` sequences, ``h`` query heads over ``hk`` key/value heads and ``sq`` queries
    cuts its work into (each then split among :func:`split_for`'s programs): rows take a key/value head's query heads
    together where ``grouped``, else one query head each."""
    r = h // hk if grouped else 1
    return b * (h // r) * triton.cdiv(r * sq, BLOCK_Q)


def split_for(tiles: int, keys: int, sms: int, block_n: int = BLOCK_N) -> int:
    """Slices of the keys per (batch, head, query block): enough programs for :data:`PROGRAMS_PER_SM` an SM, each slice
    at least ``block_n`` keys, at most :data:`MAX_SPLIT`."""
    want = max(1, PROGRAMS_PER_SM * sms // max(1, tiles))
    split = 1 << (want.bit_length() - 1)
    return max(1, min(split, MAX_SPLIT, 1 << (max(1, keys // block_n).bit_length() - 1)))


@functools.cache
def _sms(device: Any) -> int:
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count if torch.device(device).type == "cuda" else 8


def output_like(q: Any, v: Any) -> Any:
    """The output: the query's sizes with the values' head size, laid out ``(batch, queries, heads, head size)``."""
    b, h, sq, _ = q.shape
    return q.new_empty((b, sq, h, v.shape[-1])).transpose(1, 2)


def decode_attention(q: Any, k: Any, v: Any, mask: Any = None, scale: float | None = None, *, split: int | None = None,
                     block_n: int = BLOCK_N, warps: int = WARPS, stages: int = 2, grouped: bool = True) -> Any:
    """``softmax(q k^T * scale + mask) v`` for a call :func:`takes`; ``scale`` None: 1/sqrt(head size). ``split``
    (None: :func:`split_for`'s), ``block_n``, ``warps``, ``stages`` and ``grouped`` (a program's rows take the query
    heads of a key/value head together, which then reads once; else one query head each) are for timing other configs
    (``bench/device/decode_attention_sites.py``); a graph's call takes the defaults."""
    import torch

    b, h, sq, d = q.shape
    out = output_like(q, v)
    r = h // k.shape[1] if grouped else 1
    tiles = tiles_for(b, h, k.shape[1], sq, grouped)
    split = min(split or split_for(tiles, k.shape[2], _sms(q.device), block_n), MAX_SPLIT)
    if split > 1 and tiles > COUNTS:
        split = 1
    block_d = max(16, triton.next_power_of_2(d))
    ws = torch.empty(split * tiles * BLOCK_Q * block_d if split > 1 else 1, device=q.device, dtype=torch.float32)
    stats = torch.empty(2 * split * tiles * BLOCK_Q if split > 1 else 1, device=q.device, dtype=torch.float32)
    counts = COUNTS_BY_DEVICE.get(q.device) if split > 1 else stats
    m = mask.expand(b, h, sq, k.shape[2]) if mask is not None else q
    sm = tuple(m.stride()) if mask is not None else (0, 0, 0, 0)
    keys_per_split = triton.cdiv(triton.cdiv(k.shape[2], split), block_n) * block_n
    tuner_decode_attention[(b * (h // r), triton.cdiv(r * sq, BLOCK_Q), split)](
        q, k, v, m, out, ws, stats, counts, *q.stride(), *k.stride(), *v.stride(), *sm, *out.stride(),
        h, h // k.shape[1], r, sq, k.shape[2], d, 1.0 / math.sqrt(d) if scale is None else float(scale), keys_per_split,
        HAS_MASK=mask is not None, MASK_BOOL=mask is not None and mask.dtype == torch.bool, SPLIT=split,
        FENCE=not INTERPRETED, THREADS=32 * warps, BLOCK_Q=BLOCK_Q, BLOCK_N=block_n,
        BLOCK_D=block_d, num_warps=warps, num_stages=stages)
    return out


_LIBS: list[Any] = []


@functools.cache
def op() -> Any:
    """``tuner::decode_attention``, defined once per process (cached code that calls it needs it too); its fake
    kernel gives the output's size and layout."""
    import torch

    lib = torch.library.Library("tuner", "FRAGMENT")
    lib.define(SCHEMA)
    lib.impl("decode_attention", decode_attention, "CompositeExplicitAutograd")
    torch.library.register_fake("tuner::decode_attention", lambda q, k, v, mask, scale: output_like(q, v), lib=lib)
    _LIBS.append(lib)
    return torch.ops.tuner.decode_attention.default
