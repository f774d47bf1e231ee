"""Hook (d): template choices that Inductor did not offer, built from their choice ids.

A site may be forced to (or benchmark) a Triton template config from tuner's wider space
(``tuner.search_spaces.template``). Its id says everything needed to build it:

* mm / addmm / bmm: a ``KernelTemplateChoice`` made in ``InductorChoices._finalize_template_configs``
  from the first choice Inductor's heuristic gives for that template (its extra kwargs, layout and
  inputs) with the id's params, as ``LookupTableChoices`` builds its own;
* convolution (no ``KernelTemplateChoice``): ``conv2d_template.maybe_append_choice`` with the id's
  kwargs, from the selection site, where the inputs and layout are at hand.

The same place trims what every compile renders (:func:`trim`): the choices it hands Inductor (its
forced one, or those a site batch times), the ATen ones and each template's first config (so the
layout decision is the one Inductor makes with its whole list), instead of every config listed. The
recording compile still records every listed id (:func:`untrimmed`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection
from typing import Any

from tuner.backend.errors import HookUnavailable
from tuner.keys import canonical_json
from tuner.search_spaces.template import parse_generated

log = logging.getLogger("tuner.backend")


def ktc_id(ktc: Any) -> str:
    """The stable id of a KernelTemplateChoice: its template uid and its params."""
    return f"{ktc.template.uid}:{canonical_json(ktc.params.to_kwargs())}"


def _ktc_classes() -> tuple[Any, Any]:
    try:
        from torch._inductor.kernel_template_choice import KernelTemplateChoice
    except ImportError as e:
        raise HookUnavailable(f"torch._inductor.kernel_template_choice.KernelTemplateChoice is missing: {e}") from None
    for path in ("torch._inductor.template_heuristics.params", "torch._inductor.heuristics.template.params"):
        try:
            module = __import__(path, fromlist=["DictKernelTemplateParams"])
            return KernelTemplateChoice, module.DictKernelTemplateParams
        except (ImportError, AttributeError):
            continue
    raise HookUnavailable("DictKernelTemplateParams is missing from Inductor's template heuristics")


# The params of an mm-family config that are the config's own. Every other one the site's lowering derives (its
# accumulator type from the dtypes, a persistent template's SM count and operand layouts, ...) and a config built
# from an id (a stored, transferred or imported answer) must carry the site's. ``EVEN_K`` says that BLOCK_K divides
# K: set where it does not, the template's K loop loads past K unmasked.
FREE_PARAMS = frozenset(
    {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_stages", "num_warps", "EVEN_K", "hint_override"}
)


def mm_mismatch(params: dict[str, Any], site_params: dict[str, Any], k: int | None) -> str | None:
    """Why an mm-family config's ``params`` (parsed from its id) cannot run at a site whose own config of the same
    template has ``site_params`` and whose K is ``k`` (None: not static); None where it can."""
    derived = [name for name in site_params if name not in FREE_PARAMS and name in params]
    if (why := _first_difference(params, site_params, derived)) is not None:
        return why
    if params.get("EVEN_K") and (k is None or k % int(params.get("BLOCK_K") or 1)):
        return f"EVEN_K with BLOCK_K={params.get('BLOCK_K')} where K is {k if k is not None else 'not static'}"
    return None


def _first_difference(params: dict[str, Any], site: dict[str, Any], names: Any) -> str | None:
    """The first of ``names`` whose value in a config's ``params`` is not the ``site``'s, said; None where all are."""
    for name in names:
        if params.get(name) != site[name]:
            return f"{name}={params.get(name)} where the site's is {site[name]}"
    return None


def _static_k(kernel_inputs: Any) -> int | None:
    try:
        return int(kernel_inputs.mnk_symbolic()[2])
    except (AttributeError, TypeError, ValueError, IndexError):
        return None


def extra_ktcs(handler: Any, kernel_inputs: Any, templates: list[Any], op_name: str, ids: list[str]) -> list[Any]:
    """KernelTemplateChoices for the mm-family ids among ``ids`` whose template is in use at this site, those alone
    whose site-derived params are the site's (:func:`mm_mismatch`)."""
    out: list[Any] = []
    by_uid = {getattr(t, "uid", None): t for t in templates}
    wanted = [(cid, *p) for cid in ids if (p := parse_generated(cid)) is not None and p[0] in by_uid]
    if not wanted:
        return out
    try:
        ktc_cls, params_cls = _ktc_classes()
    except HookUnavailable as e:
        log.error("cannot build template configs %s: %s", [cid[:80] for cid in ids], e)
        return out
    bases = {
        uid: next(iter(handler.get_ktc(kernel_inputs, by_uid[uid], op_name)), None)
        for uid in dict.fromkeys(u for _, u, _ in wanted)
    }
    site_params = {
        uid: json.loads(canonical_json(b.params.to_kwargs())) for uid, b in bases.items() if b is not None
    }  # as ids hold them
    k = _static_k(kernel_inputs)
    for cid, uid, params in wanted:
        base = bases[uid]
        if base is None:
            log.info("Inductor's heuristic gives no %s config at this %s site; %s is not built", uid, op_name, params)
            continue
        if (why := mm_mismatch(params, site_params[uid], k)) is not None:
            _refuse(cid, why)
            continue
        out.append(
            ktc_cls(
                template=base.template,
                params=params_cls(dict(params)),
                extra_kwargs=base.extra_kwargs,
                layout=base.layout,
                inputs=base.inputs,
            )
        )
    return out


def _refuse(cid: str, why: str) -> None:
    """A wanted config that does not fit its site: logged, and told to the compile's context for its lookup's miss."""
    from tuner.backend.context import active

    log.info("the config %s is not built at this site: %s", cid[:100], why)
    ctx = active()
    if ctx is not None:
        ctx.refuse(cid, why)


def trim(ktcs: list[Any], keep: Collection[str], ids: list[str] | None = None) -> list[Any]:
    """What a compile renders of a site's configs (``ids``: their ids, where already made): the ATen ones, the first
    config of each template (so the layout decision is the one Inductor makes with them all) and those in ``keep``.
    Rendering a config costs about 3 ms (an H100) and a site lists dozens at each layer; a compile that hands Inductor
    one choice (``select_site``) needs no others, and one that times several needs those alone."""
    ids = ids if ids is not None else [ktc_id(k) for k in ktcs]
    seen: set[str] = set()
    out = []
    for k, cid in zip(ktcs, ids):
        uid = str(k.template.uid)
        if uid.startswith("aten") or uid not in seen or cid in keep:
            out.append(k)
        seen.add(uid)
    if len(out) < 2 <= len(ktcs):  # one template and no ATen: a site of one choice is never offered to the hooks
        out = list(ktcs[:2])  # the first is kept already
    return out


def untrimmed(ids: list[str], listed: list[str]) -> list[str]:
    """A site's choice ids as Inductor lists them before :func:`trim`: ``ids`` (what reached the site) with each run
    of ``listed`` (every config listed) that the trim left out put back after the kept id before it."""
    kept, after, prev = set(ids), {}, None
    for cid in listed:
        if cid in kept:
            prev = cid
        elif prev is not None:
            after.setdefault(prev, []).append(cid)
    return list(dict.fromkeys(c for cid in ids for c in (cid, *after.get(cid, ()))))


# The kwargs of Inductor's conv template that describe the convolution itself, not a config of it. A choice built from
# an id (a stored, transferred or imported answer) whose values differ from the site's computes another convolution:
# mobilenet_v3_large's space-to-depth stem (2x2 kernel) took the nearest stored site's 1x1 config and its output was
# off by 0.45 of its largest value (H100, bf16).
GEOMETRY = ("KERNEL_H", "KERNEL_W", "STRIDE_H", "STRIDE_W", "PADDING_H", "PADDING_W", "GROUPS", "UNROLL")


def conv_geometry(
    aten_kwargs: dict[str, Any], weight_sizes: list[int], float32: bool, allow_tf32: bool
) -> dict[str, Any] | None:
    """The site's values of :data:`GEOMETRY` (and ``ALLOW_TF32`` where its inputs are float32, the one dtype it
    changes), from its ATen choice's keyword arguments and its weight's sizes, as Inductor's lowering passes them to
    the template; None where the template does not compute this convolution (not 2-D, dilated, transposed, an output
    padding), so that no choice is built there."""
    try:
        kernel = [int(k) for k in weight_sizes[2:]]
        stride, padding, groups = (
            [int(v) for v in aten_kwargs["stride"]],
            [int(v) for v in aten_kwargs["padding"]],
            int(aten_kwargs["groups"]),
        )
        plain = (
            all(int(d) == 1 for d in aten_kwargs["dilation"])
            and not aten_kwargs.get("transposed")
            and all(int(v) == 0 for v in aten_kwargs.get("output_padding") or ())
        )
    except (KeyError, TypeError, ValueError):
        return None
    if len(kernel) != 2 or len(stride) != 2 or len(padding) != 2 or not plain:
        return None
    geometry = dict(zip(GEOMETRY, (*kernel, *stride, *padding, groups, kernel == [1, 1])))
    return {**geometry, "ALLOW_TF32": allow_tf32} if float32 else geometry


def conv_mismatch(kwargs: dict[str, Any], geometry: dict[str, Any]) -> str | None:
    """Why a conv config's ``kwargs`` (parsed from its id) cannot run at a site of ``geometry``; None where it can."""
    if (why := _first_difference(kwargs, geometry, geometry)) is not None:
        return why
    if not kwargs.get("UNROLL") and int(kwargs.get("num_warps") or 0) > 4:
        return "more than 4 warps in the loop that is not unrolled (triton#1254: wrong results; Inductor caps it at 4)"
    return None


def conv_site(choices: list[Any], input_nodes: list[Any]) -> dict[str, Any] | None:
    """:func:`conv_geometry` of a convolution site, from Inductor's ATen choice there (its ``kwargs``); None where
    that choice or the weight's static sizes are not at hand."""
    import torch

    aten = next((c for c in choices if isinstance(getattr(c, "kwargs", None), dict) and "stride" in c.kwargs), None)
    if aten is None:
        from tuner.backend.answers import warn_once

        warn_once(
            "Inductor's ATen convolution choice carries no stride or padding here (its ExternKernelCaller.kwargs): stored "
            "Triton conv configs cannot be checked against their sites and are not built; those sites run Inductor's default"
        )
        return None
    if len(input_nodes) < 2:
        return None
    try:
        sizes = [int(s) for s in input_nodes[1].get_size()]
        float32 = input_nodes[0].get_dtype() == torch.float32
    except (AttributeError, TypeError):
        return None
    return conv_geometry(aten.kwargs, sizes, float32, _allow_tf32())


def _allow_tf32() -> bool:
    """Whether Inductor's lowering passes ``ALLOW_TF32`` on: cuDNN's float32 precision, in the API this torch has."""
    import torch

    precision = getattr(torch.backends.cudnn, "fp32_precision", None)
    return precision == "tf32" if isinstance(precision, str) else bool(torch.backends.cudnn.allow_tf32)


def conv_choices(ids: list[str], input_nodes: list[Any], layout: Any, geometry: dict[str, Any] | None) -> list[Any]:
    """Triton conv2d template choices for the conv ids among ``ids`` (built at the selection site), those alone whose
    geometry is the site's (``geometry``, :func:`conv_site`; None: none is built)."""
    wanted = [(cid, p[1]) for cid in ids if (p := parse_generated(cid)) is not None and p[0] == "conv2d"]
    if not wanted:
        return []
    if geometry is None:
        log.info(
            "the conv template does not compute this convolution, or its geometry is unknown: %d stored config(s) not built",
            len(wanted),
        )
        return []
    try:
        from torch._inductor.kernel.conv import conv2d_template
    except ImportError as e:
        log.error("cannot build Triton conv configs (torch._inductor.kernel.conv.conv2d_template: %s)", e)
        return []
    out: list[Any] = []
    for cid, kwargs in wanted:
        if (why := conv_mismatch(kwargs, geometry)) is not None:
            _refuse(cid, why)
            continue
        made: list[Any] = []
        try:
            err = conv2d_template.maybe_append_choice(made, input_nodes=tuple(input_nodes[:2]), layout=layout, **kwargs)
        except Exception as e:  # noqa: BLE001 - a config the template rejects is one missing choice, not a failed compile
            err = e
        if err is not None or not made:
            log.info("the conv template rejects %s: %s", cid[:100], err)
            continue
        out.extend(made)
    return out
