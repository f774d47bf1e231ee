"""Template-site choices timed as CUDA-graph replays take their kernels' time (``pytest -m gpu``): a Triton choice's
run function must launch inside the capture, or the graph is empty and every choice "runs" in a few microseconds."""

import pytest
import torch

from tuner.backend.compiler import compile_with_context
from tuner.backend.instrument.context import MeasuringContext
from tuner.backend.instrument.recorder import Recorder
from tuner.core import Forcing

pytestmark = pytest.mark.gpu
PATCHES = {"fx_graph_cache": False, "autotune_local_cache": False, "benchmark_epilogue_fusion": False}


def _compile(model, x, ctx):
    def backend(gm, ex, **_):
        return compile_with_context(gm, ex, ctx, PATCHES)

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend=backend)(x)
    return ctx


def test_a_triton_choice_timed_as_graph_replays_takes_its_kernels_time():
    torch.manual_seed(0)
    m = torch.nn.Linear(4096, 4096, bias=False).cuda().to(torch.bfloat16).eval()
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    rec = Recorder()
    _compile(m, x, MeasuringContext(Forcing(), "cuda", rec))
    site = next(s for s in rec.sites.values() if s.op == "mm")
    triton = [c for c in site.choices if c.startswith("triton")][:3]
    assert triton, site.choices
    bench = {site.key: (site.default, *triton)}
    timed = {
        how: _compile(m, x, MeasuringContext(Forcing(), "cuda", None, bench, None, how)).timings[site.key]
        for how in ("cudagraph", "pipelined")
    }
    # a 4096^3 bf16 GEMM takes ~0.2 ms on an H200; an empty graph replays in ~0.01 ms
    for c in bench[site.key]:
        assert timed["cudagraph"][c] >= 0.5 * timed["pipelined"][c] and timed["cudagraph"][c] > 0.05, (c, timed)


def test_a_graph_holds_the_inputs_its_calls_read():
    """A graph replayed after the next one's capture (each empties the allocator's cache) must still find its inputs:
    they live as long as the graph, not as the caller's copies."""
    import functools
    import weakref

    from tuner.backend.instrument.site_timing import _graph_of, rotated

    x = torch.ones(1 << 22, device="cuda")
    sets = rotated((x,))
    copies = [weakref.ref(s[0]) for s in sets[1:]]
    graph = _graph_of([functools.partial(lambda t: lambda: t.mul_(1.0), *s) for s in sets])
    del sets
    assert copies and all(c() is not None for c in copies)
    _graph_of([lambda: lambda: x.add_(0.0)])  # another capture: the cache emptied
    graph.replay()
    torch.cuda.synchronize()
    assert float(x[0]) == 1.0
