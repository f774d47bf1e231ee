"""The ``tuner`` command line (Typer + rich)."""

from __future__ import annotations

from typing import Annotated

import typer

from tuner import __version__
from tuner.cli import db_cmd
from tuner.cli.bench_cmd import bench
from tuner.cli.common import friendly
from tuner.cli.explain_cmd import explain
from tuner.cli.report_cmd import report
from tuner.cli.sweep_cmd import sweep

app = typer.Typer(
    help="Autotuning kernel search for torch.compile: sweep a workload once, then torch.compile(model, backend='tuned').",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(sweep)
app.command()(bench)
app.command()(explain)
app.command()(report)
app.add_typer(db_cmd.app, name="db")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tuner {__version__}")
        raise typer.Exit()


@app.callback()
@friendly
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """tuner: better kernels than max-autotune, found once, stored, reused."""
    from tuner.settings import configure_logging

    configure_logging()


def main() -> None:
    from tuner.budget.clock import mark_process_as_command

    mark_process_as_command()  # a time budget counts from the process's start, interpreter and imports included
    _keep_bytecode()
    app()


def _keep_bytecode() -> None:
    """Before torch is imported: bytecode kept for this process and those it starts, where Python writes none."""
    from tuner.bytecode import keep
    from tuner.errors import TunerError
    from tuner.settings import settings

    try:
        keep(settings().cache_dir, settings().bytecode)
    except TunerError:
        return  # a bad setting: the command itself says so
