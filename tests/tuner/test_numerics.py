"""The numerics bound, per tensor: the dtype's tolerance, widened only by how far eager itself is from float64 on
that tensor."""

import torch
import torchvision

from tuner.measure.numerics import (
    TOLERANCE,
    eager_errors,
    relative_error,
    tensor_errors,
    tolerance_for,
    widened_by_default,
    within,
)
from tuner.workloads.steps import run_step


def test_inference_keeps_the_dtype_bound():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
    x = torch.randn(4, 32)
    ref = run_step("infer", m, x, grads=True)
    es = eager_errors("infer", m, x, ref)
    assert len(es) == 1 and 0 <= es[0] < 1e-5
    assert tolerance_for("fp32", es) == [TOLERANCE["fp32"]]


def test_a_training_step_widens_it_by_eagers_own_rounding():
    """resnet18's fp32 gradients differ from float64 by more than 1e-3/4: a correct compile may too."""
    torch.manual_seed(0)
    m = torchvision.models.resnet18().train()
    x = torch.randn(4, 3, 64, 64)
    ref = run_step("train", m, x, grads=True)
    es = eager_errors("train", m, x, ref)
    assert len(es) == len(ref) and max(es) > 0
    tol = tolerance_for("fp32", es)
    assert tol == [max(TOLERANCE["fp32"], 4 * e) for e in es]
    # a step that is wrong (every gradient scaled by a quarter) stays outside the bound; eager's own error differs by
    # CPU (1.6% on an AMD EPYC, so a bound of 6.4%, against about 1e-3 on a Xeon)
    wrong = [t * 1.25 for t in ref]
    assert not within(tensor_errors(wrong, ref), tol) and relative_error(wrong, ref) > max(tol)
    assert tolerance_for("bf16", [float("nan")]) == [TOLERANCE["bf16"]]


def test_under_mixed_precision_a_wrong_output_is_caught_though_small_gradients_are_far_off():
    """resnet18 amp-bf16: eager's gradients are up to ~50% from float64 (the output ~3%), which one bound for every tensor (the
    largest) would let any output through; per tensor, the output's bound stays the dtype's."""
    torch.manual_seed(0)
    m = torchvision.models.resnet18().train()
    x = torch.randn(2, 3, 64, 64)
    ref = run_step("train", m, x, grads=True, amp=("cpu", "bfloat16"))
    tol = tolerance_for("amp-bf16", eager_errors("train", m, x, ref))
    assert max(tol) > 1.0 and tol[0] < 0.2  # tensor 0 is the output
    wrong = [ref[0] * 1.25, *ref[1:]]
    errs = tensor_errors(wrong, ref)
    assert max(errs) < max(tol) and not within(errs, tol)  # the old single bound would have admitted it
    assert within(tensor_errors(ref, ref), tol) and widened_by_default(tol, [2.0] * len(tol)) == [
        max(t, 4.0) for t in tol
    ]
