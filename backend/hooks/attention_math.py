"""Attention the dispatcher runs as math, kept as one node until Inductor's post-grad passes, so that a fused backend
can be tried there too.

PyTorch picks an SDPA backend per call while AOT tracing. Where no fused kernel takes the call as it stands, it
traces ATen's math attention: two batched GEMMs (in float32 for a half-precision input) and a softmax, which Inductor
compiles as kernels of its own: a broadcast boolean mask whose last dimension is not contiguous, as Transformers builds
it when Dynamo traces, is one such call, which the memory-efficient kernel refuses. Nothing in the graph Inductor
lowers then says that it was attention, and max-autotune can only tune its GEMMs.

A pre-grad pass (:class:`KeepMathAttention`, placed in every compile of the ``tuned`` backend, inference only) turns
each SDPA call that would be traced as math into one call of ``tuner::attention``, which AOT tracing keeps whole.
The attention hook (``hooks/attention``) then finds it as a site whose backend is ``math`` and lowers it after the
graph is keyed: to the answer's fused backend, else back to math attention, as Inductor would have traced it
(:func:`lowered`). The graph's key is the same whichever backend an answer names.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any

from tuner.backend.errors import HookUnavailable
from tuner.backend.hooks.custom_pass import IMPORT_ERROR, Base
from tuner.keys import digest
from tuner.once import warn_once
from tuner.search_spaces.attention import DECODE

VERSION = 1  # part of the pass's cache key: bump when the rewrite changes
SCHEMA = "attention(Tensor q, Tensor k, Tensor v, Tensor? mask, bool causal, float? scale, bool gqa) -> Tensor"
# The dispatcher's names of the backends tuner's attention space names (``search_spaces/attention.BACKENDS``).
SDP_BACKENDS = {
    "flash": "FLASH_ATTENTION",
    "flash_cpu": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}
log = logging.getLogger("tuner.backend")
_LIBS: list[Any] = []


@functools.cache
def op() -> Any:
    """``tuner::attention``, defined once per process (cached code that still calls it needs it too): math attention
    in eager, as the dispatcher would have run it; its fake kernel gives the output's size."""
    import torch

    lib = torch.library.Library("tuner", "FRAGMENT")
    lib.define(SCHEMA)
    lib.impl("attention", _math, "CompositeExplicitAutograd")
    torch.library.register_fake("tuner::attention", lambda q, k, v, mask, causal, scale, gqa: _out_like(q, v), lib=lib)
    _LIBS.append(lib)
    return torch.ops.tuner.attention.default


def sdpa(backend: str | None, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float | None, gqa: bool) -> Any:
    """The call through PyTorch's own front end with only ``backend`` enabled (None: the dispatcher's own pick among
    those the user left enabled), its output contiguous. A fused kernel is given the inputs in a form it takes (a
    per-head mask as four dimensions, a last dimension of stride 1); math attention gets them as they are."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if backend not in (None, "math"):
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
        if mask is not None:
            mask = mask.unsqueeze(0) if mask.dim() == 3 else mask
            mask = mask if mask.stride(-1) == 1 else mask.contiguous()
    if backend == DECODE:  # tuner's own kernel (``backend/decode_attention.py``), grouped heads read as they are
        from tuner.backend.decode_attention import op

        return op()(q, k, v, mask, scale).contiguous()
    extra = {"enable_gqa": True} if gqa else {}
    with sdpa_kernel([getattr(SDPBackend, SDP_BACKENDS[backend])]) if backend else contextlib.nullcontext():
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal, scale=scale, **extra
        )
    return out.contiguous()


def _math(q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float | None, gqa: bool) -> Any:
    return sdpa("math", q, k, v, mask, causal, scale, gqa)


def _sdpa_targets() -> tuple[Any, ...]:
    import torch

    return (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)


def _call(node: Any) -> dict[str, Any] | None:
    """A Dynamo graph's SDPA call as ``tuner::attention``'s arguments (nodes), where its dropout is 0 and its flags and
    scale are constants; else None."""
    if node.op != "call_function" or node.target not in _sdpa_targets():
        return None
    names = ("q", "k", "v", "mask", "dropout", "causal", "scale", "gqa")
    given = dict(zip(names, node.args))
    for kw, name in (
        ("query", "q"),
        ("key", "k"),
        ("value", "v"),
        ("attn_mask", "mask"),
        ("dropout_p", "dropout"),
        ("is_causal", "causal"),
        ("scale", "scale"),
        ("enable_gqa", "gqa"),
    ):
        if kw in node.kwargs:
            given[name] = node.kwargs[kw]
    flags = [given.get(n) for n in ("dropout", "causal", "scale", "gqa")]
    if any(hasattr(f, "meta") for f in flags) or given.get("dropout", 0.0) != 0.0 or not all(n in given for n in "qkv"):
        return None  # a flag computed in the graph, or dropout: left as it is
    return {
        "q": given["q"],
        "k": given["k"],
        "v": given["v"],
        "mask": given.get("mask"),
        "causal": bool(given.get("causal", False)),
        "scale": given.get("scale"),
        "gqa": bool(given.get("gqa", False)),
    }


def _value(x: Any) -> Any:
    return getattr(x, "meta", {}).get("example_value") if hasattr(x, "meta") else x


def traced(backend: str | None, args: list[Any]) -> Any:
    """The ATen graph of :func:`sdpa` with ``backend`` over (fake) ``args``, as Inductor decomposes it."""
    from torch._inductor.pattern_matcher import fwd_only

    tensors = [i for i, a in enumerate(args[:4]) if a is not None]

    def run(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(tensors, xs):
            full[i] = x
        return sdpa(backend, *full)

    return fwd_only(run, [args[i] for i in tensors])


def runs_as_math(args: list[Any]) -> bool:
    """Whether the dispatcher traces this call (fake inputs) as math attention: no fused attention op in its graph."""
    graph = traced(None, args)
    return not any("_scaled_dot_product_" in str(n.target) and "math" not in str(n.target) for n in graph.graph.nodes)


class KeepMathAttention(Base):  # type: ignore[misc,valid-type]
    """The pre-grad pass: each inference SDPA call the dispatcher would trace as math, as one ``tuner::attention``."""

    def __call__(self, graph: Any) -> None:
        import torch

        if torch.is_grad_enabled():  # AOT traces a training graph, whose backward needs the forward's own form
            return
        seen: dict[str, bool] = {}
        for node in list(graph.nodes):
            a = _call(node)
            if a is None:
                continue
            args = [_value(a[n]) for n in ("q", "k", "v", "mask")] + [a["causal"], a["scale"], a["gqa"]]
            if any(x is None for x in args[:3]):
                continue
            key = digest(
                [
                    [list(x.shape), list(x.stride()), str(x.dtype), str(x.device)]
                    if isinstance(x, torch.Tensor)
                    else repr(x)
                    for x in args
                ]
            )
            try:
                if key not in seen:
                    with getattr(args[0], "fake_mode", None) or contextlib.nullcontext():
                        seen[key] = runs_as_math(args)
            except Exception as e:  # noqa: BLE001 - a call this torch traces otherwise is left as it is
                log.info("tuner: an attention call was not checked for math dispatch (%s: %s)", type(e).__name__, e)
                seen[key] = False
            if seen[key]:
                _replace(graph, node, a, args)
        graph.lint()

    def uuid(self) -> Any:
        return f"tuner-math-attention-{VERSION}"


def _replace(graph: Any, node: Any, a: dict[str, Any], vals: list[Any]) -> None:
    with graph.inserting_before(node):
        new = graph.call_function(op(), (a["q"], a["k"], a["v"], a["mask"], a["causal"], a["scale"], a["gqa"]))
    new.meta = {**node.meta, "example_value": _out_like(vals[0], vals[2])}
    node.replace_all_uses_with(new)
    graph.erase_node(node)


def _out_like(q: Any, v: Any) -> Any:
    """An empty tensor of the attention's output size: the query's, with the values' head size."""
    return q.new_empty((*q.shape[:-1], v.shape[-1]))


def lowered(node: Any, backend: str, fake_mode: Any) -> Any:
    """A ``tuner::attention`` node of a post-grad graph as ``backend``'s attention (``math``: as the dispatcher traced
    it), inserted before it; the node of its output."""
    q, k, v, mask, causal, scale, gqa = node.args
    return inserted(node, backend, (q, k, v, mask), causal, scale, gqa, fake_mode)


def inserted(
    before: Any, backend: str, nodes: tuple[Any, ...], causal: bool, scale: float | None, gqa: bool, fake_mode: Any
) -> Any:
    """``backend``'s attention over ``nodes`` (query, key, value and the mask or None), traced as Inductor decomposes
    it and inserted before the node ``before``; the node of its output."""
    val = lambda n: n.meta["val"] if n is not None else None
    with fake_mode:
        sub = traced(backend, [*map(val, nodes), causal, scale, gqa])
    placeholders = [p for p in sub.graph.nodes if p.op == "placeholder"]
    with before.graph.inserting_before(before):
        return before.graph.graph_copy(sub.graph, dict(zip(placeholders, [n for n in nodes if n is not None])))


def pre_grad_patches(config: Any, given: dict[str, Any]) -> dict[str, Any]:
    """Inductor config placing :class:`KeepMathAttention`, where the user set neither a pre-grad pass nor a post-grad
    one of their own, in Inductor's ``config`` or in the compile's options ``given`` (the attention hook's post-grad
    pass must lower what it keeps); else nothing."""
    slots = ("pre_grad_custom_pass", "post_grad_custom_post_pass")
    if not all(hasattr(config, s) for s in slots) or IMPORT_ERROR is not None:
        _unavailable()
        return {}
    if any(given.get(s, getattr(config, s)) is not None for s in slots):
        return {}
    op()
    return {"pre_grad_custom_pass": KeepMathAttention()}


def _unavailable() -> None:
    """Said once per process: this torch has no pre-grad pass interface, and attention run as math stays as Inductor
    traces it (two batched GEMMs and a softmax)."""
    message = HookUnavailable(
        "Inductor's pre_grad_custom_pass or custom-pass interface is unavailable: attention the "
        "dispatcher runs as math is compiled as Inductor traces it"
    )
    warn_once(log, f"tuner: {message}")
