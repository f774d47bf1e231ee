"""The measuring session keeps the capture's compile (Inductor's defaults) as the baseline of later trials."""

import torch

from tuner.measure.jobs import GraphTrial
from tuner.measure.result import Status
from tuner.measure.session import Session
from tuner.workloads.spec import WorkloadSpec


def test_the_capture_compile_is_the_defaults_baseline_and_is_not_compiled_again():
    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    session.capture()
    first = session.compile({})
    assert first.compile_s == 0.0  # no second compile of Inductor's defaults
    assert first.fn is session.compile({}).fn
    with torch.no_grad():
        torch.testing.assert_close(first.fn(session.inputs[0]), session.reference, rtol=1e-3, atol=1e-3)
    m = session.time_graph(GraphTrial({}, {}, 3, 1.0))
    assert m.status is Status.OK and m.median_ms > 0 and m.baseline_ms == m.median_ms


def test_a_training_capture_is_the_defaults_baseline_too():
    """A training sweep's first baseline costs no compile (the CUDA-graph phase on resnet50's training step compiled
    the defaults again: ~40 s of a 240-s budget on the H200). Timing it leaves the weights as eager's."""
    session = Session(
        WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", mode="train", input_shape=(16, 64), threads=2)
    )
    session.capture()
    kept = session.compile({})
    assert kept.compile_s == 0.0
    m = session.time_graph(GraphTrial({}, {}, 3, 1.0))
    assert m.status is Status.OK and m.median_ms > 0
    model = getattr(kept.fn, "_orig_mod", kept.fn)
    for mine, eager in zip(model.parameters(), session.model.parameters()):
        torch.testing.assert_close(mine, eager)  # the baseline's copy takes no optimizer step


def test_every_spelling_of_nothing_forced_is_the_kept_defaults_compile():
    from tuner.core import Forcing

    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    session.capture()
    assert session.compile(Forcing().to_json()).fn is session.compile({}).fn


def test_only_a_plain_compile_runs_under_cuda_graphs_never_one_that_records_or_captures():
    """An answer turning CUDA graphs on restarts a timed compile under them (on the CPU Inductor counts the skip);
    a recording compile keeps them off: under a graph tree, what it keeps alive breaks the pool's tracking (H200)."""
    from torch._dynamo.utils import counters

    from tuner.backend.instrument.recorder import Recorder
    from tuner.core import Forcing, Kind
    from tuner.search_spaces.cuda_graph import on

    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    cap = session.capture()
    # The flag forced as a CPU graph's knobs: the CUDA-graph kind itself is looked up on CUDA graphs only.
    forcing = Forcing({Kind.CPP_GRAPH: {g["key"]: on() for g in cap.graphs}}).to_json()
    before = counters["inductor"]["cudagraph_skips"]
    session.compile(forcing, recorder=Recorder())
    assert counters["inductor"]["cudagraph_skips"] == before
    session.compile(forcing)
    assert counters["inductor"]["cudagraph_skips"] > before


def test_a_cpu_capture_times_compiled_instances_and_every_whole_workload_spread_covers_their_spread():
    """Two compiles of one config differ on the CPU by more than their timings' spreads show (the instances' weights
    and buffers sit at other addresses): the capture times two more instances of its config beside its own, and a
    whole-workload trial's spreads are at least the spread it measured, so a gain inside it is noise."""
    from tuner.measure import session as session_module

    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    cap = session.capture()
    assert session_module.INSTANCES == 2 and "instances" in cap.costs
    assert cap.instances is not None and cap.instances.instance_spread_ms >= 0 and cap.instances.instance_base_ms > 0
    assert 0 < cap.instances.warm_compile_s and cap.later_compile_s == min(
        cap.compile_s, 2 * cap.instances.warm_compile_s
    )
    assert "compiled instances of one config differ by up to" in cap.instance_note()
    session.instance_spread_ms = 1.0  # as a large spread: both sides of a trial are widened to it
    m = session.time_graph(GraphTrial({}, {}, 3, 1.0))
    assert m.spread_ms >= 1.0 and m.baseline_spread_ms >= 1.0 and m.within_noise

    told = Session(
        WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2),
        instance_spread_ms=0.01,
    )
    again = told.capture()  # a restarted worker is told the spread: no more compiles
    assert "instances" not in again.costs and again.instances is None and again.later_compile_s == again.compile_s


def test_no_instance_compile_starts_that_would_end_past_the_time_budgets_share():
    import time

    late = Session(
        WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2),
        instances_by=time.monotonic(),
    )
    cap = late.capture()
    assert cap.instances is None and late.instance_spread_ms is None and cap.instance_note() == ""


def test_a_verification_times_fresh_instances_of_both_sides_and_keeps_none_of_them():
    """A trial times its candidate against the capture's one instance; a verification (``instances=2``) also compiles
    each side anew, pools each side's instances, and counts the spread between instances as that of a mean of two."""
    import math

    from tuner.core import Forcing, Kind
    from tuner.study.settle import verifier

    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    cap = session.capture()
    scalar = Forcing({Kind.CPP_GRAPH: {g["key"]: {"cpp.simdlen": 0} for g in cap.graphs}}).to_json()
    session.instance_spread_ms = 0.5
    one = session.time_graph(GraphTrial({}, scalar, 3, 1.0))
    kept = session.compile(scalar)
    two = session.time_graph(GraphTrial({}, scalar, 3, 1.0, instances=2))
    assert one.status is Status.OK and two.status is Status.OK and two.median_ms > 0 and two.baseline_ms > 0
    assert one.spread_ms >= 0.5 and one.baseline_spread_ms >= 0.5
    assert min(two.spread_ms, two.baseline_spread_ms) >= 0.5 / math.sqrt(2) - 1e-9
    assert kept.compile_s == 0.0 and session.compile(scalar).fn is kept.fn  # the fresh instances were not kept
    assert session.compile({}).fn is session._defaults.fn

    def measure(config, rounds):
        return "trial"

    assert verifier(measure) is measure
    measure.verify = lambda config, rounds: "verification"
    assert verifier(measure)({}, 3) == "verification"
