"""What every command shares: the console, the --db option, and errors as one line + exit code 1."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from tuner.errors import TunerError
from tuner.settings import settings

LOG_WIDTH = 160  # columns where the output is a file or a pipe, not a terminal


def _console(stderr: bool = False) -> Console:
    """A terminal's own width; where the output is a log (a file, a pipe) and COLUMNS is unset, :data:`LOG_WIDTH`
    columns, not rich's 80, where a bench table's modes were cut to "tuned…" and a task's name folded over eight
    lines."""
    c = Console(stderr=stderr)
    return c if c.is_terminal or os.environ.get("COLUMNS") else Console(stderr=stderr, width=LOG_WIDTH)


console = _console()
err_console = _console(stderr=True)

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL (sqlite:///path.db, postgresql+psycopg://host/name). Default: $TUNER_DB or SQLite in the user cache folder.",
        show_default=False,
    ),
]

F = TypeVar("F", bound=Callable[..., Any])


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shown(text: object) -> str:
    """Text from a database or a file, safe to print: control characters written out (an ANSI escape in a task's name
    cannot clear the terminal) and rich markup escaped (``[/x]`` in a name is no tag)."""
    return escape(_CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text)))


def writable_out(path: Path, option: str = "--out") -> Path:
    """``path``, checked before any work: its folder made if missing, and a file there writable (a long bench must not
    end in a traceback for want of a place to write)."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise TunerError(f"{option} {path} is a folder; name a file")
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=True):
            pass
    except OSError as e:
        raise TunerError(f"{option} {path}: cannot write there ({e.strerror or e})") from None
    return path


def db_url(value: str | None) -> str:
    return value or settings().db_url


def compile_bytecode() -> None:
    """Where this command keeps bytecode of its own (``tuner.bytecode``) on enough cores: the packages every
    measurement imports, compiled there once, said with its time."""
    from tuner import bytecode

    prefix = bytecode.kept()
    took = bytecode.precompile(prefix) if prefix is not None and bytecode.cores() >= bytecode.AHEAD_MIN_CORES else None
    if took is not None:
        console.print(
            f"[dim]this Python writes no bytecode beside its sources (PYTHONDONTWRITEBYTECODE): torch and the packages it "
            f"compiles with were compiled once under {prefix} in {took:.1f} s, which every later process reads "
            "(TUNER_BYTECODE_CACHE=0: not)[/]",
            highlight=False,
        )


def fail(message: str) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {shown(message)}", highlight=False, soft_wrap=True)  # "[hf]" is no markup
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


# --- workload options, shared by every command that builds a workload -----------------------------
ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="A torchvision model name (resnet50, vit_b_16, …), timm:NAME, hf:NAME[,key=value…] (a Transformers config, no download) or pkg.module:factory returning an nn.Module.",
    ),
]
DeviceOpt = Annotated[
    str | None, typer.Option("--device", help="cpu or cuda. Default: cuda when available.", show_default=False)
]
ModeOpt = Annotated[
    str,
    typer.Option(
        "--mode",
        help="infer (no_grad, with freezing), train (forward + backward + optimizer step) or decode (hf: language models: one token per sequence against a static KV cache of --seq-len positions; tuner's GPT-2-style decoder at the config's sizes, its query heads grouped over the config's num_key_value_heads where it has fewer).",
    ),
]
BatchOpt = Annotated[int, typer.Option("--batch", help="Batch size.")]
DtypeOpt = Annotated[
    str,
    typer.Option(
        "--dtype",
        help="fp32, bf16 or fp16 (weights and inputs in it), or amp-bf16 / amp-fp16: mixed precision, fp32 weights and the step under torch.autocast (as training usually runs).",
    ),
]
ImageSizeOpt = Annotated[int, typer.Option("--image-size", help="Square image size for vision models.")]
InputShapeOpt = Annotated[
    str | None,
    typer.Option(
        "--input-shape",
        help="Full input shape, batch first, e.g. 8,3,224,224 (overrides --batch/--image-size).",
        show_default=False,
    ),
]
ChannelsLastOpt = Annotated[
    bool, typer.Option("--channels-last/--no-channels-last", help="Run the model in channels_last memory format.")
]
FreezingOpt = Annotated[
    bool,
    typer.Option(
        "--freezing/--no-freezing",
        help="Inference: freeze weights into constants (what backend='tuned' then needs too).",
    ),
]
SeqLenOpt = Annotated[
    int,
    typer.Option(
        "--seq-len",
        help="Tokens per sequence, for hf: models (random token ids); with --mode decode, the KV cache's length.",
    ),
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        "--threads",
        help="CPU threads (default: torch's). CPU winners are keyed by it: deploy with the same.",
        show_default=False,
    ),
]


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def make_spec(
    model: str,
    device: str | None,
    mode: str,
    batch: int,
    dtype: str,
    image_size: int,
    input_shape: str | None,
    channels_last: bool,
    freezing: bool,
    threads: int | None,
    seed: int = 0,
    seq_len: int = 128,
) -> Any:
    from tuner.workloads.spec import WorkloadSpec, parse_shape

    return WorkloadSpec(
        model=model,
        device=device or default_device(),
        mode=mode,
        batch=batch,
        dtype=dtype,
        image_size=image_size,
        input_shape=parse_shape(input_shape) if input_shape else None,
        channels_last=channels_last,
        freezing=freezing,
        seed=seed,
        threads=threads,
        seq_len=seq_len,
    )
