"""``tuner explain``: per task of a workload, whether the database answers its compile, and why not."""

from __future__ import annotations

import json
from typing import Annotated

import typer
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
    ModelOpt,
    ModeOpt,
    SeqLenOpt,
    ThreadsOpt,
    console,
    db_url,
    friendly,
    make_spec,
    shown,
)

STYLE = {"hit": "green", "transferred": "yellow", "miss": "red"}


@friendly
def explain(
    model: ModelOpt,
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
    strict: Annotated[
        bool,
        typer.Option(
            "--strict", help="Exact entries only, as options={'transfer': False}: no answers from other sizes."
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    db: DbOption = None,
) -> None:
    """Say, task by task, what the database answers this workload's compile: hit, transferred or miss, and why.

    Compiles the workload once under backend='tuned' (fresh caches, nothing benchmarked or stored) and lists every
    template site and graph it looked up; 'transferred' is the nearest stored task's answer at other sizes. Triton
    kernels are not listed: Inductor looks them up inside its kernel loader."""
    from tuner.commands.explain import explain_workload

    spec = make_spec(
        model, device, mode, batch, dtype, image_size, input_shape, channels_last, freezing, threads, seq_len=seq_len
    )
    report = explain_workload(spec, db_url(db), transfer=not strict)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
        return
    t = Table(
        title=shown(f"{report['workload']}: what {report['db']} answers") + (" (exact entries only)" if strict else "")
    )
    for col in ("kind", "task", "outcome", "answer or reason"):
        t.add_column(col, overflow="fold")
    for d in report["decisions"]:
        t.add_row(
            shown(d["kind"]), shown(d["what"]), f"[{STYLE[d['outcome']]}]{d['outcome']}[/]", shown(_answer_text(d))
        )
    console.print(t)
    c = report["counts"]
    st = report["store"]
    console.print(
        f"{c['hit']} hit(s), {c['transferred']} transferred, {c['miss']} miss(es); "
        f"the stored answers were read {st['reads']} time(s) for {st['graphs']} graph(s)"
    )
    if report["note"]:
        console.print(shown(report["note"]), highlight=False, soft_wrap=True)


def _answer_text(d: dict) -> str:
    """A hit's answer (knobs that differ from this Inductor's own values), a transfer's source, a miss's reason."""
    if d["outcome"] == "miss":
        return d["reason"]
    said = _short(d["answer"])
    if d.get("source_name"):
        said += f" from {d['source_name']} ({d['reason']})"
    return said


def _short(answer: object) -> str:
    if not isinstance(answer, dict):
        return str(answer)
    from tuner.backend.process import inductor_flag

    changed = []
    for k, v in answer.items():
        if k == "vetoes":
            changed += [f"{len(v)} fusion(s) vetoed"] if v else []
            continue
        try:
            same = inductor_flag(k) == v
        except AttributeError:
            same = False
        if not same:
            changed.append(f"{k}={v}")
    return ", ".join(changed) or "Inductor's own values"
