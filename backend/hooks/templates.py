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


def extra_ktcs(handler: Any, kernel_inputs: Any, templates: list[Any], op_name: str, ids: list[str]) -> list[Any]:
    """KernelTemplateChoices for the mm-family ids among ``ids`` whose template is in use at this site."""
    out: list[Any] = []
    by_uid = {getattr(t, "uid", None): t for t in templates}
    wanted = [p for cid in ids if (p := parse_generated(cid)) is not None and p[0] in by_uid]
    if not wanted:
        return out
    try:
        ktc_cls, params_cls = _ktc_classes()
    except HookUnavailable as e:
        log.error("cannot build template configs %s: %s", [cid[:80] for cid in ids], e)
        return out
    bases = {uid: next(iter(handler.get_ktc(kernel_inputs, by_uid[uid], op_name)), None) for uid in dict.fromkeys(u for u, _ in wanted)}
    for uid, params in wanted:
        base = bases[uid]
        if base is None:
            log.info("Inductor's heuristic gives no %s config at this %s site; %s is not built", uid, op_name, params)
            continue
        out.append(ktc_cls(template=base.template, params=params_cls(dict(params)), extra_kwargs=base.extra_kwargs, layout=base.layout, inputs=base.inputs))
    return out


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


def conv_choices(ids: list[str], input_nodes: list[Any], layout: Any) -> list[Any]:
    """Triton conv2d template choices for the conv ids among ``ids`` (built at the selection site)."""
    wanted = [(cid, p[1]) for cid in ids if (p := parse_generated(cid)) is not None and p[0] == "conv2d"]
    if not wanted:
        return []
    try:
        from torch._inductor.kernel.conv import conv2d_template
    except ImportError as e:
        log.error("cannot build Triton conv configs (torch._inductor.kernel.conv.conv2d_template: %s)", e)
        return []
    out: list[Any] = []
    for cid, kwargs in wanted:
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

