"""Which compiles time their site choices as CUDA-graph replays (``TUNER_SITE_TIMING=cudagraph``); the replays
themselves are tested on the GPU (tests/gpu)."""

import pytest

from tuner.backend.context import CompileContext
from tuner.backend.forcing import Forcing


@pytest.mark.parametrize(
    "device, timing, rounds, expect",
    [
        ("cuda", "cudagraph", {"k": ("a", "b")}, True),
        ("cuda", "launch", {"k": ("a", "b")}, False),  # Inductor's own timing, the default
        ("cpu", "cudagraph", {"k": ("a", "b")}, False),  # no CUDA graphs on the CPU: timed as Inductor does
        ("cuda", "cudagraph", None, False),  # a compile that benchmarks nothing (forcing, recording) is untouched
    ],
)
def test_only_cuda_site_benchmarks_are_timed_as_graphs(device, timing, rounds, expect):
    ctx = CompileContext(Forcing(), device, benchmark=rounds, site_timing=timing)
    assert ctx.times_sites_as_graphs is expect
