"""Template sites, tuned together in rounds: one compile benchmarks a batch of choices at every site.

Inductor times a site's choices only while it lowers the graph, so one trial per compile would
cost a whole-model compile per trial. Instead each round asks every site's study for up to
``batch`` choices, compiles once with each site offered its default plus those choices, and
reads back Inductor's timings (its own benchmarker, choices precompiled in parallel, timed one
at a time on the device). Each candidate's ratio is against the default *timed in the same
round*. A round that fails (a crash, a compile error, wrong numerics) is split and retried in
halves, so one bad choice costs only itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.db import TaskRecord, TrialRecord
from tuner.keys import config_hash
from tuner.measure.result import Measurement, SiteRound, Status
from tuner.search import Asker, Pending, StudyContext, TaskOutcome, measured_before, open_study, record
from tuner.tasks import TaskSpec

MeasureRound = Callable[[dict[str, tuple[str, ...]], int], SiteRound]
Request = dict[str, tuple[str, ...]]


@dataclass
class _Site:
    task: TaskSpec
    rec: TaskRecord
    asker: Asker
    todo: Pending = field(default_factory=dict)

    @property
    def default(self) -> str:
        return str(self.task.space.default["choice"])


def site_target(searched: int, task: TaskSpec) -> int:
    """A site's trials: its seeds (every choice Inductor offered) plus ``searched`` beyond them."""
    return searched + len(task.space.seeds())


def _request_for(site: _Site, choices: list[str]) -> tuple[str, ...]:
    """The default first, then the candidates; a site needs two choices for Inductor to benchmark it."""
    out = [site.default, *[c for c in choices if c != site.default]]
    if len(out) == 1:
        out.append(next(c for c in site.task.signature["space"]["choices"] if c != site.default))
    return tuple(out)


def measure_split(measure_round: MeasureRound, request: Request, rounds: int) -> dict[str, dict[str, Measurement]]:
    """{site: {choice: measurement}}: the round as asked, or, when it fails, its halves (recursively)."""
    r = measure_round(request, rounds)
    if isinstance(r, Measurement):  # the worker died or timed out
        r = SiteRound(r.status, error=r.error)
    if r.status is Status.OK:
        out: dict[str, dict[str, Measurement]] = {}
        for key, choices in request.items():
            t = r.timings.get(key, {})
            base = t.get(choices[0])
            out[key] = {}
            for c in choices:
                ms = t.get(c)
                if ms is None or base is None:
                    out[key][c] = Measurement(Status.RUNTIME_ERROR, error=f"the site was not benchmarked (timings for {sorted(t)})")
                elif not math.isfinite(ms):
                    out[key][c] = Measurement(Status.RUNTIME_ERROR, error="Inductor's benchmark of this choice failed (inf)")
                else:
                    out[key][c] = Measurement(Status.OK, ms, ms, 0.0, base, compile_s=r.compile_s)
        return out
    # Split: by sites first, then by choices (keeping the default in each half).
    if len(request) > 1:
        keys = list(request)
        half = len(keys) // 2
        return {
            **measure_split(measure_round, {k: request[k] for k in keys[:half]}, rounds),
            **measure_split(measure_round, {k: request[k] for k in keys[half:]}, rounds),
        }
    (key, choices), = request.items()
    if len(choices) > 2:
        cands = list(choices[1:])
        half = len(cands) // 2
        a = measure_split(measure_round, {key: (choices[0], *cands[:half])}, rounds)[key]
        b = measure_split(measure_round, {key: (choices[0], *cands[half:])}, rounds)[key]
        return {key: {**a, **b}}
    failed = Measurement(r.status, error=r.error)
    return {key: {c: failed for c in choices}}


def tune_sites(
    ctx: StudyContext,
    group: list[tuple[TaskSpec, TaskRecord]],
    measure_round: MeasureRound,
    batch: int,
    on_trial: Callable[[TrialRecord], None] = lambda t: None,
) -> tuple[list[TaskOutcome], int]:
    """Tune ``group``'s sites together; store each one's verified winner. Returns (outcomes, measured)."""
    sites: list[_Site] = []
    for task, rec in group:
        seen, invalid = measured_before(ctx, rec)
        study = open_study(ctx, rec, task.space, seen)
        sites.append(_Site(task, rec, Asker(ctx, rec, task.space, study, seen, site_target(ctx.budget.site_target, task), on_trial, invalid=invalid)))
    measured = 0
    while ctx.time_left():
        for s in sites:
            s.todo = s.asker.ask_batch(batch)
        asked = [s for s in sites if s.todo]
        if not asked:
            if not any(s.asker.open() for s in sites):
                break
            continue
        request = {s.task.key: _request_for(s, [c["choice"] for c, _ in s.todo.values()]) for s in asked}
        results = measure_split(measure_round, request, ctx.budget.rounds)
        no_timing = Measurement(Status.RUNTIME_ERROR, error="no timing")
        for s in asked:
            s.asker.tell_batch(s.todo, [results[s.task.key].get(c["choice"]) or no_timing for c, _ in s.todo.values()])
            measured += len(s.todo)
    return _verify(ctx, sites, measure_round), measured


def _verify(ctx: StudyContext, sites: list[_Site], measure_round: MeasureRound) -> list[TaskOutcome]:
    """Re-measure each site's best candidate against its default, all in one round; a winner needs a real gain."""
    best: dict[str, tuple[_Site, TrialRecord | None, TrialRecord | None]] = {}
    for s in sites:
        ok = [t for t in ctx.db.trials(s.rec.id, ctx.device_id) if t.status == Status.OK.value and t.ratio is not None]
        dh = config_hash(s.task.space.default)
        default = next((t for t in reversed(ok) if config_hash(t.config) == dh), None)
        cands = sorted((t for t in ok if config_hash(t.config) != dh), key=lambda t: t.ratio or 9e9)
        top = cands[0] if cands and (cands[0].ratio or 9e9) < 1 - ctx.budget.min_gain else None
        best[s.task.key] = (s, default, top)
    request = {k: _request_for(s, [top.config["choice"]]) for k, (s, _, top) in best.items() if top is not None}
    # Not bounded by the time budget: it is one round, and without it no site could win.
    results = measure_split(measure_round, request, ctx.budget.verify_rounds) if request else {}
    outcomes = []
    for key, (s, default, top) in best.items():
        winner, trial_id = s.task.space.default, default.id if default else None
        default_ms = default.median_ms if default else None
        best_ms, is_default = default_ms, True
        if top is not None and key in results:
            m = results[key].get(top.config["choice"])
            if m is not None:
                rec = record(ctx, s.rec, top.config, m)
                if m.ok and m.ratio is not None and m.ratio < 1 - ctx.budget.min_gain:
                    winner, trial_id, best_ms, default_ms, is_default = top.config, rec.id, m.median_ms, m.baseline_ms, False
                elif m.ok:
                    default_ms = best_ms = m.baseline_ms
        ctx.db.set_winner(s.rec.id, ctx.device_id, trial_id, winner, best_ms, default_ms)
        total = len(ctx.db.trials(s.rec.id, ctx.device_id))
        outcomes.append(TaskOutcome(s.rec, winner, is_default, default_ms, best_ms, 0, total))
    return outcomes
