"""Template sites, tuned together in site batches: one compile benchmarks a batch of choices at every site.

Inductor times a site's choices only while it lowers the graph, so one trial per compile would cost a whole-model
compile per trial. Instead each batch asks every site's study for up to ``batch`` choices, compiles once with each
site offered its default plus those choices, and reads back Inductor's timings (its own benchmarker, choices
precompiled in parallel, timed one at a time on the device). Each candidate's ratio is against the default *timed in
the same compile*. A batch that fails (a crash, a compile error, wrong numerics) is split and retried in halves, so
one bad choice costs only itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tuner.backend.instrument.pruning import PRUNED_NOTE
from tuner.db import TaskRecord, TrialRecord
from tuner.budget import clock
from tuner.budget.clock import CAPTURE, fits
from tuner.sweep.epilogues import Epilogue
from tuner.budget.estimate import PRIOR_MARGIN, SITE_CHOICE
from tuner.core import TaskOutcome, TaskSpec
from tuner.measure.result import Measurement, SiteTimings, Status
from tuner.study.context import StudyContext
from tuner.study.settle import clearly_faster, finalist, settle, settle_measured, settle_won, UNVERIFIED_GAIN
from tuner.study.study import first_to_measure, measured_before, open_study, Pending, Study

Request = dict[str, tuple[str, ...]]  # {site key: choice ids, the default first}
MeasureSites = Callable[[Request], SiteTimings]


@dataclass(frozen=True)
class EpilogueCredit:
    """What a site's epilogue costs where a library call leaves it to a kernel of its own: the kernel that runs it
    where the capture found one (``at``, by site key: ``tuner.sweep.epilogues``), else ``ms``, the step's median
    pointwise kernel (``tuner.sweep.profile.epilogue_ms``; 0: no credit); and where a site won with it is said. With
    ``in_graph``
    (the choices are timed as CUDA-graph replays, the device's time alone) a kernel is counted at its device time in
    the step where profiled (``device_ms``: the median one's), as no launch is left to save (a short kernel's time
    alone is mostly its launch)."""

    ms: float = 0.0
    note: Callable[[str], None] = lambda said: None
    at: Mapping[str, Epilogue] = field(default_factory=dict)
    in_graph: bool = False
    device_ms: float | None = None

    def of(self, key: str) -> tuple[float, str, bool]:
        """(the credit at site ``key``, what it is, whether it is the site's own kernel)."""
        if self.ms <= 0:
            return 0.0, "", False
        found = self.at.get(key)
        if found is not None:
            return found.cost(self.in_graph), f"its kernel {found.kernel}", True
        return (
            (self.device_ms if self.in_graph and self.device_ms else self.ms),
            "the step's median pointwise kernel",
            False,
        )


@dataclass
class _Site:
    task: TaskSpec
    rec: TaskRecord
    asker: Study
    todo: Pending = field(default_factory=dict)

    @property
    def default(self) -> str:
        return str(self.task.space.default["choice"])


def site_target(tuning: StudyContext, task: TaskSpec) -> int:
    """A site's trials: with a learned ranking, its default, the ranked and a few explored; else its seeds (every
    choice Inductor offered) plus the budget's searched trials beyond them."""
    return tuning.target(task.kind, tuning.budget.site_target + len(task.space.seeds()))


def _request_for(site: _Site, choices: list[str]) -> tuple[str, ...]:
    """The default first, then the candidates; a site needs two choices for Inductor to benchmark it."""
    out = [site.default, *[c for c in choices if c != site.default]]
    if len(out) == 1:
        out.append(next(c for c in site.task.signature["space"]["choices"] if c != site.default))
    return tuple(out)


def measure_split(measure: MeasureSites, request: Request) -> dict[str, dict[str, Measurement]]:
    """{site: {choice: measurement}}: the batch as asked, or, when it fails, its halves (recursively). A site the
    compile never met (its forcing lowers the graph without it) is left out."""
    r = measure(request)
    if r.status is Status.OK:
        out: dict[str, dict[str, Measurement]] = {}
        for key, choices in request.items():
            if r.met is not None and key not in r.met:
                continue
            t = r.timings.get(key, {})
            base = t.get(choices[0])
            out[key] = {}
            for c in choices:
                ms = t.get(c)
                if ms is None or base is None:
                    out[key][c] = Measurement(
                        Status.RUNTIME_ERROR, error=f"the site was not benchmarked (timings for {sorted(t)})"
                    )
                elif not math.isfinite(ms):
                    out[key][c] = Measurement(
                        Status.RUNTIME_ERROR, error="Inductor's benchmark of this choice failed (inf)"
                    )
                elif c in r.pruned.get(key, ()):
                    out[key][c] = Measurement(Status.PRUNED, ms, ms, 0.0, base, error=PRUNED_NOTE)
                else:
                    out[key][c] = Measurement(Status.OK, ms, ms, 0.0, base, compile_s=r.compile_s)
        return out
    # Split: by sites first, then by choices (keeping the default in each half).
    if len(request) > 1:
        keys = list(request)
        half = len(keys) // 2
        return {
            **measure_split(measure, {k: request[k] for k in keys[:half]}),
            **measure_split(measure, {k: request[k] for k in keys[half:]}),
        }
    ((key, choices),) = request.items()
    if len(choices) > 2:
        cands = list(choices[1:])
        half = len(cands) // 2
        a = measure_split(measure, {key: (choices[0], *cands[:half])})[key]
        b = measure_split(measure, {key: (choices[0], *cands[half:])})[key]
        return {key: {**a, **b}}
    failed = Measurement(r.status, error=r.error)
    return {key: {c: failed for c in choices}}


PROBE_CHOICES = 2  # candidates per site in a batch whose cost is not known yet: the first batch measures the cost


def _line(tuning: StudyContext) -> tuple[float, float] | None:
    """A site batch's cost line (``Costs.line``), its fixed part anchored on the workload's measured compile."""
    return tuning.costs.line(SITE_CHOICE, fixed_prior=tuning.costs.expect(CAPTURE) or None)


def choices_that_fit(tuning: StudyContext, batch: int, sites: int) -> int:
    """Candidates to ask each of ``sites`` open sites for in the next batch so that the batch ends by the deadline:
    ``batch`` without a deadline, else as many as fit (0: none). A batch costs a compile plus a share per choice
    (``Costs.line``, its prior share in ``Costs.slopes`` until batches of two sizes have run), so a larger batch
    costs less per choice than a small one. Before the first batch, where the device has a prior share, the
    compile is the workload's measured one and the first batch is sized like any other; where it has none, a small
    probe measures the cost first (so the progress's ETA rests on a measured cost, with or without a deadline)."""
    if sites == 0 or not tuning.time_left():
        return 0
    line = _line(tuning)
    if line is None:
        return min(batch, PROBE_CHOICES)
    if tuning.deadline is None:
        return batch
    fixed, per_choice = line
    if not tuning.costs.sized.get(SITE_CHOICE):  # the share is a prior, from another machine: taken at a margin
        per_choice *= PRIOR_MARGIN
    left = tuning.deadline - clock.now() - fixed
    if left <= 0:
        return 0
    if per_choice <= 0:  # all of it compile: a batch costs the same at any size
        return batch
    return max(0, min(batch, int(left / (per_choice * sites)) - 1))  # each site also times its default


def expected_s(tuning: StudyContext, targets: list[int], batch: int) -> float | None:
    """Seconds that tuning sites of trial ``targets`` is expected to take, batched: each batch is a compile and a
    share per choice (:func:`_line`; before the first, the workload's compile, and the device's prior share where it
    has one, else a probe of ``PROBE_CHOICES`` first), as many batches as the largest target needs, then the
    verification's compile (each site's finalist beside its default). None before the workload's compile is known.
    Counted a choice at a time from a prior instead, a CPU sweep's sites expected ~16 s took 30 s: two compiles."""
    compile_s = tuning.costs.expect(CAPTURE)
    if not targets or not compile_s:
        return None if targets else 0.0
    line = _line(tuning)
    fixed, per_choice, probe = (compile_s, 0.0, PROBE_CHOICES) if line is None else (*line, 0)
    batches = (1 if probe else 0) + math.ceil(max(0, max(targets) - probe) / batch)
    return (batches + 1) * fixed + (sum(targets) + 2 * len(targets)) * per_choice


def sites_that_fit(tuning: StudyContext, batch: int, most: int) -> int:
    """How many of ``most`` open sites one batch can hold, each offered a candidate besides its default, by the
    deadline: a group larger than that measures nothing, a smaller one measures its sites (0: not even one)."""
    return next((k for k in range(most, 0, -1) if choices_that_fit(tuning, batch, k) > 0), 0)


def _timed(tuning: StudyContext, measure: MeasureSites, request: Request) -> dict[str, dict[str, Measurement]]:
    """``measure_split`` of the request, its cost per choice observed."""
    t0 = clock.now()
    timed = request
    try:
        out = measure_split(measure, request)
        timed = {k: request[k] for k in out}  # the choices at sites the compile met: the others cost nothing
        return out
    finally:
        tuning.costs.observe_sized(SITE_CHOICE, sum(len(c) for c in timed.values()), clock.now() - t0)


def tune_sites(
    tuning: StudyContext,
    group: list[tuple[TaskSpec, TaskRecord]],
    measure: MeasureSites,
    batch: int,
    on_trial: Callable[[TrialRecord], None] = lambda t: None,
    credit: EpilogueCredit = EpilogueCredit(),
) -> tuple[list[TaskOutcome], int, set[int], set[int]]:
    """Tune ``group``'s sites together; store each one's verified winner. Returns (outcomes, measured, the ids of
    the sites the deadline cut short, the ids of those a batch's compile never met, dropped unmeasured)."""
    sites: list[_Site] = []
    gone: set[int] = set()
    for task, rec in group:
        seen, invalid = measured_before(tuning, rec)
        study, first = open_study(tuning, rec, task.space), first_to_measure(tuning, rec, task.space, seen)
        sites.append(
            _Site(
                task,
                rec,
                Study(
                    tuning,
                    rec,
                    task.space,
                    study,
                    seen,
                    site_target(tuning, task),
                    on_trial,
                    invalid=invalid,
                    queue=first,
                ),
            )
        )
    measured = 0
    while (n := choices_that_fit(tuning, batch, sum(1 for s in sites if s.asker.open()))) > 0:
        for s in sites:
            s.todo = s.asker.ask_batch(n)
        asked = [s for s in sites if s.todo]
        if not asked:
            if not any(s.asker.open() for s in sites):
                break
            continue
        request = {s.task.key: _request_for(s, [c["choice"] for c, _ in s.todo.values()]) for s in asked}
        results = _timed(tuning, measure, request)
        no_timing = Measurement(Status.RUNTIME_ERROR, error="no timing")
        for s in asked:
            if s.task.key not in results:  # not met: the winners forced lower the graphs without it
                s.asker.drop(s.todo)
                gone.add(s.rec.id)
                continue
            s.asker.tell_batch(s.todo, [results[s.task.key].get(c["choice"]) or no_timing for c, _ in s.todo.values()])
            measured += len(s.todo)
    cut = {s.rec.id for s in sites if s.asker.open()}
    return _verify(tuning, [s for s in sites if s.rec.id not in gone], measure, credit), measured, cut, gone


def saves_a_kernel(space: Any, choice: str, ratio: float | None) -> bool:
    """Whether ``choice``, timed alone at ``ratio`` of the site's default, is no slower and takes in the epilogue the
    default leaves to a kernel of its own (``TemplateSpace.saves_epilogue_kernel``): it is then faster in the step."""
    return ratio is not None and ratio <= 1.0 and space.saves_epilogue_kernel(choice)


def with_epilogue(
    space: Any, ok: list[TrialRecord], top: TrialRecord | None, credit_ms: float, own: bool = False
) -> TrialRecord | None:
    """The site's choice that wins once its epilogue is counted, if one does, among its measured trials ``ok`` (``top``:
    its finalist, :func:`finalist`). At a site whose output a pointwise op reads and whose default, a library call,
    leaves that op to a kernel of its own (``credit_ms``), a Triton template takes it in: its fastest measured choice
    that was no slower than the default timed beside it wins where it beats the default plus that kernel by
    ``UNVERIFIED_GAIN``, and no choice that leaves the epilogue is faster counted so. The site's own timing cannot see
    this: on gpt2's decode step (H200) Triton tiles at each layer site timed within 6% of cuBLAS alone, and with all of
    them the step ran 0.451 ms against 0.485 with cuBLAS at three. With ``own`` (the credit is the site's own epilogue
    kernel, timed in the capture, not the step's median one), a choice slower alone may win too, by the same margin
    over the default and that kernel: max-autotune's templates at BERT's FFN took in a 29-us GELU kernel."""
    if credit_ms <= 0:
        return None
    fusing = [
        t
        for t in ok
        if t.baseline_ms
        and (
            saves_a_kernel(space, t.config["choice"], t.ratio)
            or own
            and t.ratio is not None
            and space.saves_epilogue_kernel(t.config["choice"])
        )
    ]
    if not fusing:
        return None
    best = min(fusing, key=lambda t: t.ratio or 9e9)
    if (
        top is not None
        and not space.saves_epilogue_kernel(top.config["choice"])
        and top.median_ms + credit_ms < best.median_ms
    ):
        return None
    return best if best.median_ms <= (1 - UNVERIFIED_GAIN) * (best.baseline_ms + credit_ms) else None


def _verify(
    tuning: StudyContext, sites: list[_Site], measure: MeasureSites, credit: EpilogueCredit = EpilogueCredit()
) -> list[TaskOutcome]:
    """Re-measure each site's best candidate against its default, all in one compile; a winner needs a real gain. A
    finalist that beat its default by ``UNVERIFIED_GAIN`` in its own batch wins on that trial, with no second compile:
    that batch's compile ran it (Inductor takes a site's fastest choice; its numerics were checked), and the gain is
    far past the noise of two timings in one compile (gpt2's decode step on the H200: its vocabulary projection, 103
    us in cuBLAS, 26 in a Triton template, verified by a compile of 12 s)."""
    finals = {s.task.key: (s, *finalist(tuning, s.rec, s.task.space)) for s in sites}
    fused = {
        k: t
        for k, (s, ok, _, top) in finals.items()
        if (t := with_epilogue(s.task.space, ok, top, *_credit(credit, k))) is not None
    }
    outcomes = [_won_with_epilogue(tuning, s, fused[k], credit) for k, (s, *_) in finals.items() if k in fused]
    best = {k: (s, default, top) for k, (s, _, default, top) in finals.items() if k not in fused}
    clear = {k for k, (_, _, top) in best.items() if clearly_faster(top, UNVERIFIED_GAIN)}
    request = {
        k: _request_for(s, [top.config["choice"]])
        for k, (s, _, top) in best.items()
        if top is not None and k not in clear
    }
    # One compile for every site, within the phase's deadline: the phase's share counts it (``SitePhase.compiles``).
    # Run past it, on regnet_y_400mf's 300-s H200 sweep it took 45 s of the fusion and kernel phases' time.
    fixed, per_choice = _line(tuning) or (0.0, 0.0)
    expected = fixed + per_choice * sum(len(c) for c in request.values())
    if request and not fits(tuning.deadline, expected):
        return outcomes + [
            settle_measured(tuning, s.rec, s.task.space, d, top, UNVERIFIED_GAIN) for s, d, top in best.values()
        ]
    results = _timed(tuning, measure, request) if request else {}
    for key, (s, default, top) in best.items():
        if key in clear:
            outcomes.append(settle_measured(tuning, s.rec, s.task.space, default, top, UNVERIFIED_GAIN))
            continue
        m = results.get(key, {}).get(top.config["choice"]) if top is not None else None
        outcomes.append(settle(tuning, s.rec, s.task.space, default, default.median_ms if default else None, top, m))
    return outcomes


def _credit(credit: EpilogueCredit, key: str) -> tuple[float, bool]:
    ms, _, own = credit.of(key)
    return ms, own


def _won_with_epilogue(tuning: StudyContext, site: _Site, trial: TrialRecord, credit: EpilogueCredit) -> TaskOutcome:
    """Store ``trial``'s choice as the site's winner (:func:`with_epilogue`) and say so."""
    ms, what, _ = credit.of(site.task.key)
    credit.note(
        f"{site.task.name}: a Triton template won, {trial.median_ms * 1e3:.1f} us against the library call's "
        f"{trial.baseline_ms * 1e3:.1f} us and its epilogue's kernel (~{ms * 1e3:.1f} us, {what}), which the template takes in"
    )
    return settle_won(tuning, site.rec, trial)
