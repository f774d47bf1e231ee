"""Mixed precision (``--dtype amp-bf16``): fp32 weights and inputs, the step under torch.autocast, as training
usually runs; compiled and timed for real on the CPU."""

import torch

from tests.helpers.models import mlp
from tuner.commands.bench import run_bench
from tuner.workloads.steps import run_step
from tuner.core import WorkloadName
from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

AMP = WorkloadSpec(
    model="tests.helpers.models:mlp", device="cpu", mode="train", dtype="amp-bf16", input_shape=(4, 64), threads=2
)


def test_an_amp_workload_keeps_fp32_weights_and_inputs_and_names_itself():
    assert AMP.amp == ("cpu", "bfloat16") and WorkloadSpec(model="m", dtype="bf16").amp is None
    model, x = build_model(AMP), make_inputs(AMP, sets=1)[0]
    assert all(p.dtype == torch.float32 for p in model.parameters()) and x.dtype == torch.float32
    assert "/amp-bf16/" in AMP.name and WorkloadName.parse(AMP.name).dtype == "amp-bf16"


def test_the_step_runs_under_autocast_and_its_gradients_stay_fp32():
    m, x = mlp(), torch.randn(4, 64)
    out, *grads = run_step("train", m, x, grads=True, amp=("cpu", "bfloat16"))
    assert out.dtype == torch.bfloat16 and grads and all(g.dtype == torch.float32 for g in grads)
    assert run_step("train", m, x, grads=True)[0].dtype == torch.float32  # without amp: the weights' dtype


def test_a_compiled_amp_training_step_matches_eager_within_bf16(tmp_path):
    result = run_bench(AMP, ["eager", "default"], f"sqlite:///{tmp_path / 'none.db'}", rounds=3)
    assert result["results"]["default"]["numerics_ok"] and result["results"]["default"]["median_ms"] > 0


def test_a_timed_training_step_ends_with_its_optimizers_step(tmp_path):
    """tuner bench times a training step as users run one: forward and backward, then SGD (vision) or AdamW
    (language models), eager, in every mode alike."""
    from tuner.commands.bench import _timed_step
    from tuner.workloads.steps import optimizer_for

    model, inputs = build_model(AMP), make_inputs(AMP)
    assert isinstance(optimizer_for("train", "hf:gpt2", model), torch.optim.AdamW)
    assert (
        isinstance(optimizer_for("train", AMP.model, model), torch.optim.SGD)
        and optimizer_for("infer", AMP.model, model) is None
    )
    before = [p.detach().clone() for p in model.parameters()]
    _timed_step(AMP, model, inputs)(0)
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))  # the weights moved: it stepped
    doc = run_bench(AMP, ["default"], f"sqlite:///{tmp_path / 'none.db'}", rounds=3)
    assert doc["optimizer"] == "SGD" and doc["results"]["default"]["median_ms"] > 0
