"""Levers max-autotune never tries, on the GPU for real (``pytest -m gpu``): each attention backend forced at a bf16
attention site keeps eager's numerics, and the persistent TMA GEMM templates are offered at an mm site and can be
forced."""

import functools
import pytest
import torch
from torch._inductor.utils import run_and_get_code

from tests.helpers.compiling import measured, recorded
from tests.helpers.models import _Attention, _MaskedAttention
from tuner.backend import journal, process
from tuner.backend.instrument.recorder import Recorder
from tuner.core import Forcing, Kind
from tuner.search_spaces.attention import ANSWER_KNOB, FAMILY

pytestmark = pytest.mark.gpu

OPS = {
    "flash": "_scaled_dot_product_flash_attention",
    "efficient": "_scaled_dot_product_efficient_attention",
    "cudnn": "_scaled_dot_product_cudnn_attention",
}


_compiled = functools.partial(measured, device="cuda")


def _forced_attention(model_class, backend):
    """A bf16 attention block recorded, then compiled with its attention site forced to ``backend``: (the site, the
    compile's decisions, the output, eager's, the generated code)."""
    torch.manual_seed(0)
    m = model_class(dim=256, heads=4).cuda().to(torch.bfloat16).eval()
    x = torch.randn(4, 128, 256, device="cuda", dtype=torch.bfloat16)
    rec = Recorder()
    with torch.no_grad():
        ref = m(x)
        _compiled(m, recorder=rec)(x)
        (g,) = rec.graphs.values()
        (site,) = g.found[FAMILY]
        forcing = Forcing({FAMILY: {g.keys[FAMILY]: {ANSWER_KNOB: {site["site"]: backend}}}})
        with journal.recording() as decisions:
            y, (code,) = run_and_get_code(_compiled(m, forcing), x)
    return site, decisions, y, ref, code


@pytest.mark.parametrize("backend", ["flash", "efficient", "cudnn", "math"])
def test_each_attention_backend_is_forced_and_keeps_numerics(backend):
    site, decisions, y, ref, code = _forced_attention(_Attention, backend)
    assert site["backend"] in OPS and site["count"] == 2
    torch.testing.assert_close(y, ref, rtol=0.05, atol=0.05)
    assert [d.outcome for d in decisions if d.kind == FAMILY] == [journal.HIT]
    for name, op in OPS.items():
        assert (f"aten.{op}.default" in code) == (name == backend), (name, backend)


@pytest.mark.parametrize("backend", ["efficient", "cudnn"])
def test_a_masked_site_is_forced_to_each_backend_that_takes_a_mask(backend):
    """A boolean mask broadcast over the heads ([b, 1, n, n]): the memory-efficient kernel takes a bias of every head's
    sizes only, so the forced rewrite expands it (stride 0), as the dispatcher does."""
    site, _, y, ref, code = _forced_attention(_MaskedAttention, backend)
    assert site["mask"]
    torch.testing.assert_close(y, ref, rtol=0.05, atol=0.05)
    assert f"aten.{OPS[backend]}.default" in code


def test_the_persistent_tma_templates_are_offered_and_forced():
    if not process.has_inductor_flag("triton.enable_persistent_tma_matmul"):
        pytest.skip("this Inductor has no persistent TMA GEMM templates")
    m = torch.nn.Linear(512, 1024, bias=False).cuda().to(torch.bfloat16).eval()
    x = torch.randn(2048, 512, device="cuda", dtype=torch.bfloat16)
    (site,) = recorded(m, x, "cuda").sites.values()
    with torch.no_grad():
        tma = [c for c in site.choices if c.startswith("triton::mm_persistent_tma:")]
        assert tma, site.choices
        with journal.recording() as decisions:
            y, (code,) = run_and_get_code(_compiled(m, Forcing({Kind.SITE: {site.key: tma[0]}})), x)
        torch.testing.assert_close(y, m(x), rtol=0.05, atol=0.05)
    assert [(d.outcome, d.answer) for d in decisions if d.kind == Kind.SITE] == [(journal.HIT, tma[0])]
    assert "tma" in code.lower()


def test_a_forced_triton_template_takes_in_the_epilogue_a_library_call_leaves():
    """A linear layer then a GELU at a decode step's size: the recording says the site has an epilogue; forced to its
    library default the GELU is a kernel of its own, forced to a Triton tile it is part of the tile's kernel."""
    m = (
        torch.nn.Sequential(torch.nn.Linear(768, 3072), torch.nn.GELU(approximate="tanh"))
        .cuda()
        .to(torch.bfloat16)
        .eval()
    )
    x = torch.randn(8, 768, device="cuda", dtype=torch.bfloat16)
    rec = Recorder()
    with torch.no_grad():
        _compiled(m, recorder=rec)(x)
        (site,) = rec.sites.values()
        assert site.epilogue, "a GELU reads the site's output"
        triton = next(c for c in site.choices if c.startswith("triton::mm:"))
        codes = {}
        for choice in (site.default, triton):
            y, (codes[choice],) = run_and_get_code(_compiled(m, Forcing({Kind.SITE: {site.key: choice}})), x)
            torch.testing.assert_close(y, m(x), rtol=0.05, atol=0.05)
    assert "triton_poi_" in codes[site.default], "the library call leaves the GELU to a kernel of its own"
    assert "triton_poi_" not in codes[triton] and "tanh" in codes[triton], "the Triton tile takes the GELU in"


@pytest.mark.parametrize("backend", ["efficient", "cudnn"])
def test_attention_the_dispatcher_runs_as_math_is_forced_to_a_fused_kernel(backend):
    """A mask broadcast along its key dimension (as Transformers builds BERT's under Dynamo on torch before 2.14): the
    dispatcher runs math attention; the site is recorded as math and a fused kernel takes it when forced, given the
    mask in a form it takes (``backend/hooks/attention_math.sdpa``)."""
    from tests.helpers.models import _BroadcastMaskAttention

    site, decisions, y, ref, code = _forced_attention(_BroadcastMaskAttention, backend)
    assert site["backend"] == "math" and site["mask"] and site["count"] == 2
    torch.testing.assert_close(y, ref, rtol=0.05, atol=0.05)
    assert [d.outcome for d in decisions if d.kind == FAMILY] == [journal.HIT]
    assert f"aten.{OPS[backend]}.default" in code and "tuner.attention" not in code
