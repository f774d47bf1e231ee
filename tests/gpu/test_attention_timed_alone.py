"""Attention backends timed alone on the GPU for real (``pytest -m gpu``): every fused backend of a bf16 site is timed
and checked against math attention, and a CUDA sweep settles an attention task from those timings, with no
whole-workload trial of its own."""

import pytest
from typer.testing import CliRunner

from tests.helpers.attention_db import attention_task
from tuner.backend.instrument.attention_timing import time_backends
from tuner.cli import app
from tuner.search_spaces.attention import ALONE_TOLERANCE

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("shape,causal", [([8, 12, 1, 64, 512], False), ([2, 4, 32, 16, 32], True)])
def test_each_fused_backend_is_timed_alone_after_its_numerics(shape, causal):
    got = time_backends(
        {"shape": shape, "dtype": "bfloat16", "causal": causal, "mask": False}, ["flash", "efficient", "cudnn"]
    )
    timed = {b: t for b, t in got.items() if "ms" in t}
    assert {"flash", "efficient"} <= set(timed), got
    for t in timed.values():
        assert 0 < t["ms"] < 1.0 and t["spread"] >= 0 and t["error"] <= ALONE_TOLERANCE["bfloat16"]


def test_a_cuda_sweep_settles_the_attention_backends_alone(db_url, cwd_root):
    args = [
        "sweep",
        "--model",
        "tests.helpers.models:attention",
        "--input-shape",
        "2,32,64",
        "--device",
        "cuda",
        "--dtype",
        "bf16",
        "--budget",
        "quick",
        "--trials",
        "2",
        "--no-fusion",
        "--no-time-unfrozen",
        "--db",
        db_url,
    ]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "attention site(s) alone" in " ".join(res.output.split())
    _, trials, winner = attention_task(db_url)
    assert 1 <= len(trials) <= 2 and all(status == "ok" for _, status, _ in trials), (
        trials
    )  # the default and the fastest
    assert all(ms < 0.1 for _, _, ms in trials)  # the attention's time alone (two calls), not the workload's step
    assert winner in [c for c, _, _ in trials]


def test_a_masked_site_is_timed_alone_with_its_mask_and_never_with_flash():
    """An additive mask broadcast over the heads, as the dispatcher hands the fused kernels a model's boolean one."""
    layout = {"dtype": "bfloat16", "shape": [8, 1, 128, 128], "stride": [16384, 0, 128, 1]}
    site = {"shape": [8, 16, 128, 64, 128], "dtype": "bfloat16", "causal": False, "mask": True, "mask_layout": layout}
    got = time_backends(site, ["flash", "efficient", "cudnn"])
    assert "ms" not in got["flash"] and "mask" in got["flash"]["error"]
    assert "ms" in got["efficient"] and got["efficient"]["error"] <= ALONE_TOLERANCE["bfloat16"], got


def test_a_site_run_as_math_has_its_fused_backends_timed_through_the_front_end():
    """BERT-base's boolean mask as Transformers builds it under a compile on torch 2.11 (strides ``(0, n, 1, 0)``):
    the raw memory-efficient op refused its last dimension in a sweep; through PyTorch's front end, as the rewrite calls
    it, the fused kernels take it (the mask made contiguous first), with math's numerics."""
    layout = {"dtype": "bool", "shape": [8, 1, 512, 512], "stride": [0, 512, 1, 0]}
    site = {
        "shape": [8, 12, 512, 64, 512],
        "dtype": "bfloat16",
        "causal": False,
        "mask": True,
        "mask_layout": layout,
        "backend": "math",
    }
    got = time_backends(site, ["flash", "efficient", "cudnn"], front_end=True)
    assert "ms" not in got["flash"]
    assert (
        "ms" in got["efficient"]
        and 0 < got["efficient"]["ms"] < 1.0
        and got["efficient"]["error"] <= ALONE_TOLERANCE["bfloat16"]
    ), got
