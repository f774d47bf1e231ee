"""How a time budget is split: each phase's share of the time left when it starts, the deadlines (the phases', and
the sweep's own, which the end's verification and whole-workload check may run to), what a sweep may take past its
budget, and the least budget that holds a sweep's first trials."""

from __future__ import annotations

from tuner.budget.clock import CLOSING_S
from tuner.budget.estimate import UNFROZEN_COMPILES, WHOLE_COMPILES
from tuner.budget.names import FUSION, GRAPH_KNOBS, KERNELS, SITES

# Each phase gets this share of the time still left when it starts (what a phase leaves unused flows to the next); the
# last before the whole-workload check gets all of it. Without a share, the first phase could take the whole budget.
PHASE_SHARE = {SITES: 0.4, GRAPH_KNOBS: 0.5, FUSION: 0.7, KERNELS: 0.5}
STUDY_SHARE = 0.5  # a graph study of a kind's own phase (the attention backends)
WHOLE_SHARE = 0.15  # of a time budget, kept for verification and the whole-workload check at the end
# ... grown up to this share to also hold timing the workload unfrozen (frozen inference), which a short budget's
# usual share cannot hold beside the check.
MAX_END_SHARE = 0.35
# A search expected to take at most this long, with no whole-workload trial (the attention sites timed alone), runs
# before the phase a budget was raised to hold, which then takes all the time left: the floor holds both.
CHEAP_S = 5.0
# Candidates per site a floor's site batch holds (besides each site's default): the ranked few a first batch offers
# where the floor leaves it no more time.
FLOOR_CHOICES = 4


def share(name: str, last: bool, lead: bool = False) -> float:
    """The share of the time left that phase ``name`` takes: all of it as the ``last`` search, or as the template
    sites where they ``lead`` (the budget was sized to hold their batch, :func:`floor_s`)."""
    return 1.0 if last or (lead and name == SITES) else PHASE_SHARE.get(name, STUDY_SHARE)


def promised_end_s(budget_s: float) -> float:
    """The most a sweep with a time budget of ``budget_s`` may take: 1.1 x the budget + 20 s (a trial in flight at
    the deadline, the closing writes, the worker's exit)."""
    return 1.1 * budget_s + 20.0


def end_compiles(unfrozen: bool) -> int:
    """What the end's measurements compile: the check's winners, and where ``unfrozen`` is still to be timed (frozen
    inference), the workload unfrozen. The defaults' compile is the capture's, which the worker holds to the end."""
    return WHOLE_COMPILES + (UNFROZEN_COMPILES if unfrozen else 0)


def deadlines(
    budget_s: float | None, t0: float, check_s: float = 0.0, end_s: float = 0.0, keep_end: bool = True
) -> dict[str, float | None]:
    """The phases' deadline (the budget less the share kept for the end) and the sweep's own, which verification and
    the whole-workload check may run to. A share too small to hold the check (``check_s``: its expected cost) would
    go unused: the phases get it. ``end_s``: what the end's measurements cost together (the check and the unfrozen
    arm); the share grows to hold them where that stays within :data:`MAX_END_SHARE` of the budget. ``keep_end`` off
    (a budget raised to hold the first trials alone, :func:`floor_s`): only the closing's time is kept, and the end
    runs where they leave time."""
    if not budget_s:
        return {"deadline": None, "settle_by": None}
    if not keep_end:
        return {"deadline": t0 + budget_s - CLOSING_S, "settle_by": t0 + budget_s}
    kept = WHOLE_SHARE * budget_s
    if kept < end_s <= MAX_END_SHARE * budget_s:
        kept = end_s
    return {"deadline": t0 + budget_s - (kept if kept >= check_s else 0.0), "settle_by": t0 + budget_s}


def first_trials_s(spent_s: float, trials_s: float) -> float:
    """The time budget that holds ``trials_s`` of trials after ``spent_s``, and the closing. Nothing is kept for the end
    of a budget so sized (:func:`deadlines`): the whole-workload check runs where the trials leave time."""
    return spent_s + trials_s + CLOSING_S


def floor_s(
    spent_s: float, graphs_s: float, site_batch_s: float | None, max_autotune_s: float | None, max_autotune_share: float
) -> tuple[float, bool]:
    """(the least time budget that holds a sweep's first trials, whether they include a template-site batch), where the
    workload under CUDA graphs comes first: the time so far, that trial (``graphs_s``) and the closing. CUDA graphs
    alone give what Inductor's reduce-overhead mode gives, and max-autotune also tunes the template sites: where a
    site batch is worth its trial (``site_batch_s``: its expected cost; None: not worth one), the floor holds one,
    even past ``max_autotune_share`` of max-autotune's expected compile, which would otherwise cap the budget."""
    one = first_trials_s(spent_s, graphs_s)
    if site_batch_s is None:
        return one, False
    with_sites = first_trials_s(spent_s, graphs_s + site_batch_s)
    if with_sites <= max_autotune_share * (max_autotune_s or 0.0):
        return one, False
    return with_sites, True
