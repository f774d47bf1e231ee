"""A Triton config that does not fit a site, forced there (an imported or transferred answer), is not built there, on
the GPU for real (``pytest -m gpu``): the site keeps Inductor's default and eager's numerics. Built, a conv config of
another geometry computed a 1x1 convolution in place of a 3x3 one, and an mm config that says BLOCK_K divides K where
it does not loads past K unmasked."""

import json

import pytest
import torch

from tests.helpers.compiling import measured, recorded
from tuner.backend import journal
from tuner.core import Forcing, Kind
from tuner.search_spaces.template import CONV_PREFIX, parse_generated

pytestmark = pytest.mark.gpu

ONE_BY_ONE = CONV_PREFIX + (
    "ALLOW_TF32=False, BLOCK_K=16, BLOCK_M=64, BLOCK_N=16, GROUPS=1, KERNEL_H=1, KERNEL_W=1, "
    "PADDING_H=0, PADDING_W=0, STRIDE_H=1, STRIDE_W=1, UNROLL=True, num_stages=2, num_warps=4"
)


def test_a_forced_conv_config_of_another_geometry_is_a_miss_and_numerics_hold():
    torch.manual_seed(0)
    m = (
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        .cuda()
        .to(torch.bfloat16)
        .to(memory_format=torch.channels_last)
        .eval()
    )
    x = torch.randn(8, 16, 32, 32, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    (site,) = recorded(m, x, "cuda").sites.values()
    with torch.no_grad(), journal.recording() as decisions:
        y = measured(m, Forcing({Kind.SITE: {site.key: ONE_BY_ONE}}), device="cuda")(x)
        ref = m(x)
    assert [d.outcome for d in decisions if d.kind == Kind.SITE] == [journal.MISS]
    torch.testing.assert_close(y, ref, rtol=0.03, atol=0.03)


def test_a_forced_mm_config_whose_block_k_does_not_divide_k_is_a_miss_and_numerics_hold():
    torch.manual_seed(0)
    m = torch.nn.Linear(576, 64, bias=False).cuda().to(torch.bfloat16).eval()
    x = torch.randn(8, 576, device="cuda", dtype=torch.bfloat16)
    (site,) = recorded(m, x, "cuda").sites.values()
    listed = next(c for c in site.choices if c.startswith("triton::mm:"))
    params = {**parse_generated(listed)[1], "BLOCK_K": 128, "EVEN_K": True}  # 576 = 4.5 x 128
    wrong = "triton::mm:" + json.dumps(params, sort_keys=True, separators=(",", ":"))
    with torch.no_grad(), journal.recording() as decisions:
        y = measured(m, Forcing({Kind.SITE: {site.key: wrong}}), device="cuda")(x)
        ref = m(x)
    assert [d.outcome for d in decisions if d.kind == Kind.SITE] == [journal.MISS]
    torch.testing.assert_close(y, ref, rtol=0.03, atol=0.03)
