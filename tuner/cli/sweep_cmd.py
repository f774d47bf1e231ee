"""``tuner sweep``: tune every kernel decision of one workload on this machine's device."""

from __future__ import annotations

import dataclasses
import time
from typing import Annotated

import typer

from tuner.cli.common import (
    ChannelsLastOpt, compile_bytecode, DbOption, DeviceOpt, DtypeOpt, FreezingOpt, ImageSizeOpt, InputShapeOpt, ModelOpt, ModeOpt,
    SeqLenOpt, ThreadsOpt, console, db_url, friendly, make_spec,
)
from tuner.errors import TunerError


@friendly
def sweep(
    model: ModelOpt,
    device: DeviceOpt = None,
    mode: ModeOpt = "infer",
    batch: Annotated[str, typer.Option("--batch", help="Batch size, or several comma-separated (1,8,32): swept in turn into one database, later ones seeded by the earlier ones' winners, a time budget shared between them.")] = "1",
    dtype: DtypeOpt = "fp32",
    image_size: ImageSizeOpt = 224,
    input_shape: InputShapeOpt = None,
    channels_last: ChannelsLastOpt = False,
    freezing: FreezingOpt = True,
    time_unfrozen: Annotated[bool, typer.Option("--time-unfrozen/--no-time-unfrozen", help="Inference with --freezing: time the workload without freezing against frozen; on the CPU first, and where unfrozen is faster, capture it again unfrozen and tune that (one compile; two where it wins); on CUDA at the end, where time allows. --no-time-unfrozen tunes it frozen.")] = True,
    budget: Annotated[str, typer.Option(help="quick, default or full: trials per task. On a GPU, default with no --time-budget takes one of 0.9 x the time max-autotune is expected to need to compile the workload (at least what the capture and the trial under CUDA graphs take, where the GPU waits for the host, and one batch of template sites too where those do not fit within max-autotune's compile).")] = "default",
    trials: Annotated[int | None, typer.Option(help="Trials per task (overrides the budget's).", show_default=False)] = None,
    time_budget: Annotated[float | None, typer.Option(help="Seconds for the whole command, capture and checks included: it ends within 1.1 x this + 20 s, keeps every trial measured and leaves the rest resumable.", show_default=False)] = None,
    sampler: Annotated[str, typer.Option(help="Optuna sampler: tpe, random, cmaes, gp or grid.")] = "tpe",
    threads: ThreadsOpt = None,
    seq_len: SeqLenOpt = 128,
    seed: Annotated[int, typer.Option(help="Seed for the model, the inputs and the sampler.")] = 0,
    workers: Annotated[int, typer.Option(help="Local worker processes sharing the sweep through the database (CUDA: one per visible GPU; CPU: each on its own cores, --threads each or the cores split evenly).", min=1)] = 1,
    from_similar: Annotated[bool, typer.Option(help="Seed each study with this task's winners from other device models (re-measured here before use).")] = False,
    fusion: Annotated[bool, typer.Option("--fusion/--no-fusion", help="After the kernels, search each graph's fusion grouping (knobs and vetoes of single fusions), measured end to end.")] = True,
    skip: Annotated[str, typer.Option("--skip", help="Searches to leave out, comma-separated; their tasks keep Inductor's choices: template-sites, attention-backends, fusion-groupings, and graph-knobs on a CPU, triton-kernels and cuda-graphs on CUDA.", show_default=False)] = "",
    ranking: Annotated[bool, typer.Option("--ranking/--no-ranking", help="Measure first the candidates that a cost model, fit on this database's trials of the same device model, predicts fastest (with too few trials there, the unranked order).")] = True,
    prior: Annotated[bool, typer.Option("--prior/--no-prior", help="Also learn the ranking from, and seed studies with, the measurements tuner ships for this device model, else for its architecture (the same compute capability; tuner/ranking/priors: the H200, so Hopper GPUs). Never written into --db.")] = True,
    share_gpu: Annotated[bool, typer.Option(help="With --workers on CUDA: let all workers share the visible GPUs' first one.")] = False,
    db: DbOption = None,
) -> None:
    """Capture every graph torch.compile makes for the workload, search each task's configuration
    with Optuna on the real device, and store every trial and the verified winners.

    Rerunning the same command continues where it stopped; Ctrl-C keeps every finished trial.
    Then: torch.compile(model, backend="tuned") forces the winners without benchmarking.
    """
    from tuner.budget.clock import command_started

    started = command_started()  # the time budget counts from the command's start, imports and all
    compile_bytecode()
    from tuner.budget.presets import make_budget
    from tuner.cli.render import print_report
    from tuner.study.samplers import SAMPLERS
    from tuner.sweep.options import SweepOptions

    if sampler not in SAMPLERS:
        raise typer.BadParameter(f"must be one of {', '.join(SAMPLERS)}", param_hint="--sampler")
    sizes = parse_batches(batch)
    the_budget = make_budget(budget, trials=trials, time_budget_s=time_budget)
    first = make_spec(model, device, mode, sizes[0], dtype, image_size, input_shape, channels_last, freezing, threads, seed, seq_len=seq_len)
    left_out = parse_skip(skip, first.device)
    from tuner.sweep.phases import FusionPhase

    fusion, left_out = fusion and FusionPhase.name not in left_out, left_out - {FusionPhase.name}  # the one switch of --no-fusion
    from tuner.db import Database

    Database.open(db_url(db)).close()  # fail fast, before any compile, on a bad database
    ends_by = _announce(the_budget, started)
    for i, size in enumerate(sizes):
        spec = first if len(sizes) == 1 else _at_batch(first, size)
        share = _share(the_budget, started, len(sizes) - i)
        if len(sizes) > 1:
            console.print(f"[bold]batch {size}[/] ({i + 1} of {len(sizes)})" + (f": {share.time_budget_s:.0f} s of the budget" if share.time_budget_s else ""))
        opts = SweepOptions(spec, share, db_url(db), sampler, seed, from_similar, workers, fusion, ranking, prior, time.monotonic() if i else started,
                            time_unfrozen, left_out)
        report = _sweep_one(opts, ends_by, share_gpu)
        defaults = {o.task.key: _default_of(o) for o in report.outcomes}
        print_report(console, report, defaults)
        if report.interrupted:  # Ctrl-C: the batches after this one are not started
            raise typer.Exit(130)


def parse_batches(text: str) -> list[int]:
    """``--batch``: one size or several, comma-separated, each swept once."""
    try:
        sizes = list(dict.fromkeys(int(p) for p in text.split(",") if p.strip()))
    except ValueError:
        raise TunerError(f"--batch must be a whole number or several comma-separated (1,8,32), not {text!r}") from None
    if not sizes or any(n < 1 for n in sizes):
        raise TunerError(f"--batch must be positive, not {text!r}")
    return sizes


def parse_skip(text: str, device: str) -> frozenset[str]:
    """``--skip``: the phases named (``tuner.sweep.phases.skippable``), by the names the phases print."""
    import difflib

    from tuner.sweep.phases import skippable

    names = skippable(device)
    out = set()
    for part in filter(None, (p.strip().lower() for p in text.split(","))):
        if part not in names:
            near = difflib.get_close_matches(part, names, n=1)
            raise TunerError(f"--skip: no search {part!r} on {device}" + (f"; did you mean {near[0]}?" if near else "")
                             + f" (one of {', '.join(names)})")
        out.add(names[part])
    return frozenset(out)


def _at_batch(spec, size: int):  # type: ignore[no-untyped-def]
    """The workload at another batch size (an --input-shape keeps its other dimensions)."""
    return dataclasses.replace(spec, batch=size, input_shape=(size, *spec.input_shape[1:]) if spec.input_shape else None)


def _share(budget, started: float, left: int):  # type: ignore[no-untyped-def]
    """This batch's budget: an equal part of the time still left (what an earlier batch left unused flows on)."""
    if budget.time_budget_s is None:
        return budget
    remaining = max(1.0, budget.time_budget_s - (time.monotonic() - started))
    return dataclasses.replace(budget, time_budget_s=remaining / left)


def _sweep_one(opts, ends_by: float | None, share_gpu: bool):  # type: ignore[no-untyped-def]
    from tuner.cli.render import RichProgress
    from tuner.sweep.driver import run_sweep

    if opts.workers > 1:
        from tuner.cli.common import err_console
        from tuner.sweep.distributed import combine, run_workers

        from tuner.measure.affinity import describe
        from tuner.sweep.distributed import cpu_plan

        console.print(f"[dim]{opts.workers} workers sharing {opts.db_url}[/]")
        if opts.spec.device == "cpu":
            console.print(describe(cpu_plan(opts, opts.workers)), highlight=False)
        with RichProgress(console, ends_by, opts.spec.name) as progress:
            reports, errors = run_workers(opts, opts.workers, share_gpu=share_gpu, progress=progress)
        for e in errors:
            err_console.print(f"[red]worker failed:[/] {e}", highlight=False)
        if not reports:
            raise typer.Exit(1)
        return combine(reports)
    with RichProgress(console, ends_by, opts.spec.name) as progress:
        return run_sweep(opts, progress)


def _announce(budget, started: float) -> float | None:  # type: ignore[no-untyped-def]
    """Say what the budget promises before anything compiles; returns the promised end (monotonic) if any."""
    import datetime as dt

    from tuner.ranking import EXPLORE
    from tuner.budget.shares import promised_end_s

    if budget.time_budget_s is None:
        sized = ("; on a GPU it ends before max-autotune would have compiled the workload, unless its first trials cannot "
                 "(it then says so after the capture)") if budget.as_fast_as_max_autotune else ""
        console.print(f"[dim]--budget {budget.name}: up to {budget.trials} trials per task ({budget.ranked} ranked + {EXPLORE} explored where a "
                      f"learned ranking has data){sized}; the expected time follows the capture, and each phase's as it starts[/]")
        return None
    bound = promised_end_s(budget.time_budget_s)
    at = (dt.datetime.now() + dt.timedelta(seconds=bound - (time.monotonic() - started))).strftime("%H:%M:%S")
    console.print(f"[dim]time budget {budget.time_budget_s:.0f} s: this sweep ends by {at} at the latest ({bound:.0f} s)[/]")
    return started + bound


def _default_of(outcome) -> dict:  # type: ignore[no-untyped-def]
    from tuner.search_spaces import space_for

    return space_for(outcome.task.kind, outcome.task.signature).default
