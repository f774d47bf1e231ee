"""``tuner report``: a self-contained HTML report of a tuning database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tuner.cli.common import DbOption, console, db_url, friendly, writable_out


@friendly
def report(
    out: Annotated[Path, typer.Option("--out", help="The HTML file to write.")] = Path("report.html"),
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Only this model's workloads.", show_default=False)
    ] = None,
    bench: Annotated[
        list[Path] | None,
        typer.Option("--bench", help="A `tuner bench --out` JSON to include (repeatable).", show_default=False),
    ] = None,
    sweep_cost: Annotated[
        list[Path] | None,
        typer.Option(
            "--sweep-cost",
            help="A sweep-cost JSON (bench/analysis/sweep_cost.py) to include (repeatable).",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Write a self-contained HTML report of the database (no network needed to open it).

    It shows where trials were measured, default vs best per task kind (tables and bar charts), Optuna's history and
    parameter importances of the largest searches, trials by status with reasons, and any bench or sweep-cost
    results given."""
    from tuner.commands.report import write_report

    path = write_report(writable_out(out), url=db_url(db), model=model, bench=bench, sweep_cost=sweep_cost)
    console.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
