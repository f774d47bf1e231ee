"""Hook (e): a strided convolution that reads few channels (a CNN's stem: 3), rewritten as a stride-1 convolution
over its input's space-to-depth form, through Inductor's ``post_grad_custom_pre_pass``.

For stride ``s``, the input's ``s x s`` blocks become channels (3 become 12 at ``s = 2``) and the kernel shrinks to
``ceil(k/s)`` taps a side (7x7 becomes 4x4), its new taps zero. cuDNN pads 3 channels to 8 and spends most of its
tensor-core work on zeros; on 12 channels and a quarter of the taps the convolution's choices do far better (H200,
bf16 channels-last, batch 32, resnet50's 7x7/2 stem: 0.330 ms as max-autotune compiles it, 0.177 ms rewritten and
compiled the same way; ``bench/device/conv_as_mm.py``). A patchify stem (kernel = stride: ViT's 16x16/16, ConvNeXt's
4x4/4) becomes a 1x1 convolution over its patches, a GEMM: as a gather and a GEMM vit_b_16's took 0.117 ms against
0.331 ms as a convolution, both compiled with max-autotune. A frozen weight is rewritten once, as a constant; another
(a training step's) in the graph. Only where the fusion study turns the knob on (``search_spaces/fusion.py``):
:func:`eligible_shapes` lists where it could apply (``rewrites.patches`` turns the knob into Inductor's config).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from tuner.backend.hooks.custom_pass import Base, rewrite_each, traced_call

MAX_CHANNELS = 4  # cuDNN's bf16/fp16 tensor-core kernels want 8: at or below 4, more than half of its K is padding
VERSION = 1  # part of the pass's cache key: bump when the rewrite changes


def _convolution() -> Any:
    import torch

    return torch.ops.aten.convolution.default


def _rewritable(node: Any) -> bool:
    """A 2-D, ungrouped, undilated, not transposed convolution with a stride ``s >= 2`` equal on both axes, a kernel
    at least as wide (a patchify stem's kernel equals it: the rewrite is then a 1x1 convolution, a GEMM over its
    input's patches), and at most ``MAX_CHANNELS`` input channels."""
    if node.op != "call_function" or node.target is not _convolution() or len(node.args) < 9:
        return False
    x, w, _, stride, _, dilation, transposed, _, groups = node.args[:9]
    xv, wv = getattr(x, "meta", {}).get("val"), getattr(w, "meta", {}).get("val")
    if xv is None or wv is None or xv.dim() != 4 or wv.dim() != 4:
        return False
    s = list(stride)
    return (
        not transposed
        and groups == 1
        and all(d == 1 for d in dilation)
        and len(s) == 2
        and s[0] == s[1] >= 2
        and 0 < wv.shape[1] <= MAX_CHANNELS
        and min(wv.shape[2:]) >= s[0]
    )


def eligible_shapes(gm: Any) -> list[list[list[int]]]:
    """The input and weight shapes of each convolution of this (post-AOT) graph the rewrite would change (a
    dynamic size as -1): what the capture's profile finds them by, to weigh the rewrite by their time."""

    def sizes(node: Any) -> list[int]:
        return [d if isinstance(d, int) else -1 for d in node.meta["val"].shape]

    return [[sizes(n.args[0]), sizes(n.args[1])] for n in gm.graph.nodes if _rewritable(n)]


def _weight_steps(op: Callable[..., Any], w: Any, shape: Sequence[int], s: int) -> Any:
    """``[OC, C, KH, KW]`` as the weight of the stride-1 convolution over the space-to-depth input:
    ``[OC, C*s*s, ceil(KH/s), ceil(KW/s)]``, the kernel padded with zero taps to a multiple of ``s``. Each step is
    ``op(aten_op, *args)``: run on a tensor (a frozen weight, once) or added to the graph (:func:`_call`)."""
    import torch

    aten = torch.ops.aten
    oc, c, kh, kw = (int(d) for d in shape)
    th, tw = -(-kh // s), -(-kw // s)
    wp = op(aten.constant_pad_nd.default, w, [0, tw * s - kw, 0, th * s - kh], 0.0)
    taps = op(aten.view.default, wp, [oc, c, th, s, tw, s])
    moved = op(aten.permute.default, taps, [0, 1, 3, 5, 2, 4])
    dense = op(aten.clone.default, moved, memory_format=torch.contiguous_format)
    return op(aten.view.default, dense, [oc, c * s * s, th, tw])


def s2d_weight(w: Any, s: int) -> Any:
    """A frozen weight rewritten (:func:`_weight_steps`), channels-last as Inductor lays out a frozen weight."""
    import torch

    out = _weight_steps(lambda target, *args, **kwargs: target(*args, **kwargs), w, w.shape, s)
    return out.contiguous(memory_format=torch.channels_last)


_call = traced_call  # a module global, so a test can make it fail


def _weight(gm: Any, w: Any, s: int, fake_mode: Any) -> Any:
    """The node of the rewritten weight: a frozen one computed now, as a constant of the graph; another (a training
    step's parameter, say) transformed in the graph."""
    g = gm.graph
    if w.op == "get_attr":
        w2 = s2d_weight(getattr(gm, w.target).detach(), s)
        name = f"{w.target}_s2d"
        gm.register_buffer(name, w2)
        node = g.get_attr(name)
        node.meta["val"] = fake_mode.from_tensor(w2, static_shapes=True)
        return node
    return _weight_steps(functools.partial(_call, g, fake_mode), w, w.meta["val"].shape, s)


def _rewrite(gm: Any, conv: Any, fake_mode: Any) -> None:
    import torch

    aten = torch.ops.aten
    x, w, bias, stride, padding = conv.args[:5]
    s, (ph, pw) = int(stride[0]), [int(p) for p in padding]
    n, c, h, wd = (int(d) for d in x.meta["val"].shape)
    oh, ow = (int(d) for d in conv.meta["val"].shape[2:])
    g = gm.graph
    with g.inserting_before(conv):
        wn = _weight(gm, w, s, fake_mode)
        th, tw = (int(d) for d in wn.meta["val"].shape[2:])
        rows, cols = (oh + th - 1) * s, (ow + tw - 1) * s  # the padded input the output reads
        xp = _call(g, fake_mode, aten.constant_pad_nd.default, x, [pw, cols - wd - pw, ph, rows - h - ph], 0.0)
        blocks = _call(g, fake_mode, aten.view.default, xp, [n, c, rows // s, s, cols // s, s])
        nhwc = _call(g, fake_mode, aten.permute.default, blocks, [0, 2, 4, 1, 3, 5])
        dense = _call(g, fake_mode, aten.clone.default, nhwc, memory_format=torch.contiguous_format)
        flat = _call(g, fake_mode, aten.view.default, dense, [n, rows // s, cols // s, c * s * s])
        xs = _call(g, fake_mode, aten.permute.default, flat, [0, 3, 1, 2])  # channels-last [n, c*s*s, rows/s, cols/s]
        out = _call(g, fake_mode, aten.convolution.default, xs, wn, bias, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    conv.replace_all_uses_with(out)
    g.erase_node(conv)


class SpaceToDepth(Base):  # type: ignore[misc,valid-type]
    """The post-grad pass: every :func:`_rewritable` convolution of the graph, rewritten."""

    def __call__(self, graph: Any) -> None:
        from torch._guards import detect_fake_mode

        gm = graph.owning_module
        convs = [n for n in graph.nodes if _rewritable(n)]
        if gm is None or not convs:
            return
        fake_mode = detect_fake_mode([n.meta["val"] for n in convs[0].args[:2]])
        rewrite_each(
            graph,
            convs,
            lambda conv: _rewrite(gm, conv, fake_mode),
            "the space-to-depth rewrite",
            "the convolution is compiled as it is",
        )

    def uuid(self) -> Any:
        return f"tuner-space-to-depth-{VERSION}"
