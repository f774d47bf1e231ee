"""The claim scheduler: tuning loops that any number of workers, in any processes on any machines, run against one
database. Each claims a task (or a group of template sites), tunes it, stores its winner and marks it finished, or
releases it when its deadline cuts it short, so a rerun continues it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

from tuner.core import Forcing, TaskOutcome, TaskSpec
from tuner.db import Database
from tuner.db.claims import claim_next, finish, held_by_others, pending, release, renew, worker_id
from tuner.sweep.progress import Progress
from tuner.study.context import StudyContext
from tuner.study.settle import choose_winner
from tuner.study.study import run_study
from tuner.sweep.site_batches import EpilogueCredit, MeasureSites, sites_that_fit, tune_sites
from tuner.sweep.winners import StoredWinners, stored_outcome


# A claim expires this long after its last heartbeat beyond one trial's timeout (a site group's heartbeat comes once a
# site batch, which can take several trials' time). A claim being made right now shows up within CLAIM_IN_FLIGHT_S.
CLAIM_GRACE_S = 300.0
SITE_CLAIM_GRACE_S = 600.0
CLAIM_IN_FLIGHT_S = 5.0
# A site group's claims are renewed at most this often as its trials are stored: once per trial and site cost 7488
# database writes for one batch of 24 sites (34 s of a 70-s replay), against a claim that lives for minutes.
HEARTBEAT_S = 10.0


def wait_for_others(
    db: Database, tuning: StudyContext, ids: list[int], progress: Progress, poll_s: float = 2.0
) -> None:
    """Later phases build on the template winners: wait while other live workers still tune sites (not for sites
    this worker released when the time budget cut them short)."""
    noted = False
    while tuning.time_left() and held_by_others(db, ids, tuning.device_id, worker_id()):
        if not noted:
            progress.note("waiting for other workers to finish the template sites")
            noted = True
        time.sleep(poll_s)


def tune_site_groups(
    tuning: StudyContext,
    sites: list[tuple[TaskSpec, Any]],
    measure: MeasureSites,
    batch: int,
    workers: int,
    progress: Progress,
    credit: EpilogueCredit = EpilogueCredit(),
) -> tuple[dict[int, TaskOutcome], int]:
    """Claim sites a group at a time (a share of them per worker) and tune each group in rounds; ``credit``: what a
    site's epilogue costs where a library call leaves it to a kernel of its own (``site_batches.EpilogueCredit``;
    its ``note`` is ``progress``'s, once a message). A
    group the deadline cut short before it measured anything ends the phase, and a site's win is said once: the
    time a smaller group was sized to had gone on opening its studies, and claiming again in ever smaller groups
    measures nothing."""
    wid = worker_id()
    ttl = tuning.budget.trial_timeout_s + SITE_CLAIM_GRACE_S
    by_id = {r.id: (t, r) for t, r in sites}
    ids = [r.id for _, r in sites]
    size = max(1, -(-len(sites) // max(1, workers)))
    outcomes: dict[int, TaskOutcome] = {}
    measured_total = 0
    dropped: set[int] = set()
    credit = dataclasses.replace(credit, note=_once(progress.note))
    while (fit := sites_that_fit(tuning, batch, size)) > 0:  # as many sites as a batch holds by the deadline
        group = []
        while len(group) < fit:
            tid = claim_next(
                tuning.db,
                [i for i in ids if i not in {r.id for _, r in group} | dropped],
                tuning.device_id,
                wid,
                tuning.budget.site_target,
                ttl,
            )
            if tid is None:
                break
            group.append(by_id[tid])
        if not group:
            break
        progress.task(f"{len(group)} template sites")

        beat = [time.monotonic()]

        def on_trial(t: Any) -> None:
            if time.monotonic() - beat[0] >= HEARTBEAT_S:  # a batch stores hundreds of trials at once
                beat[0] = time.monotonic()
                for _, r in group:
                    renew(tuning.db, r.id, tuning.device_id, wid, ttl)

        got, measured, cut, gone = tune_sites(tuning, group, measure, batch, on_trial, credit)
        dropped |= gone  # released, and never claimed again here: no compile under these winners meets them
        measured_total += measured
        for o in got:
            outcomes[o.task.id] = dataclasses.replace(o, measured=measured)
        for (
            _,
            r,
        ) in (
            group
        ):  # cut short by the time budget, or not met under the winners forced: released, so a rerun continues the site
            if r.id not in cut | gone:
                finish(tuning.db, r.id, tuning.device_id, wid, tuning.budget.site_target)
            else:
                release(tuning.db, r.id, tuning.device_id, wid)
        if cut and not measured:
            break
    return outcomes, measured_total


def _once(note: Callable[[str], None]) -> Callable[[str], None]:
    """``note``, saying each text once."""
    said: set[str] = set()

    def once(text: str) -> None:
        if text not in said:
            said.add(text)
            note(text)

    return once


def _study_to_join(
    tuning: StudyContext, ids: list[int], wid: str, joined: set[int], target: int, wait_s: float = CLAIM_IN_FLIGHT_S
) -> int | None:
    """A task another worker is tuning now, not joined before. A claim being made at this moment (its row locked,
    so ``claim_next`` skipped it, its insert not yet committed) shows up in a moment: while unfinished tasks are
    unaccounted for, look again for up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        held = [t for t in held_by_others(tuning.db, ids, tuning.device_id, wid) if t not in joined]
        if held:
            return held[0]
        rest = [t for t in ids if t not in joined]
        if not rest or not pending(tuning.db, rest, tuning.device_id, target) or time.monotonic() > deadline:
            return None
        time.sleep(0.1)


def tune_tasks(
    tuning: StudyContext,
    tasks: list[TaskSpec],
    records: list[Any],
    measure_for: Callable[[TaskSpec, Forcing], Any],
    winners: StoredWinners,
    progress: Progress | None = None,
    batch: int = 1,
    target: int | None = None,
    join: bool = False,
) -> tuple[list[TaskOutcome], int]:
    """Claim tasks one at a time (in order) until none is left for this worker; tune each and store its winner.
    Any number of these loops, in any processes on any machines, can share one database. Each task is measured with
    the ``winners`` of the tasks before it forced (a winner this loop settles joins them). With ``batch`` > 1,
    ``measure_for`` gives a function of a list of configs. ``join``: with nothing left to claim, add trials to
    the studies other workers are running (each joined once); their holders pick the winners. Meant for
    phases of few, costly tasks (a graph's grouping), where a worker would otherwise wait idle."""
    progress = progress or Progress()
    db, wid = tuning.db, worker_id()
    target = target or tuning.budget.trials
    ttl = tuning.budget.trial_timeout_s + CLAIM_GRACE_S
    by_id = {r.id: (t, r) for t, r in zip(tasks, records)}
    ids = [r.id for r in records]
    outcomes: list[TaskOutcome] = []
    measured_total = 0
    joined: set[int] = set()
    if not tasks:
        return outcomes, measured_total
    kind = tasks[0].space.family  # one phase's tasks: one kind
    if not tuning.fits(kind):
        progress.note(
            f"{tasks[0].name}{f' and {len(tasks) - 1} more' if len(tasks) > 1 else ''}: a trial (~{tuning.trial_s(kind):.0f} s) "
            "would end past this phase's deadline: not measured within this time budget"
        )
    while tuning.fits(kind):
        tid = claim_next(db, ids, tuning.device_id, wid, target, ttl)
        joining = tid is None
        if joining and join:
            tid = _study_to_join(tuning, ids, wid, joined, target)
        if tid is None:
            break
        spec_t, rec = by_id[tid]
        progress.task(spec_t.name + (" (joined)" if joining else ""))
        measure = measure_for(spec_t, winners.forcing(zip(tasks, records), before=tid))

        def on_trial(t: Any, _tid: int = tid, _holder: bool = not joining) -> None:
            if _holder:
                renew(db, _tid, tuning.device_id, wid, ttl)

        measured = run_study(
            tuning, rec, spec_t.space, measure, on_trial=on_trial, batch=batch, target=target, join=joining
        )
        cut = not tuning.fits(spec_t.space.family)  # the next trial would end past the deadline
        measured_total += measured
        if joining:
            joined.add(tid)
            continue
        single = measure if batch == 1 else (lambda c, r, _m=measure: _m([c], r)[0])
        stored = stored_outcome(db, tuning.device_id, rec, spec_t) if measured == 0 else None
        outcomes.append(
            stored or dataclasses.replace(choose_winner(tuning, rec, spec_t.space, single), measured=measured)
        )
        winners.settled(tid, outcomes[-1].winner)
        if not cut:
            finish(db, tid, tuning.device_id, wid, target)
        else:  # cut short by the time budget: a rerun continues the study
            release(db, tid, tuning.device_id, wid)
    return outcomes, measured_total
