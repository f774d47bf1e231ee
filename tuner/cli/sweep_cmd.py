"""``tuner sweep``: tune every kernel decision of one workload on this machine's device."""

from __future__ import annotations

from typing import Annotated

import typer

from tuner.cli.common import DbOption, console, db_url, friendly


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@friendly
def sweep(
    model: Annotated[str, typer.Option("--model", "-m", help="A torchvision model name (resnet50, vit_b_16, …) or pkg.module:factory returning an nn.Module.")],
    device: Annotated[str | None, typer.Option(help="cpu or cuda. Default: cuda when available.", show_default=False)] = None,
    mode: Annotated[str, typer.Option(help="infer (no_grad, with freezing) or train (forward + backward + optimizer step).")] = "infer",
    batch: Annotated[int, typer.Option(help="Batch size.")] = 1,
    dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16.")] = "fp32",
    image_size: Annotated[int, typer.Option(help="Square image size for vision models.")] = 224,
    input_shape: Annotated[str | None, typer.Option(help="Full input shape, batch first, e.g. 8,3,224,224 (overrides --batch/--image-size).", show_default=False)] = None,
    channels_last: Annotated[bool, typer.Option(help="Run the model in channels_last memory format.")] = False,
    freezing: Annotated[bool, typer.Option(help="Inference: freeze weights into constants (what backend='tuned' then needs too).")] = True,
    budget: Annotated[str, typer.Option(help="quick, default or full.")] = "default",
    trials: Annotated[int | None, typer.Option(help="Trials per task (overrides the budget's).", show_default=False)] = None,
    time_budget: Annotated[float | None, typer.Option(help="Stop starting new trials after this many seconds.", show_default=False)] = None,
    sampler: Annotated[str, typer.Option(help="Optuna sampler: tpe, random, cmaes, gp or grid.")] = "tpe",
    threads: Annotated[int | None, typer.Option(help="CPU threads to tune for (default: torch's). Deploy with the same count.", show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Seed for the model, the inputs and the sampler.")] = 0,
    db: DbOption = None,
) -> None:
    """Capture every graph torch.compile makes for the workload, search each task's configuration
    with Optuna on the real device, and store every trial and the verified winners.

    Rerunning the same command continues where it stopped; Ctrl-C keeps every finished trial.
    Then: torch.compile(model, backend="tuned") forces the winners without benchmarking.
    """
    from tuner.budget import make_budget
    from tuner.cli.render import RichProgress, print_report
    from tuner.samplers import SAMPLERS
    from tuner.sweep import SweepOptions, run_sweep
    from tuner.tasks import tasks_from_capture  # noqa: F401  (imported for its torch-free validation path)
    from tuner.workload import WorkloadSpec, parse_shape

    if sampler not in SAMPLERS:
        raise typer.BadParameter(f"must be one of {', '.join(SAMPLERS)}", param_hint="--sampler")
    spec = WorkloadSpec(
        model=model, device=device or _default_device(), mode=mode, batch=batch, dtype=dtype, image_size=image_size,
        input_shape=parse_shape(input_shape) if input_shape else None, channels_last=channels_last,
        freezing=freezing, seed=seed, threads=threads,
    )
    opts = SweepOptions(spec, make_budget(budget, trials=trials, time_budget_s=time_budget), db_url(db), sampler, seed)
    from tuner.db import Database

    Database.open(opts.db_url).close()  # fail fast, before any compile, on a bad database
    with RichProgress(console) as progress:
        report = run_sweep(opts, progress)
    defaults = {o.task.key: _default_of(o) for o in report.outcomes}
    print_report(console, report, defaults)
    if report.interrupted:
        raise typer.Exit(130)


def _default_of(outcome) -> dict:  # type: ignore[no-untyped-def]
    from tuner.search_spaces import space_for

    return space_for(outcome.task.kind, outcome.task.signature).default
