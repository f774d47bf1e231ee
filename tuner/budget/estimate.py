"""What a phase is expected to cost before it runs: its planned trials times the cost per trial of its kind, as
measured in this sweep so far, else a prior (seconds per trial as measured on our machines, below).

An estimate is labelled as one; the promise is the time budget (``tuner.budget.clock``). The sweep prints the whole
budget's estimate after its capture (``tuner.sweep.phases.forecast``) and each phase's again as the phase is planned,
when its tasks are known for sure (the Triton kernels, say, are captured again with the template winners forced).
"""

from __future__ import annotations

import json
from typing import Any

from tuner.kinds import descriptor
from tuner.search_spaces.template import BEYOND_MAX_AUTOTUNE
from tuner.budget.clock import CAPTURE, Costs

SITE_CHOICE = "site choice"  # the cost kind of one choice offered in a site batch (its share of the compile included)
ALONE = (
    "attention alone"  # the cost kind of timing a workload's attention sites alone (``tuner.sweep.attention_alone``)
)
# Seconds per trial before this sweep has timed one, by device type: medians of measured sweeps. A site choice includes
# its share of the batch's compile; a graph trial is a whole compile and its timing.
PRIORS = {
    "cuda": {SITE_CHOICE: 0.2, "kernel": 0.3, "graph": 25.0, ALONE: 3.0},
    "cpu": {SITE_CHOICE: 2.0, "kernel": 1.0, "graph": 8.0},
}


# Compiles of the whole workload, the unit in which measurements that compile it are expected before they are timed.
# The whole-workload check compiles the winners (the defaults' compile is the capture's, which a live worker keeps).
WHOLE_COMPILES = 1
# The workload unfrozen, timed against the winners kept: its own compile, and the winners' if the worker no longer
# holds them.
UNFROZEN_COMPILES = 2
# A whole-workload trial on CUDA compiles the baseline and the candidate, then times both: the least time worth giving
# a phase of such trials, in compiles of the workload, while the sweep can afford it (``tuner.budget.timebox``).
TRIAL_COMPILES = 2.25
# The first graph trial of a phase compiles its baseline (the winners so far) and its candidate.
FIRST_GRAPH_TRIAL_COMPILES = 2
REPLAY_S = 3.0  # CUDA graphs captured by hand: a replay's expected cost before one is timed (its capture and rounds)


# Seconds a site batch spends per choice beyond its compile, until the sweep has timed batches of two sizes. None is
# known for the CPU: there a batch's first cost is taken as all per choice.
SITE_CHOICE_MARGINAL = {"cuda": 0.13}
# Until a batch here has measured it, that share is taken at this multiple wherever a batch is sized or held by a
# deadline: hosts differ, and a batch sized on too small a share ends past its phase's deadline.
PRIOR_MARGIN = 2.0


def prior_choice_share(device_type: str) -> float:
    """Seconds a choice is taken to add to a site batch before a batch here has measured it (0: no prior)."""
    return SITE_CHOICE_MARGINAL.get(device_type, 0.0) * PRIOR_MARGIN


# Seconds max-autotune's compile spends per choice it benchmarks at the template sites, and per Triton kernel (its
# coordinate-descent tuning and its wider config list, timed at the first call), beyond the default compile. A GEMM
# template choice costs in proportion to its tile (BLOCK_M x BLOCK_N x BLOCK_K x num_stages: the code Triton unrolls
# and compiles): MAX_AUTOTUNE_TILE_S a million of it; any other choice (a convolution template, a library call)
# MAX_AUTOTUNE_CHOICE_S. The same workload's compile varies widely between runs, so no model of the choices alone
# does much better; an estimate under the compile only sizes a budget short.
MAX_AUTOTUNE_CHOICE_S = {"cuda": 0.5}
# Seconds max-autotune spends rendering one listed choice each time a site is lowered (a site met in every layer is
# lowered once a layer), which the capture's default compile no longer spends: it renders only the choices it may
# pick (``backend/hooks/templates.trim``). The figures above were fit to default compiles that rendered every choice.
MAX_AUTOTUNE_RENDER_S = {"cuda": 0.003}
MAX_AUTOTUNE_TILE_S = {"cuda": 0.34}
MAX_AUTOTUNE_KERNEL_S = {"cuda": 2.2}
# ... up to this many kernels: coordinate descent's time stops growing with the count of small kernels.
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


def max_autotune_s(
    device_type: str, default_compile_s: float, choices: list[str], kernels: int = 0, renders: int = 0
) -> float | None:
    """About how long max-autotune would take to compile a workload whose default compile took
    ``default_compile_s``, whose template sites list ``choices`` (:func:`max_autotune_choices`), rendered ``renders``
    times (:func:`max_autotune_renders`; 0 where the default compile rendered them all) and which has ``kernels``
    Triton kernels (counted up to :data:`MAX_AUTOTUNE_KERNELS`); None where not measured."""
    if device_type not in MAX_AUTOTUNE_CHOICE_S or not choices:
        return None
    tuned = min(kernels, MAX_AUTOTUNE_KERNELS.get(device_type, kernels))
    return (
        default_compile_s
        + sum(choice_s(device_type, c) for c in choices)
        + tuned * MAX_AUTOTUNE_KERNEL_S.get(device_type, 0.0)
        + renders * MAX_AUTOTUNE_RENDER_S.get(device_type, 0.0)
    )


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
    compiles the whole workload (a graph trial) never less than the workload's own compile took (a larger workload's
    trial outlasts the prior's)."""
    line = _prior_kind(kind)
    prior = PRIORS.get(device_type, PRIORS["cpu"])[line]
    return costs.expect(kind) or (max(prior, costs.expect(CAPTURE)) if line == "graph" else prior)


def expected_s(costs: Costs, device_type: str, kinds_and_trials: list[tuple[str, int]]) -> float:
    return sum(n * per_trial(costs, device_type, kind) for kind, n in kinds_and_trials)


__all__ = [
    "ALONE",
    "MAX_AUTOTUNE_CHOICE_S",
    "MAX_AUTOTUNE_KERNEL_S",
    "MAX_AUTOTUNE_KERNELS",
    "MAX_AUTOTUNE_RENDER_S",
    "MAX_AUTOTUNE_TILE_S",
    "PRIOR_MARGIN",
    "choice_s",
    "max_autotune_choices",
    "max_autotune_renders",
    "prior_choice_share",
    "PRIORS",
    "SITE_CHOICE",
    "SITE_CHOICE_MARGINAL",
    "expected_s",
    "max_autotune_s",
    "per_trial",
    "tile_m",
]
