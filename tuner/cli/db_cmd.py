"""``tuner db …``: what the database holds, and schema upgrades."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from tuner.cli.common import DbOption, console, db_url, friendly

app = typer.Typer(help="Inspect and maintain the tuning database.", no_args_is_help=True)


@app.command()
@friendly
def stats(db: DbOption = None, as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Count tasks, trials (by status), winners, devices and environments."""
    from tuner.db import Database

    database = Database.open(db_url(db), create=False)
    try:
        s = database.stats()
    finally:
        database.close()
    if as_json:
        typer.echo(json.dumps(s, indent=2, sort_keys=True))
        return
    t = Table(title=f"tuning database {s['url']}", show_header=False)
    for k in ("tasks", "trials", "winners", "devices", "environments"):
        t.add_row(k, str(s[k]))
    for k, v in sorted(s["trials_by_status"].items()):
        t.add_row(f"  trials {k}", str(v))
    for k, v in sorted(s["tasks_by_kind"].items()):
        t.add_row(f"  tasks {k}", str(v))
    console.print(t)


@app.command()
@friendly
def show(db: DbOption = None, top: Annotated[int, typer.Option("--top", min=1, help="How many winners to list.")] = 20) -> None:
    """List the winners with the largest speedups over Inductor's defaults."""
    from tuner.db import Database

    database = Database.open(db_url(db), create=False)
    try:
        rows = database.top_winners(top)
    finally:
        database.close()
    t = Table(title=f"top {len(rows)} winners")
    for col in ("task", "kind", "device", "default ms", "tuned ms", "speedup", "config"):
        t.add_column(col, overflow="fold")
    for r in rows:
        fmt = lambda v: f"{v:.4g}" if v else "-"  # noqa: E731
        t.add_row(r["task"], r["kind"], r["device"], fmt(r["baseline_ms"]), fmt(r["median_ms"]),
                  f"{r['speedup']:.3f}x" if r["speedup"] else "-", json.dumps(r["config"], sort_keys=True))
    console.print(t)


@app.command()
@friendly
def upgrade(db: DbOption = None) -> None:
    """Upgrade the database's schema to this tuner's revision (creating it if empty)."""
    from tuner.db import migrate
    from tuner.db.engine import check_schema, make_engine
    from tuner.errors import SchemaError

    from sqlalchemy.exc import SQLAlchemyError

    from tuner.errors import StorageError

    url = db_url(db)
    engine = make_engine(url)
    try:
        try:
            before = migrate.current_revision(engine)
        except SQLAlchemyError as e:
            raise StorageError(f"cannot open database {url}: {str(getattr(e, 'orig', e)).splitlines()[0]}") from None
        before = migrate.current_revision(engine)
        if before is not None and before not in migrate.known_revisions():
            raise SchemaError(f"database is at schema revision {before}, written by a newer tuner; upgrade tuner instead")
        migrate.upgrade(engine)
        check_schema(engine, url, create=False)
        console.print(f"database at schema revision {migrate.head_revision()} (was {before or 'empty'})")
    finally:
        engine.dispose()
