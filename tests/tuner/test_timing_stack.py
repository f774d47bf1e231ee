"""The cause of ``python -m tuner bench`` timing Inductor's modes up to 2x slow: CPython keeps frames in 16-KiB chunks,
mapped when a frame does not fit and unmapped when it returns, so a loop whose callee's frame straddles a chunk boundary
maps, faults in and unmaps a chunk on every call. Where the boundary falls depends on the caller's depth alone (runpy's
frames under ``-m``). The timing harness runs every sample in a chunk of its own (``roomy``), whatever the depth."""

import resource
import sys

import pytest

from tuner.backend.instrument.timing import interleaved, roomy

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="frame-stack chunks came with CPython 3.11")

CALLS = 2000


def _function(name: str, local_names: int, body: str) -> object:
    names = " = ".join(f"_{i}" for i in range(local_names)) or "_"
    ns: dict = {}
    exec(f"def {name}(*a):\n    if a is None:\n        {names} = None\n    {body}\n", ns)
    return ns[name]


LEAF = _function("leaf", 64, "return None")  # ~0.5 KiB of frame: wider than one step of the depth scan
STEP = _function("step", 32, "return a[1](a[0] - 1, *a[1:]) if a[0] else a[2]()")  # ~0.25 KiB per step deeper


def hot(_: int = 0) -> None:
    for _ in range(CALLS):
        LEAF()


def _faults(fn) -> int:
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    fn()
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before


def _straddling_depth() -> int:
    """A depth (in steps) at which ``hot``'s calls cross a chunk boundary: about a page fault per call there."""
    for depth in range(96):  # 24 KiB: more than one chunk's span
        hot()  # once to settle
        if _faults(lambda: STEP(depth, STEP, hot)) > CALLS // 2:
            return depth
    pytest.fail("no depth made the loop's calls straddle a frame-stack chunk boundary")


def test_a_loop_at_the_wrong_depth_maps_a_chunk_per_call_and_roomy_stops_it():
    depth = _straddling_depth()
    assert _faults(lambda: STEP(depth, STEP, hot)) > CALLS // 2  # the same depth again: not a one-off
    assert _faults(lambda: STEP(depth, STEP, lambda: roomy(hot))) < CALLS // 20  # roomy's own chunk: ~33 pages, once


def test_the_harness_times_each_sample_in_a_chunk_of_its_own():
    depth = _straddling_depth()
    runs = []

    def counted(i: int) -> None:
        runs.append(i)
        hot()

    faults = _faults(
        lambda: STEP(depth, STEP, lambda: interleaved({"hot": counted}, rounds=5, min_sample_ms=1.0, warmup=2))
    )
    assert len(runs) >= 5 + 3 and faults < len(runs) * CALLS // 50  # straddling, it would be about one per call
