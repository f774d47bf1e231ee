"""The numerics bound: the dtype's tolerance, widened only by how far eager itself is from float64."""

import torch
import torchvision

from tuner.measure.numerics import TOLERANCE, eager_error, relative_error, tolerance_for
from tuner.steps import run_step


def test_inference_keeps_the_dtype_bound():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).eval()
    x = torch.randn(4, 32)
    ref = run_step("infer", m, x, grads=True)
    e = eager_error("infer", m, x, ref)
    assert 0 <= e < 1e-5
    assert tolerance_for("fp32", e) == TOLERANCE["fp32"]


def test_a_training_step_widens_it_by_eagers_own_rounding():
    """resnet18's fp32 gradients differ from float64 by more than 1e-3/4: a correct compile may too."""
    torch.manual_seed(0)
    m = torchvision.models.resnet18().train()
    x = torch.randn(4, 3, 64, 64)
    ref = run_step("train", m, x, grads=True)
    e = eager_error("train", m, x, ref)
    assert e > 0
    tol = tolerance_for("fp32", e)
    assert tol == max(TOLERANCE["fp32"], 4 * e)
    # a step that is wrong (every gradient scaled by a quarter) stays outside the bound; eager's own error differs by
    # CPU (1.6% on an AMD EPYC, so a bound of 6.4%, against about 1e-3 on a Xeon)
    wrong = [t * 1.25 for t in ref]
    assert relative_error(wrong, ref) > tol
    assert tolerance_for("bf16", float("nan")) == TOLERANCE["bf16"]
