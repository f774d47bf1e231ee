"""What every command shares: the console, the --db option, and errors as one line + exit code 1."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from tuner.errors import TunerError
from tuner.settings import settings

console = Console()
err_console = Console(stderr=True)

DbOption = Annotated[
    str | None,
    typer.Option("--db", help="Database URL (sqlite:///path.db, postgresql+psycopg://host/name). Default: $TUNER_DB or SQLite in the user cache folder.", show_default=False),
]

F = TypeVar("F", bound=Callable[..., Any])


def db_url(value: str | None) -> str:
    return value or settings().db_url


def fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(1)


def friendly(fn: F) -> F:
    """Turn tuner's own errors into one line on stderr and exit code 1; Ctrl-C into exit code 130."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TunerError as e:
            raise fail(str(e)) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]
