"""Fusion groupings of one graph: Inductor's fusion knobs plus vetoes of individual fusions.

(a) Graph-level knobs, named as Inductor's config (a config applies as ``inductor_config.patch``):
``max_fusion_size``, ``aggressive_fusion``, ``epilogue_fusion``, ``prologue_fusion``,
``score_fusion_memory_threshold``, the three ``realize_*_threshold`` (always set explicitly: 2.14
resolves two of them per device when left None), ``split_reductions``, ``loop_ordering_after_fusion``;
on CUDA also ``combo_kernels``, ``triton.tiling_prevents_{pointwise,reduction}_fusion``, ``triton.multi_kernel`` and,
where this Inductor has it, ``triton.enable_pdl`` (programmatic dependent launch on Hopper: a kernel's launch overlaps
the end of the one before; max-autotune leaves it off). ``triton.multi_kernel`` 2 or 3 compiles each reduction whose
row fits 16 times Inductor's bound for a persistent reduction both ways, and runs the looped (2) or the persistent (3)
one: 1, which picks by timing both at the first call, is never offered, as a tuned compile benchmarks nothing.
On an H100 (frozen, CUDA graphs) 3 ran the Qwen2 prefill 0.967x and convnext_tiny 0.993x, 2 convnext_tiny 1.048x.
(b) Per-pair decisions: ``veto.<pair id>`` (true: Inductor may not make that fusion) for the pairs with
the highest scores among those Inductor made while the graph was captured.
(c) Evidence: where the recording saw Inductor refuse template epilogues only because they share no data at the
same index (``unshared_epilogues``), the study first measures the default with ``aggressive_fusion``, which admits
them: each one fused is a kernel launch fewer and an output not written and read back.
(d) ``space_to_depth``, only where the recording counted strided convolutions reading at most 4 channels
(``s2d_convs``, a CNN's or a ViT's stem): each becomes a stride-1 convolution over its input's space-to-depth form
(``backend/hooks/conv_rewrite.py``). It is measured first too, with (c), (f), (g), (h) and (i) where they apply, then
each alone. On the CPU,
``cpp.max_horizontal_fusion_size`` stays in the C++ codegen space (``cpp_graph``), tuned before this.
(e) ``freezing``, only in the tasks of older databases whose graph was compiled frozen (``frozen``): false compiles it
unfrozen, weights as inputs (``backend/hooks/restart.py``), where no other knob of this space applies. The study never
asks for it. It is now a kind of its own (``search_spaces/freezing.py``), decided before the searches; the answers
stored here still apply.
(f) ``cudnn_epilogue``, on CUDA only where the recording counted convolutions followed by a ReLU (a residual add
between them allowed: ``epilogue_convs``): their bias, add and ReLU run in cuDNN's own epilogue instead of a Triton
kernel of their own (``backend/hooks/conv_epilogue.py``). On the H200 (bf16 b32, frozen, CUDA graphs) that ran
resnet50 0.87x and resnext50_32x4d 0.88x, but regnet_y_1_6gf 1.23x: measured, never assumed. Depthwise convolutions
are left to ATen (mnasnet1_0 ran 4.2x slower with them on an H100, level without; mobilenet_v3_large 0.93x).
(g) ``merge_gemms``, only where the recording counted matrix multiplies that read one input through constant weights
(``sibling_gemms``: a frozen transformer's q, k and v projections, its MLP's gate and up): each group becomes one GEMM
over the weights side by side (``backend/hooks/gemm_merge.py``). Measured first too.
(h) ``combo_kernels`` (independent kernels launched as one; max-autotune leaves it off) is measured first too where the
sweep found the step a run of short Triton kernels (``short_kernels``: their launches a step, a decode step's).
(i) ``compute_once``, only where the recording counted costly transcendental values that kernels read broadcast
(``broadcast_values``: a rotary embedding's ``cos`` and ``sin``, read by every layer's q and k): each is stored once
instead of computed again for every element of every kernel that reads it (``backend/hooks/compute_once.py``).
Measured first too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.kinds import GRAPH_HOOK, TaskKind
from tuner.core import Kind
from tuner.search_spaces.base import Bool, Param, Space, choice, with_default
from tuner.search_spaces.freezing import FREEZING  # an older task's knob: false compiles a frozen graph again, unfrozen

FAMILY = Kind.FUSION
MAX_PAIRS = 12
SPACE_TO_DEPTH = "space_to_depth"  # not an Inductor flag: the backend turns it into a post-grad pass
CONV_EPILOGUE = "cudnn_epilogue"  # nor this one (``backend/hooks/conv_epilogue.py``)
MERGE_GEMMS = "merge_gemms"  # nor this one (``backend/hooks/gemm_merge.py``)
COMPUTE_ONCE = "compute_once"  # nor this one (``backend/hooks/compute_once.py``)
ANY_DEVICE = ("cpu", "cuda")


@dataclass(frozen=True)
class RewriteKnob:
    """A graph rewrite as the fusion space offers it: its knob, the devices it is offered on, the recording's count of
    the places it applies to (``seen``: a key of the grouping's context, also the recorded graph's field), the recorded
    graph's field that lists those places where the sweep's gain estimate reads them (``places``) and what the sweep
    says of them (``says``, with ``{n}``). Its pass and its finder are the backend's (``backend/hooks/rewrites.py``);
    what it may gain, the sweep's (``tuner/budget/gain.py``)."""

    knob: str
    seen: str
    says: str
    places: str = ""
    devices: tuple[str, ...] = ANY_DEVICE


# Each rewrite, in the order its pass runs and its knob is offered: the stem rewritten first, so that its new
# convolution's ReLU is fused into cuDNN's epilogue too.
REWRITE_KNOBS = {
    r.knob: r
    for r in (
        RewriteKnob(
            SPACE_TO_DEPTH,
            "s2d_convs",
            "{n} strided convolution(s) read at most 4 channels (rewritten over their input's space-to-depth form)",
            "s2d_shapes",
        ),
        RewriteKnob(
            CONV_EPILOGUE,
            "epilogue_convs",
            "{n} convolution(s) end in a ReLU (cuDNN runs it, with the bias and residual add before it)",
            devices=("cuda",),
        ),
        RewriteKnob(
            MERGE_GEMMS,
            "sibling_gemms",
            "{n} matrix multiplies read one input through frozen weights (each such group as one GEMM)",
            "sibling_dims",
        ),
        RewriteKnob(
            COMPUTE_ONCE,
            "broadcast_values",
            "{n} transcendental value(s) are read broadcast, recomputed in every kernel that reads them "
            "(each stored once)",
            "broadcast_ops",
        ),
    )
}


def rewrite_knobs(device: str) -> list[str]:
    """The rewrite knobs a grouping on ``device`` can be offered (where its graph has what they apply to)."""
    return [knob for knob, r in REWRITE_KNOBS.items() if device in r.devices]


def _offered(rewrite: RewriteKnob, device: Any) -> bool:
    """Whether a grouping on ``device`` (None: an older task's, which named none) can be offered ``rewrite``."""
    return device in rewrite.devices or (device is None and rewrite.devices == ANY_DEVICE)


MULTI_KERNEL = "triton.multi_kernel"
CUDA_ONLY = (
    "combo_kernels",
    "triton.tiling_prevents_pointwise_fusion",
    "triton.tiling_prevents_reduction_fusion",
    "triton.enable_pdl",
    MULTI_KERNEL,
)
# Knobs of a few values: {name: (the values offered, the largest Inductor takes)}; Inductor's own value is offered too
# where it is another (multi_kernel's 1 times both variants at a compile's first call, so it is never offered
# otherwise).
CHOICES = {MULTI_KERNEL: ((0, 2, 3), 3)}
_INTS = (
    "max_fusion_size",
    "score_fusion_memory_threshold",
    "realize_reads_threshold",
    "realize_opcount_threshold",
    "realize_acc_reads_threshold",
)
# Every Inductor flag this space may set: a signature naming any other (from a crafted file, say) has no space.
KNOBS = (
    *_INTS,
    "aggressive_fusion",
    "epilogue_fusion",
    "prologue_fusion",
    "split_reductions",
    "loop_ordering_after_fusion",
    *CUDA_ONLY,
)
MAX_INT_KNOB = 1 << 20


def space(context: dict[str, Any]) -> Space:
    """``context``: ``device``, ``defaults`` (Inductor's values at capture), ``pairs`` (ids of fusions to search)."""
    d = _checked_defaults(dict(context["defaults"]))
    if context.get("device") not in (None, "cpu", "cuda"):
        raise ValueError(f"device {str(context.get('device'))[:20]!r} is neither cpu nor cuda")
    ints = {  # the keys are _INTS
        "max_fusion_size": [8, 16, 32, 64, 128],
        "score_fusion_memory_threshold": [1, 10, 100],
        "realize_reads_threshold": [2, 4, 8],
        "realize_opcount_threshold": [10, 30, 50, 100],
        "realize_acc_reads_threshold": [4, 8, 12, 16],
    }
    params: list[Param] = []
    for name in sorted(d):
        if name in ints:
            params.append(choice(name, with_default(ints[name], int(d[name]))))
        elif name in CUDA_ONLY and context.get("device") == "cpu":
            continue
        elif name in CHOICES:
            params.append(choice(name, with_default(list(CHOICES[name][0]), int(d[name]))))
        else:
            params.append(Bool(name))
    pairs = [str(p) for p in context.get("pairs", [])][:MAX_PAIRS]
    if any(len(p) > 200 for p in pairs):
        raise ValueError("a fusion pair id is longer than 200 characters")
    params += [Bool(f"veto.{p}") for p in pairs]
    default = {**{p.name: d[p.name] for p in params if p.name in d}, **{f"veto.{p}": False for p in pairs}}
    ctx = {"device": context.get("device"), "defaults": d, "pairs": pairs}
    for seen in (
        "unshared_epilogues",
        *(r.seen for r in REWRITE_KNOBS.values()),
        "short_kernels",
        "frozen",
    ):  # absent otherwise: older tasks keep their fingerprint
        if int(context.get(seen) or 0) > 0:
            ctx[seen] = int(context[seen])
    for r in REWRITE_KNOBS.values():
        if r.seen in ctx and _offered(r, context.get("device")):
            params.append(Bool(r.knob))
            default[r.knob] = False
    if "frozen" in ctx:
        params.append(Bool(FREEZING))
        default[FREEZING] = True
    return FusionSpace(FAMILY, tuple(params), default, (), ctx)


def _checked_defaults(defaults: dict[str, Any]) -> dict[str, Any]:
    """The signature's knob values, each a flag this space knows with a value of its type and range."""
    unknown = sorted(str(k)[:60] for k in defaults if k not in KNOBS)
    if unknown:
        raise ValueError(f"unknown Inductor flag(s) {unknown[:5]}")
    for k, v in defaults.items():
        if k in _INTS or k in CHOICES:
            top = CHOICES[k][1] if k in CHOICES else MAX_INT_KNOB
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= top:
                raise ValueError(f"{k}={str(v)[:20]} is not an integer in [0, {top}]")
        elif not isinstance(v, bool):
            raise ValueError(f"{k}={str(v)[:20]} is not true or false")
    return dict(defaults)


@dataclass(frozen=True)
class FusionSpace(Space):
    def suggest(self, trial: Any) -> dict[str, Any]:
        """As :meth:`Space.suggest`, with the graph left frozen where it was: unfrozen, no other knob applies, and the
        whole-workload check measures that choice once for the whole workload."""
        config = {p.name: p.suggest(trial) for p in self.params if p.name != FREEZING}
        return {**config, FREEZING: True} if FREEZING in self.default else config

    def evidence(self) -> list[dict[str, Any]]:
        """The default with ``aggressive_fusion``, where the graph has template epilogues only it would fuse, with each
        rewrite knob offered (where the graph has what it applies to), and with ``combo_kernels`` where the step is a
        run of short kernels: all of them together first, then each alone."""
        levers = (
            [{"aggressive_fusion": True}]
            if self.context.get("unshared_epilogues") and not self.default.get("aggressive_fusion", True)
            else []
        )
        levers += [{knob: True} for knob in REWRITE_KNOBS if knob in self.default]
        if self.context.get("short_kernels") and self.default.get("combo_kernels") is False:
            levers.append({"combo_kernels": True})
        both = [{k: v for lever in levers for k, v in lever.items()}] if len(levers) > 1 else []
        return [{**self.default, **lever} for lever in both + levers]

    def reshapes_sites(self, config: dict[str, Any]) -> bool:
        """Only a rewrite (:data:`REWRITE_KNOBS`) or unfreezing changes which template sites a grouping's graph meets:
        fusion knobs and vetoes group the kernels a lowering made."""
        return any(config.get(k) != self.default[k] for k in (*REWRITE_KNOBS, FREEZING) if k in self.default)


def knobs_of(config: dict[str, Any]) -> dict[str, Any]:
    """The graph-level knobs of a grouping: the part that means the same in another graph (vetoes name its pairs)."""
    return {k: v for k, v in config.items() if not k.startswith("veto.")}


def to_patches(config: dict[str, Any]) -> dict[str, Any]:
    """Inductor config patches, plus ``vetoes``: the pair ids Inductor may not fuse."""
    out = {k: v for k, v in config.items() if not k.startswith("veto.")}
    out["vetoes"] = sorted(k.removeprefix("veto.") for k, v in config.items() if k.startswith("veto.") and v)
    return out


def _patches(key: str, config: dict[str, Any], signature: dict[str, Any]) -> tuple[str, Any]:
    return key, to_patches(config)


KIND = TaskKind(
    FAMILY,
    space,
    GRAPH_HOOK,
    phase="fusion groupings",
    cost="graph",
    group="fusion-grouping",
    answer=_patches,
    beside_base=True,
    label="fusion",
)
