"""A stored Triton template config is built at a site only where it computes that site's op.

A conv config's id carries the convolution's own geometry (kernel, stride, padding, groups, unrolling), not only its
tile sizes: built at a site of another geometry it computes another convolution. A transferred answer (the nearest
stored site's) reached mobilenet_v3_large's space-to-depth stem so, and its output was off by 0.45 of its largest
value (H100, bf16). An mm config's id carries params the site's lowering derives (``EVEN_K``: BLOCK_K divides K; its
accumulator type), which must be the site's."""

import logging

import pytest
import torch
import torch._inductor.config as inductor_config
from torch import nn

import tuner.backend as tb
from tuner.backend import journal
from tuner.backend.hooks.templates import conv_geometry, conv_mismatch
from tuner.core import Kind
from tuner.db import Database, current_device
from tuner.search_spaces.template import CONV_PREFIX, parse_generated

ONE_BY_ONE = CONV_PREFIX + (
    "ALLOW_TF32=False, BLOCK_K=16, BLOCK_M=64, BLOCK_N=16, GROUPS=1, KERNEL_H=1, KERNEL_W=1, "
    "PADDING_H=0, PADDING_W=0, STRIDE_H=1, STRIDE_W=1, UNROLL=True, num_stages=2, num_warps=4"
)
ATEN = {
    "stride": [2, 2],
    "padding": [1, 1],
    "dilation": [1, 1],
    "transposed": False,
    "output_padding": [0, 0],
    "groups": 1,
}


def _kwargs(cid):
    return parse_generated(cid)[1]


def test_a_config_runs_only_at_a_site_of_its_geometry():
    one = conv_geometry({**ATEN, "stride": [1, 1], "padding": [0, 0]}, [4, 8, 1, 1], float32=False, allow_tf32=False)
    assert conv_mismatch(_kwargs(ONE_BY_ONE), one) is None
    stem = conv_geometry(ATEN, [4, 3, 3, 3], float32=False, allow_tf32=False)
    assert stem["UNROLL"] is False and (stem["KERNEL_H"], stem["STRIDE_W"], stem["PADDING_H"]) == (3, 2, 1)
    assert conv_mismatch(_kwargs(ONE_BY_ONE), stem) == "KERNEL_H=1 where the site's is 3"
    rolled = {
        **_kwargs(ONE_BY_ONE),
        "KERNEL_H": 3,
        "KERNEL_W": 3,
        "STRIDE_H": 2,
        "STRIDE_W": 2,
        "PADDING_H": 1,
        "PADDING_W": 1,
        "UNROLL": False,
    }
    assert conv_mismatch(rolled, stem) is None
    assert "triton#1254" in conv_mismatch({**rolled, "num_warps": 8}, stem)


def test_float32_sites_also_match_the_tf32_setting_and_unusual_convolutions_build_nothing():
    fp32 = conv_geometry({**ATEN, "stride": [1, 1], "padding": [0, 0]}, [4, 8, 1, 1], float32=True, allow_tf32=True)
    assert conv_mismatch(_kwargs(ONE_BY_ONE), fp32) == "ALLOW_TF32=False where the site's is True"
    assert conv_geometry({**ATEN, "dilation": [2, 2]}, [4, 3, 3, 3], False, False) is None
    assert conv_geometry({**ATEN, "transposed": True}, [4, 3, 3, 3], False, False) is None
    assert conv_geometry(ATEN, [4, 3, 3], False, False) is None  # a 1-D convolution
    assert conv_geometry({"stride": [1, 1]}, [4, 3, 3, 3], False, False) is None


def _store_site(url, choice, x_sizes, w_sizes):
    """A stored convolution site at other sizes, its winner ``choice``; channels-last inputs, as Inductor's lowering
    lays out a CPU convolution's."""

    def row(sizes):
        n, c, h, w = sizes
        return ["cpu", "torch.float32", *sizes, h * w * c, 1, w * c, c, 0]

    sig = {
        "op": "convolution",
        "fp32_precision": torch.get_float32_matmul_precision(),
        "inputs": [row(x_sizes), row(w_sizes)],
        "space": {"choices": ["aten:convolution", choice], "default": "aten:convolution"},
    }
    db = Database.open(url)
    task = db.upsert_task("c" * 64, "template_choice", "convolution", sig, "fp")
    db.set_winner(task.id, db.device_id(current_device("cpu")), None, {"choice": choice}, 1.0, 2.0)
    db.close()


def test_the_nearest_sites_config_of_another_geometry_is_not_built(tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 't.db'}"
    _store_site(url, ONE_BY_ONE, [2, 8, 16, 16], [4, 8, 1, 1])
    torch._dynamo.reset()
    inductor_config.freezing = False  # a frozen CPU convolution is oneDNN's, no selection site
    tb.reset_stats()
    m, x = nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False).eval(), torch.randn(2, 3, 16, 16)
    with torch.no_grad(), caplog.at_level(logging.INFO, logger="tuner.backend"):
        y = torch.compile(m, backend="tuned", options={"db": url})(x)
        torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-5)
        with journal.recording() as decisions:
            torch._dynamo.reset()
            torch.compile(m, backend="tuned", options={"db": url})(x)
    s = tb.stats()
    assert s["transferred"] == 0 and s["misses"] >= 1, s
    assert "KERNEL_H=1 where the site's is 3" in caplog.text
    (site,) = [d for d in decisions if d.kind == Kind.SITE]
    assert (
        site.outcome == journal.MISS
        and "is not offered here" in site.reason
        and site.reason.endswith("KERNEL_H=1 where the site's is 3; Inductor's default aten:convolution")
    ), site


@pytest.fixture(autouse=True)
def _freezing_back():
    old = inductor_config.freezing
    yield
    inductor_config.freezing = old


def test_an_mm_config_runs_only_with_the_sites_derived_params():
    from tuner.backend.hooks.templates import mm_mismatch

    gpt2 = {
        "ACC_TYPE": "tl.float32",
        "BLOCK_K": 128,
        "BLOCK_M": 16,
        "BLOCK_N": 32,
        "EVEN_K": True,
        "GROUP_M": 8,
        "USE_FAST_ACCUM": False,
        "hint_override": None,
        "num_stages": 6,
        "num_warps": 4,
    }
    site = {**gpt2, "BLOCK_K": 64, "BLOCK_M": 64, "num_stages": 3}
    assert mm_mismatch(gpt2, site, k=768) is None, "tile sizes and stages are the config's own"
    assert mm_mismatch(gpt2, site, k=576) == "EVEN_K with BLOCK_K=128 where K is 576"
    assert mm_mismatch(gpt2, site, k=None) == "EVEN_K with BLOCK_K=128 where K is not static"
    assert mm_mismatch({**gpt2, "EVEN_K": False}, site, k=576) is None, "masked loads run at any K"
    assert (
        mm_mismatch(gpt2, {**site, "ACC_TYPE": "tl.int32"}, k=768) == "ACC_TYPE=tl.float32 where the site's is tl.int32"
    )
