"""tuner report: one self-contained HTML file rendered from a real swept database."""

import json
import re
import sys

from typer.testing import CliRunner

from tuner.cli import app

runner = CliRunner()


def test_report_of_a_swept_database_shows_provenance_kinds_searches_and_statuses(swept_at_batch_1, tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_text(
        json.dumps(
            {
                "command": "tuner bench --model m",
                "date": "2026-12-01",
                "results": {
                    "default": {"median_ms": 0.5, "compile_s": 3.0},
                    "tuned": {"median_ms": 0.4, "compile_s": 2.0, "benchmarks": 0},
                },
            }
        )
    )
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["report", "--db", swept_at_batch_1, "--out", str(out), "--bench", str(bench)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    from tuner.db import current_device

    assert current_device("cpu").name in page and "torch" in page
    for kind in ("template_choice", "cpp_graph", "fusion_graph"):
        assert f"<h3>{kind} (" in page
    # a task row and its chart's series (not a winner cell "(Inductor's default)": every winner may beat its default)
    assert "packed_linear 1x64" in page and '"name":"Inductor\'s default"' in page
    studies = re.findall(r"<h3>([^<]*\[(?:template_choice|cpp_graph|fusion_graph)\][^<]*)</h3>", page)
    assert studies and page.count("Optimization History Plot") == len(studies)
    assert "<th>status</th>" in page and "<td>ok</td>" in page
    assert "tuner bench --model m" in page and "<td>tuned</td>" in page
    # self-contained: plotly.js inline once, nothing fetched from the network
    assert page.count("plotly.js v") == 1 and not re.search(r"<script[^>]+src=[\"']https?:", page)


def test_report_for_another_model_has_no_winners(swept_at_batch_1, tmp_path):
    out = tmp_path / "r.html"
    assert (
        runner.invoke(app, ["report", "--db", swept_at_batch_1, "--out", str(out), "--model", "resnet50"]).exit_code
        == 0
    )
    assert "no winners stored" in out.read_text()


def test_report_without_plotly_is_one_line(swept_at_batch_1, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "plotly", None)
    result = runner.invoke(app, ["report", "--db", swept_at_batch_1, "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 1 and "pip install -e '.[report]'" in result.output
