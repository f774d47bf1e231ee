"""CUDA graphs as a measured answer, on the GPU (``pytest -m gpu`` on the device): the default step's idle share, the
training step under CUDA graphs against the defaults in one worker, and the tuned backend running a stored answer
under CUDA graph trees (forward and backward) with an optimizer stepping between replays."""

import pytest

from tuner.workloads.spec import WorkloadSpec

pytestmark = pytest.mark.gpu

# The mlp, not the convnet: the convnet ends in a softmax, whose mean has no gradient, so its weights' gradients are
# rounding noise and the capture's own numerics gate refuses the step (1.5x eager's, fp32, on the H200)
TRAIN = WorkloadSpec(model="tests.helpers.models:mlp", device="cuda", mode="train", dtype="fp32", input_shape=(8, 64))


@pytest.fixture(scope="module")
def captured():
    from tuner.measure.session import Session
    from tuner.sweep.tasks import tasks_from_capture

    s = Session(TRAIN)
    cap = s.capture()
    return s, cap, [t for t in tasks_from_capture(cap, "mlp") if t.kind == "cuda_graph"]


def test_a_small_training_step_waits_for_the_host_and_runs_faster_under_cuda_graphs(captured):
    from tuner.core import Forcing
    from tuner.measure import GraphTrial
    from tuner.search_spaces.cuda_graph import on

    session, cap, tasks = captured
    assert cap.busy_ms and cap.step_ms and cap.idle_share is not None
    assert cap.idle_share > 0.3, (cap.step_ms, cap.busy_ms)  # a batch of 8: microseconds of kernels per launch
    gemms = [
        op for op in cap.library if op["op"] in ("mm", "addmm")
    ]  # the step's library calls, found by op and shapes
    assert gemms and all(op["ms"] > 0 and len(op["shapes"]) == 2 for op in gemms), cap.library
    assert len(tasks) == 1
    m = session.time_graph(GraphTrial(Forcing().to_json(), tasks[0].forcing(on()).to_json(), 10, 5.0))
    assert m.ok, m.error
    assert m.median_ms < m.baseline_ms, (m.median_ms, m.baseline_ms)


def test_the_tuned_backend_trains_under_cuda_graphs_from_a_stored_answer(captured, db_url, caplog):
    import logging

    import torch
    from torch._dynamo.utils import counters

    from tuner.db import Database, current_device
    from tuner.search_spaces.cuda_graph import on
    from tuner.workloads.steps import run_step
    from tuner.workloads.spec import build_model, make_inputs

    _, _, (task,) = captured
    db = Database.open(db_url)
    rec = db.upsert_task(task.key, task.kind, task.name, task.signature, task.space.fingerprint())
    db.set_winner(rec.id, db.device_id(current_device("cuda")), None, on(), 1.0, 2.0)
    db.close()
    model, inputs = build_model(TRAIN), make_inputs(TRAIN)
    ref = run_step("train", model, inputs[0], grads=True)
    torch._dynamo.reset()
    skips = counters["inductor"]["cudagraph_skips"]
    fn = torch.compile(model, backend="tuned", options={"db": db_url})
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # steps between replays, as a training loop's would
    with caplog.at_level(logging.WARNING, logger="tuner"):
        for i in range(4):  # warm-up, record, replays
            got = run_step("train", fn, inputs[0], grads=True)
            opt.step()
    assert "runs under CUDA graphs" in caplog.text
    assert counters["inductor"]["cudagraph_skips"] == skips
    for g, r in zip(got, ref):
        assert (g.float() - r.float()).abs().max() <= 0.05 * r.float().abs().max() + 1e-3


INFER = WorkloadSpec(model="tests.helpers.models:mlp", device="cuda", dtype="fp32", input_shape=(8, 64))


def test_an_inference_step_replayed_by_hand_as_a_cuda_graph_is_checked_and_timed_against_its_launches():
    """The capture's compile of a small inference step, captured by hand as one CUDA graph: its output matches
    eager's, and its replays beat the same compile launched kernel by kernel (a batch of 8 leaves the GPU waiting);
    a training step is not replayed so (its compile is the one to time)."""
    from tuner.measure import GraphReplay
    from tuner.measure.session import Session

    s = Session(INFER)
    s.capture()
    m = s.time_replay(GraphReplay(10, 5.0))
    assert m.ok, m.error
    assert m.compile_s == 0.0 and m.median_ms < m.baseline_ms, (m.median_ms, m.baseline_ms)
    train = Session(TRAIN)
    train.capture()
    assert not train.time_replay(GraphReplay(10, 5.0)).ok
