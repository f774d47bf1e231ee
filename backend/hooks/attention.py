"""Hook (h): the SDPA backend of each attention site, through Inductor's ``post_grad_custom_post_pass``.

At trace time PyTorch's dispatcher picks one fused attention kernel per call by heuristics (flash, memory-efficient,
cuDNN; on the CPU its flash kernel) and the graph Inductor lowers names it: ``aten._scaled_dot_product_*``. Inductor
never measures that pick; max-autotune never revisits it. Here a graph's attention nodes whose only used output is
the attention itself (inference: nothing keeps the log-sum-exp for a backward) are rewritten to the backend the
graph's stored answer names for their site (``search_spaces/attention.py``). A site is its inputs' sizes, strides
and dtype, its mask, causality, scale and dropout: the sites of a transformer's repeated layers are one site.
:func:`found` lists what a graph holds, :func:`patches` turns an answer into Inductor's config (the kind's adapter,
``TaskKind.adapter``).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from tuner.backend.hooks import attention_math
from tuner.backend.hooks.custom_pass import Base, placed
from tuner.keys import digest
from tuner.search_spaces.attention import ANSWER_KNOB, BACKENDS, DECODE, KV_HEADS, site_class

VERSION = 1  # part of the pass's cache key: bump when the rewrite changes
log = logging.getLogger(__name__)


@functools.cache
def _ops() -> dict[Any, str]:
    """{ATen overload: backend name} of the fused attention ops a graph may hold (those this torch has)."""
    import torch

    aten = torch.ops.aten
    names = {
        "flash": "_scaled_dot_product_flash_attention",
        "efficient": "_scaled_dot_product_efficient_attention",
        "cudnn": "_scaled_dot_product_cudnn_attention",
        "flash_cpu": "_scaled_dot_product_flash_attention_for_cpu",
        "math": "_scaled_dot_product_attention_math",
    }
    return {
        **{getattr(aten, op).default: backend for backend, op in names.items() if hasattr(aten, op)},
        attention_math.op(): "math",
    }


def _arguments(node: Any) -> dict[str, Any] | None:
    """The call's (query, key, value, mask, dropout, causal, scale), whatever the op's signature; None if unreadable."""
    import torch

    if node.target is attention_math.op():
        q, k, v, mask, causal, scale, _ = node.args
        return {"q": q, "k": k, "v": v, "mask": mask, "dropout": 0.0, "causal": causal, "scale": scale}

    try:
        args = torch.fx.operator_schemas.normalize_function(
            node.target, node.args, node.kwargs, normalize_to_only_use_kwargs=True
        )
    except Exception:  # noqa: BLE001 - an op this torch spells otherwise is left alone
        return None
    if args is None:
        return None
    kw = args.kwargs
    return {
        "q": kw["query"],
        "k": kw["key"],
        "v": kw["value"],
        "mask": kw.get("attn_bias", kw.get("attn_mask")),
        "dropout": float(kw.get("dropout_p", 0.0)),
        "causal": bool(kw.get("is_causal", False)),
        "scale": kw.get("scale"),
    }


def _output_only(node: Any) -> bool:
    """Whether the node's only used output is the attention (item 0): nothing needs the others' form."""
    import operator

    if node.target is attention_math.op():
        return True  # one output
    return bool(node.users) and all(
        u.op == "call_function" and u.target is operator.getitem and u.args[1] == 0 for u in node.users
    )


def _tensor(x: Any) -> list[Any] | None:
    val = getattr(x, "meta", {}).get("val") if x is not None else None
    if val is None:
        return None
    return [str(val.dtype).removeprefix("torch."), [int(d) for d in val.shape], [int(d) for d in val.stride()]]


def describe(node: Any) -> dict[str, Any] | None:
    """A rewritable attention node's site (what its key hashes) and backend; None where it is not one."""
    backend = _ops().get(node.target) if node.op == "call_function" else None
    a = _arguments(node) if backend else None
    if a is None or a["dropout"] != 0.0 or not _output_only(node):
        return None
    try:
        q, k, v = (_tensor(a[n]) for n in "qkv")
        mask = _tensor(a["mask"])
    except (TypeError, ValueError):  # a symbolic size: no site
        return None
    if q is None or k is None or v is None or len(q[1]) != 4:
        return None
    site = {
        "q": q,
        "k": k,
        "v": v,
        "mask": mask,
        "causal": a["causal"],
        "scale": None if a["scale"] is None else float(a["scale"]),
    }
    layout = {"mask_layout": dict(zip(("dtype", "shape", "stride"), mask))} if mask is not None else {}
    return {
        "site": digest(site)[:16],
        "backend": backend,
        "shape": [*q[1], k[1][2]],
        "dtype": q[0],
        "mask": mask is not None,
        "causal": a["causal"],
        "class": site_class(q[0], q[1][3], mask is not None, a["causal"]),
        "strides": [q[2], k[2], v[2]],
        **layout,
        **({DECODE: True} if _decodes(a, q, k, v) else {}),
        **({KV_HEADS: k[1][1]} if k[1][1] != q[1][1] else {}),
    }


def _decodes(a: dict[str, Any], q: list[Any], k: list[Any], v: list[Any]) -> bool:
    """Whether tuner's decode kernel takes the call (a few queries over many keys, on CUDA), its values' sizes the keys'."""
    from tuner.backend.decode_attention import takes

    device = getattr(a["q"].meta.get("val"), "device", None)
    return getattr(device, "type", None) == "cuda" and k[1] == v[1] and takes(q[1], k[1], q[0], a["causal"])


def found(gm: Any) -> list[dict[str, Any]]:
    """What the recording keeps of a graph about to be lowered: its attention sites, each once, with how many nodes
    share it (``count``)."""
    out: dict[str, dict[str, Any]] = {}
    for node in gm.graph.nodes:
        d = describe(node)
        if d is not None:
            out.setdefault(d["site"], {**d, "count": 0})["count"] += 1
    return list(out.values())


def full_mask(backend: str, q: list[int], k: list[int], mask: list[int] | None) -> list[int] | None:
    """The sizes ``backend`` takes a mask of these sizes at, where they differ: the memory-efficient kernel takes a
    bias of [batch, heads, queries, keys] only (the dispatcher expands a broadcast one, stride 0; cuDNN's takes it
    as it is). None: as it is."""
    full = [q[0], q[1], q[2], k[2]]
    return full if backend == "efficient" and mask is not None and list(mask) != full else None


def call(backend: str, a: dict[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """(op, args, kwargs) of ``backend``'s fused attention for the call's arguments (tensors, or nodes whose mask
    already has the sizes :func:`full_mask` asks). The op's output is a tuple, the attention first
    (:func:`attention_of`)."""
    import torch

    aten = torch.ops.aten
    q, k, v, mask, causal, scale = a["q"], a["k"], a["v"], a["mask"], a["causal"], a["scale"]
    if backend == DECODE:
        from tuner.backend.decode_attention import op

        return op(), (q, k, v, mask, scale), {}
    if isinstance(mask, torch.Tensor) and (full := full_mask(backend, list(q.shape), list(k.shape), list(mask.shape))):
        mask = mask.expand(full)
    if backend == "flash":
        return aten._scaled_dot_product_flash_attention.default, (q, k, v, 0.0, causal, False), {"scale": scale}
    if backend == "efficient":
        return (
            aten._scaled_dot_product_efficient_attention.default,
            (q, k, v, mask, False, 0.0, causal),
            {"scale": scale},
        )
    if backend == "cudnn":
        return (
            aten._scaled_dot_product_cudnn_attention.default,
            (q, k, v, mask, False, 0.0, causal, False),
            {"scale": scale},
        )
    if backend == "flash_cpu":
        return (
            aten._scaled_dot_product_flash_attention_for_cpu.default,
            (q, k, v, 0.0, causal),
            {"attn_mask": mask, "scale": scale},
        )
    raise ValueError(f"unknown attention backend {backend!r}")


def attention_of(backend: str) -> bool:
    """Whether ``backend``'s op (:func:`call`) gives the attention itself, not a tuple that holds it first."""
    return backend == DECODE


def _expanded(g: Any, node: Any, backend: str, a: dict[str, Any]) -> Any:
    """The call's mask node, expanded before ``node`` where ``backend`` takes it at other sizes (:func:`full_mask`)."""
    import torch

    mask, val = a["mask"], (lambda n: getattr(n, "meta", {}).get("val"))
    if mask is None or val(mask) is None:
        return mask
    full = full_mask(backend, list(val(a["q"]).shape), list(val(a["k"]).shape), list(val(mask).shape))
    if full is None:
        return mask
    with g.inserting_before(node):
        out = g.call_function(torch.ops.aten.expand.default, (mask, full))
    out.meta["val"] = val(mask).expand(full)
    return out


def _fused(node: Any, backend: str, a: dict[str, Any], fake_mode: Any) -> Any:
    """The node of ``backend``'s fused kernel's output, inserted before ``node``."""
    import operator

    import torch

    g = node.graph
    a = {**a, "mask": _expanded(g, node, backend, a)}
    op, args, kwargs = call(backend, a)
    with g.inserting_before(node):
        new = g.call_function(op, args, kwargs)
        with fake_mode:
            new.meta["val"] = op(
                *torch.fx.node.map_arg(args, lambda x: x.meta["val"]),
                **torch.fx.node.map_arg(kwargs, lambda x: x.meta["val"]),
            )
        if attention_of(backend):
            return new
        out = g.call_function(operator.getitem, (new, 0))
    out.meta["val"] = new.meta["val"][0]
    return out


def _decomposed(node: Any, a: dict[str, Any], fake_mode: Any) -> Any:
    """ATen's math attention, traced through Inductor's decompositions (two batched GEMMs and a softmax that Inductor
    compiles as its own kernels) and inserted before ``node``; the node of its output."""
    return attention_math.inserted(
        node, "math", (a["q"], a["k"], a["v"], a["mask"]), a["causal"], a["scale"], False, fake_mode
    )


def _rewrite(node: Any, backend: str, fake_mode: Any) -> None:
    """``node`` replaced by ``backend``'s attention; the users of its output read the new one's."""
    a = _arguments(node)
    assert a is not None
    if backend == "flash" and a["mask"] is not None:
        raise ValueError("the flash kernel takes no attention mask")
    g = node.graph
    if (
        node.target is attention_math.op()
    ):  # kept whole through AOT tracing: one output, lowered here whatever the answer
        node.replace_all_uses_with(attention_math.lowered(node, backend, fake_mode))
        g.erase_node(node)
        return
    out = _decomposed(node, a, fake_mode) if backend == "math" else _fused(node, backend, a, fake_mode)
    for user in list(node.users):
        user.replace_all_uses_with(out)
        g.erase_node(user)
    g.erase_node(node)


class AttentionBackends(Base):  # type: ignore[misc,valid-type]
    """The post-grad pass: each attention node of a site the answer names, rewritten to that site's backend."""

    def __init__(self, backends: dict[str, str]):
        self.backends = dict(backends)

    def __call__(self, graph: Any) -> None:
        from torch._guards import detect_fake_mode

        kept = (
            attention_math.op()
        )  # math attention kept whole by the pre-grad pass: lowered here, as math where no answer says otherwise
        todo = []
        for n in graph.nodes:
            d = describe(n)
            want = (
                (self.backends.get(d["site"]) or self.backends.get(d["class"], d["backend"]))
                if d is not None
                else "math"
            )
            if n.target is kept or (d is not None and want != d["backend"]):
                todo.append((n, want))
        if not todo:
            return
        fake_mode = detect_fake_mode([todo[0][0].args[0].meta["val"]])
        for node, backend in todo:
            try:
                _rewrite(node, backend, fake_mode)
            except Exception as e:  # noqa: BLE001 - this torch or these inputs refuse it: the site keeps its kernel
                log.warning(
                    "tuner: attention rewritten to %s failed (%s: %s); the site keeps its kernel",
                    backend,
                    type(e).__name__,
                    e,
                )
                if node.target is kept and backend != "math" and node.graph is graph:
                    _rewrite(node, "math", fake_mode)
        graph.lint()

    def uuid(self) -> Any:
        return f"tuner-attention-{VERSION}-{digest(sorted(self.backends.items()))[:16]}"


def patches(knobs: dict[str, Any], config: Any) -> dict[str, Any]:
    """``knobs`` as Inductor config patches: a graph's attention answer becomes the post-grad pass, which also lowers
    the attention the pre-grad pass kept whole (``attention_math``), so it is placed with no answer too. Where this
    torch has no custom-pass interface, or the user set a post-grad pass of their own (in Inductor's ``config``), an
    answer is dropped with a warning and the sites keep the kernels the dispatcher chose."""
    out = dict(knobs)
    backends = {
        str(k): str(v)
        for k, v in (out.pop(ANSWER_KNOB, None) or {}).items()
        if any(v in names for names in BACKENDS.values())
    }
    if DECODE in backends.values():  # defined before a compile, whose cached code may call it without this pass running
        from tuner.backend.decode_attention import op

        op()
    slot = "post_grad_custom_post_pass"
    if not backends and getattr(config, slot) is not None:
        return out
    return placed(
        out, slot, getattr(config, slot), lambda: AttentionBackends(backends), "the stored attention backends"
    )


def compile_patches(config: Any, given: dict[str, Any]) -> dict[str, Any]:
    """Inductor config for a whole compile (before AOT tracing): the pre-grad pass that keeps math attention whole."""
    return attention_math.pre_grad_patches(config, given)
