"""Hook (d''): split-K choices at skinny mm/addmm sites on CUDA, as Inductor extern kernels.

A site of few rows (``tuner.search_spaces.splitk``) is offered tuner's own kernel (``tuner.backend.splitk_mm``) beside
Inductor's list: the site's :func:`~tuner.search_spaces.splitk.menu`, and any split-K id the compile wants there (a
forced, transferred or imported one, checked first). Each is an ``ExternKernelChoice`` bound with its config as
keyword arguments, so the compiled code calls ``extern_kernels.tuner_splitk_mm(a, b, BLOCK_M=..., out=buf)`` and
times like cuBLAS's extern call. Only tuner's compiles see these choices: the selector offers them through the active
context. Its two extern kernels are registered by :func:`install` in every CUDA compile, so that code loaded from
Inductor's cache finds them.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from tuner.keys import canonical_json
from tuner.search_spaces import splitk

log = logging.getLogger("tuner.backend")
NAMES = {"mm": "tuner_splitk_mm", "addmm": "tuner_splitk_addmm"}
DTYPES = ("torch.bfloat16", "torch.float16")


@functools.cache
def _externs() -> dict[str, Any]:
    """The two extern kernels, registered once a process; {} (said once, as an error) where this torch or Triton
    cannot make them: sites are then offered Inductor's list alone, and a stored split-K winner is a miss."""
    try:
        from torch._inductor.select_algorithm import ExternKernelChoice

        from tuner.backend.splitk_mm import splitk_addmm, splitk_mm

        return {
            "mm": ExternKernelChoice(splitk_mm, None, name=NAMES["mm"]),
            "addmm": ExternKernelChoice(splitk_addmm, None, name=NAMES["addmm"]),
        }
    except (ImportError, AttributeError, TypeError, AssertionError) as e:
        log.error("split-K choices are unavailable with this torch (Inductor's ExternKernelChoice, or Triton): %s", e)
        return {}


def install() -> None:
    """Register the extern kernels (code loaded from Inductor's cache calls them) and make the current device's tile
    counts now, outside any CUDA-graph pool (``tuner.backend.splitk_mm``)."""
    import torch

    if _externs() and torch.cuda.is_available():
        from tuner.backend.splitk_mm import reserve

        reserve(torch.device("cuda", torch.cuda.current_device()))


def id_of(choice: Any) -> str | None:
    """A bound split-K choice's id (None for any other choice)."""
    if getattr(getattr(choice, "choice", None), "name", None) not in NAMES.values():
        return None
    kwargs = getattr(choice, "kwargs", {}) or {}
    return splitk.PREFIX + canonical_json({k: kwargs[k] for k in splitk.PARAMS})


def _static(size: Any) -> list[int] | None:
    try:
        return [int(s) for s in size]
    except (TypeError, ValueError):  # symbolic: a dynamic shape
        return None


def _shape(name: str, input_nodes: list[Any], layout: Any) -> tuple[int, int, int] | None:
    """(M, N, K) where the site takes split-K choices: a 2-D mm or addmm of bf16/fp16 on CUDA, few rows, static."""
    if name not in NAMES or getattr(getattr(layout, "device", None), "type", None) != "cuda":
        return None
    a, b = input_nodes[-2], input_nodes[-1]
    sa, sb = _static(a.get_size()), _static(b.get_size())
    if sa is None or sb is None or len(sa) != 2 or len(sb) != 2:
        return None
    if {str(a.get_dtype()), str(b.get_dtype()), str(layout.dtype)} - set(DTYPES) or a.get_dtype() != b.get_dtype():
        return None
    m, k, n = sa[0], sa[1], sb[1]
    return (m, n, k) if splitk.applies(m, n, k) else None


def _fits(c: dict[str, int], m: int, n: int, k: int) -> bool:
    """Whether a wanted config's split tiles fit the kernel's tile counts (a menu's always do)."""
    from tuner.backend.splitk_mm import COUNTS

    fits = c["SPLIT_K"] == 1 or -(-m // c["BLOCK_M"]) * -(-n // c["BLOCK_N"]) <= COUNTS
    if not fits:
        log.warning("ignoring a split-K choice of more than %d output tiles at an %dx%dx%d GEMM", COUNTS, m, k, n)
    return fits


@functools.cache
def _sms(index: int) -> int:
    import torch

    return int(torch.cuda.get_device_properties(index).multi_processor_count)


def choices(
    name: str,
    input_nodes: list[Any],
    layout: Any,
    wanted: tuple[str, ...],
    scalars: dict[str, Any] | None,
    sms: int | None = None,
) -> list[Any]:
    """The split-K choices of this site: its menu (for ``sms`` SMs, else its device's), then the wanted split-K ids it
    lacks (none where it takes none)."""
    mnk, extern = _shape(name, input_nodes, layout), _externs().get(name)
    if mnk is None or extern is None:
        return []
    configs = splitk.menu(*mnk, sms or _sms(layout.device.index or 0))
    if sms is None:  # compiling for a real device: its tile counts are made now, outside any CUDA-graph pool
        from tuner.backend.splitk_mm import reserve

        reserve(layout.device)
    for cid in wanted:
        try:
            c = splitk.parse(cid)
        except ValueError as e:
            log.warning("ignoring a split-K choice: %s", e)
            continue
        if c is not None and c not in configs and _fits(c, *mnk):
            configs.append(c)
    extra = (
        {"alpha": (scalars or {}).get("alpha", 1), "beta": (scalars or {}).get("beta", 1)} if name == "addmm" else {}
    )
    return [extern.bind(tuple(input_nodes), layout, **extra, **c) for c in configs]
