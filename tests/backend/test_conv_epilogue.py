"""The rewrite of a convolution's bias, residual add and ReLU into cuDNN's epilogue. On the CPU the graphs are traced
with fake CUDA tensors (cuDNN itself needs the GPU): what it matches, what it leaves, the ops' sizes and layouts as
Inductor will allocate them, the fusion space's knob and its place in the pre-pass slot. The GPU test runs the ops."""

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from tuner.backend.hooks import conv_epilogue, conv_rewrite, rewrites as graph_rewrites
from tuner.search_spaces.fusion import CONV_EPILOGUE, SPACE_TO_DEPTH, space
from tuner.sweep.tasks import fusion_tasks

aten = torch.ops.aten
CL = torch.channels_last


def _conv(x, w, b=None, stride=1, padding=0, groups=1):
    return aten.convolution(x, w, b, [stride, stride], [padding, padding], [1, 1], False, [0, 0], groups)


def _traced(fn, *shapes, device="cuda"):
    """``fn`` traced over fake bf16 tensors of ``shapes`` (4-D ones channels-last) on ``device``."""
    with FakeTensorMode():
        args = [torch.empty(s, device=device, dtype=torch.bfloat16) for s in shapes]
        args = [a.to(memory_format=CL) if a.dim() == 4 else a for a in args]
        return make_fx(fn)(*args)


def _targets(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_a_chain_of_residual_blocks_is_fused_in_order_each_residual_an_earlier_result():
    def blocks(x, w, b):
        a = aten.relu(_conv(x, w, b, padding=1))
        c = aten.relu(aten.add(_conv(a, w, padding=1), a))  # the residual is the first block's fused result
        return aten.relu(aten.add(x, _conv(c, w, padding=1)))  # the residual on the left

    gm = _traced(blocks, (2, 8, 6, 6), (8, 8, 3, 3), (8,))
    assert conv_epilogue.eligible(gm) == 3
    assert conv_epilogue.fuse(gm.graph) == 3
    assert _targets(gm) == ["tuner.conv_relu.default", "tuner.conv_add_relu.default", "tuner.conv_add_relu.default"]
    gm.recompile()
    with FakeTensorMode(allow_non_fake_inputs=True):
        out = gm(
            *(
                torch.empty(s, device="cuda", dtype=torch.bfloat16).to(memory_format=CL)
                for s in [(2, 8, 6, 6), (8, 8, 3, 3)]
            ),
            torch.empty(8, device="cuda", dtype=torch.bfloat16),
        )
    assert out.shape == (2, 8, 6, 6) and out.is_contiguous(memory_format=CL)


def test_what_the_rewrite_leaves_alone():
    def others(x, w, w1):
        y = _conv(x, w, padding=1)  # no ReLU after it
        shared = _conv(x, w, padding=1)  # its output read twice: the ReLU is not its only use
        bcast = aten.relu(
            aten.add(_conv(x, w1), torch.ops.aten.ones.default([1, 1, 1, 1], dtype=torch.bfloat16, device=x.device))
        )
        scaled = aten.relu(aten.add(_conv(x, w1), x, alpha=2))  # an add with alpha
        return y, aten.relu(shared), shared, bcast, scaled

    gm = _traced(others, (2, 8, 6, 6), (8, 8, 3, 3), (8, 8, 1, 1))
    assert conv_epilogue.eligible(gm) == 0 and conv_epilogue.fuse(gm.graph) == 0
    cpu = _traced(lambda x, w: aten.relu(_conv(x, w)), (2, 8, 6, 6), (8, 8, 1, 1), device="cpu")
    assert conv_epilogue.eligible(cpu) == 0  # cuDNN's epilogue is CUDA's


def test_depthwise_convolutions_stay_with_aten_and_grouped_ones_are_fused():
    """One input channel per group (depthwise) stays ATen's convolution, which picks its own kernel where cuDNN's is
    slow; a grouped convolution with more channels per group (resnext's) is fused."""

    def mixed(x, dw, grouped):
        a = aten.relu(_conv(x, dw, padding=1, groups=8))  # depthwise: 8 groups of one channel
        return aten.relu(_conv(a, grouped, padding=1, groups=2))  # 2 groups of 4 channels

    gm = _traced(mixed, (2, 8, 6, 6), (8, 1, 3, 3), (8, 4, 3, 3))
    assert conv_epilogue.eligible(gm) == 1 and conv_epilogue.fuse(gm.graph) == 1
    assert _targets(gm) == ["aten.convolution.default", "aten.relu.default", "tuner.conv_relu.default"]


@pytest.mark.parametrize(
    "shape, weight, stride, padding, groups",
    [
        ((2, 8, 7, 9), (16, 8, 3, 3), 2, 1, 1),
        ((2, 64, 14, 14), (64, 2, 3, 3), 1, 1, 32),
        ((3, 4, 5, 5), (6, 4, 1, 1), 1, 0, 1),
    ],
)
def test_the_ops_fake_sizes_and_layouts_are_the_convolutions(shape, weight, stride, padding, groups):
    """Inductor allocates what the fake kernels return: the convolution's size, channels-last from channels-last
    operands, as cuDNN writes it (the CUDA kernels return that layout too: the GPU test)."""
    ops = conv_epilogue.ops()
    with FakeTensorMode():
        x = torch.empty(shape, device="cuda", dtype=torch.bfloat16).to(memory_format=CL)
        w = torch.empty(weight, device="cuda", dtype=torch.bfloat16).to(memory_format=CL)
        ref = _conv(x, w, stride=stride, padding=padding, groups=groups)
        conv = [[stride, stride], [padding, padding], [1, 1], groups]
        for out in (ops.conv_relu(x, w, None, *conv), ops.conv_add_relu(x, w, torch.empty_like(ref), None, *conv)):
            assert out.shape == ref.shape and out.is_contiguous(memory_format=CL) and out.dtype == ref.dtype


def test_the_knob_is_a_cuda_grouping_choice_measured_first_and_shares_the_pre_pass_slot_with_the_stem_rewrite():
    graph = {
        "backward": False,
        "lines": 10,
        "index": 0,
        "fusion_key": "fk",
        "device": "cuda",
        "s2d_convs": 1,
        "epilogue_convs": 3,
        "fusion_defaults": {"aggressive_fusion": False},
    }
    (task,) = fusion_tasks([graph], "m")
    assert task.space.default[CONV_EPILOGUE] is False and task.space.context["epilogue_convs"] == 3
    assert task.space.evidence()[:3] == [
        {**task.space.default, SPACE_TO_DEPTH: True, CONV_EPILOGUE: True},
        {**task.space.default, SPACE_TO_DEPTH: True},
        {**task.space.default, CONV_EPILOGUE: True},
    ]
    cpu = space({"device": "cpu", "defaults": {}, "epilogue_convs": 3})
    assert CONV_EPILOGUE not in cpu.default and cpu.evidence() == []
    both = graph_rewrites.patches({SPACE_TO_DEPTH: True, CONV_EPILOGUE: True, "aggressive_fusion": True}, None)
    rewrites = both["post_grad_custom_pre_pass"]
    assert both["aggressive_fusion"] is True and CONV_EPILOGUE not in both
    assert [type(p) for p in rewrites.passes] == [conv_rewrite.SpaceToDepth, conv_epilogue.FuseEpilogues]
    assert rewrites.uuid() == f"tuner-space-to-depth-1+tuner-conv-epilogue-{conv_epilogue.VERSION}"
    alone = graph_rewrites.patches({CONV_EPILOGUE: True}, None)["post_grad_custom_pre_pass"]
    assert isinstance(alone, conv_epilogue.FuseEpilogues)


@pytest.mark.gpu
@pytest.mark.parametrize("groups", [1, 4])
def test_on_the_gpu_the_fused_ops_match_convolution_bias_add_relu(groups):
    torch.manual_seed(0)
    ops = conv_epilogue.ops()
    x = torch.randn(4, 32, 14, 14, device="cuda", dtype=torch.bfloat16).to(memory_format=CL)
    w = (torch.randn(32, 32 // groups, 3, 3, device="cuda", dtype=torch.bfloat16) / 10).to(memory_format=CL)
    b, z = torch.randn(32, device="cuda", dtype=torch.bfloat16), torch.randn_like(x)
    conv = [[1, 1], [1, 1], [1, 1], groups]
    ref = torch.nn.functional.conv2d(x.float(), w.float(), b.float(), 1, 1, 1, groups)
    for out, want in (
        (ops.conv_relu(x, w, b, *conv), ref.relu()),
        (ops.conv_add_relu(x, w, z, b, *conv), (ref + z.float()).relu()),
    ):
        assert out.is_contiguous(memory_format=CL)
        torch.testing.assert_close(out.float(), want, rtol=0.02, atol=0.05)


class _Residual(torch.nn.Module):
    """Two convolution + batch norm + ReLU layers, the second with a residual add (frozen: the norms fold in)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Conv2d(16, 16, 3, 1, 1), torch.nn.Conv2d(16, 16, 1)
        self.na, self.nb = torch.nn.BatchNorm2d(16), torch.nn.BatchNorm2d(16)

    def forward(self, x):
        y = torch.relu(self.na(self.a(x)))
        return torch.relu(self.nb(self.b(y)) + x)


@pytest.mark.gpu
def test_on_the_gpu_the_recording_counts_the_epilogues_and_the_forced_knob_compiles_them_into_cudnn():
    from torch._inductor.utils import run_and_get_code

    from tests.backend.test_conv_rewrite import _compiled, _grouping, _inference
    from tuner.core import Forcing, Kind
    from tuner.search_spaces.fusion import to_patches

    model = _Residual().eval().cuda().to(torch.bfloat16)
    x = torch.randn(4, 16, 20, 20, device="cuda", dtype=torch.bfloat16).to(memory_format=CL)
    g, task = _grouping(model, x, device="cuda", freezing=True)
    assert g.epilogue_convs == 2 and task.space.evidence()[0] == {**task.space.default, CONV_EPILOGUE: True}
    forcing = Forcing({Kind.FUSION: {g.fusion_key: to_patches({**task.space.default, CONV_EPILOGUE: True})}})
    with _inference(freezing=True):
        y, (code,) = run_and_get_code(_compiled(model, forcing, device="cuda"), x)
        ref = model.float()(x.float())
    assert "tuner.conv_relu" in code and "tuner.conv_add_relu" in code
    assert (y.float() - ref).abs().max() <= 0.02 * ref.abs().max()
