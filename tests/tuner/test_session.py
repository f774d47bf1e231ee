"""The measuring session keeps the capture's compile (Inductor's defaults) as the baseline of later trials."""

import torch

from tuner.measure.jobs import GraphTrial
from tuner.measure.result import Status
from tuner.measure.session import Session
from tuner.workload import WorkloadSpec


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


def test_a_training_capture_is_not_kept_its_weights_took_a_step():
    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", mode="train", input_shape=(16, 64), threads=2))
    session.capture()
    assert session.compile({}).compile_s > 0.0


def test_every_spelling_of_nothing_forced_is_the_kept_defaults_compile():
    from tuner.core import Forcing

    session = Session(WorkloadSpec(model="tests.helpers.models:mlp", device="cpu", input_shape=(16, 64), threads=2))
    session.capture()
    assert session.compile(Forcing().to_json()).fn is session.compile({}).fn
