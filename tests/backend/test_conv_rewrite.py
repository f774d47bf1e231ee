"""The space-to-depth rewrite of strided convolutions that read few channels (a CNN's stem), on the CPU for real:
the recording counts where it applies, the fusion space then offers it and measures it first, and a compile with it
forced replaces the stem convolution and keeps eager's numerics. On the CPU, freezing packs convolution weights for
oneDNN before any post-grad pass, so the rewrite never applies there: these tests compile without freezing (the
weight is rewritten in the graph), and the frozen path (the weight rewritten once, as a constant) runs with that
packing off in a process of its own, as turning it off in this one would keep Inductor from ever registering it.)"""

import contextlib
import dataclasses
import logging

import pytest
import torch
import torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code

from tests.helpers.compiling import measured
from tuner.backend.instrument.recorder import Recorder
from tuner.backend.hooks import conv_rewrite, rewrites
from tuner.core import Forcing, Kind
from tuner.search_spaces.fusion import SPACE_TO_DEPTH, to_patches
from tuner.sweep.tasks import fusion_tasks


S2D_WEIGHT = "(8, 12, 4, 4)"  # the rewritten 7x7/2 stem's weight, as the generated code asserts its size


def stem(channels: int = 3) -> torch.nn.Module:
    """A 7x7/2 stem convolution with batch norm (frozen: folded into it), then a 3x3/2 one over 8 channels."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(channels, 8, 7, 2, 3),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, 2, 1),
    ).eval()


def _input(channels: int = 3) -> torch.Tensor:
    return torch.randn(2, channels, 33, 33).to(memory_format=torch.channels_last)


@contextlib.contextmanager
def _inference(freezing=False):
    with inductor_config.patch({"freezing": freezing}), torch.no_grad():
        yield


_compiled = measured


def _grouping(model, x, device="cpu", freezing=False):
    rec = Recorder()
    with _inference(freezing):
        _compiled(model, recorder=rec, device=device)(x)
    (g,) = rec.graphs.values()
    (task,) = fusion_tasks([dataclasses.asdict(g)], "stem")
    return g, task


def _rewrite_on(g, task):
    """The recorded graph's grouping with the rewrite on, every other knob Inductor's default, forced."""
    return Forcing({Kind.FUSION: {g.fusion_key: to_patches({**task.space.default, SPACE_TO_DEPTH: True})}})


def test_the_recording_counts_the_stem_and_its_grouping_measures_the_rewrite_first():
    g, task = _grouping(stem(), _input())
    assert g.s2d_convs == 1  # the 3-channel stem; the 8-channel convolution after it is left alone
    assert task.space.default[SPACE_TO_DEPTH] is False
    assert task.space.evidence()[0] == {**task.space.default, SPACE_TO_DEPTH: True}
    g8, task8 = _grouping(stem(channels=8), _input(channels=8))
    assert g8.s2d_convs == 0 and SPACE_TO_DEPTH not in task8.space.default and task8.space.evidence() == []


def test_the_profile_weighs_the_rewrite_by_the_time_of_the_convolutions_it_applies_to():
    """The recording lists the stem's shapes; the capture's profile of the compiled step finds its library call by
    them, so the fusion study's expected gain holds the stem's time (here the host's: a CPU has no device time)."""
    from tuner.measure.busy import library_ops
    from tuner.measure.result import CaptureResult
    from tuner.budget.gain import FUSION, RATES, S2D_RATE
    from tuner.sweep.profile import profile_of

    model, x = stem(), _input()
    rec = Recorder()
    with _inference():
        fn = _compiled(model, recorder=rec)
        fn(x)
        ops = library_ops(lambda i: fn(x), lambda: None, device=False)
    (g,) = rec.graphs.values()
    assert g.s2d_shapes == [[[2, 3, 33, 33], [8, 3, 7, 7]]]
    stem_ms = [op["ms"] for op in ops if op["op"] == "convolution" and op["shapes"] == g.s2d_shapes[0]]
    assert len(stem_ms) == 1 and stem_ms[0] > 0 and len([op for op in ops if op["op"] == "convolution"]) == 2, ops
    cap = CaptureResult([dataclasses.asdict(g)], [], {}, {}, {}, 1.0, step_ms=5.0, busy_ms=4.0, library=ops)
    p = profile_of(cap, [])
    assert p.s2d_ms == stem_ms[0]
    assert abs(p.gain_ms(FUSION) - (p.triton_ms * RATES[FUSION] + stem_ms[0] * S2D_RATE)) < 1e-12


def test_the_forced_rewrite_replaces_the_stem_and_keeps_eager_numerics():
    model, x = stem(), _input()
    g, task = _grouping(model, x)
    with _inference():
        ref = model(x)
        plain, (plain_code,) = run_and_get_code(_compiled(model), x)
        forcing = _rewrite_on(g, task)
        rewritten, (code,) = run_and_get_code(_compiled(model, forcing), x)
    assert S2D_WEIGHT not in plain_code and S2D_WEIGHT in code  # the stride-1 convolution's 12-channel 4x4 weight
    torch.testing.assert_close(plain, ref, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(rewritten, ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "size, kernel, stride, padding", [(33, 7, 2, 3), (32, 3, 2, 1), (31, 5, 3, 2), (30, 4, 2, 1), (34, 8, 8, 0)]
)
def test_the_rewrite_is_exact_at_odd_sizes_kernels_and_strides(size, kernel, stride, padding):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 5, kernel, stride, padding), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, size, size + 1).to(memory_format=torch.channels_last)
    g, task = _grouping(model, x)
    forcing = _rewrite_on(g, task)
    with _inference():
        y, (code,) = run_and_get_code(_compiled(model, forcing), x)
    taps = -(-kernel // stride)
    rows, cols = ((n + 2 * padding - kernel) // stride + taps for n in (size, size + 1))
    assert f"(1, {3 * stride * stride}, {rows}, {cols})" in code  # the input's space-to-depth form, made once
    torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-4)


def test_the_knob_never_reaches_inductor_and_a_users_own_pass_is_kept(caplog):
    from tuner.search_spaces.fusion import REWRITE_KNOBS

    assert list(rewrites.REWRITES) == list(REWRITE_KNOBS)  # every rewrite knob the space offers has its pass, in order
    assert rewrites.patches({SPACE_TO_DEPTH: False, "aggressive_fusion": True}, None) == {"aggressive_fusion": True}
    on = rewrites.patches({SPACE_TO_DEPTH: True}, None)
    assert (
        isinstance(on["post_grad_custom_pre_pass"], conv_rewrite.SpaceToDepth)
        and on["post_grad_custom_pre_pass"].uuid()
    )
    with caplog.at_level(logging.WARNING, logger="tuner"):
        assert rewrites.patches({SPACE_TO_DEPTH: True}, object()) == {}
    assert "already set" in caplog.text


@pytest.mark.gpu
def test_on_the_gpu_the_rewritten_bf16_stem_matches_eager():
    """As Inductor lowers it on CUDA (bf16, channels-last, the convolution templates offered), where it is searched."""
    model = stem().cuda().to(torch.bfloat16)
    x = _input().cuda().to(torch.bfloat16)
    g, task = _grouping(model, x, device="cuda", freezing=True)
    assert g.s2d_convs == 1
    forcing = _rewrite_on(g, task)
    with _inference(freezing=True):
        y, (code,) = run_and_get_code(_compiled(model, forcing, device="cuda"), x)
        ref = model.float()(x.float())
    assert "_s2d" in code  # the frozen weight, rewritten once
    assert (y.float() - ref).abs().max() <= 0.02 * ref.abs().max()  # bf16 through two convolutions


FROZEN = """
import torch, torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code
from tests.backend.test_conv_rewrite import _compiled, _grouping, _input, _rewrite_on, stem

inductor_config.cpp.weight_prepack = False
model, x = stem(), _input()
g, task = _grouping(model, x, freezing=True)
assert g.s2d_convs == 1, g
forcing = _rewrite_on(g, task)
with inductor_config.patch(freezing=True), torch.no_grad():
    y, (code,) = run_and_get_code(_compiled(model, forcing), x)
    torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-4)
assert "_s2d" in code, "the frozen weight is rewritten once, as a constant"
print("ok")
"""


def test_a_frozen_weight_is_rewritten_once_as_a_constant(cwd_root):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", FROZEN], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_a_rewrite_that_fails_leaves_the_convolution_as_it_was(monkeypatch, caplog):
    """As on a torch whose aten ops or fake tensors behave otherwise: the pass warns and Inductor compiles the
    convolution unchanged (the nodes the rewrite had added are removed), with eager's numerics."""
    model, x = stem(), _input()
    g, task = _grouping(model, x)
    real_call = conv_rewrite._call

    def failing(graph, fake_mode, target, *args, **kwargs):
        if target is torch.ops.aten.clone.default:
            raise RuntimeError("simulated: this op cannot be traced here")
        return real_call(graph, fake_mode, target, *args, **kwargs)

    monkeypatch.setattr(conv_rewrite, "_call", failing)
    forcing = _rewrite_on(g, task)
    with caplog.at_level(logging.WARNING, logger="tuner"), _inference():
        y, (code,) = run_and_get_code(_compiled(model, forcing), x)
    assert "space-to-depth rewrite failed" in caplog.text and S2D_WEIGHT not in code
    torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-4)


def test_a_stored_rewrite_can_be_left_out_as_an_ablation_measures_it(tmp_path):
    """options={"without": ["space_to_depth"]}: the stored grouping without its rewrite (every other knob kept), as
    `tuner bench --ablate` times each rewrite's share of the gain; the stored rewrite applies otherwise."""
    from tests.backend.test_tuned_backend import _store_winner
    from tuner.commands.bench import ablation, stored_rewrites

    model, x = stem(), _input()
    g, task = _grouping(model, x)
    url = f"sqlite:///{tmp_path / 's2d.db'}"
    _store_winner(url, str(Kind.FUSION), task.key, {**task.space.default, SPACE_TO_DEPTH: True}, task.signature)
    codes = {}
    for without in ((), (SPACE_TO_DEPTH,)):
        torch._dynamo.reset()
        with _inference():
            y, (codes[without],) = run_and_get_code(
                torch.compile(model, backend="tuned", options={"db": url, "without": list(without)}), x
            )
        torch.testing.assert_close(y, model(x), rtol=1e-4, atol=1e-4)
    assert S2D_WEIGHT in codes[()] and S2D_WEIGHT not in codes[(SPACE_TO_DEPTH,)]
    assert stored_rewrites(url, "cpu") == [SPACE_TO_DEPTH]  # what `bench --ablate` leaves out one at a time
    assert ablation("cpu", [SPACE_TO_DEPTH])[-1] == "tuned-without-space_to_depth"
    assert "tuned-without-cudnn_epilogue" in ablation("cuda") and "tuned-without-cudnn_epilogue" not in ablation("cpu")


def test_every_rewrite_has_a_finder_whose_places_the_recording_keeps():
    """One row a rewrite (``REWRITE_KNOBS``): its finder's result lands in the recorded graph's fields it names."""
    import dataclasses

    from tuner.backend.instrument.recorder import GraphRecord, Recorder
    from tuner.search_spaces.fusion import REWRITE_KNOBS

    assert list(rewrites.FINDERS) == list(REWRITE_KNOBS)
    fields = {f.name for f in dataclasses.fields(GraphRecord)}
    assert all(r.seen in fields and (not r.places or r.places in fields) for r in REWRITE_KNOBS.values())
    rec = Recorder()
    rec.graphs["g"], rec.current_graph = GraphRecord("g", "cpp_graph", False, 0, 10), "g"
    found = {knob: ([[1, 2], [3, 4]] if r.places else 3) for knob, r in REWRITE_KNOBS.items()}
    rec.lowering(True, {}, found)
    g = rec.graphs["g"]
    assert g.frozen and all(getattr(g, r.seen) == (2 if r.places else 3) for r in REWRITE_KNOBS.values())
    assert all(getattr(g, r.places) == [[1, 2], [3, 4]] for r in REWRITE_KNOBS.values() if r.places)
