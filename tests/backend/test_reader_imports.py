"""The compile-time reader stands apart from the sweep's instrument: a user's compile under ``backend="tuned"``, with
a database that answers it, loads none of the modules that record, time sites, capture kernels or drive a sweep."""

import json
import subprocess
import sys

from tests.helpers.dbfill import fill

SWEEP_ONLY = (
    "tuner.backend.instrument",
    "tuner.measure",
    "tuner.sweep",
    "tuner.study",
    "tuner.workloads",
    "tuner.commands",
    "optuna",
)

PROGRAM = """
import json, sys, torch
import tuner.backend
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
with torch.no_grad():
    torch.compile(m, backend="tuned", options={"db": sys.argv[1]})(torch.randn(4, 8))
print(json.dumps({"stats": tuner.backend.stats(), "modules": sorted(sys.modules)}))
"""


def test_a_tuned_compile_loads_no_sweep_module(db_url):
    fill(db_url).close()
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, db_url], capture_output=True, text=True, timeout=300, check=True
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert sum(report["stats"][k] for k in ("hits", "misses")) >= 1, "the compile looked its graph up"
    assert "tuner.backend.answers" in report["modules"] and "tuner.backend.hooks.selector" in report["modules"]
    loaded = [m for m in report["modules"] if any(m == p or m.startswith(p + ".") for p in SWEEP_ONLY)]
    assert loaded == [], f"a tuned compile loaded the sweep's modules {loaded}"
