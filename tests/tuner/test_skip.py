"""``tuner sweep --skip``: the searches named are left out, on either device, and their tasks keep Inductor's choices
(the CPU sweep that leaves them out: ``tests/backend/test_attention.py``)."""

import pytest

from tuner.cli.sweep_cmd import parse_skip
from tuner.errors import TunerError
from tuner.budget.presets import make_budget
from tuner.sweep.options import SweepOptions
from tuner.sweep.plan import graphs_searched, phases, searches
from tuner.sweep.phases import KernelPhase, WholeCheckPhase, skippable
from tuner.workloads.spec import WorkloadSpec


def _opts(device: str, skip: str) -> SweepOptions:
    return SweepOptions(
        WorkloadSpec("resnet18", device=device), make_budget("quick"), "sqlite://", skip=parse_skip(skip, device)
    )


@pytest.mark.parametrize("device, last", [("cpu", "graph-knobs"), ("cuda", "triton-kernels")])
def test_the_searches_named_are_left_out(device, last):
    every = [p.name for p in searches(_opts(device, ""))]
    assert every == [skippable(device)[n] for n in skippable(device) if n != "cuda-graphs"]  # --skip names each search
    assert [p.name for p in searches(_opts(device, f"template-sites, {last.upper()}"))] == [
        "attention backends",
        "fusion groupings",
    ]


def test_cuda_graphs_and_the_kernels_after_the_check_are_left_out_on_cuda():
    assert graphs_searched(_opts("cuda", "")) and not graphs_searched(_opts("cuda", "cuda-graphs"))
    assert not graphs_searched(_opts("cpu", ""))
    kept = [p for p in phases([], WholeCheckPhase(), kernels=False)]
    assert not any(isinstance(p, KernelPhase) for p in kept) and any(
        isinstance(p, KernelPhase) for p in phases([], WholeCheckPhase())
    )
    with pytest.raises(TunerError, match="no search 'triton-kernels' on cpu"):
        parse_skip("triton-kernels", "cpu")
