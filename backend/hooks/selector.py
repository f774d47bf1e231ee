"""Hook (b): template selection sites, through a subclass of ``select_algorithm.AlgorithmSelectorCache``.

Every site with two or more choices (ATen vs Triton vs CPP GEMM) is offered to the
active :class:`~tuner.backend.context.CompileContext`, which answers with one
choice: a site that reaches Inductor with a single choice is never benchmarked.
"""

from __future__ import annotations

import re
from typing import Any

from tuner.backend import counters, process
from tuner.backend.context import active
from tuner.backend.errors import HookUnavailable
from tuner.core import Kind
from tuner.backend.hooks import splitk, templates
from tuner.keys import task_key

try:
    from torch._inductor import select_algorithm as _sa

    _Base: Any = _sa.AlgorithmSelectorCache
except (ImportError, AttributeError) as e:  # pragma: no cover - depends on the torch build
    _sa, _Base = None, object
    _IMPORT_ERROR: Exception | None = e
else:
    _IMPORT_ERROR = None


def _scalar(v: Any) -> Any:
    try:
        return int(v)
    except (TypeError, ValueError):
        return str(v)


def site_payload(name: str, input_nodes: list[Any]) -> dict[str, Any]:
    """Op name, per-input (device, dtype, sizes, strides, offset) and the float32 matmul precision."""
    import torch

    return {
        "op": name,
        "inputs": [[_scalar(x) for x in _sa.AlgorithmSelectorCache.key_of(n)] for n in input_nodes],
        "fp32_precision": torch.get_float32_matmul_precision(),
    }


def choice_id(choice: Any) -> str:
    """A stable id: the same choice in another process or torch build gets the same id."""
    own = splitk.id_of(choice)
    if own is not None:
        return own
    ann = getattr(choice, "annotations", None) or {}
    ktc = ann.get("ktc") if isinstance(ann, dict) else None
    if ktc is not None:
        try:
            # e.g. "triton::mm:{...params}" or "aten::bias_addmm:{}" (2.11+ annotates ATen choices too)
            return templates.ktc_id(ktc)
        except (AttributeError, TypeError, ValueError):
            pass
    cls = type(choice).__name__
    name = re.sub(r"_\d+$", "", str(getattr(choice, "name", cls)))
    if cls == "ExternKernelCaller":
        return f"aten:{name}"
    if "Cpp" in name or cls.startswith("DataProcessor") or cls.startswith("Cpp"):
        return f"cpp:{name.removeprefix('cpp_')}"
    desc = re.sub(r"\s+", " ", str(getattr(choice, "description", "") or ""))
    return f"{cls}:{name}:{desc}"


def scalars_of(choices: list[Any]) -> dict[str, Any] | None:
    """The op's scalars (addmm's alpha and beta), from the kernel-template annotation Inductor attaches; not
    part of the site key, kept for the lookup-table export."""
    for c in choices:
        ann = getattr(c, "annotations", None) or {}
        ktc = ann.get("ktc") if isinstance(ann, dict) else None
        scalars = getattr(getattr(ktc, "inputs", None), "_scalars", None)
        if isinstance(scalars, dict):
            return {str(k): _scalar(v) for k, v in scalars.items()}
    return None


def default_index(choices: list[Any]) -> int:
    """The choice plain Inductor (no max-autotune) uses: its ATen/extern kernel when it offers one."""
    for i, c in enumerate(choices):
        if splitk.id_of(c) is None and (type(c).__name__ == "ExternKernelCaller" or choice_id(c).startswith("aten:")):
            return i
    return 0


class TunedSelector(_Base):  # type: ignore[misc, valid-type]
    def __init__(self) -> None:
        super().__init__()
        self.add_feedback_saver(self._count_benchmark)

    @staticmethod
    def _count_benchmark(timings: Any, name: str, input_nodes: Any, *args: Any, **kwargs: Any) -> None:
        ctx = active()
        if ctx is not None and timings:
            counters.bump("benchmarks")
            ctx.record_timings(
                site_payload(name, list(input_nodes)), {choice_id(c): float(ms) for c, ms in timings.items()}
            )

    def __call__(self, name, choices, input_nodes, layout, *args, **kwargs):  # type: ignore[no-untyped-def]
        ctx = active()
        # A conv site of a forcing compile may arrive with ATen alone (``TunedChoices`` skips Inductor's Triton
        # conv list there): its forced Triton config is built here, from its id.
        if ctx is not None and (len(choices) > 1 or name == "convolution"):
            choices = self._answer(ctx, name, list(choices), list(input_nodes), layout)
            if len(choices) > 1 and ctx.defers_sites and "return_multi_template" in kwargs:
                # Inductor's deferred selection (a MultiTemplateBuffer, timed by the scheduler): the choices'
                # precompiles start now, in the background, and the rest of the graph is lowered meanwhile; a
                # batch of sites then compiles its choices together, not a site's few at a time.
                kwargs["return_multi_template"] = True
        return super().__call__(name, choices, input_nodes, layout, *args, **kwargs)

    @staticmethod
    def _answer(ctx: Any, name: str, choices: list[Any], input_nodes: list[Any], layout: Any) -> list[Any]:
        try:
            payload = site_payload(name, input_nodes)
        except Exception:  # noqa: BLE001 - a one-choice site's inputs may be unrealized (INDUCTOR_HOOKS): leave it
            return choices
        ids = [choice_id(c) for c in choices]
        missing = [c for c in ctx.site_wants(task_key(Kind.SITE, payload), payload) if c not in ids]
        if missing and name == "convolution":
            ctx.refused.clear()  # this site's refusals alone
            choices = [
                *choices,
                *templates.conv_choices(missing, input_nodes, layout, templates.conv_site(choices, input_nodes)),
            ]
            ids = [choice_id(c) for c in choices]
        if len(choices) > 1:  # a site plain Inductor settles alone (one choice) is not one tuner searches either
            extra = splitk.choices(name, input_nodes, layout, tuple(missing), scalars_of(choices))
            choices, ids = [*choices, *extra], [*ids, *(choice_id(c) for c in extra)]
        if len(choices) < 2 and not missing:  # a wanted choice that could not be built is still a lookup: a miss
            return choices
        picks = [choices[i] for i in ctx.select_site(payload, ids, default_index(choices), scalars_of(choices))]
        if len(picks) > 1:  # the sweep's context times them its own way (``backend/instrument``)
            ctx.benchmarking(payload, picks, [choice_id(c) for c in picks])
        return picks


def install() -> None:
    """Make the process-wide selector ours (idempotent)."""
    if _IMPORT_ERROR is not None or not hasattr(_sa, "_ALGORITHM_SELECTOR_CACHE"):
        raise HookUnavailable(
            "torch._inductor.select_algorithm._ALGORITHM_SELECTOR_CACHE is missing in this torch; "
            "template choices cannot be forced"
        )
    if not isinstance(_sa._ALGORITHM_SELECTOR_CACHE, TunedSelector):
        process.patch("template selector", _sa, "_ALGORITHM_SELECTOR_CACHE", TunedSelector())
