"""What a phase is expected to cost before it runs: its planned trials times the cost per trial of its kind, as
measured in this sweep so far, else a prior (seconds per trial as measured on our machines, below).

An estimate is labelled as one; the promise is the time budget (``tuner.sweep.clock``). The sweep prints the whole
budget's estimate after its capture (``tuner.sweep.phases.forecast``) and each phase's again as the phase is planned,
when its tasks are known for sure (the Triton kernels, say, are captured again with the template winners forced).
"""

from __future__ import annotations

import json
from typing import Any

from tuner.kinds import descriptor
from tuner.search_spaces.template import BEYOND_MAX_AUTOTUNE
from tuner.sweep.clock import CAPTURE, Costs

SITE_CHOICE = "site choice"  # the cost kind of one choice offered in a site batch (its share of the compile included)
ALONE = "attention alone"  # the cost kind of timing a workload's attention sites alone (``tuner.sweep.attention_alone``)
# Seconds per trial, medians of sweeps on the H200 (torch 2.11, resnet50/squeezenet1_1/vit_b_16, bf16 b32) and on a
# 2-core Xeon (CI, resnet18 b1 64x64): a site choice includes its share of the batch's compile; a graph trial is a
# whole compile and its timing. The H200's site choice: 0.32 s in a batch of 72 generated choices for resnet50
# (bench/device/site_cost.py, with the compile workers' Triton cache shared and site timings deferred), 0.19 s in
# a --budget default sweep whose first batch is sized to its deadline (264 site trials and 48 verified choices in
# 58.5 s; 0.65 s when a site was first probed with 2 choices).
PRIORS = {
    "cuda": {SITE_CHOICE: 0.2, "kernel": 0.3, "graph": 25.0, ALONE: 3.0},
    "cpu": {SITE_CHOICE: 2.0, "kernel": 1.0, "graph": 8.0},
}


# Seconds a site batch spends per choice beyond its compile, until the sweep has timed batches of two sizes: H200,
# torch 2.11, resnet50 bf16 b32, 72 choices in 23.1 s (bench/results/h200/resnet50-site-cost-2026-12-01.json) and a compile
# that benchmarks nothing in 13-19 s (tuner bench's tuned compiles). None measured on the CPU: there a batch's first
# cost is taken as all per choice, as before.
SITE_CHOICE_MARGINAL = {"cuda": 0.13}
# Until a batch here has measured it, that share is taken at this multiple wherever a batch is sized or held by a
# deadline: on an H100 host gpt2's decode batch of 40 choices took 28 s against its 18-s compile, 0.25 s a choice
# against the prior 0.13, and ended 4 s past its phase's deadline
# (bench/results/h100/sweep-hf_gpt2-decode-bf16-b8-s512-epilogue-credit-2026-12-05.log); with renders trimmed, 30
# choices took 15.1 s against a 7.8-s compile, 0.24 s a choice (…-render-trim-2026-12-05-2.log).
PRIOR_MARGIN = 2.0


def prior_choice_share(device_type: str) -> float:
    """Seconds a choice is taken to add to a site batch before a batch here has measured it (0: no prior)."""
    return SITE_CHOICE_MARGINAL.get(device_type, 0.0) * PRIOR_MARGIN


# Seconds max-autotune's compile spends per choice it benchmarks at the template sites, and per Triton kernel (its
# coordinate-descent tuning and its wider config list, timed at the first call), beyond the default compile. A GEMM
# template choice costs in proportion to its tile (BLOCK_M x BLOCK_N x BLOCK_K x num_stages: the code Triton unrolls
# and compiles): MAX_AUTOTUNE_TILE_S a million of it; any other choice (a convolution template, a library call)
# MAX_AUTOTUNE_CHOICE_S. H200, torch 2.11, bf16: gpt2's decode step (tiles at 8 rows, a mean of 0.31 M) spent 0.10 s a
# choice, the Qwen2 prefill (1.58 M) 0.81-0.89 s, vit_b_32 (1.54 M) 0.31-0.67 s over five runs, resnet50 and
# resnext50_32x4d (convolution templates) 0.48-0.60 s. Fit on eight benches' compiles, these two figures put each of
# them within -27%..+27% of its estimate (in-sample; one flat 0.5 s a choice: -30%..+86%;
# bench/analysis/max_autotune_estimate.py). The same workload's compile varies by up to 50% between runs (vit_b_32:
# 84-127 s), so no model of the choices alone does much better. Where the rest goes, by Inductor's own timers (H100,
# bench/results/h100/compile-regions-*-2026-12-06*.json): each distinct site is autotuned once, not once per layer;
# a Qwen2 prefill site took 19.1 s (0.94-1.03 s a listed choice against these figures' 0.53) and a vit_b_32 site 13.9 s
# (0.69 s), both listing the same 22 choices; the kernel term (2.1-2.2 s a kernel) and the default compile matched.
# That per-choice cost, which no recorded feature of the sites explains, is what an LLM prefill's estimate misses
# (-24% to -38%); an estimate under the compile only sizes a budget short.
MAX_AUTOTUNE_CHOICE_S = {"cuda": 0.5}
# Seconds max-autotune spends rendering one listed choice each time a site is lowered (a site met in every layer is
# lowered once a layer), which the capture's default compile no longer spends: it renders only the choices it may
# pick (``backend/hooks/templates.trim``). H100, torch 2.11, gpt2's decode step: its recording compile rendered 1225
# choices in 9.5 s (median of 3) and 98 in 6.1 s (bench/results/h100/render-trim-hf_gpt2-decode-2026-12-05.json);
# vit_b_32's 1381 in 15.8 s and 110 in 12.7 s (render-trim-vit_b_32-2026-12-05.json).
# The figures above were fit to default compiles that rendered every choice.
MAX_AUTOTUNE_RENDER_S = {"cuda": 0.003}
MAX_AUTOTUNE_TILE_S = {"cuda": 0.34}
MAX_AUTOTUNE_KERNEL_S = {"cuda": 2.2}
# ... up to this many kernels: coordinate descent, timed by Inductor's own timers, took 28.2-34.0 s for the Qwen2
# prefill's 16 kernels, 27.0-28.7 s for vit_b_32's 13 and 29.2 s for mobilenet_v3_large's 46 small ones (0.63 s a
# kernel; H100, bench/results/h100/compile-regions-*-2026-12-06*.json, mobilenet_v3_large-bf16-b32-120-2026-12-06.json).
# Counted per kernel, mobilenet_v3_large's estimate was 466 s against a 357-s compile (+31%, and a sweep sized at 0.9x
# it would outlast the compile); held at 16 kernels, 402 s (+13%). The cap was chosen after that run: the in-sample
# benches change only past 16 kernels (resnext50_32x4d -15% -> -16%, convnext_tiny +1% -> -3%).
MAX_AUTOTUNE_KERNELS = {"cuda": 16}


def max_autotune_choices(sites: list[dict[str, Any]]) -> list[str]:
    """The choices max-autotune would benchmark at these recorded sites: those of templates it offers."""
    return [str(c) for s in sites for c in s["choices"] if not str(c).startswith(BEYOND_MAX_AUTOTUNE)]


def max_autotune_renders(sites: list[dict[str, Any]]) -> int:
    """How many choices max-autotune renders at these recorded sites: each site's listed choices, each time it is met."""
    return sum(int(s.get("count") or 1) * len(max_autotune_choices([s])) for s in sites)


def tile_m(choice: str) -> float | None:
    """A GEMM template choice's tile in millions: BLOCK_M x BLOCK_N x BLOCK_K x num_stages; None for a choice that
    names no such blocks (a convolution template, a library call)."""
    _, brace, config = choice.partition(":{")
    try:
        c = json.loads("{" + config) if brace else {}
        return int(c["BLOCK_M"]) * int(c["BLOCK_N"]) * int(c["BLOCK_K"]) * max(1, int(c.get("num_stages") or 1)) / 1e6
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def choice_s(device_type: str, choice: str) -> float:
    """What one listed choice adds to max-autotune's compile on ``device_type``: by its tile where it names a GEMM
    template's blocks, else a flat figure."""
    flat, per_tile, tile = MAX_AUTOTUNE_CHOICE_S[device_type], MAX_AUTOTUNE_TILE_S.get(device_type), tile_m(choice)
    return per_tile * tile if per_tile is not None and tile is not None else flat


def max_autotune_s(device_type: str, default_compile_s: float, choices: list[str], kernels: int = 0, renders: int = 0) -> float | None:
    """About how long max-autotune would take to compile a workload whose default compile took
    ``default_compile_s``, whose template sites list ``choices`` (:func:`max_autotune_choices`), rendered ``renders``
    times (:func:`max_autotune_renders`; 0 where the default compile rendered them all) and which has ``kernels``
    Triton kernels (counted up to :data:`MAX_AUTOTUNE_KERNELS`); None where not measured."""
    if device_type not in MAX_AUTOTUNE_CHOICE_S or not choices:
        return None
    tuned = min(kernels, MAX_AUTOTUNE_KERNELS.get(device_type, kernels))
    return (default_compile_s + sum(choice_s(device_type, c) for c in choices) + tuned * MAX_AUTOTUNE_KERNEL_S.get(device_type, 0.0)
            + renders * MAX_AUTOTUNE_RENDER_S.get(device_type, 0.0))


def _prior_kind(kind: str) -> str:
    """The prior line of a cost kind: a task kind's own (its descriptor's ``cost``), else a whole compile's."""
    if kind in (SITE_CHOICE, ALONE):
        return kind
    try:
        return descriptor(kind).cost
    except KeyError:
        return "graph"


def per_trial(costs: Costs, device_type: str, kind: str) -> float:
    """Seconds one trial of ``kind`` is expected to take: this sweep's recent ones, else the prior; a trial that
    compiles the whole workload (a graph trial) never less than the workload's own compile took. On the CPU the prior
    is resnet18's 8 s: shufflenet_v2_x0_5's training step, whose compile took 66.7 s, was expected at 8 s a trial."""
    line = _prior_kind(kind)
    prior = PRIORS.get(device_type, PRIORS["cpu"])[line]
    return costs.expect(kind) or (max(prior, costs.expect(CAPTURE)) if line == "graph" else prior)


def expected_s(costs: Costs, device_type: str, kinds_and_trials: list[tuple[str, int]]) -> float:
    return sum(n * per_trial(costs, device_type, kind) for kind, n in kinds_and_trials)


__all__ = ["ALONE", "MAX_AUTOTUNE_CHOICE_S", "MAX_AUTOTUNE_KERNEL_S", "MAX_AUTOTUNE_KERNELS", "MAX_AUTOTUNE_RENDER_S", "MAX_AUTOTUNE_TILE_S", "PRIOR_MARGIN", "choice_s",
           "max_autotune_choices", "max_autotune_renders", "prior_choice_share", "PRIORS", "SITE_CHOICE", "SITE_CHOICE_MARGINAL", "expected_s", "max_autotune_s", "per_trial", "tile_m"]
