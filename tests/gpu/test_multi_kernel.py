"""A grouping's ``triton.multi_kernel`` on the GPU for real (``pytest -m gpu``): forced to 3, a LayerNorm whose row is
past Inductor's bound for a persistent reduction is compiled both ways (persistent and looped), the variant picked by
the value, so the compile's first call times nothing; eager's numerics hold. At 0 it is looped only. At 1 (a user's
own setting) the first call times both variants, and ``stats()`` counts it."""

import pytest
import torch
import torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code

from tests.backend.test_conv_rewrite import _compiled, _grouping, _inference
from tuner.backend import counters
from tuner.core import Forcing, Kind
from tuner.search_spaces.fusion import MULTI_KERNEL, to_patches

pytestmark = pytest.mark.gpu


def _run(model, x, g, task, value):
    """``model`` compiled with its grouping's ``triton.multi_kernel`` forced to ``value`` (1, which the space never
    offers, as a user's ``TORCHINDUCTOR_MULTI_KERNEL=1`` sets it): (output, code, how many multi-kernels timed their
    variants, each also one of ``stats()["benchmarks"]``)."""
    forcing = (
        Forcing()
        if value == 1
        else Forcing({Kind.FUSION: {g.fusion_key: to_patches({**task.space.default, MULTI_KERNEL: value})}})
    )
    counters.reset_stats()
    with _inference(), inductor_config.patch({MULTI_KERNEL: 1} if value == 1 else {}):
        y, (code,) = run_and_get_code(_compiled(model, forcing, device="cuda"), x)
    return y, code, counters.count("multi_kernel_timed")


@pytest.mark.parametrize("value", [0, 3, 1])
def test_multi_kernel_runs_the_variant_its_value_names(value):
    torch.manual_seed(0)
    model = torch.nn.LayerNorm(8192).cuda().to(torch.bfloat16).eval()
    x = torch.randn(64, 8192, device="cuda", dtype=torch.bfloat16)
    g, task = _grouping(model, x, device="cuda")
    assert task.space.default[MULTI_KERNEL] == 0
    y, code, timed = _run(model, x, g, task, value)
    with torch.no_grad():
        torch.testing.assert_close(y, model(x), rtol=0.05, atol=0.05)
    both = "triton_per_" in code and "triton_red_" in code
    assert both == (value != 0), "a row of 8192 is looped by default, and compiled both ways under multi-kernel"
    assert (timed > 0) == (value == 1), timed
