"""``tuner db …``: what the database holds, and schema upgrades."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tuner.cli.common import (
    BatchOpt,
    ChannelsLastOpt,
    DbOption,
    DeviceOpt,
    DtypeOpt,
    FreezingOpt,
    ImageSizeOpt,
    InputShapeOpt,
    ModeOpt,
    SeqLenOpt,
    ThreadsOpt,
    console,
    db_url,
    default_device,
    err_console,
    friendly,
    make_spec,
    shown,
)

app = typer.Typer(help="Inspect and maintain the tuning database.", no_args_is_help=True)


@app.command()
@friendly
def stats(
    db: DbOption = None, as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False
) -> None:
    """Count tasks, trials (by status), winners, devices and environments."""
    from tuner.db import Database

    database = Database.open(db_url(db), create=False, read_only=True)
    try:
        s = database.stats()
    finally:
        database.close()
    if as_json:
        typer.echo(json.dumps(s, indent=2, sort_keys=True))
        return
    t = Table(title=f"tuning database {shown(s['url'])}", show_header=False)
    for k in ("tasks", "trials", "winners", "devices", "environments"):
        t.add_row(k, str(s[k]))
    for k, v in sorted(s["trials_by_status"].items()):
        t.add_row(f"  trials {shown(k)}", str(v))
    for k, v in sorted(s["tasks_by_kind"].items()):
        t.add_row(f"  tasks {shown(k)}", str(v))
    console.print(t)


@app.command()
@friendly
def show(
    db: DbOption = None, top: Annotated[int, typer.Option("--top", min=1, help="How many winners to list.")] = 20
) -> None:
    """List the winners with the largest speedups over Inductor's defaults, each with the spread of its timing: the
    winning trial's interquartile range, or where wider, how far the default's time moved between that task's
    trials (marked "drift": what a re-measurement on this machine can differ by)."""
    from tuner.db import Database

    database = Database.open(db_url(db), create=False, read_only=True)
    try:
        rows = database.top_winners(top)
    finally:
        database.close()
    from tuner.cli.render import config_diff
    from tuner.search_spaces import InvalidConfig, space_for

    t = Table(title=f"top {len(rows)} winners")
    for col in (
        "task",
        "kind",
        "device",
        "default ms",
        "tuned ms",
        "spread ms",
        "speedup",
        "winner (changes from the default)",
    ):
        t.add_column(col, overflow="fold")
    for r in rows:
        fmt = lambda v: f"{v:.4g}" if v else "-"  # noqa: E731
        try:
            change = config_diff(r["config"], space_for(r["kind"], r["signature"] or {}).default)
        except InvalidConfig:
            change = json.dumps(r["config"], sort_keys=True)
        spread = (
            "-"
            if r["spread_ms"] is None
            else f"{r['spread_ms']:.2g}" + (" drift" if r["spread_ms"] != r["iqr_ms"] else "")
        )
        t.add_row(
            shown(r["task"]),
            shown(r["kind"]),
            shown(r["device"]),
            fmt(r["baseline_ms"]),
            fmt(r["median_ms"]),
            spread,
            f"{r['speedup']:.3f}x" if r["speedup"] else "-",
            shown(change),
        )
    console.print(t)


@app.command()
@friendly
def check(
    db: DbOption = None,
    drop: Annotated[
        bool, typer.Option("--drop", help="Delete the rows listed (a task with its trials and winners).")
    ] = False,
) -> None:
    """List the rows whose JSON cannot be read (hand-edited or damaged cells; every command skips them), and with
    --drop delete them. Without --drop the database is only read."""
    from tuner.db import Database
    from tuner.db.check import drop as drop_rows, unreadable_rows

    database = Database.open(db_url(db), create=False, read_only=not drop)
    try:
        rows = unreadable_rows(database)
        if drop and rows:
            drop_rows(database, rows)
    finally:
        database.close()
    if not rows:
        console.print("every row is readable")
        return
    t = Table(title=f"{len(rows)} unreadable row(s)")
    for col in ("table", "id", "column", "row", "cell"):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r.table, str(r.id), r.column, shown(r.label), shown(r.raw[:60]))
    console.print(t)
    console.print(f"dropped {len(rows)} row(s)" if drop else "`tuner db check --drop` deletes them")


@app.command()
@friendly
def upgrade(db: DbOption = None) -> None:
    """Upgrade the database's schema to this tuner's revision (creating it if empty)."""
    from sqlalchemy.exc import SQLAlchemyError

    from tuner.db import migrate
    from tuner.db.engine import _first_line, _safe, check_schema, make_engine, schema_lock
    from tuner.errors import SchemaError, StorageError

    url = db_url(db)
    engine = make_engine(url)
    try:
        with schema_lock(engine, url):
            try:
                before = migrate.current_revision(engine)
                if before is not None and before not in migrate.known_revisions():
                    raise SchemaError(
                        f"database is at schema revision {before}, written by a newer tuner; upgrade tuner instead"
                    )
                migrate.upgrade(engine)
            except SQLAlchemyError as e:
                raise StorageError(f"cannot open database {_safe(url)}: {_first_line(e)}") from None
        check_schema(engine, url, create=False)
        console.print(f"database at schema revision {migrate.head_revision()} (was {before or 'empty'})")
    finally:
        engine.dispose()


@app.command("export")
@friendly
def export_cmd(
    file: Annotated[
        Path, typer.Argument(help="Where to write: JSON Lines, gzip-compressed when the name ends in .gz.")
    ],
    db: DbOption = None,
    device: Annotated[
        str | None, typer.Option(help="Only this device (name substring or fingerprint).", show_default=False)
    ] = None,
    model: Annotated[str | None, typer.Option(help="Only tasks of this model's sweeps.", show_default=False)] = None,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            help="tuner (JSON Lines, for `tuner db import`) or inductor-lut (the CUDA mm-family winners as "
            "Inductor's own lookup-table JSON, for torch._inductor.config.lookup_table.table).",
        ),
    ] = "tuner",
) -> None:
    """Write trials and winners to a portable file (a header line, then one JSON record per line),
    or with --format inductor-lut the GEMM template winners as Inductor's lookup table."""
    from tuner.db import Database

    if format not in ("tuner", "inductor-lut"):
        raise typer.BadParameter("must be tuner or inductor-lut", param_hint="--format")
    database = Database.open(db_url(db), create=False, read_only=True)
    try:
        if format == "inductor-lut":
            _export_lut(database, file, device, model)
            return
        from tuner.db.export import export_records, write_export

        counts = write_export(export_records(database, device=device, model=model), file)
    finally:
        database.close()
    console.print(f"wrote {file}: " + (", ".join(f"{k}={v}" for k, v in counts.items()) or "nothing matched"))


def _export_lut(database: Any, file: Path, device: str | None, model: str | None) -> None:
    from tuner.db.lut import export_lut
    from tuner.errors import TunerError

    if model is not None:
        raise typer.BadParameter("--model does not apply to --format inductor-lut (keys are shapes, not models)")
    try:
        table, notes = export_lut(database, device)
    except ValueError as e:
        raise TunerError(str(e)) from None
    file.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    for n in notes:
        console.print(f"[yellow]note:[/] {n}")
    console.print(f"wrote {file}: {len(table)} GEMM site(s) in Inductor's lookup-table format")


@app.command("import")
@friendly
def import_cmd(
    file: Annotated[Path, typer.Argument(help="A file written by `tuner db export`.")],
    db: DbOption = None,
) -> None:
    """Validate every line and config of FILE, then add what is new, all or nothing. Importing twice changes nothing.

    A task this database holds keeps its own signature (the file's is ignored) and the file's configs are checked
    against the space this tuner builds for it; a new task's signature must name only Inductor's flags, with values a
    device allows. A winner counts only with its own measured trial in the file, and replaces a stored winner only
    where that trial shows a larger speedup than the stored winner's trial."""
    from tuner.db import Database
    from tuner.db.engine import sqlite_path
    from tuner.db.transfer import apply_import, known_tasks, read_import, unbacked_note

    url = db_url(db)
    path = sqlite_path(url)
    if path is not None and not path.exists():  # read the whole file before a new database exists
        plan = read_import(file, {})
        database = Database.open(url)
    else:
        database = Database.open(url)
        try:
            plan = read_import(file, known_tasks(database))
        except BaseException:
            database.close()
            raise
    try:
        added = apply_import(database, plan)
    finally:
        database.close()
    console.print(f"imported {escape(str(file))}: added " + ", ".join(f"{k}={v}" for k, v in added.items()))
    if note := unbacked_note(plan.unbacked):
        console.print(f"[yellow]{note}[/]")


@app.command()
@friendly
def merge(
    source: Annotated[str, typer.Argument(help="URL of the database to merge from.")],
    db: DbOption = None,
) -> None:
    """Merge another database into this one (validated like an import); per device the faster verified winner stays."""
    from tuner.db import Database
    from tuner.db.transfer import merge as merge_dbs, unbacked_note

    src = Database.open(source, create=False, read_only=True)
    dst = Database.open(db_url(db))
    try:
        added, unbacked = merge_dbs(src, dst)
    finally:
        src.close()
        dst.close()
    console.print(f"merged {escape(src.safe_url)}: added " + ", ".join(f"{k}={v}" for k, v in added.items()))
    if note := unbacked_note(unbacked):
        console.print(f"[yellow]{note}[/]")


@app.command()
@friendly
def revalidate(
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="One workload's model (with the workload flags below); default: every stored workload of this device type.",
            show_default=False,
        ),
    ] = None,
    device: DeviceOpt = None,
    mode: ModeOpt = "infer",
    batch: BatchOpt = 1,
    dtype: DtypeOpt = "fp32",
    image_size: ImageSizeOpt = 224,
    input_shape: InputShapeOpt = None,
    channels_last: ChannelsLastOpt = False,
    freezing: FreezingOpt = True,
    threads: ThreadsOpt = None,
    seq_len: SeqLenOpt = 128,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    db: DbOption = None,
) -> None:
    """Re-measure stored winners here (after a torch upgrade, say); keep those that still win, revert the rest.

    Without --model, every stored workload whose model tuner builds itself (torchvision, timm:, hf:); a stored
    pkg.module:factory is never imported on the database's word: name it with --model.

    Each stored winner is timed against Inductor's default on this machine's torch and device; those no longer faster
    by the budget's minimum gain are put back to the default, and the drift is printed. Template sites, CPU graph
    knobs and fusion groupings; Triton kernels are not revalidated yet."""
    from tuner.commands.revalidate import revalidate as run, stored_specs

    url = db_url(db)
    if model:
        specs = [
            make_spec(
                model,
                device,
                mode,
                batch,
                dtype,
                image_size,
                input_shape,
                channels_last,
                freezing,
                threads,
                seq_len=seq_len,
            )
        ]
    else:
        specs, code = stored_specs(url, device or default_device(), threads)
        if code:
            err_console.print(
                f"[yellow]not re-measured: {len(code)} stored model(s) named as code to import "
                f"({shown(', '.join(code[:3]))}{', …' if len(code) > 3 else ''}); name one with --model to re-measure it[/]"
            )
    reports = [run(spec, url, note=lambda s: err_console.print(f"[dim]{s}[/]")) for spec in specs]
    if as_json:
        typer.echo(json.dumps(reports, indent=2))
        return
    for r in reports:
        _drift_table(r)


def _drift_table(report: dict[str, Any]) -> None:
    t = Table(title=shown(f"{report['workload']} on {report['device']} (torch {report['torch']})"))
    for col in ("task", "kind", "stored speedup", "speedup now", "verdict"):
        t.add_column(col, overflow="fold")
    fmt = lambda v: f"{v:.3f}x" if v else "-"  # noqa: E731
    for d in report["drift"]:
        verdict = "[green]kept[/]" if d["verdict"] == "kept" else f"[red]reverted[/] ({shown(d['why'])})"
        t.add_row(shown(d["task"]), shown(d["kind"]), fmt(d["stored_speedup"]), fmt(d["speedup"]), verdict)
    console.print(t)
    kept = sum(d["verdict"] == "kept" for d in report["drift"])
    console.print(f"{kept} of {len(report['drift'])} stored winner(s) kept ({report['tasks']} task(s) in the workload)")
