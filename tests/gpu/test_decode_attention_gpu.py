"""Tuner's decode attention kernel on the GPU for real (``pytest -m gpu``): its numerics against math attention over
splits, grouped heads and masks, the tile counts it leaves, a CUDA graph of its calls, and the site timed alone beside
the fused backends."""

import pytest
import torch

from tuner.backend.decode_attention import decode_attention, op
from tuner.backend.instrument.attention_timing import _reference as timing_reference, time_backends
from tuner.backend.splitk_mm import COUNTS_BY_DEVICE
from tuner.search_spaces.attention import ALONE_TOLERANCE

pytestmark = pytest.mark.gpu


def _reference(q, k, v, mask=None):
    """Float32 attention, the key/value heads repeated for each query head of a group and a boolean mask read as which
    keys to attend to (``attention_timing._reference``, what a site timed alone is checked against)."""
    return timing_reference({"q": q, "k": k, "v": v, "mask": mask, "causal": False})


@pytest.mark.parametrize(
    "b, h, hk, sq, sk, d, mask",
    [
        (8, 12, 12, 1, 512, 64, None),
        (2, 16, 4, 4, 2048, 128, "bool"),
        (3, 8, 8, 16, 100, 80, "bias"),
        (1, 2, 1, 1, 64, 16, None),
    ],
)
def test_the_kernel_matches_math_attention_and_leaves_its_counts_zero(b, h, hk, sq, sk, d, mask):
    torch.manual_seed(0)
    q = torch.randn(b, h, sq, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(b, hk, sk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    m = {
        "bool": lambda: torch.rand(b, 1, sq, sk, device="cuda") > 0.2,
        "bias": lambda: torch.randn(1, sk, device="cuda", dtype=torch.bfloat16),
        None: lambda: None,
    }[mask]()
    ref = _reference(q, k, v, m)
    for _ in range(3):
        got = op()(q, k, v, m, None)
        assert ((got.float() - ref).abs().max() / ref.abs().max()) < ALONE_TOLERANCE["bfloat16"]
    # configs the device script times: another split, key step and warps; one query head a program
    for config in ({"split": 2, "block_n": 128, "warps": 4}, {"grouped": False}):
        got = decode_attention(q, k, v, m, None, **config)
        assert ((got.float() - ref).abs().max() / ref.abs().max()) < ALONE_TOLERANCE["bfloat16"], config
    assert int(COUNTS_BY_DEVICE.get("cuda").abs().sum()) == 0


def test_a_cuda_graph_of_its_calls_replays_them():
    q = torch.randn(8, 12, 1, 64, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(8, 12, 512, 64, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    op()(q, k, v, None, None)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = op()(q, k, v, None, None)
    for _ in range(3):
        q.normal_()
        graph.replay()
        torch.testing.assert_close(out.float(), _reference(q, k, v), rtol=0.03, atol=0.03)


def test_a_decode_site_is_timed_alone_beside_the_fused_backends():
    site = {"shape": [8, 12, 1, 64, 512], "dtype": "bfloat16", "causal": False, "mask": False, "decode": True}
    got = time_backends(site, ["cudnn", "decode"])
    assert "ms" in got["decode"] and 0 < got["decode"]["ms"] < 1.0, got
    print({b: t.get("ms") for b, t in got.items()})
    unmarked = time_backends({**site, "decode": False}, ["decode"])
    assert "ms" not in unmarked["decode"]


def test_a_decode_step_with_grouped_heads_forced_to_the_kernel_matches_eager():
    """A Llama-style decode step (8 query heads over 2 key/value heads, SDPA's ``enable_gqa``): each layer's attention
    site, forced to ``decode``, calls the kernel in the compiled graph, with eager's numerics."""
    from torch._inductor.utils import run_and_get_code

    from tuner.backend.hooks.attention import AttentionBackends
    from tuner.backend.hooks.attention_math import KeepMathAttention
    from tuner.search_spaces.attention import site_class
    from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

    spec = WorkloadSpec(
        model="hf:llama,num_hidden_layers=2,hidden_size=512,num_attention_heads=8,num_key_value_heads=2,vocab_size=1000",
        device="cuda",
        mode="decode",
        dtype="bf16",
        batch=4,
        seq_len=1024,
    )
    model, ids = build_model(spec), make_inputs(spec)[0]
    assert model.blocks[0].k.shape == (4, 2, 1024, 64)
    forced = AttentionBackends({site_class("bfloat16", 64, False, False): "decode"})
    torch._dynamo.reset()
    with torch.no_grad():
        want = model(ids).float()
        f = torch.compile(
            model, options={"pre_grad_custom_pass": KeepMathAttention(), "post_grad_custom_post_pass": forced}
        )
        got, codes = run_and_get_code(f, ids)
    assert sum(c.count("torch.ops.tuner.decode_attention.default(") for c in codes) == 2, codes
    assert float((got.float() - want).abs().max() / want.abs().max()) < 0.05
