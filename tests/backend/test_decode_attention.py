"""Tuner's decode attention kernel on the CPU: it runs in Triton's interpreter (a subprocess, as the interpreter is
chosen when Triton's JIT is imported; in float16, whose values the interpreter computes as such), both by itself and
as the backend a compiled graph's attention site is rewritten to. Which calls it takes, and where the attention space
offers it, are checked as they are."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tuner.backend.decode_attention import BLOCK_N, MAX_SPLIT, split_for, takes, tiles_for
from tuner.search_spaces import space_for
from tuner.search_spaces.attention import FAMILY
from tuner.search_spaces.base import InvalidConfig

_KERNEL = textwrap.dedent("""
    import json, torch
    from tuner.backend.decode_attention import op
    from tuner.backend.splitk_mm import COUNTS_BY_DEVICE
    torch.manual_seed(0)
    errors, layouts = [], []
    for b, h, hk, sq, sk, d, mask, scale in [(2, 4, 4, 1, 300, 64, None, None), (1, 4, 2, 3, 130, 32, "bool", 0.3),
                                             (2, 2, 1, 16, 64, 16, "bias", None), (1, 2, 2, 5, 1000, 80, None, None)]:
        q = torch.randn(b, h, sq, d).half()
        k, v = (torch.randn(b, hk, sk, d).half() for _ in range(2))
        m = {"bool": lambda: torch.rand(b, h, sq, sk) > 0.3, "bias": lambda: torch.randn(1, sk).half(), None: lambda: None}[mask]()
        g = h // hk
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1),
                                                               attn_mask=m if m is None or m.dtype == torch.bool else m.float(), scale=scale)
        for _ in range(2):  # the second call finds the counts the first one left
            out = op()(q, k, v, m, scale)
            errors.append(float((out.float() - ref).abs().max() / ref.abs().max()))
        layouts.append(list(out.shape) == list(ref.shape) and out.transpose(1, 2).is_contiguous())
        # configs of the kind the device script times: the split past its bound clamped to it; one query head a program
        from tuner.backend.decode_attention import decode_attention
        for config in ({"split": 32, "block_n": 32, "warps": 2, "stages": 3}, {"grouped": False}):
            out = decode_attention(q, k, v, m, scale, **config)
            errors.append(float((out.float() - ref).abs().max() / ref.abs().max()))
    left = [float(c.abs().sum()) for c in COUNTS_BY_DEVICE._by_device.values()]
    print(json.dumps({"errors": errors, "layouts": layouts, "left": left}))
""")

_REWRITE = textwrap.dedent("""
    import json, torch, torch.nn.functional as F
    from torch._inductor.utils import run_and_get_code
    from tuner.backend.hooks.attention import AttentionBackends
    from tuner.backend.hooks.attention_math import KeepMathAttention
    from tuner.search_spaces.attention import site_class

    class Cached(torch.nn.Module):
        def __init__(self, biased, kv_heads=4):
            super().__init__()
            self.register_buffer("k", torch.randn(2, kv_heads, 200, 32).half())
            self.register_buffer("v", torch.randn(2, kv_heads, 200, 32).half())
            self.bias = torch.nn.Parameter(torch.randn(4, 1, 200).half()) if biased else None
            self.gqa = kv_heads < 4

        def forward(self, q):
            grouped = {"enable_gqa": True} if self.gqa else {}
            return F.scaled_dot_product_attention(q, self.k, self.v, attn_mask=self.bias, **grouped) * 2

    got = []
    # a fused site; a three-dimensional bias, which the CPU's dispatcher runs as math; 4 query heads over 2 (enable_gqa)
    for biased, kv_heads in ((False, 4), (True, 4), (False, 2)):
        m, q = Cached(biased, kv_heads), torch.randn(2, 4, 1, 32).half()
        forced = AttentionBackends({site_class("float16", 32, biased, False): "decode"})
        with torch.no_grad():
            f = torch.compile(m, options={"pre_grad_custom_pass": KeepMathAttention(), "post_grad_custom_post_pass": forced})
            out, (code,) = run_and_get_code(f, q)
            got.append({"calls": code.count("torch.ops.tuner.decode_attention.default("), "error": float((out - m(q)).abs().max())})
    print(json.dumps(got))
""")


def _interpreted(source):
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_kernel_matches_math_attention_over_splits_groups_and_masks():
    got = _interpreted(_KERNEL)
    assert len(got["errors"]) == 16 and max(got["errors"]) < 2e-3, got
    assert all(got["layouts"]) and got["left"] and max(got["left"]) == 0.0, got


def test_a_site_forced_to_decode_calls_the_kernel_in_the_compiled_graph():
    got = _interpreted(_REWRITE)
    assert [g["calls"] for g in got] == [1, 1, 1] and max(g["error"] for g in got) < 1e-2, got


@pytest.mark.parametrize(
    "q, k, dtype, causal, taken",
    [
        ([8, 12, 1, 64], [8, 12, 512, 64], "bfloat16", False, True),
        ([2, 16, 4, 128], [2, 4, 2048, 128], "float16", False, True),  # grouped heads
        ([8, 12, 17, 64], [8, 12, 512, 64], "bfloat16", False, False),  # more queries than a block
        ([8, 12, 1, 64], [8, 12, 512, 64], "bfloat16", True, False),  # causal, aligned to the first key
        ([8, 12, 1, 64], [8, 12, 512, 64], "float32", False, False),
        ([2, 6, 1, 64], [2, 4, 512, 64], "bfloat16", False, False),  # heads that do not group
        ([2, 6, 1, 8], [2, 6, 512, 8], "bfloat16", False, False),
    ],
)
def test_it_takes_a_few_half_precision_queries_over_many_keys(q, k, dtype, causal, taken):
    assert takes(q, k, dtype, causal) is taken


def test_the_keys_are_split_so_each_sm_gets_programs_and_each_slice_keys():
    assert split_for(96, 512, 132) == 4  # gpt2's decode step on the H200
    assert split_for(96, 100, 132) == 1  # slices of at least a loop step of keys
    assert split_for(1, 1 << 20, 132) == MAX_SPLIT
    assert split_for(4096, 4096, 132) == 1
    assert all(split_for(t, n, 132) * BLOCK_N <= max(n, BLOCK_N) for t in (1, 96, 4096) for n in (64, 512, 4096))


def test_a_blocks_rows_take_a_key_heads_query_heads_together():
    assert tiles_for(8, 12, 12, 1) == 96  # gpt2's: one head, one query a block
    assert tiles_for(8, 32, 8, 1) == 64 and tiles_for(8, 32, 8, 1, grouped=False) == 256  # 4 heads a block, or 1
    assert tiles_for(2, 2, 1, 16) == 4  # 2 heads x 16 queries: two blocks of 16 rows


def test_the_space_offers_decode_only_at_a_site_the_capture_marked():
    site = {
        "site": "0" * 16,
        "backend": "cudnn",
        "mask": False,
        "count": 12,
        "shape": [8, 12, 1, 64, 512],
        "dtype": "bfloat16",
    }
    (plain,) = space_for(FAMILY, {"space": {"device": "cuda", "sites": [site]}}).params
    (marked,) = space_for(FAMILY, {"space": {"device": "cuda", "sites": [{**site, "decode": True}]}}).params
    assert "decode" not in plain.options and marked.options[-1] == "decode"
    space = space_for(FAMILY, {"space": {"device": "cuda", "sites": [site]}})
    with pytest.raises(InvalidConfig):
        space.validate({"site." + "0" * 16: "decode"})  # an imported answer naming it where it was never offered
    (cpu,) = space_for(
        FAMILY, {"space": {"device": "cpu", "sites": [{**site, "backend": "math", "decode": True}]}}
    ).params
    assert "decode" not in cpu.options
