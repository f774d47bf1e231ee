"""A split-K matrix multiply for skinny GEMMs: one kernel, its K split among ``SPLIT_K`` programs per output tile.

A GEMM of few rows (a decode step's 8 tokens, a classifier's batch) has few output tiles: cuBLAS and Inductor's
templates give each tile one program that walks the whole of K, so most of the device idles while those programs wait
on memory. Here each tile's K is cut into ``SPLIT_K`` slices, one program each. Every program writes its partial sum
into an fp32 buffer, a slice per split, and counts itself in; the last to count in adds the slices up in split order
(the same sum every call), sets the count back to zero for the next call, adds the bias and writes the output. So it is
one kernel, with no memset or reduction kernel of its own. (Partial sums added atomically into one slice can come out
wrong where a thread holds 8 or more of them, with Triton 3.6.)

The partial sums are the call's own buffer; the tile counts are the process's, per device, made once (at compile
time where the hook knows the device) and kept: calls must not overlap on two streams. :func:`splitk_mm` and
:func:`splitk_addmm` take Inductor's extern-kernel convention (the output as ``out=``); ``tuner.backend.hooks.splitk``
offers them at template sites.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import triton
import triton.language as tl


INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"  # Triton's interpreter (CPU tests) runs no inline PTX


@triton.jit
def _kernel(
    a,
    b,
    bias,
    c,
    ws,
    counts,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    sxm,
    sxn,
    scm,
    scn,
    alpha,
    beta,
    K_PER_SPLIT,
    HAS_BIAS: tl.constexpr,
    SPLIT_K: tl.constexpr,
    FENCE: tl.constexpr,
    THREADS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    pid_m, pid_n, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    k0 = pid_k * K_PER_SPLIT
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(k0, tl.minimum(k0 + K_PER_SPLIT, K), BLOCK_K):
        kk = k + rk
        x = tl.load(a + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        y = tl.load(b + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(x, y)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT_K > 1:
        tiles = tl.num_programs(0) * tl.num_programs(1)
        tile = pid_m * tl.num_programs(1) + pid_n
        offs = tile * (BLOCK_M * BLOCK_N) + tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        tl.store(ws + pid_k * tiles * (BLOCK_M * BLOCK_N) + offs, acc)
        if FENCE:  # each thread's partial is in L2 before its tile's count goes up (a GPU-scope fence, once a thread)
            tl.inline_asm_elementwise(
                "fence.acq_rel.gpu; mov.b32 $0, $1;",
                "=r,r",
                [tl.arange(0, THREADS)],
                dtype=tl.int32,
                is_pure=False,
                pack=1,
            )
        tl.debug_barrier()
        last = tl.atomic_add(counts + tile, 1, sem="acq_rel") == SPLIT_K - 1
        full = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int1) | last
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for s in tl.static_range(SPLIT_K):  # the partials in split order: the same sum every call
            acc += tl.load(ws + s * tiles * (BLOCK_M * BLOCK_N) + offs, mask=full, other=0.0, cache_modifier=".cg")
        tl.store(counts + tile, 0, mask=last)
        mask = mask & full
    acc = acc * alpha
    if HAS_BIAS:
        acc += beta * tl.load(bias + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask, other=0.0).to(tl.float32)
    tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty), mask=mask)


COUNTS = 1 << 16  # output tiles a split-K call may have (a menu's splits have a few hundred at most)


class _Counts:
    """Each device's zeroed int32 tile counts, made once and kept: every call sets the counts it used back to zero,
    and a captured CUDA graph keeps the address. :func:`reserve` is called at compile time, outside any CUDA-graph
    memory pool (a buffer made during a CUDA-graph tree's warm-up would come from its pool, which the tree may
    reset); a call on a device with none makes them then."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_device: dict[Any, Any] = {}

    def get(self, device: Any) -> Any:
        import torch

        device = torch.device(device)
        if device.type == "cuda" and device.index is None:  # a layout's "cuda" and a tensor's "cuda:0" are one device
            device = torch.device("cuda", torch.cuda.current_device())
        have = self._by_device.get(device)
        if have is None:
            with self._lock:
                have = self._by_device.get(device)
                if have is None:
                    have = self._by_device[device] = torch.zeros(COUNTS, device=device, dtype=torch.int32)
        return have


COUNTS_BY_DEVICE = _Counts()


def reserve(device: Any) -> None:
    COUNTS_BY_DEVICE.get(device)


def launch(
    a: Any,
    b: Any,
    bias: Any,
    out: Any,
    *,
    BLOCK_M: int,
    BLOCK_N: int,
    BLOCK_K: int,
    SPLIT_K: int,  # noqa: N803
    num_warps: int,
    num_stages: int,
    alpha: float = 1.0,
    beta: float = 1.0,
) -> Any:
    """``out = alpha * a @ b + beta * bias`` (``bias`` may be None, or broadcast to ``out``); the config's names are
    those of its choice id (``tuner.search_spaces.splitk``)."""
    block_m, block_n, block_k, split_k = BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K
    (m, k), n = a.shape, b.shape[1]
    grid_m, grid_n = triton.cdiv(m, block_m), triton.cdiv(n, block_n)
    per_split = triton.cdiv(triton.cdiv(k, split_k), block_k) * block_k
    ws, counts = (
        (out, out)
        if split_k == 1
        else _split_buffers(a.device, split_k * grid_m * grid_n * block_m * block_n, grid_m * grid_n)
    )
    x = bias.expand(m, n) if bias is not None else out
    sx = (x.stride(0), x.stride(1)) if bias is not None else (0, 0)
    _kernel[(grid_m, grid_n, split_k)](
        a,
        b,
        x,
        out,
        ws,
        counts,
        m,
        n,
        k,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        *sx,
        out.stride(0),
        out.stride(1),
        alpha,
        beta,
        per_split,
        HAS_BIAS=bias is not None,
        SPLIT_K=split_k,
        FENCE=not INTERPRETED,
        THREADS=32 * num_warps,
        BLOCK_M=block_m,
        BLOCK_N=block_n,
        BLOCK_K=block_k,
        num_warps=num_warps,
        num_stages=num_stages,
    )
    return out


def _split_buffers(device: Any, floats: int, tiles: int) -> tuple[Any, Any]:
    """The call's partial sums (its own, as any buffer of the compiled graph: no value carries over) and the device's
    tile counts."""
    import torch

    if tiles > COUNTS:
        raise ValueError(f"a split-K call of {tiles} output tiles (at most {COUNTS})")
    return torch.empty(floats, device=device, dtype=torch.float32), COUNTS_BY_DEVICE.get(device)


def splitk_mm(a: Any, b: Any, *, out: Any, **config: int) -> Any:
    """``mm``'s extern-kernel form: ``out = a @ b``."""
    return launch(a, b, None, out, **config)


def splitk_addmm(bias: Any, a: Any, b: Any, *, out: Any, alpha: float = 1.0, beta: float = 1.0, **config: int) -> Any:
    """``addmm``'s extern-kernel form (Inductor hands it the bias expanded to the output's size)."""
    return launch(a, b, bias, out, alpha=alpha, beta=beta, **config)
