"""``tuner db revalidate``'s parts: a stored workload name read back as the workload to capture again (the same
name), and why a winner it timed was put back."""

import pytest

from tests.helpers.dbfill import fill
from tuner.commands.revalidate import _why_not, stored_specs
from tuner.measure.result import Measurement, Status
from tuner.workloads.spec import WorkloadSpec

GPT = "hf:gpt2"
SPECS = [
    WorkloadSpec(GPT, device="cpu", mode="decode", batch=8, seq_len=512, dtype="bf16"),
    WorkloadSpec(GPT, device="cpu", batch=4, seq_len=128),
    WorkloadSpec("resnet18", device="cpu", batch=2, image_size=64, channels_last=True),
    WorkloadSpec("resnet18", device="cpu", batch=2, image_size=64, freezing=False),
    WorkloadSpec("resnet18", device="cpu", mode="train", batch=2, image_size=64, dtype="amp-bf16"),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_stored_workload_is_captured_again_as_the_workload_it_names(db_url, spec):
    """A decode step's name holds one token per sequence and its KV cache's length: read back as an input shape, it
    was refused ("--mode decode takes ... not --input-shape") and revalidate stopped."""
    db = fill(db_url)
    try:
        rec = db.upsert_task(
            "d" * 64,
            "template_choice",
            "packed_linear",
            {"op": "mm", "inputs": [], "space": {"choices": ["a", "b"], "default": "a"}},
            "fp",
        )
        db.link_workload(spec.name, [rec.id])
    finally:
        db.close()
    specs, refused = stored_specs(db_url, "cpu", threads=None)
    assert spec.name in [s.name for s in specs] and not refused


def test_a_reverted_winner_says_whether_it_was_slower_too_little_faster_or_faster_within_the_noise():
    """Re-timed at 1.049x with spreads that overlap, a winner was reported "no longer faster"."""
    noisy = Measurement(Status.OK, 2.0, 1.9, 0.2, 2.1, baseline_spread_ms=0.2)
    assert noisy.ratio < 0.98 and not noisy.beats_default(0.02)
    assert _why_not(noisy, 0.02) == "faster only within the noise (spreads 0.2 and 0.2 ms)"
    assert _why_not(Measurement(Status.OK, 2.09, 2.0, 0.0, 2.1), 0.02) == "faster by less than 2%"
    assert _why_not(Measurement(Status.OK, 2.2, 2.1, 0.0, 2.1), 0.02) == "no longer faster"


TRITON = (
    'triton::mm:{"ACC_TYPE":"tl.float32","BLOCK_K":128,"BLOCK_M":16,"BLOCK_N":32,"EVEN_K":true,"GROUP_M":8,'
    '"USE_FAST_ACCUM":false,"hint_override":null,"num_stages":6,"num_warps":4}'
)


@pytest.mark.parametrize(
    "epilogue, ratio, verdict", [(True, 0.995, "kept"), (True, 1.03, "reverted"), (False, 0.995, "reverted")]
)
def test_a_site_winner_that_takes_in_its_epilogue_is_kept_while_no_slower_alone(db_url, epilogue, ratio, verdict):
    """A Triton tile stored for the kernel it saves (the GELU cuBLAS leaves to a kernel of its own) is re-timed alone
    within 1% of cuBLAS: kept, as the sweep kept it; slower alone, or with no epilogue to take in, put back."""
    from tests.helpers.replay import ENV
    from tuner.commands.revalidate import _Run
    from tuner.core import Kind, TaskSpec
    from tuner.db import Database, current_device
    from tuner.search_spaces import space_for
    from tuner.budget.presets import make_budget

    db = Database.open(db_url)
    try:
        space = {
            "choices": ["aten::bias_addmm:{}", TRITON],
            "default": "aten::bias_addmm:{}",
            **({"epilogue": True} if epilogue else {}),
        }
        sig = {"op": "addmm", "inputs": [], "space": space}
        task = TaskSpec("e" * 64, Kind.SITE, "addmm 8x3072", sig, space_for(Kind.SITE, sig))
        rec = db.upsert_task(task.key, task.kind, task.name, sig, task.space.fingerprint())
        dev = db.device_id(current_device("cpu"))
        run = _Run(db, None, dev, db.environment_id(ENV), make_budget("quick"))
        drift = run.settle(
            task, rec, {"choice": TRITON}, 1.07, Measurement(Status.OK, 0.005 * ratio, 0.005 * ratio, 0.0, 0.005)
        )
        assert drift.verdict == verdict
        assert db.winner_config(rec.id, dev)["choice"] == (TRITON if verdict == "kept" else "aten::bias_addmm:{}")
    finally:
        db.close()
