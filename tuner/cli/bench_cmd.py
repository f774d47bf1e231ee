"""``tuner bench``: eager vs Inductor's modes vs tuned, in one run, as a table, JSON and PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from tuner.cli.common import (
    BatchOpt, ChannelsLastOpt, compile_bytecode, DbOption, DeviceOpt, DtypeOpt, FreezingOpt, ImageSizeOpt, InputShapeOpt, ModelOpt, ModeOpt,
    SeqLenOpt, ThreadsOpt, console, db_url, friendly, make_spec, writable_out,
)


@friendly
def bench(
    model: ModelOpt,
    device: DeviceOpt = None,
    mode: ModeOpt = "infer",
    batch: BatchOpt = 1,
    dtype: DtypeOpt = "fp32",
    image_size: ImageSizeOpt = 224,
    input_shape: InputShapeOpt = None,
    channels_last: ChannelsLastOpt = False,
    freezing: FreezingOpt = True,
    modes: Annotated[str, typer.Option(help="Comma-separated: eager, default, max-autotune-no-cudagraphs, max-autotune and reduce-overhead (both with CUDA graphs), freezing (Inductor's defaults, frozen: what tuned starts from), freezing-max-autotune (freezing + max-autotune, with CUDA graphs on a CUDA device: Inductor at its strongest), freezing-max-autotune-no-cudagraphs, freezing-reduce-overhead (Inductor's default kernels, frozen, under CUDA graphs; added on a CUDA device wherever freezing-max-autotune is timed), tuned, tuned-kernels (kernel winners, Inductor's fusion), tuned-no-kernels (every winner but the Triton kernel configs), tuned-no-cuda-graphs (every winner, never under CUDA graphs), tuned-strict (exact entries only, no answers from other sizes), tuned-reduce-overhead (the winners inside CUDA graphs), tuned-without-NAME (every winner but a winner group's or a kind's: template-site, Triton-kernel, graph-knob, fusion-grouping, cuda_graph, …; or the groupings without one rewrite: space_to_depth, cudnn_epilogue, merge_gemms, compute_once).")] = "eager,default,freezing-max-autotune,tuned",
    ablate: Annotated[bool, typer.Option("--ablate", help="Add tuned and one mode per lever left out (each winner group that can answer on this device, and CUDA graphs on a GPU): each lever's share of the gain, in one run.")] = False,
    rounds: Annotated[int, typer.Option(help="Interleaved timing rounds.", min=3)] = 30,
    instances: Annotated[int | None, typer.Option(help="Compile each mode this many times, each of a fresh copy of the model, and take the median of their medians (default: 3 on the CPU, where two compiles of one config can run 5-10% apart; 1 on a GPU).", min=1, show_default=False)] = None,
    threads: ThreadsOpt = None,
    seq_len: SeqLenOpt = 128,
    out: Annotated[Path | None, typer.Option(help="Write the JSON here (and a PNG beside it). Written again after each mode's compile, marked partial, so a run stopped early keeps its compile times.", show_default=False)] = None,
    db: DbOption = None,
    also_db: Annotated[list[str] | None, typer.Option(
        "--also-db", help="LABEL=URL: another tuning database, benchmarked as mode tuned-LABEL in the same run (repeatable).",
        show_default=False)] = None,
) -> None:
    """Compile the workload in every mode (fresh caches each) and time them against each other in one process."""
    compile_bytecode()
    from tuner.commands.bench import plot, run_bench

    extra = {}
    for item in also_db or []:
        label, sep, url = item.partition("=")
        if not sep or not label or not url:
            raise typer.BadParameter(f"expected LABEL=URL, got {item!r}", param_hint="--also-db")
        extra[label] = db_url(url)
    mode_names = [m.strip() for m in modes.split(",") if m.strip()] + [f"tuned-{label}" for label in extra]
    spec = make_spec(model, device, mode, batch, dtype, image_size, input_shape, channels_last, freezing, threads, seq_len=seq_len)
    from tuner.commands.bench import ablation, stored_rewrites, with_anchors

    mode_names = with_anchors(spec.device, mode_names)
    if ablate:
        mode_names = list(dict.fromkeys([*mode_names, *ablation(spec.device, stored_rewrites(db_url(db), spec.device))]))
    if out is not None:
        writable_out(out)
    write = (lambda doc: out.write_text(json.dumps(doc, indent=2) + "\n")) if out is not None else None
    result = run_bench(spec, mode_names, db_url(db), rounds=rounds, extra_dbs=extra, checkpoint=write,
                       progress=lambda s: console.print(f"[dim]{s}[/]"), instances=instances)
    t = Table(title=f"{spec.name} on {result['device']} (torch {result['torch']})")
    for col in ("mode", "median ms", "IQR ms", "tok/s" if spec.mode == "decode" else "img/s", "compile s", "vs eager",
                "vs best Inductor", "benchmarks", "hit/tr/miss"):
        t.add_column(col)
    for name, r in result["results"].items():
        t.add_row(name, f"{r['median_ms']:.4g}", f"{r['spread_ms']:.2g}", f"{r['img_per_s']:.0f}", f"{r['compile_s']:.1f}",
                  f"{r['speedup_vs_eager']:.2f}x" if "speedup_vs_eager" in r else "-",
                  _vs_best(r), str(r.get("benchmarks", "")), _lookups(r))
    console.print(t)
    if result.get("best_inductor"):
        best = result["results"][result["best_inductor"]]
        console.print(f"best Inductor mode in this run: {result['best_inductor']} ({best['median_ms']:.4g} ms; freezing "
                      f"{'on' if best['freezing'] else 'off'}, CUDA graphs {'on' if best['cuda_graphs'] else 'off'}); "
                      "'vs best Inductor' is each tuned mode's time over it (below 1: faster)", highlight=False)
    levers = [_lever(n, r) for n, r in result["results"].items() if "vs_tuned" in r]
    if levers:
        console.print("tuned with one lever left to Inductor, over tuned (above 1: the lever's gain; its share of tuned's "
                      "lead over the best Inductor mode): " + ", ".join(levers), highlight=False)
    for line in [*unmatched(result["results"]), *noisy(result["results"])]:
        console.print(f"[yellow]{line}[/]")
    if out is not None:
        out.write_text(json.dumps(result, indent=2) + "\n")  # the whole document: no "partial" mark
        png = out.with_suffix(".png")
        drew = plot(result, str(png))
        console.print(f"wrote {out}" + (f" and {png}" if drew else " (no PNG: pip install matplotlib)"))


def _lever(name: str, r: dict) -> str:
    share = f" ({r['share_of_gain']:.0%})" if "share_of_gain" in r else ""
    return f"{name.removeprefix('tuned-without-').removeprefix('tuned-no-')} {r['vs_tuned']:.3f}x{share}"


def _vs_best(r: dict[str, Any]) -> str:
    """A tuned mode's time over the best Inductor mode's; no ratio where its output is off (not a result)."""
    if "vs_best_inductor" not in r:
        return ""
    return "numerics off" if r.get("numerics_ok") is False else f"{r['vs_best_inductor']:.3f}x"


def _lookups(r: dict[str, Any]) -> str:
    n = r.get("lookups")
    return f"{n['hits']}/{n['transferred']}/{n['misses']}" if n else ""


NOISY = 0.05  # an IQR over this share of its median makes differences of a few percent unreadable


def noisy(results: dict[str, dict[str, Any]]) -> list[str]:
    """One line where some mode's timings spread widely: its differences from the others below that spread are not
    results (hf:gpt2 on the H200 once spread 0.34-0.76 ms around 3 ms medians, and tuned read 9-12% slower than the
    default; re-timed with spreads of 0.05 ms, every mode was within 2% of the others)."""
    worst = max(((r["spread_ms"] / r["median_ms"], name) for name, r in results.items() if r.get("median_ms")), default=None)
    if worst is None or worst[0] <= NOISY:
        return []
    return [f"noisy timings: {worst[1]}'s IQR is {worst[0]:.0%} of its median; differences smaller than that are not results "
            "(run it again on a quiet machine, or with more --rounds)"]


def unmatched(results: dict[str, dict[str, Any]]) -> list[str]:
    """One line for each tuned mode that found none of its database's answers: its time is Inductor's defaults'."""
    from tuner.backend.counters import matched_nothing

    out = []
    for name, r in results.items():
        n = r.get("lookups")
        if n and matched_nothing(n):
            out.append(f"{name}: none of the database's answers matched this workload ({n['misses']} lookups missed): "
                       "it ran Inductor's defaults; `tuner explain` with the same workload flags says why")
    return out
