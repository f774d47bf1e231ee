"""Triton kernels are tuned in the order of their share of the step: time per launch times launches per step."""

import gzip
import json

from tuner.ranking.prior import PRIOR_DIR
from tuner.tasks import kernel_tasks, step_share_ms


def _kernel_tasks_of_a_real_export(n):
    """``n`` Triton kernel tasks as a sweep stored them (the shipped H200 resnet18 training-step prior)."""
    with gzip.open(PRIOR_DIR / "h200-resnet18-train-bf16-b32.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    tasks = [r for r in rows if r.get("type") == "task" and r["kind"].startswith("triton_")]
    assert len(tasks) >= n
    return tasks[:n]


def test_a_kernel_launched_once_per_block_comes_before_a_slower_one_launched_once():
    once, per_block, fast = _kernel_tasks_of_a_real_export(3)
    records = [
        {"key": once["key"], "kind": once["kind"], "name": "triton_red_once", "signature": once["signature"], "default_ms": 0.020, "launches": 1},
        {"key": per_block["key"], "kind": per_block["kind"], "name": "triton_per_block", "signature": per_block["signature"], "default_ms": 0.012, "launches": 12},
        {"key": fast["key"], "kind": fast["kind"], "name": "triton_fast", "signature": fast["signature"], "default_ms": 0.004},  # no count: one launch
    ]
    tasks = kernel_tasks(records)
    assert [t.key for t in tasks] == [per_block["key"], once["key"], fast["key"]]
    assert tasks[0].name == "triton_per_block 12us x12" and tasks[1].name == "triton_red_once 20us"
    assert tasks[0].signature["launches"] == 12 and tasks[2].signature["launches"] == 1
    assert abs(step_share_ms(records[1]) - 0.144) < 1e-12
