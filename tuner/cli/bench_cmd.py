"""``tuner bench``: eager vs Inductor's modes vs tuned, in one run, as a table, JSON and PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tuner.cli.common import DbOption, console, db_url, friendly


@friendly
def bench(
    model: Annotated[str, typer.Option("--model", "-m", help="torchvision name or pkg.module:factory.")],
    device: Annotated[str | None, typer.Option(help="cpu or cuda. Default: cuda when available.", show_default=False)] = None,
    mode: Annotated[str, typer.Option(help="infer or train.")] = "infer",
    batch: Annotated[int, typer.Option(help="Batch size.")] = 1,
    dtype: Annotated[str, typer.Option(help="fp32, bf16 or fp16.")] = "fp32",
    image_size: Annotated[int, typer.Option(help="Square image size for vision models.")] = 224,
    input_shape: Annotated[str | None, typer.Option(help="Full input shape, batch first.", show_default=False)] = None,
    channels_last: Annotated[bool, typer.Option(help="channels_last memory format.")] = False,
    freezing: Annotated[bool, typer.Option(help="Freeze weights for the tuned mode (as the sweep did).")] = True,
    modes: Annotated[str, typer.Option(help="Comma-separated: eager, default, max-autotune-no-cudagraphs, freezing-max-autotune, tuned.")] = "eager,default,freezing-max-autotune,tuned",
    rounds: Annotated[int, typer.Option(help="Interleaved timing rounds.", min=3)] = 30,
    threads: Annotated[int | None, typer.Option(help="CPU threads.", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(help="Write the JSON here (and a PNG beside it).", show_default=False)] = None,
    db: DbOption = None,
) -> None:
    """Compile the workload in every mode (fresh caches each) and time them against each other in one process."""
    from tuner.cli.sweep_cmd import _default_device
    from tuner.compare import plot, run_bench
    from tuner.workload import WorkloadSpec, parse_shape

    spec = WorkloadSpec(
        model=model, device=device or _default_device(), mode=mode, batch=batch, dtype=dtype, image_size=image_size,
        input_shape=parse_shape(input_shape) if input_shape else None, channels_last=channels_last, freezing=freezing, threads=threads,
    )
    result = run_bench(spec, [m.strip() for m in modes.split(",") if m.strip()], db_url(db), rounds=rounds,
                       progress=lambda s: console.print(f"[dim]{s}[/]"))
    t = Table(title=f"{spec.name} on {result['device']} (torch {result['torch']})")
    for col in ("mode", "median ms", "img/s", "compile s", "vs eager", "benchmarks"):
        t.add_column(col)
    for name, r in result["results"].items():
        t.add_row(name, f"{r['median_ms']:.4g}", f"{r['img_per_s']:.0f}", f"{r['compile_s']:.1f}",
                  f"{r.get('speedup_vs_eager', 0):.2f}x", str(r.get("benchmarks", "")))
    console.print(t)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
        png = out.with_suffix(".png")
        drew = plot(result, str(png))
        console.print(f"wrote {out}" + (f" and {png}" if drew else " (no PNG: pip install matplotlib)"))
