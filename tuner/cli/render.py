"""Rich rendering of a sweep: the progress bar and the closing tables."""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from tuner.cli.common import shown
from tuner.sweep.progress import Progress as SweepProgress
from tuner.sweep.options import SweepReport


class BoundedRemaining(TimeRemainingColumn):
    """Rich's rate-based estimate of the time left, never past ``ends_by`` (a time budget's promised end). Rendered
    afresh each time: Rich keeps a column's last render for half a second while no trial has completed, and a sweep
    that ended so (its first trials outside the bar's count) showed 'eta 0:00:37' under its closing tables."""

    max_refresh = None

    def __init__(self, ends_by: float | None):
        super().__init__()
        self.ends_by = ends_by

    def render(self, task: Any) -> Text:
        left = task.time_remaining
        if self.ends_by is not None:
            bound = max(0.0, self.ends_by - time.monotonic())
            left = bound if left is None else min(left, bound)
        if left is None:
            return Text("-:--:--", style="progress.remaining")
        return Text(str(dt.timedelta(seconds=int(left))), style="progress.remaining")


class RichProgress(SweepProgress):
    def __init__(self, console: Console, ends_by: float | None = None, workload: str = ""):
        self.console = console
        self.workload = workload  # its model, which every graph task's name repeats, is left out of the task lines
        self.remaining = BoundedRemaining(ends_by)
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("trials"),
            TimeElapsedColumn(),
            TextColumn("eta"),
            self.remaining,
            console=console,
            transient=False,
        )
        self.id: Any = None
        self.failed = 0

    def __enter__(self) -> "RichProgress":
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        """The bar's last render stays on screen: it says the sweep ended, with nothing left to wait for (a sweep
        cut short by its time budget had shown 'eta 0:00:42' under its closing tables)."""
        if self.id is not None:
            self.remaining.ends_by = time.monotonic()
            self.bar.update(self.id, description="ended" if exc[0] is None else "interrupted")
        self.bar.__exit__(*exc)

    def start(self, total: int, names: list[str]) -> None:
        """Called once per phase (template sites, then Triton kernels, then graphs): the bar grows."""
        names = [task_label(n, self.workload) for n in names]
        listed = ", ".join(names[:8]) + (f", … ({len(names) - 8} more)" if len(names) > 8 else "")
        self.console.print(f"{len(names)} tasks: {shown(listed)}", highlight=False)
        if self.id is None:
            self.id = self.bar.add_task("tuning", total=total)
        else:
            self.bar.update(self.id, total=(self.bar.tasks[0].total or 0) + total)

    def task(self, name: str) -> None:
        if self.id is not None:
            self.bar.update(self.id, description=f"[cyan]{shown(task_label(name, self.workload)[:40])}")

    def trial(self, status: str) -> None:
        if status != "ok":
            self.failed += 1
        if self.id is not None:
            bar_task = self.bar.tasks[0]
            if bar_task.total is not None and bar_task.completed + 1 > bar_task.total:
                # a trial beyond the plan (another worker's study joined): the plan grows; never "13/11 trials"
                self.bar.update(self.id, total=bar_task.completed + 1)
            self.bar.advance(self.id)

    def note(self, text: str) -> None:
        self.console.print(f"[dim]{shown(text)}[/]")


def _ms(v: float | None) -> str:
    return f"{v:.4g}" if v else "-"


_PARAM = re.compile(r"\b(BLOCK_[MNK]|SPLIT_K|num_stages|num_warps|GROUP_M)\"?[=:](\d+)")
_SHORT = {
    "BLOCK_M": "M",
    "BLOCK_N": "N",
    "BLOCK_K": "K",
    "SPLIT_K": "split",
    "num_stages": "s",
    "num_warps": "w",
    "GROUP_M": "g",
}


def short_choice(choice: str) -> str:
    """A template choice id in a few characters: ``triton_convolution2d M128 N64 K64 s3 w8``."""
    head = (
        choice.split(":")[1]
        if choice.count(":") >= 2 and choice.startswith("TritonTemplateCaller")
        else choice.split(":{")[0]
    )
    params = dict(_PARAM.findall(choice))
    return " ".join([head, *(f"{_SHORT[k]}{params[k]}" for k in _SHORT if k in params)])


def config_diff(winner: dict[str, Any], default: dict[str, Any]) -> str:
    """What a winner changes from the default, compactly (a template choice in a few characters)."""
    changed = {k: v for k, v in winner.items() if default.get(k) != v}
    if not changed:
        return "(Inductor's default)"
    if set(changed) == {"choice"}:
        return short_choice(str(changed["choice"]))
    return json.dumps(changed, sort_keys=True)


def task_label(name: str, workload: str) -> str:
    """A task's name without the model that the table's title names already (an ``hf:`` model's spec, repeated in every
    row, folded each into eight lines of a log's 80 columns)."""
    model = workload.split("/", 1)[0]
    return name[len(model) + 1 :] if model and name.startswith(model + " ") else name


def print_report(console: Console, report: SweepReport, defaults: dict[str, dict[str, Any]]) -> None:
    if report.graph_breaks:
        n = sum(report.graph_breaks.values())
        console.print(f"[yellow]{n} graph break(s)[/]:")
        for reason, count in report.graph_breaks.items():
            console.print(f"  {count} × {shown(reason)}", highlight=False)
    else:
        console.print("graph breaks: none")
    if report.capture_compile_s is not None:
        console.print(f"capture: the default compile took {report.capture_compile_s:.1f} s")
    t = Table(title=shown(f"{report.workload} on {report.device}"))
    for col in ("task", "trials", "default ms", "best ms", "speedup", "winner"):
        t.add_column(col, overflow="fold")
    for o in report.outcomes:
        t.add_row(
            shown(task_label(o.task.name, report.workload)),
            str(o.total),
            _ms(o.default_ms),
            _ms(o.best_ms),
            f"{o.speedup:.3f}x" if o.speedup else "-",
            shown(config_diff(o.winner, defaults.get(o.task.key, {}))),
        )
    console.print(t)
    if report.speedup:
        console.print(
            f"whole workload: {_ms(report.default_ms)} ms with {report.baseline} → {_ms(report.tuned_ms)} ms tuned "
            f"([bold]{report.speedup:.3f}x[/]); eager {_ms(report.eager_ms)} ms"
        )
    if report.unfrozen_ratio:
        console.print(
            f"without freezing the workload ran at {report.unfrozen_ratio:.3f}x its time frozen (timed together): "
            "its graphs are stored to compile unfrozen"
        )
    state = "[yellow]interrupted[/]: every trial measured so far is stored" if report.interrupted else "done"
    console.print(f"{state}: {report.trials_measured} trials measured in {report.wall_s:.0f} s")
