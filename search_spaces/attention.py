"""The SDPA backend of each attention site of a graph: which fused attention kernel runs it.

PyTorch's dispatcher picks one at trace time by heuristics and Inductor keeps it; nothing measures it. One task per
forward graph that holds attention whose only used output is the attention itself (inference; a training forward
keeps its log-sum-exp for the backward, which only its own kernel reads). One parameter per site, ``site.<id>``: the
site's backend. On CUDA: ``flash`` (FlashAttention-2; no mask), ``efficient`` (memory-efficient), ``cudnn`` (cuDNN's
fused attention), ``math`` (ATen's composite: two GEMMs and a softmax) and, at a site of a few queries over many keys
(a decode step's; the capture marks it ``decode``), ``decode``: tuner's own kernel, its keys split among programs
(``backend/decode_attention.py``); on the CPU ``flash_cpu`` and ``math``. The
default is the dispatcher's pick: ``math`` where no fused kernel took the call as it stood
(``backend/hooks/attention_math`` keeps such a call whole, so that it is a site at all). The study measures each backend
at every site that takes it first
(:meth:`AttentionSpace.evidence`), then mixes. At other sizes of the same graph, each site takes the answer of the
first site of its class (dtype, head size, mask, causality: :func:`site_class`). ``backend/hooks/attention.py``
rewrites the graph as the answer says.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from tuner.keys import digest
from tuner.kinds import GRAPH_HOOK, TaskKind
from tuner.search_spaces.base import Space, choice

FAMILY = "attention"
ANSWER_KNOB = "tuner.attention_backends"  # not an Inductor flag: the backend turns it into a post-grad pass
DECODE = (
    "decode"  # tuner's own kernel: offered only at a site the capture marked as one it takes (older records never are)
)
BACKENDS = {"cuda": ("flash", "efficient", "cudnn", "math", DECODE), "cpu": ("flash_cpu", "math")}
KV_HEADS = "kv_heads"  # a site's key/value heads, where fewer than its query heads (grouped; older records never say)
DECOMPOSED = "math"  # the backend Inductor lowers itself, into batched GEMMs (template sites) and a softmax
MAX_SITES = 16
# Timed alone (``tuner.sweep.attention_alone``): a backend's output may differ from math attention's (float32) by this
# much of its largest value, per dtype.
ALONE_TOLERANCE = {"float16": 2e-2, "bfloat16": 4e-2, "float32": 2e-3}
_SITE_ID = re.compile(r"^[0-9a-f]{16}$")
_DTYPE = re.compile(r"^[a-z0-9_]{0,24}$")


def site_class(dtype: str, head_dim: int, mask: bool, causal: bool) -> str:
    """What a site is at any sizes (its dtype, head size, mask and causality): the key under which an answer stands in
    for the same model's sites at other batch sizes and lengths (``tuner.nearest``), as ``class:<id>``."""
    return (
        "class:" + digest({"dtype": dtype, "head_dim": int(head_dim), "mask": bool(mask), "causal": bool(causal)})[:16]
    )


def _options(device: str, site: dict[str, Any]) -> list[str]:
    """The backends a site may take on ``device``: its own first; flash only without a mask; tuner's decode kernel only
    where the site is marked as one it takes."""
    allowed = [
        b
        for b in BACKENDS[device]
        if not (b == "flash" and site.get("mask")) and (b != DECODE or site.get(DECODE) is True)
    ]
    return [site["backend"], *(b for b in allowed if b != site["backend"])]


MASK_DTYPES = ("bool", "float16", "bfloat16", "float32")


def rebuildable(site: dict[str, Any]) -> bool:
    """Whether ``site`` can be rebuilt from what it records and timed alone: five sizes, a floating dtype, and no mask
    or one whose layout it records (older records have none)."""
    sized = len(site.get("shape") or []) == 5 and str(site.get("dtype")) in ALONE_TOLERANCE
    return sized and (not site.get("mask") or bool(site.get("mask_layout")))


def _checked(context: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    device = context.get("device")
    if device not in BACKENDS:
        raise ValueError(f"device {str(device)[:20]!r} has no attention backends")
    sites = list(context.get("sites") or [])
    if not sites or len(sites) > MAX_SITES:
        raise ValueError(f"an attention task holds 1 to {MAX_SITES} sites, not {len(sites)}")
    out = []
    for s in sites:
        if not isinstance(s, dict) or not isinstance(s.get("site"), str) or not _SITE_ID.match(s["site"]):
            raise ValueError("an attention site id is 16 hexadecimal digits")
        if s.get("backend") not in BACKENDS[device]:
            raise ValueError(f"unknown {device} attention backend {str(s.get('backend'))[:20]!r}")
        count = s.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 100_000:
            raise ValueError("an attention site's count is an integer in [1, 100000]")
        dtype = str(s.get("dtype", ""))
        if not _DTYPE.match(dtype):
            raise ValueError("an attention site's dtype is a short name")
        out.append(
            {
                "site": s["site"],
                "backend": s["backend"],
                "mask": bool(s.get("mask")),
                "count": count,
                "shape": [int(d) for d in (s.get("shape") or [])][:5],
                "causal": bool(s.get("causal")),
                "dtype": dtype,
                **_strides(s.get("strides")),
                **_mask_layout(s.get("mask_layout")),
                **({DECODE: True} if s.get(DECODE) is True else {}),
                **_kv_heads(s),
            }
        )
    return device, out


def _kv_heads(site: dict[str, Any]) -> dict[str, Any]:
    """``{"kv_heads": n}`` where a site records key/value heads that its query heads group over, else nothing."""
    n, shape = site.get(KV_HEADS), site.get("shape") or []
    if n is None:
        return {}
    heads = shape[1] if len(shape) == 5 and isinstance(shape[1], int) else None
    if not isinstance(n, int) or isinstance(n, bool) or heads is None or not 1 <= n < heads or heads % n:
        raise ValueError("an attention site's key/value heads are fewer than its query heads and divide them")
    return {KV_HEADS: n}


def _mask_layout(layout: Any) -> dict[str, Any]:
    """``{"mask_layout": {dtype, shape, stride}}`` where a site records its mask's (at most four dimensions, which
    broadcast to the scores' ``(b, h, sq, sk)``: a site whose mask does not is not timed alone), else nothing."""
    if layout is None:
        return {}
    shape, stride = (layout.get(k) if isinstance(layout, dict) else None for k in ("shape", "stride"))
    ok = (
        isinstance(layout, dict) and layout.get("dtype") in MASK_DTYPES and _sizes(shape, 1, 4) and _sizes(stride, 1, 4)
    )
    if not ok or len(shape) != len(stride):
        raise ValueError(
            "an attention site's mask layout is a dtype (bool or floating) and one to four sizes and strides"
        )
    return {"mask_layout": {"dtype": layout["dtype"], "shape": list(shape), "stride": list(stride)}}


def _strides(strides: Any) -> dict[str, Any]:
    """``{"strides": [q, k, v]}`` where a site records its inputs' strides (four non-negative integers each), else
    nothing: the site is then rebuilt contiguous."""
    if strides is None:
        return {}
    if not (isinstance(strides, list) and len(strides) == 3 and all(_sizes(t, 4, 4) for t in strides)):
        raise ValueError(
            "an attention site's strides are three lists of four non-negative integers (query, key, value)"
        )
    return {"strides": [list(t) for t in strides]}


def _sizes(t: Any, least: int, most: int) -> bool:
    """Whether ``t`` is a list of ``least`` to ``most`` non-negative integers (sizes or strides)."""
    return (
        isinstance(t, list)
        and least <= len(t) <= most
        and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**40 for x in t)
    )


def space(context: dict[str, Any]) -> Space:
    """``context``: ``device`` and ``sites`` (``backend/hooks/attention.sites``: id, backend, mask, count, shape)."""
    device, sites = _checked(context)
    params = tuple(choice(f"site.{s['site']}", _options(device, s)) for s in sites)
    default = {f"site.{s['site']}": s["backend"] for s in sites}
    return AttentionSpace(FAMILY, params, default, (), {"device": device, "sites": sites})


@dataclass(frozen=True)
class AttentionSpace(Space):
    def evidence(self) -> list[dict[str, Any]]:
        """Each other backend at every site that takes it, one config per backend: a transformer's sites are alike. In
        the order of their times alone where the sites were timed (:func:`ranked`), without a backend a site refused."""
        out, refused = [], self.context.get("refused") or {}
        for backend in self.context.get("order") or BACKENDS[self.context["device"]]:
            config = {
                p.name: backend
                if backend in p.options and backend not in refused.get(p.name, ())
                else self.default[p.name]  # type: ignore[attr-defined]
                for p in self.params
            }
            if config != self.default and config not in out:
                out.append(config)
        return out

    def reshapes_sites(self, config: dict[str, Any]) -> bool:
        """Only a site moved to or from ``math`` changes the graph's template sites (its two GEMMs are sites); a
        fused backend is one library call, whichever."""
        return any((config.get(k) == DECOMPOSED) != (v == DECOMPOSED) for k, v in self.default.items())


def ranked(space: AttentionSpace, timings: dict[str, dict[str, dict[str, Any]]]) -> AttentionSpace:
    """``space`` given its sites' fused backends timed alone ({site id: {backend: {"ms", ...} or {"error"}}}): its
    evidence fastest first (by each backend's time over the timed sites, each by its calls, after those that run more
    of them), and a backend that got no time at a site (the site's inputs refused, or numerics apart) ruled out there,
    never compiled into a trial. The options stay: a study's distributions do not change from one sweep to the next."""
    refused = {f"site.{site}": sorted(b for b, r in t.items() if "ms" not in r) for site, t in timings.items()}
    counts = {s["site"]: int(s.get("count", 1)) for s in space.context["sites"]}

    def total(backend: str) -> tuple[int, float]:
        """(minus the sites it ran, their time by calls): one that runs more of the sites first."""
        times = [counts.get(site, 1) * t[backend]["ms"] for site, t in timings.items() if "ms" in t.get(backend, {})]
        return -len(times), sum(times)

    order = sorted(BACKENDS[space.context["device"]], key=total)

    def taken(config: dict[str, Any]) -> str | None:
        bad = [f"{k}={config[k]}" for k, backends in refused.items() if config.get(k) in backends]
        return f"refused when timed alone: {', '.join(bad)}" if bad else None

    context = {**space.context, "order": order, "refused": refused}
    return dataclasses.replace(space, constraints=(*space.constraints, taken), context=context)


def backends_of(config: dict[str, Any]) -> dict[str, str]:
    """{site id: backend} of a config."""
    return {k.removeprefix("site."): str(v) for k, v in config.items() if k.startswith("site.")}


def _answer(key: str, config: dict[str, Any], signature: dict[str, Any]) -> tuple[str, Any]:
    """Each site's backend, and per site class the backend of its first site: what a compile of the same graph at other
    sizes applies to its own sites, whose ids differ."""
    backends = backends_of(config)
    classes: dict[str, str] = {}
    for s in (signature.get("space") or {}).get("sites") or []:
        if s.get("site") in backends and len(s.get("shape") or []) >= 4:
            classes.setdefault(
                site_class(str(s.get("dtype", "")), s["shape"][3], bool(s.get("mask")), bool(s.get("causal"))),
                backends[s["site"]],
            )
    return key, {ANSWER_KNOB: {**backends, **classes}}


def _graph_task(graph: dict[str, Any], sites: list[dict[str, Any]], info: dict[str, Any]) -> dict[str, Any] | None:
    """A forward graph's task, where it holds attention sites the rewrite applies to."""
    found = (graph.get("found") or {}).get(FAMILY) or []
    return {"device": graph.get("device", "cpu"), "sites": found[:MAX_SITES]} if found else None


def _work(space: dict[str, Any]) -> float:
    """Multiply-adds per step of a task's attention sites: two GEMMs each (scores, then their product with the
    values), half of each under a causal mask."""
    total = 0.0
    for s in space.get("sites") or []:
        try:
            b, h, sq, d, sk = (int(x) for x in s["shape"])
            total += int(s.get("count", 1)) * 2 * b * h * sq * sk * d / (2 if s.get("causal") else 1)
        except (KeyError, TypeError, ValueError):
            continue
    return total


KIND = TaskKind(
    FAMILY,
    space,
    GRAPH_HOOK,
    phase="attention backends",
    cost="graph",
    group="attention",
    answer=_answer,
    beside_base=True,
    forward_only=True,
    quiet_miss=True,
    label="attention",
    graph_task=_graph_task,
    adapter="tuner.backend.hooks.attention",
    work=_work,
    library_ops=tuple(
        f"_scaled_dot_product_{op}"
        for op in ("flash_attention", "efficient_attention", "cudnn_attention", "flash_attention_for_cpu")
    ),
)
