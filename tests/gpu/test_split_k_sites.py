"""Split-K choices at a skinny GEMM site, on the GPU for real (``pytest -m gpu``): the recording lists the site's menu
beside Inductor's choices, a forced split-K choice compiles to a call of tuner's kernel and keeps eager's numerics,
also captured in a CUDA graph and replayed (each call must leave its tile counts zero for the next)."""

import functools
import pytest
import torch
from torch._inductor.utils import run_and_get_code

from tests.helpers.compiling import measured, recorded
from tuner.backend import journal
from tuner.core import Forcing, Kind
from tuner.search_spaces import splitk

pytestmark = pytest.mark.gpu

_compiled = functools.partial(measured, device="cuda")


def _site(m, x):
    (site,) = recorded(m, x, "cuda").sites.values()
    return site


@pytest.mark.parametrize("bias, k", [(True, 3072), (False, 768)])
def test_a_forced_split_k_choice_runs_tuners_kernel(bias, k):
    torch.manual_seed(0)
    m = torch.nn.Linear(k, 768, bias=bias).cuda().to(torch.bfloat16).eval()
    x = torch.randn(8, k, device="cuda", dtype=torch.bfloat16)
    site = _site(m, x)
    offered = [c for c in site.choices if splitk.is_id(c)]
    assert [splitk.parse(c) for c in offered] == splitk.menu(
        8, 768, k, torch.cuda.get_device_properties(0).multi_processor_count
    )
    assert not site.default.startswith(splitk.PREFIX)
    for pick in (c for c in offered if splitk.parse(c)["SPLIT_K"] > 1):
        with torch.no_grad(), journal.recording() as decisions:
            y, (code,) = run_and_get_code(_compiled(m, Forcing({Kind.SITE: {site.key: pick}})), x)
            ref = m(x)
        assert [(d.outcome, d.answer) for d in decisions if d.kind == Kind.SITE] == [(journal.HIT, pick)]
        assert "extern_kernels.tuner_splitk_" in code
        torch.testing.assert_close(y, ref, rtol=0.03, atol=0.03)


def test_a_split_k_site_replays_right_in_a_cuda_graph():
    torch.manual_seed(0)
    m = (
        torch.nn.Sequential(torch.nn.Linear(3072, 768), torch.nn.GELU(), torch.nn.Linear(768, 3072))
        .cuda()
        .to(torch.bfloat16)
        .eval()
    )
    x = torch.randn(8, 3072, device="cuda", dtype=torch.bfloat16)
    rec = recorded(m, x, "cuda")
    answers = {}
    for key, site in rec.sites.items():
        answers[key] = max((c for c in site.choices if splitk.is_id(c)), key=lambda c: splitk.parse(c)["SPLIT_K"])
    assert len(answers) == 2
    f = _compiled(m, Forcing({Kind.SITE: answers}))
    static = x.clone()
    with torch.no_grad():
        ref = m(x)
        f(static)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            f(static)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = f(static)
        for _ in range(20):
            graph.replay()
        torch.testing.assert_close(out, ref, rtol=0.03, atol=0.03)
