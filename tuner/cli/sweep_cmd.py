"""``tuner sweep``: tune every kernel decision of one workload on this machine's device."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from tuner.cli.common import (
    BatchOpt, ChannelsLastOpt, DbOption, DeviceOpt, DtypeOpt, FreezingOpt, ImageSizeOpt, InputShapeOpt, ModelOpt, ModeOpt,
    ThreadsOpt, console, db_url, friendly, make_spec,
)


@friendly
def sweep(
    model: ModelOpt,
    device: DeviceOpt = None,
    mode: ModeOpt = "infer",
    batch: BatchOpt = 1,
    dtype: DtypeOpt = "fp32",
    image_size: ImageSizeOpt = 224,
    input_shape: InputShapeOpt = None,
    channels_last: ChannelsLastOpt = False,
    freezing: FreezingOpt = True,
    budget: Annotated[str, typer.Option(help="quick, default or full.")] = "default",
    trials: Annotated[int | None, typer.Option(help="Trials per task (overrides the budget's).", show_default=False)] = None,
    time_budget: Annotated[float | None, typer.Option(help="Seconds for the whole command, capture and checks included: it ends within 1.1 x this + 20 s, keeps every trial measured and leaves the rest resumable.", show_default=False)] = None,
    sampler: Annotated[str, typer.Option(help="Optuna sampler: tpe, random, cmaes, gp or grid.")] = "tpe",
    threads: ThreadsOpt = None,
    seed: Annotated[int, typer.Option(help="Seed for the model, the inputs and the sampler.")] = 0,
    workers: Annotated[int, typer.Option(help="Local worker processes sharing the sweep through the database (CUDA: one per visible GPU).", min=1)] = 1,
    from_similar: Annotated[bool, typer.Option(help="Seed each study with this task's winners from other device models (re-measured here before use).")] = False,
    fusion: Annotated[bool, typer.Option("--fusion/--no-fusion", help="After the kernels, search each graph's fusion grouping (knobs and vetoes of single fusions), measured end to end.")] = True,
    ranking: Annotated[bool, typer.Option("--ranking/--no-ranking", help="Measure first the candidates that a cost model, fit on this database's trials of the same device model, predicts fastest (with too few trials there, the unranked order).")] = True,
    share_gpu: Annotated[bool, typer.Option(help="With --workers on CUDA: let all workers share the visible GPUs' first one.")] = False,
    db: DbOption = None,
) -> None:
    """Capture every graph torch.compile makes for the workload, search each task's configuration
    with Optuna on the real device, and store every trial and the verified winners.

    Rerunning the same command continues where it stopped; Ctrl-C keeps every finished trial.
    Then: torch.compile(model, backend="tuned") forces the winners without benchmarking.
    """
    started = time.monotonic()  # the time budget counts from the command's start, imports and all
    from tuner.budget import make_budget
    from tuner.cli.render import RichProgress, print_report
    from tuner.samplers import SAMPLERS
    from tuner.sweep import SweepOptions, run_sweep

    if sampler not in SAMPLERS:
        raise typer.BadParameter(f"must be one of {', '.join(SAMPLERS)}", param_hint="--sampler")
    spec = make_spec(model, device, mode, batch, dtype, image_size, input_shape, channels_last, freezing, threads, seed)
    opts = SweepOptions(spec, make_budget(budget, trials=trials, time_budget_s=time_budget), db_url(db), sampler, seed, from_similar, workers, fusion, ranking, started)
    from tuner.db import Database

    Database.open(opts.db_url).close()  # fail fast, before any compile, on a bad database
    ends_by = _announce(opts.budget, started)
    if workers > 1:
        from tuner.cli.common import err_console
        from tuner.distributed import combine, run_workers

        console.print(f"[dim]{workers} workers sharing {opts.db_url}[/]")
        with RichProgress(console, ends_by) as progress:
            reports, errors = run_workers(opts, workers, share_gpu=share_gpu, progress=progress)
        for e in errors:
            err_console.print(f"[red]worker failed:[/] {e}", highlight=False)
        if not reports:
            raise typer.Exit(1)
        report = combine(reports)
    else:
        with RichProgress(console, ends_by) as progress:
            report = run_sweep(opts, progress)
    defaults = {o.task.key: _default_of(o) for o in report.outcomes}
    print_report(console, report, defaults)
    if report.interrupted:
        raise typer.Exit(130)


def _announce(budget, started: float) -> float | None:  # type: ignore[no-untyped-def]
    """Say what the budget promises before anything compiles; returns the promised end (monotonic) if any."""
    import datetime as dt

    from tuner.ranking import EXPLORE
    from tuner.sweep import promised_end_s

    if budget.time_budget_s is None:
        console.print(f"[dim]--budget {budget.name}: up to {budget.trials} trials per task ({budget.ranked} ranked + {EXPLORE} explored where a "
                      "learned ranking has data); the expected time follows the capture, and each phase's as it starts[/]")
        return None
    bound = promised_end_s(budget.time_budget_s)
    at = (dt.datetime.now() + dt.timedelta(seconds=bound - (time.monotonic() - started))).strftime("%H:%M:%S")
    console.print(f"[dim]time budget {budget.time_budget_s:.0f} s: this sweep ends by {at} at the latest ({bound:.0f} s)[/]")
    return started + bound


def _default_of(outcome) -> dict:  # type: ignore[no-untyped-def]
    from tuner.search_spaces import space_for

    return space_for(outcome.task.kind, outcome.task.signature).default
