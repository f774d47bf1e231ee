"""The pytest-benchmark suites: ``pytest bench/suites --benchmark-only -m "not gpu"`` times them;
``--benchmark-disable`` runs each once, unmeasured (the smoke run ``.ci/run`` makes so the suites cannot rot).

Each run sweeps its models once (``--budget quick``; two trials a task in a smoke run, into a database of its own) and
then times eager, Inductor's default and tuned, the warm-database compile, the backend's lookup per compile and
export/import throughput. ``--benchmark-json FILE`` keeps a run; ``--benchmark-compare`` reads across commits.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # bench.suites.models:NAME must import in the sweep's spawned worker too
    sys.path.insert(0, str(ROOT))


@dataclass(frozen=True)
class Workload:
    name: str
    model: str  # as --model takes it
    shape: tuple[int, ...]
    device: str = "cpu"

    @property
    def flags(self) -> list[str]:
        return [
            "--model",
            self.model,
            "--input-shape",
            ",".join(map(str, self.shape)),
            "--device",
            self.device,
            "--threads",
            "2",
        ]


WORKLOADS = [
    Workload("mlp", "bench.suites.models:mlp", (32, 64)),
    Workload("transformer_block", "bench.suites.models:transformer_block", (8, 16, 64)),
    Workload("resnet18-64", "resnet18", (1, 3, 64, 64)),
]
GPU_WORKLOADS = [Workload("resnet18-224-cuda", "resnet18", (32, 3, 224, 224), "cuda")]


def pytest_collection_modifyitems(config, items):
    import torch

    for item in items:
        if "gpu" in item.keywords and not torch.cuda.is_available():
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))


@pytest.fixture(scope="session")
def swept(tmp_path_factory, request):
    """{workload name: database URL}, each swept once per run, on first use."""
    from typer.testing import CliRunner

    from tuner.cli import app

    folder = tmp_path_factory.mktemp("suites")
    os.environ.setdefault("TUNER_CACHE_DIR", str(folder / "cache"))
    os.chdir(ROOT)
    done: dict[str, str] = {}
    smoke = ["--trials", "2"] if request.config.getoption("benchmark_disable") else []

    def get(w: Workload) -> str:
        if w.name not in done:
            url = f"sqlite:///{folder / (w.name + '.db')}"
            result = CliRunner().invoke(app, ["sweep", *w.flags, "--budget", "quick", *smoke, "--db", url])
            assert result.exit_code == 0, result.output
            done[w.name] = url
        return done[w.name]

    return get
