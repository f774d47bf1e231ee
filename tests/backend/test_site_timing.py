"""Which compiles time their site choices their own way (``TUNER_SITE_TIMING``: pipelined calls, the default, or
CUDA-graph replays) or defer them to Inductor's scheduler (``TUNER_SITE_DEFER``); all are tested for real on the
GPU (tests/gpu)."""

import pytest

from tuner.backend.instrument.context import MeasuringContext
from tuner.core import Forcing


@pytest.mark.parametrize(
    "device, timing, rounds, expect",
    [
        ("cuda", "cudagraph", {"k": ("a", "b")}, "cudagraph"),
        ("cuda", "pipelined", {"k": ("a", "b")}, "pipelined"),
        ("cuda", "launch", {"k": ("a", "b")}, None),  # Inductor's own timing
        ("cpu", "cudagraph", {"k": ("a", "b")}, None),  # no CUDA graphs on the CPU: timed as Inductor does
        ("cpu", "pipelined", {"k": ("a", "b")}, None),
        ("cuda", "cudagraph", None, None),  # a compile that benchmarks nothing (forcing, recording) is untouched
    ],
)
def test_only_cuda_site_benchmarks_are_timed_our_way(device, timing, rounds, expect):
    ctx = MeasuringContext(Forcing(), device, benchmark=rounds, site_timing=timing)
    assert ctx.retimes_sites == expect


def test_site_timing_is_auto_unless_set_and_a_bad_value_is_refused():
    from tuner.errors import TunerError
    from tuner.settings import Settings

    assert Settings.from_env({}).site_timing == "auto"
    assert Settings.from_env({"TUNER_SITE_TIMING": "launch"}).site_timing == "launch"
    with pytest.raises(TunerError, match="TUNER_SITE_TIMING must be one of auto, pipelined, launch, cudagraph"):
        Settings.from_env({"TUNER_SITE_TIMING": "graphs"})


@pytest.mark.parametrize(
    "device, defer, rounds, expect",
    [
        (
            "cuda",
            True,
            {"k": ("a", "b")},
            True,
        ),  # a CUDA site batch: Inductor's deferred selection, timed at scheduling
        ("cuda", False, {"k": ("a", "b")}, False),  # TUNER_SITE_DEFER=0: timed where the site is lowered
        ("cpu", True, {"k": ("a", "b")}, False),  # Inductor never defers a CPP-backend site
        ("cuda", True, None, False),  # a compile that benchmarks nothing (forcing, recording) is untouched
    ],
)
def test_only_cuda_site_benchmarks_are_deferred(device, defer, rounds, expect):
    ctx = MeasuringContext(Forcing(), device, benchmark=rounds, site_defer=defer)
    assert ctx.defers_sites is expect


def test_site_defer_is_on_unless_turned_off():
    from tuner.settings import Settings

    assert Settings.from_env({}).site_defer is True
    assert Settings.from_env({"TUNER_SITE_DEFER": "0"}).site_defer is False


@pytest.mark.parametrize("how", ["cudagraph", "pipelined"])
def test_a_choice_that_cannot_be_timed_our_way_is_timed_as_inductor_would(monkeypatch, caplog, how):
    """On the CPU no choice can be captured in a CUDA graph or timed between CUDA events: forced on anyway, every
    choice of a real site round (ATen's and a CPP GEMM template behind its input-preparing wrapper) falls back to
    its own timing, with a warning, and the round's timings are complete."""
    import logging
    import math

    from tuner.backend import counters
    from tuner.measure.jobs import SiteBatch
    from tuner.measure.result import Status
    from tuner.measure.session import Session
    from tuner.workloads.spec import WorkloadSpec

    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    site = next(s for s in session.capture().sites if len(s["choices"]) >= 2)
    choices = tuple(dict.fromkeys([site["default"], *site["choices"]]))[:3]
    monkeypatch.setattr(MeasuringContext, "retimes_sites", property(lambda self: how if self.benchmark else None))
    counter = {"cudagraph": "graph_timed", "pipelined": "pipelined_timed"}[how]
    before = counters.count(counter)
    with caplog.at_level(logging.WARNING, logger="tuner.backend"):
        r = session.run(SiteBatch({}, {site["key"]: choices}))
    assert r.status is Status.OK, r.error
    t = r.timings[site["key"]]
    assert all(c in t and math.isfinite(t[c]) and t[c] > 0 for c in choices), t
    assert counters.count(counter) == before
    reasons = [m.split(f" {how} (", 1)[1] for m in caplog.messages if m.startswith("cannot time")]
    assert len(reasons) >= len(choices) and r.fallbacks == len(reasons)  # said to the sweep, which notes it
    # each run function was built (for a wrapper choice, from its wrapped one's prepared inputs): the capture
    # itself is what failed, for want of a GPU
    assert all("NVIDIA" in r or "CUDA" in r for r in reasons), reasons


def test_candidates_clearly_slower_than_the_best_so_far_stop_after_their_probe(monkeypatch):
    """Early exit at a real CPU site: with the bar at zero every candidate after the default is stopped after its
    probe (and stored as pruned, with the probe's time); with the bar out of reach none is."""
    import math

    from tuner.backend.instrument import pruning
    from tuner.backend.instrument import site_timing
    from tuner.measure.jobs import SiteBatch
    from tuner.measure.result import Status
    from tuner.measure.session import Session
    from tuner.sweep.site_batches import measure_split
    from tuner.workloads.spec import WorkloadSpec

    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    site = next(s for s in session.capture().sites if len(s["choices"]) >= 2)
    choices = tuple(dict.fromkeys([site["default"], *site["choices"]]))[:3]
    key = site["key"]

    monkeypatch.setattr(MeasuringContext, "prunes_sites", property(lambda self: bool(self.benchmark)))  # CUDA's way
    monkeypatch.setattr(pruning, "PRUNE_FACTOR", 0.0)
    monkeypatch.setattr(site_timing, "PRUNE_FLOOR_MS", -math.inf)
    r = session.run(SiteBatch({}, {key: choices}))
    assert r.status is Status.OK, r.error
    assert r.pruned == {key: sorted(choices[1:])}  # the default is always timed in full
    out = measure_split(lambda req: session.run(SiteBatch({}, req)), {key: choices})[key]
    assert out[choices[0]].status is Status.OK
    assert all(out[c].status is Status.PRUNED and out[c].median_ms > 0 and out[c].baseline_ms for c in choices[1:])

    monkeypatch.setattr(pruning, "PRUNE_FACTOR", math.inf)
    r = session.run(SiteBatch({}, {key: choices}))
    assert r.status is Status.OK and r.pruned == {} and set(r.timings[key]) >= set(choices)


def test_a_cpu_site_is_timed_in_full_and_never_pruned():
    assert not MeasuringContext(Forcing(), "cpu", benchmark={"k": ("a", "b")}).prunes_sites
    assert MeasuringContext(Forcing(), "cuda", benchmark={"k": ("a", "b")}).prunes_sites
    assert not MeasuringContext(Forcing(), "cuda").prunes_sites


def test_a_probe_overhead_common_to_every_choice_never_prunes(monkeypatch):
    """Probes are compared with probes: when a probe costs far more than the kernels it times (a Python call around
    a small CPU kernel), no choice is stopped for it, as the default's full timing alone would have it."""
    from tuner.backend.instrument import site_timing
    from tuner.measure.jobs import SiteBatch
    from tuner.measure.result import Status
    from tuner.measure.session import Session
    from tuner.workloads.spec import WorkloadSpec

    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    site = next(s for s in session.capture().sites if len(s["choices"]) >= 2)
    choices = tuple(dict.fromkeys([site["default"], *site["choices"]]))[:3]
    monkeypatch.setattr(MeasuringContext, "prunes_sites", property(lambda self: bool(self.benchmark)))  # CUDA's way
    monkeypatch.setattr(site_timing, "_probe_ms", lambda fn, out: (fn(), 5.0)[1])  # each probe: 5 ms, all overhead
    r = session.run(SiteBatch({}, {site["key"]: choices}))
    assert r.status is Status.OK and r.pruned == {} and all(r.timings[site["key"]][c] < 5.0 for c in choices)


def test_clearly_slower_needs_both_the_factor_and_a_margin_above_floor_and_noise():
    from tuner.backend.instrument.pruning import clearly_slower

    assert clearly_slower(0.30, 0.10, floor_ms=0.05)
    assert not clearly_slower(0.14, 0.10, floor_ms=0.0)  # under 1.5x
    assert not clearly_slower(0.20, 0.10, floor_ms=0.15)  # 2x, but within what a probe's overhead adds
    assert not clearly_slower(0.20, 0.10, floor_ms=0.0, noise_ms=0.05)  # 2x, but within 3 IQRs of its own noise
    assert not clearly_slower(0.30, None, floor_ms=0.0)  # nothing timed yet


def test_graph_replays_rotate_over_copies_of_the_inputs_that_together_outgrow_the_l2_cache():
    """A choice timed as graph replays reads each call's inputs cold, as a model reads its weights: the inputs and
    copies of them (same sizes, strides and values, other memory), enough to reach ROTATE_BYTES, 2 to MAX_COPIES
    sets."""
    import torch

    from tuner.backend.instrument.site_timing import MAX_COPIES, ROTATE_BYTES, rotated

    a, w = torch.randn(8, 768), torch.randn(50, 768).t()  # a transposed weight, as a linear layer's
    bias = torch.randn(50).expand(8, 50)  # addmm's bias, stride 0 over the rows: shared, as no copy holds its strides
    sets = rotated((bias, a, w, 2))
    assert len(sets) == MAX_COPIES and sets[0] == (bias, a, w, 2)
    for b, x, y, k in sets[1:]:
        assert (
            k == 2 and x.stride() == a.stride() and y.stride() == w.stride() and torch.equal(y, w) and torch.equal(x, a)
        )
        assert x.data_ptr() != a.data_ptr() and y.data_ptr() != w.data_ptr() and b is bias
    big = torch.empty(ROTATE_BYTES // 12 + 1, dtype=torch.float32)  # just over a third of the bytes: 3 sets
    assert len(rotated((big,))) == 3 and len(rotated((torch.empty(ROTATE_BYTES // 4),))) == 2


def test_a_probe_slowed_by_the_host_is_taken_again_before_it_prunes():
    """A candidate whose first probe the host slowed (another choice precompiling meanwhile) is probed again beside
    the best choice, and kept where it is no slower then; one that is slower both times is pruned."""
    import time

    from tuner.backend.instrument.site_timing import _probe_ms, confirmed_slower

    def sleeper(ms):
        return lambda: time.sleep(ms / 1e3)

    fast, slow = sleeper(0.2), sleeper(6.0)
    best = _probe_ms(fast, None)
    assert confirmed_slower(
        _probe_ms(slow, None), lambda: _probe_ms(slow, None), best, lambda: _probe_ms(fast, None), 1.0
    )
    spiked = 6.0 + best  # a fast candidate's first probe, as the busy host had it
    assert not confirmed_slower(spiked, lambda: _probe_ms(fast, None), best, lambda: _probe_ms(fast, None), 1.0)
    assert not confirmed_slower(best, lambda: _probe_ms(slow, None), best, lambda: _probe_ms(fast, None), 1.0), (
        "no second probe unless the first says slower"
    )
