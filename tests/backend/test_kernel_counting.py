"""Each tunable Triton kernel a CUDA compile lowers counts as a hit or a miss (the real kernels need a GPU: tests/gpu
runs a compile at another batch; here kernel objects as Inductor lays them out stand in, keyed by Inductor's own
hash)."""

import logging
from types import SimpleNamespace

from tuner.backend import counters, journal
from tuner.backend.context import CompileContext
from tuner.backend.hooks import kernels as kernel_hook
from tuner.core import Forcing, Kind


def _kernel(name, heuristic="HeuristicType.POINTWISE", src=None):
    src = src or f"def {name}(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):\n    pass\n"
    return SimpleNamespace(heuristic_type=heuristic, size_hints={"x": 1024}, fn=SimpleNamespace(src=src, __name__=name))


def test_stored_kernels_hit_others_miss_and_templates_are_not_counted():
    stored, other = _kernel("triton_poi_a"), _kernel("triton_poi_b", src="def triton_poi_b(x):\n    return 1\n")
    template = _kernel("triton_tem_c", heuristic="HeuristicType.TEMPLATE")
    found = kernel_hook.tunable([stored, other, template])
    assert [name for _, _, name in found] == ["triton_poi_a", "triton_poi_b"]
    ctx = CompileContext(
        Forcing(
            {Kind.TRITON_POINTWISE: {kernel_hook.lookup_hash(stored): {"XBLOCK": 256, "num_warps": 4, "num_stages": 1}}}
        ),
        "cuda",
    )
    before = counters.stats()
    with journal.recording() as decisions:
        ctx.kernels_lowered(found)
    after = counters.stats()
    assert (after["hits"] - before["hits"], after["misses"] - before["misses"]) == (1, 1)
    assert [(d.kind, d.outcome) for d in decisions] == [("triton_pointwise", "hit"), ("triton_pointwise", "miss")]


def test_a_kernel_that_cannot_be_keyed_is_left_out_with_one_warning(caplog, monkeypatch):
    from tuner import once

    odd = SimpleNamespace(heuristic_type="HeuristicType.POINTWISE", size_hints={"x": 8})  # no .fn
    monkeypatch.setattr(once, "_said", set())
    with caplog.at_level(logging.WARNING, logger="tuner"):
        assert kernel_hook.tunable([odd, odd]) == []
    assert sum("could not be keyed" in r.getMessage() for r in caplog.records) == 1
