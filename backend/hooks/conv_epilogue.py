"""Hook: a convolution's bias, residual add and ReLU run in cuDNN's own epilogue (``cudnn_convolution_relu``,
``cudnn_convolution_add_relu``) instead of a Triton kernel of their own after it.

Where Inductor keeps a convolution on cuDNN (its default, and max-autotune's choice wherever cuDNN is fastest), the
bias (a frozen batch norm folded into it), a residual add and the ReLU after it become one Triton pointwise kernel:
the convolution's output is written, read back and written again. Max-autotune's other route fuses them into a Triton
convolution template, which is slower than cuDNN at most sites. cuDNN can fuse them itself; Inductor never asks it to.
The rewrite (:class:`FuseEpilogues`, a post-grad pass) replaces ``relu(conv(x, w, b))`` and ``relu(conv(x, w, b) + z)``
on a CUDA device with two custom ops (``tuner::conv_relu``, ``tuner::conv_add_relu``) that call those ATen functions,
depthwise convolutions left as they are (:func:`_depthwise`). Only where the fusion study turns the knob on
(``search_spaces/fusion.py``); :func:`eligible` counts where it applies.
"""

from __future__ import annotations

import functools
from typing import Any

from tuner.backend.hooks.custom_pass import Base

VERSION = 2  # part of the pass's cache key: bump when the rewrite changes
DTYPES = ("float16", "bfloat16", "float32")
SCHEMAS = (
    "conv_relu(Tensor x, Tensor w, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, SymInt groups) -> Tensor",
    "conv_add_relu(Tensor x, Tensor w, Tensor z, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, SymInt groups) -> Tensor",
)


@functools.cache
def ops() -> Any:
    """Define the two ops once per process (a compile loading cached code that calls them needs them too): their
    CUDA kernels call cuDNN's fused functions; their fake kernels give the output's size and layout."""
    import torch

    lib = torch.library.Library("tuner", "FRAGMENT")
    for schema in SCHEMAS:
        lib.define(schema)
    lib.impl("conv_relu", _conv_relu, "CUDA")
    lib.impl("conv_add_relu", _conv_add_relu, "CUDA")
    torch.library.register_fake("tuner::conv_relu", lambda x, w, bias, *conv: _out_like(x, w, *conv[:3]), lib=lib)
    torch.library.register_fake(
        "tuner::conv_add_relu", lambda x, w, z, bias, *conv: _out_like(x, w, *conv[:3]), lib=lib
    )
    _LIBS.append(lib)  # the registrations live as long as the library object
    return torch.ops.tuner


_LIBS: list[Any] = []


def _conv_relu(
    x: Any, w: Any, bias: Any, stride: list[int], padding: list[int], dilation: list[int], groups: int
) -> Any:
    import torch

    out = torch.cudnn_convolution_relu(x, w, bias, stride, padding, dilation, groups)
    return out.contiguous(memory_format=_format(x, w))


def _conv_add_relu(
    x: Any, w: Any, z: Any, bias: Any, stride: list[int], padding: list[int], dilation: list[int], groups: int
) -> Any:
    import torch

    fmt = _format(x, w)
    out = torch.cudnn_convolution_add_relu(
        x, w, z.contiguous(memory_format=fmt), 1.0, bias, stride, padding, dilation, groups
    )
    return out.contiguous(memory_format=fmt)


def _out_like(x: Any, w: Any, stride: list[int], padding: list[int], dilation: list[int]) -> Any:
    """An empty tensor of the convolution's output size, laid out as cuDNN writes it."""
    sizes = [x.shape[0], w.shape[0]]
    for i in range(2, x.dim()):
        k = dilation[i - 2] * (w.shape[i] - 1) + 1
        sizes.append((x.shape[i] + 2 * padding[i - 2] - k) // stride[i - 2] + 1)
    return x.new_empty(sizes).contiguous(memory_format=_format(x, w))


def _format(x: Any, w: Any) -> Any:
    """The layout cuDNN writes: channels-last where the input or the weight is (``cudnn_conv_suggest_memory_format``)."""
    import torch

    if x.dim() != 4:
        return torch.contiguous_format
    last = any(t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous() for t in (x, w))
    return torch.channels_last if last else torch.contiguous_format


def _conv(node: Any) -> bool:
    """A 2-D convolution on a CUDA tensor cuDNN can fuse: not transposed, float16/bfloat16/float32, not depthwise."""
    import torch

    if node.op != "call_function" or node.target is not torch.ops.aten.convolution.default or len(node.args) < 9:
        return False
    x, w = node.args[:2]
    xv, wv = getattr(x, "meta", {}).get("val"), getattr(w, "meta", {}).get("val")
    return (
        xv is not None
        and wv is not None
        and xv.dim() == 4
        and xv.device.type == "cuda"
        and not node.args[6]
        and str(xv.dtype).removeprefix("torch.") in DTYPES
        and wv.dtype == xv.dtype
        and not _depthwise(wv, node.args[8])
    )


def _depthwise(w: Any, groups: Any) -> bool:
    """Whether a convolution reads one input channel per group (a depthwise one). ATen's convolution hands those to
    its own depthwise kernel wherever its heuristics find cuDNN's slow; ``cudnn_convolution_relu`` would force
    cuDNN, which runs depthwise convolutions several times slower (pytorch/pytorch#68506 finds
    ``cudnn_convolution_relu`` 17x slower on 7x7 channels-last ones): they are left out."""
    return isinstance(groups, int) and groups > 1 and int(w.shape[1]) == 1


def _only_user(node: Any) -> Any:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _relu(node: Any) -> bool:
    import torch

    return node is not None and node.op == "call_function" and node.target is torch.ops.aten.relu.default


def _residual(add: Any, conv: Any) -> Any:
    """The other operand of ``add = conv + z`` (no alpha), a tensor of the convolution's shape and dtype; else None."""
    import torch

    if (
        add is None
        or add.op != "call_function"
        or add.target is not torch.ops.aten.add.Tensor
        or add.kwargs
        or len(add.args) != 2
    ):
        return None
    z = add.args[1] if add.args[0] is conv else add.args[0]
    zv, cv = getattr(z, "meta", {}).get("val"), conv.meta.get("val")
    if z is conv or zv is None or cv is None or tuple(zv.shape) != tuple(cv.shape) or zv.dtype != cv.dtype:
        return None
    return z


def _match(conv: Any) -> tuple[Any, Any] | None:
    """(the ReLU that ends ``conv``'s epilogue, the residual added before it or None), where the rewrite applies."""
    if not _conv(conv):
        return None
    nxt = _only_user(conv)
    if _relu(nxt):
        return nxt, None
    if (z := _residual(nxt, conv)) is not None and _relu(end := _only_user(nxt)):
        return end, z
    return None


def eligible(gm: Any) -> int:
    """How many convolutions of this (post-AOT) graph the rewrite would fuse an epilogue into."""
    return sum(_match(n) is not None for n in gm.graph.nodes)


def _replace(graph: Any, conv: Any, relu: Any, z: Any) -> None:
    tuner_ops = ops()
    x, w, bias, stride, padding, dilation, _, _, groups = conv.args[:9]
    conv_args = (list(stride), list(padding), list(dilation), groups)
    with graph.inserting_before(relu):
        if z is None:
            new = graph.call_function(tuner_ops.conv_relu.default, (x, w, bias, *conv_args))
        else:
            new = graph.call_function(tuner_ops.conv_add_relu.default, (x, w, z, bias, *conv_args))
    new.meta.update(relu.meta)
    relu.replace_all_uses_with(new)
    for node in (relu, relu.args[0], conv) if z is not None else (relu, conv):
        graph.erase_node(node)


def fuse(graph: Any) -> int:
    """Rewrite each convolution of ``graph`` the rewrite applies to, in order (a residual may be an earlier one's
    result, matched after that one is rewritten); the number rewritten."""
    done = 0
    for conv in [n for n in graph.nodes if _conv(n)]:
        if (found := _match(conv)) is not None:
            _replace(graph, conv, *found)
            done += 1
    if done:
        graph.lint()
    return done


class FuseEpilogues(Base):  # type: ignore[misc,valid-type]
    """The post-grad pass: :func:`fuse` on the graph."""

    def __call__(self, graph: Any) -> None:
        fuse(graph)

    def uuid(self) -> Any:
        return f"tuner-conv-epilogue-{VERSION}"
