"""Template sites that won slower alone, on the credit of the epilogue kernel they would take in
(``site_batches.with_epilogue``). That credit is an expectation until a compile shows it: the Triton-kernel phase's
capture with every winner forced (the site's epilogue kernel launched fewer times than under Inductor's defaults), or
the whole-workload check, which times the step. A winner the capture finds took nothing in goes back to Inductor's
default at once (:func:`unfused_epilogues`); one that neither confirmed by the end goes back too (:func:`unconfirmed`):
a template slower alone than the library call is kept only for the kernel it is shown to save."""

from __future__ import annotations

from typing import Any

from tuner.core import Kind, TaskSpec
from tuner.db import TaskRecord
from tuner.sweep.epilogues import still_apart
from tuner.sweep.phases.base import SweepContext
from tuner.sweep.winners import revert_outcomes


def credited(sweep: SweepContext, keys: set[str] | None = None) -> list[tuple[TaskSpec, TaskRecord]]:
    """The template sites (of ``keys``, where given) whose winner is slower alone than their default."""
    return [
        (t, r)
        for t, r in sweep.workload.pairs((Kind.SITE,))
        if (keys is None or t.key in keys)
        and (o := sweep.outcomes.get(r.id)) is not None
        and not o.is_default
        and o.best_ms is not None
        and o.default_ms is not None
        and o.best_ms > o.default_ms
    ]


def unfused_epilogues(sweep: SweepContext, captured: list[dict[str, Any]]) -> None:
    """Given the kernels of a capture with every winner forced: a credited site whose epilogue kernel still runs as
    often (``epilogues.still_apart``) took nothing in, and is only slower: back to Inductor's default. The others'
    epilogues are confirmed taken in (``SweepContext.fused_epilogues``). Inductor keeps apart an epilogue that reads
    the template's output through a view, so a credit is never taken on trust."""
    apart = still_apart(sweep.epilogues, sweep.kernels, captured)
    sweep.fused_epilogues |= set(sweep.epilogues) - apart
    _revert(
        sweep, credited(sweep, apart), "which still runs with every winner forced (Inductor kept the epilogue apart)"
    )


def unconfirmed(sweep: SweepContext) -> None:
    """Where the sweep ends with no whole-workload check: each credited site whose epilogue no capture with the winners
    forced found taken in goes back to Inductor's default. What stays was measured faster, alone or in the step."""
    pairs = [(t, r) for t, r in credited(sweep) if t.key not in sweep.fused_epilogues]
    _revert(sweep, pairs, "which no compile with the winners forced has shown taken in")


def _revert(sweep: SweepContext, pairs: list[tuple[TaskSpec, TaskRecord]], why: str) -> None:
    for tid in revert_outcomes(sweep.db, sweep.tuning.device_id, pairs, sweep.outcomes):
        o = sweep.outcomes[tid]
        kernel = e.kernel if (e := sweep.epilogues.get(o.task.key)) else "the step's median pointwise kernel"
        sweep.progress.note(
            f"{o.task.name}: its template won slower alone, on its epilogue kernel's time ({kernel}), {why}: "
            "back to Inductor's default"
        )
