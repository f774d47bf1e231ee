"""``tuner report``: one self-contained HTML file about a tuning database (Plotly's JavaScript is inlined once, so
it opens with no network access).

It shows where the trials were measured (devices, torch and Triton versions); per task kind, a table and a bar
chart of Inductor's default against the best time; for the tasks with the most time at stake, Optuna's
optimisation history and parameter importances (``optuna.visualization``); trials by status with sample reasons;
and, when given, ``tuner bench`` results and sweep-cost JSON files.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from tuner.errors import TunerError

TOP_STUDIES = 4
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}th{background:#f3f3f3}h2{margin-top:2em}"
)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)[:200]
    return "-" if v is None else str(v)


class _Figures:
    """Plotly figures as HTML fragments; the first carries plotly.js inline, the others reuse it."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, fig: Any) -> str:
        self.count += 1
        return fig.to_html(full_html=False, include_plotlyjs=self.count == 1)


def _kind_sections(rows: list[dict[str, Any]], figure: _Figures) -> str:
    import plotly.graph_objects as go

    out = []
    for kind in sorted({r["kind"] for r in rows}):
        mine = sorted((r for r in rows if r["kind"] == kind), key=lambda r: -(r["default_ms"] or 0))
        table = [[r["task"], r["device"], r["default_ms"], r["best_ms"], _speedup(r), r["config"]] for r in mine]
        fig = go.Figure(
            [
                go.Bar(name="Inductor's default", x=[r["task"] for r in mine], y=[r["default_ms"] for r in mine]),
                go.Bar(name="best", x=[r["task"] for r in mine], y=[r["best_ms"] for r in mine]),
            ]
        )
        fig.update_layout(
            barmode="group", height=360, yaxis_title="ms", title=f"{kind}: default vs best", margin={"b": 120}
        )
        out.append(
            f"<h3>{html.escape(kind)} ({len(mine)} tasks)</h3>"
            + figure(fig)
            + _table(["task", "device", "default ms", "best ms", "speedup", "winner"], table)
        )
    return "".join(out)


def _speedup(r: dict[str, Any]) -> float | None:
    return r["default_ms"] / r["best_ms"] if r["default_ms"] and r["best_ms"] else None


def _study_sections(url: str, figure: _Figures, model: str | None, has_studies: bool) -> str:
    """Optuna's history and importances of the studies with the most default time at stake. Optuna's storage is
    opened only where its tables exist, and told to create and upgrade nothing: a report only reads."""
    if not has_studies:
        return "<p>no Optuna studies in this database</p>"
    import optuna
    from optuna.visualization import plot_optimization_history, plot_param_importances

    storage = optuna.storages.RDBStorage(url, skip_table_creation=True, skip_compatibility_check=True)
    summaries = [s for s in optuna.get_all_study_summaries(storage) if s.user_attrs.get("default_ms")]
    if model is not None:
        summaries = [s for s in summaries if model in s.study_name or s.user_attrs.get("task", "").startswith(model)]
    summaries.sort(key=lambda s: -float(s.user_attrs["default_ms"]))
    out = []
    for s in summaries[:TOP_STUDIES]:
        study = optuna.load_study(study_name=s.study_name, storage=storage)
        out.append(
            f"<h3>{html.escape(s.study_name)}</h3><p>default {_fmt(s.user_attrs.get('default_ms'))} ms, best "
            f"{_fmt(s.user_attrs.get('best_ms'))} ms, winner {html.escape(str(s.user_attrs.get('winner')))}</p>"
        )
        out.append(figure(plot_optimization_history(study)))
        try:
            out.append(figure(plot_param_importances(study)))
        except (ValueError, RuntimeError) as e:  # too few completed trials, or a single parameter value
            out.append(f"<p>no parameter importances: {html.escape(str(e))}</p>")
    return "".join(out) or "<p>no settled studies</p>"


def _files_section(title: str, paths: list[Path]) -> str:
    out = []
    for p in paths:
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise TunerError(f"cannot read {p}: {e}") from None
        rows = [
            [k, *(_fmt(v.get(c)) for c in ("median_ms", "compile_s", "benchmarks"))]
            for k, v in data.get("results", {}).items()
        ]
        body = (
            _table(["mode", "median ms", "compile s", "benchmarks"], rows)
            if rows
            else f"<pre>{html.escape(json.dumps(data, indent=1)[:4000])}</pre>"
        )
        out.append(
            f"<h3>{html.escape(p.name)}</h3><p>{html.escape(str(data.get('command', '')))} — {html.escape(str(data.get('date', '')))}</p>{body}"
        )
    return f"<h2>{title}</h2>" + "".join(out) if out else ""


def render(
    url: str, model: str | None = None, bench: list[Path] | None = None, sweep_cost: list[Path] | None = None
) -> str:
    """The report's HTML."""
    import importlib.util

    try:
        found = importlib.util.find_spec("plotly") is not None  # optuna.visualization draws with it
    except ValueError:  # a module set to None (as uninstalled)
        found = False
    if not found:
        raise TunerError("tuner report needs plotly: pip install -e '.[report]'")
    from tuner.db import Database
    from tuner.db.summaries import provenance, trial_statuses, winner_rows

    db = Database.open(url, create=False, read_only=True)
    try:
        rows, statuses, where = winner_rows(db, model), trial_statuses(db, model), provenance(db)
        from sqlalchemy import inspect

        has_studies = inspect(db.engine).has_table("studies")
    finally:
        db.close()
    figure = _Figures()
    parts = [
        f"<h1>tuner report: {html.escape(model or 'every workload')}</h1><p>{html.escape(db.safe_url)}</p>",
        "<h2>Measured on</h2>"
        + _table(["device", "kind", "info"], [[d["name"], d["kind"], d["info"]] for d in where["devices"]])
        + _table(["torch", "triton", "cuda", "python", "tuner"], [list(e.values()) for e in where["environments"]]),
        "<h2>Default vs best, per task kind</h2>" + (_kind_sections(rows, figure) or "<p>no winners stored</p>"),
        "<h2>Searches with the most time at stake</h2>" + _study_sections(url, figure, model, has_studies),
        "<h2>Trials by status</h2>"
        + _table(
            ["status", "trials", "sample reasons"],
            [[k, v["count"], " | ".join(v["errors"])] for k, v in sorted(statuses.items())],
        ),
        _files_section("tuner bench results", bench or []),
        _files_section("Sweep cost", sweep_cost or []),
    ]
    return f"<!doctype html><html><head><meta charset='utf-8'><title>tuner report</title><style>{STYLE}</style></head><body>{''.join(parts)}</body></html>"


def write_report(out: Path, **kwargs: Any) -> Path:
    text = render(**kwargs)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out


__all__ = ["render", "write_report"]
