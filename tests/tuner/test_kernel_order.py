"""Triton kernels are tuned in the order of their share of the step: time per launch times launches per step."""

import gzip
import json

from tuner.ranking.prior import PRIOR_DIR
from tuner.sweep.tasks import kernel_tasks, step_share_ms


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
        {
            "key": once["key"],
            "kind": once["kind"],
            "name": "triton_red_once",
            "signature": once["signature"],
            "default_ms": 0.020,
            "launches": 1,
        },
        {
            "key": per_block["key"],
            "kind": per_block["kind"],
            "name": "triton_per_block",
            "signature": per_block["signature"],
            "default_ms": 0.012,
            "launches": 12,
        },
        {
            "key": fast["key"],
            "kind": fast["kind"],
            "name": "triton_fast",
            "signature": fast["signature"],
            "default_ms": 0.004,
        },  # no count: one launch
    ]
    tasks = kernel_tasks(records)
    assert [t.key for t in tasks] == [per_block["key"], once["key"], fast["key"]]
    assert tasks[0].name == "triton_per_block 12us x12" and tasks[1].name == "triton_red_once 20us"
    assert tasks[0].signature["launches"] == 12 and tasks[2].signature["launches"] == 1
    assert abs(step_share_ms(records[1]) - 0.144) < 1e-12


def test_template_sites_are_tuned_largest_first_by_their_multiply_adds(db_url):
    """A site phase cut short by its deadline tunes the sites where the work is (the shipped H200 resnet18 training
    prior's sites): a 3x3 convolution over 56x56 at stride 2 counts a quarter of its input positions."""
    from tests.helpers.replay import _context
    from tuner.core import Kind, TaskSpec
    from tuner.db import Database
    from tuner.sweep.phases import SitePhase, SweepContext, Workload
    from tuner.sweep.progress import Progress
    from tuner.search_spaces import space_for
    from tuner.sweep.tasks import site_work

    with gzip.open(PRIOR_DIR / "h200-resnet18-train-bf16-b32.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    sites = [
        TaskSpec(r["key"], Kind.SITE, r["name"], r["signature"], space_for(Kind.SITE, r["signature"]))
        for r in rows
        if r.get("type") == "task" and r["kind"] == "template_choice"
    ]
    work = {t.name: site_work(t) for t in sites}
    assert work["convolution 32x64x56x56,128x64x3x3"] == 32 * 28 * 28 * 128 * 64 * 3 * 3  # stride 2
    assert work["convolution 32x64x56x56,64x64x3x3"] == 32 * 56 * 56 * 64 * 64 * 3 * 3
    assert work["addmm 32x1000,32x512,512x1000"] == 32 * 512 * 1000 and work["mm 1000x32,32x512"] == 1000 * 32 * 512
    assert site_work(TaskSpec("k", Kind.SITE, "?", {"op": "mm", "inputs": [["cuda", "bf16", "s0"]]}, None)) == 0

    db = Database.open(db_url)
    workload = Workload(db, "replay")
    workload.register(list(reversed(sites)))  # the matmuls first, as a capture may list them
    sweep = SweepContext(
        _context(db_url, db, trials=4),
        worker=None,
        progress=Progress(),
        workload=workload,
        device_type="cuda",
        model="replay",
    )
    planned = [t.name for t in SitePhase().plan(sweep).tasks]
    assert planned[0] == "convolution 32x3x224x224,64x3x7x7" and planned[-1].split()[0] in ("mm", "addmm")
    assert [work[n] for n in planned] == sorted(work.values(), reverse=True)
    db.close()
