"""The attention backends chosen site by site, each timed alone: no compile (CUDA).

A whole-workload trial of a backend costs a compile, and budgets sized to max-autotune's compile never reached one
(gpt2's decode step: cuDNN's attention ran ~87 us of its 0.5-ms step, untried). Here every site of a task is rebuilt
from its sizes and its fused backends are timed there, interleaved (``AttentionAlone``,
``backend/instrument/attention_timing``). A task whose sites were all timed is settled by those timings: each site
takes its fastest backend, and that config wins where the task's attention time (each site's time by how many calls
share it) beats the default's by ``UNVERIFIED_GAIN`` and past the timings' spread; else the default stays. Both are
stored as trials, their times the attention's alone. The whole-workload check at the end still times every winner
together. A task with a site that cannot be rebuilt (a mask recorded without its layout) is left to the graph study,
as is the decomposed (math) backend, which Inductor compiles into kernels of its own.

A site the dispatcher runs as math has no time alone to compare with, but its fused backends do: :func:`rank_math`
times them through PyTorch's front end, as the rewrite calls them, so that the graph study's whole-workload trials try
the fastest first and never one the site refused (``AttentionSpace.ranked``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tuner.core import TaskSpec
from tuner.db import TaskRecord
from tuner.measure import AttentionAlone, Measurement, Status
from tuner.search_spaces.attention import DECODE, DECOMPOSED, FAMILY, ranked, rebuildable
from tuner.study.context import record
from tuner.study.settle import UNVERIFIED_GAIN, settle_measured, unverified
from tuner.budget.clock import fits
from tuner.budget.estimate import ALONE, per_trial

# The backends timed alone: fused kernels the site calls as they are (tuner's decode kernel where the site is marked for
# it)
FUSED = ("flash", "efficient", "cudnn", DECODE)
Pair = tuple[TaskSpec, TaskRecord]


def timed_alone(task: TaskSpec, device_type: str) -> bool:
    """Whether ``task``'s sites are all timed alone (an attention task on CUDA, every site rebuildable: a mask only
    where its layout is recorded, and a fused kernel by default). A site the dispatcher runs as math has no time
    alone to compare with: Inductor compiles math attention into kernels of its own, which its eager form does not
    time."""
    sites = task.space.context.get("sites") or []
    return (
        str(task.kind) == FAMILY
        and device_type == "cuda"
        and bool(sites)
        and all(rebuildable(s) and s.get("backend") != DECOMPOSED for s in sites)
    )


def math_sites(task: TaskSpec, device_type: str) -> list[dict[str, Any]]:
    """The sites of ``task`` (an attention task on CUDA) that the dispatcher runs as math and that can be rebuilt."""
    if str(task.kind) != FAMILY or device_type != "cuda":
        return []
    return [s for s in task.space.context.get("sites") or [] if s.get("backend") == DECOMPOSED and rebuildable(s)]


def fastest(task: TaskSpec, timings: dict[str, dict[str, dict[str, Any]]]) -> tuple[dict[str, Any], Measurement] | None:
    """The config giving each site its fastest timed backend, and its attention time against the default's (each site's
    time by its ``count``; spreads summed alike); None where a site's default backend has no time."""
    config, ms, base, spread, base_spread = dict(task.space.default), 0.0, 0.0, 0.0, 0.0
    options = {p.name: p.options for p in task.space.params}  # type: ignore[attr-defined]
    for s in task.space.context["sites"]:
        param, count = f"site.{s['site']}", int(s.get("count", 1))
        timed = {b: t for b, t in (timings.get(s["site"]) or {}).items() if "ms" in t and b in options[param]}
        default = timed.get(config[param])
        if default is None:
            return None
        best = min(timed, key=lambda b: timed[b]["ms"])
        config[param] = best
        ms, spread = ms + count * timed[best]["ms"], spread + count * timed[best]["spread"]
        base, base_spread = base + count * default["ms"], base_spread + count * default["spread"]
    return config, Measurement(Status.OK, ms, ms, spread, base, baseline_spread_ms=base_spread)


def settle_alone(sweep: Any, pairs: list[Pair], deadline: float | None) -> list[Pair]:
    """Settle the tasks of ``pairs`` whose sites are timed alone and have no stored winner, where that fits by
    ``deadline``; the pairs left to the graph study (the others, and all of them where the timing failed)."""
    alone = {r.id for t, r in pairs if timed_alone(t, sweep.device_type)}
    todo = [(t, r) for t, r in pairs if r.id in alone and sweep.db.winner_config(r.id, sweep.tuning.device_id) is None]
    sites = {s["site"]: s for t, _ in todo for s in t.space.context["sites"]}
    if not sites or not fits(deadline, per_trial(sweep.tuning.costs, sweep.device_type, ALONE)):
        return _without(pairs, alone)
    got = _timed(
        sweep,
        sites,
        False,
        f"timing {len(sites)} attention site(s) alone, each backend ({', '.join(FUSED)}) on inputs of its sizes",
        "the graph study measures them",
    )
    if got is None:
        return pairs
    return _without(pairs, {r.id for t, r in todo if _settle(sweep, t, r, got)} | (alone - {r.id for _, r in todo}))


def _timed(
    sweep: Any, sites: dict[str, dict[str, Any]], front_end: bool, said: str, otherwise: str
) -> dict[str, Any] | None:
    """``sites``' fused backends timed alone by the worker ({site id: {backend: timing}}; ``front_end``: as
    :class:`AttentionAlone` calls them), having said ``said``; None where the timing failed, said with why and
    ``otherwise`` (what follows instead)."""
    sweep.progress.note(said)
    with sweep.tuning.costs.timed(ALONE):
        got = sweep.worker.run(AttentionAlone(tuple(sites.values()), FUSED, front_end=front_end))
    if got.status is not Status.OK:
        sweep.progress.note(f"the attention sites could not be timed alone ({got.error}): {otherwise}")
        return None
    return got.timings


def _note_site(sweep: Any, task: TaskSpec, site: dict[str, Any], how: str, timed: dict[str, Any]) -> None:
    """Say what ``site`` of ``task`` timed alone (``how``: what was timed there)."""
    sweep.progress.note(
        f"{task.name}: attention site {site['site'][:8]} {site['shape']} ({site['count']} call(s)) {how}: "
        + _timings_line(timed)
    )


def _without(pairs: list[Pair], ids: set[int]) -> list[Pair]:
    return [(t, r) for t, r in pairs if r.id not in ids]


def _settle(sweep: Any, task: TaskSpec, rec: TaskRecord, timings: dict[str, Any]) -> bool:
    """Store ``task``'s winner from its sites' timings; False where they do not say (a default backend untimed)."""
    found = fastest(task, timings)
    for s in task.space.context["sites"]:
        _note_site(sweep, task, s, "timed alone", timings.get(s["site"]) or {})
    if found is None:
        return False
    config, m = found
    tuning = sweep.tuning
    default = record(
        tuning,
        rec,
        task.space.default,
        Measurement(Status.OK, m.baseline_ms, m.baseline_ms, m.baseline_spread_ms, m.baseline_ms),
    )
    if config == task.space.default:
        outcome = unverified(tuning, rec, task.space, m.baseline_ms)
    else:
        top = record(tuning, rec, config, m)
        outcome = settle_measured(
            tuning, rec, task.space, default, top if m.beats_default(UNVERIFIED_GAIN) else None, UNVERIFIED_GAIN
        )
    sweep.add([outcome])
    return True


def _timings_line(timed: dict[str, dict[str, Any]]) -> str:
    return ", ".join(
        f"{b} {t['ms'] * 1e3:.2f} us" if "ms" in t else f"{b} none ({t['error'][:80]})" for b, t in timed.items()
    )


def rank_math(sweep: Any, pairs: list[Pair], deadline: float | None) -> list[Pair]:
    """``pairs``, each task with sites the dispatcher runs as math (and no stored winner) given its fused backends'
    times alone at them: its study tries the fastest first and never one a site refused. A task whose math sites no
    fused backend took is left out: it stays as Inductor traces it. (BERT-base on the H100: its one trial, of the
    memory-efficient kernel, first in the fixed order, ran the step in 2.78 ms against 5.14; at GPT-2's masked sites of
    the same sizes cuDNN's kernel ran 36 us alone against memory-efficient's 89.)"""
    todo = {
        r.id: m
        for t, r in pairs
        if (m := math_sites(t, sweep.device_type)) and sweep.db.winner_config(r.id, sweep.tuning.device_id) is None
    }
    sites = {s["site"]: s for m in todo.values() for s in m}
    if not sites or not fits(deadline, per_trial(sweep.tuning.costs, sweep.device_type, ALONE)):
        return pairs
    got = _timed(
        sweep,
        sites,
        True,
        f"timing the fused backends ({', '.join(FUSED)}) alone at {len(sites)} attention site(s) run as math, to order their trials",
        "their trials go in the fixed order",
    )
    if got is None:
        return pairs
    return ordered(sweep, pairs, todo, got)


def ordered(
    sweep: Any, pairs: list[Pair], todo: dict[int, list[dict[str, Any]]], timings: dict[str, Any]
) -> list[Pair]:
    """``pairs`` with the spaces of the tasks in ``todo`` ({task id: its math sites}) ranked by ``timings`` (a
    worker's ``AttentionTimings``), and those with nothing left to try without."""
    out = []
    for task, rec in pairs:
        if rec.id not in todo:
            out.append((task, rec))
            continue
        mine = {s["site"]: timings.get(s["site"]) or {} for s in todo[rec.id]}
        for s in todo[rec.id]:
            _note_site(sweep, task, s, "run as math, its fused backends alone", mine[s["site"]])
        space = ranked(task.space, mine)
        if space.evidence():
            out.append((dataclasses.replace(task, space=space), rec))
        else:
            sweep.progress.note(f"{task.name}: no fused backend took its sites run as math: they stay math")
    return out
