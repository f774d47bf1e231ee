"""Template-site space: one choice per selection site (mm, addmm, bmm, convolution).

A config is always ``{"choice": ID}``, where ID is a stable choice id (see ``tuner.backend.hooks.selector``).
The options are the choices Inductor offered at the site (ATen, its own Triton configs, CPP GEMM) plus,
where the site has a Triton template, *generated* Triton configs over a wider space than Inductor's
EXHAUSTIVE list: BLOCK_M/N/K 16-256, GROUP_M, num_stages 1-6, num_warps 2-8. A generated choice's id
has exactly the form Inductor gives the same config, so a generated config that Inductor also offers
is the same choice. The compile hooks build a generated choice from its id alone
(:func:`parse_generated`), so nothing but the id travels to the compile.

For Optuna the space is conditional: ``choice`` picks ``"triton"`` (a Triton config, offered or not) or
one of the few offered ids the Triton parameters cannot express (ATen, CPP GEMM, configs outside the
ranges); only for ``"triton"`` are the block sizes asked for, so TPE models the Triton parameters instead
of thousands of unrelated categories. Every offered choice is a seed (:meth:`TemplateSpace.seeds`):
the search starts where max-autotune ends.
Where the recording saw a pointwise op read the site's output (``epilogue`` in the context), a Triton template
takes it in and a library call leaves it to a kernel of its own (:meth:`TemplateSpace.absorbs_epilogue`); the sweep
counts that kernel where it settles the site (``tuner/sweep/site_batches.with_epilogue``).
Constraints reject what cannot run well before it compiles: shared memory above the H100/H200 limit,
more than 128 accumulator values per thread, a block much larger than its dimension, 8 warps on a
non-1x1 conv (Inductor caps those at 4 for triton#1254).
"""

from __future__ import annotations

import itertools
import json
import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tuner.keys import canonical_json
from tuner.kinds import SITE_HOOK, TaskKind
from tuner.core import InputRow, Kind
from tuner.search_spaces import splitk
from tuner.search_spaces.base import Choice, InvalidConfig, IntRange, Param, PowerOfTwo, Space, choice, pow2_ceil

FAMILY = Kind.SITE
GEN = "triton"  # the ``choice`` category of a generated Triton template config
# Generated ids: a KernelTemplateChoice's template uid plus its JSON params (mm family) or Inductor's
# description of a TritonTemplateCaller (conv, which has no KernelTemplateChoice).
KTC_PREFIXES = ("triton::mm:", "triton::bmm:")
CONV_PREFIX = "TritonTemplateCaller:triton_convolution2d:"
# Offered choices of templates max-autotune does not offer (``backend/compiler.WIDER_SITES`` turns them on)
WIDER_TEMPLATES = ("triton::mm_persistent_tma:",)
# Choices Inductor fuses the pointwise ops after the site into (its epilogue fusion of Triton templates)
FUSES_EPILOGUES = (*KTC_PREFIXES, *WIDER_TEMPLATES, CONV_PREFIX)
# Every offered choice max-autotune never lists: those templates, and tuner's own split-K kernel
BEYOND_MAX_AUTOTUNE = (*WIDER_TEMPLATES, splitk.PREFIX)
SMEM_BYTES = 227 * 1024  # the largest shared memory one block may use on sm_90 (H100/H200)
MAX_ACC_PER_THREAD = 128
DTYPE_BYTES = {"torch.float32": 4, "torch.bfloat16": 2, "torch.float16": 2}


def _params(conv: bool) -> tuple[Param, ...]:
    out: list[Param] = [PowerOfTwo("BLOCK_M", 16, 256), PowerOfTwo("BLOCK_N", 16, 256), PowerOfTwo("BLOCK_K", 16, 256 if not conv else 128)]
    if not conv:
        out.append(Choice("GROUP_M", (1, 4, 8, 16)))
    out += [IntRange("num_stages", 1, 6), Choice("num_warps", (2, 4, 8))]
    return tuple(out)



def _desc_value(text: str) -> bool | int:
    if text in ("True", "False"):
        return text == "True"
    if text.lstrip("-").isdigit() and len(text) < 12:
        return int(text)
    raise ValueError(f"unexpected value {text!r}")


_KTC_ID = re.compile(r"^(?P<uid>[a-z_]+::[A-Za-z0-9_]+):(?P<params>\{.*\})$")


def parse_ktc_id(cid: str) -> tuple[str, dict[str, Any]] | None:
    """(template uid, params) of a KernelTemplateChoice id (``triton::mm:{…}``, ``aten::addmm:{}``); None otherwise.
    Parsing only: JSON, never code."""
    m = _KTC_ID.match(cid) if isinstance(cid, str) else None
    if m is None:
        return None
    try:
        params = json.loads(m.group("params"))
    except ValueError:
        return None
    return (m.group("uid"), params) if isinstance(params, dict) else None


def parse_generated(cid: str) -> tuple[str, dict[str, Any]] | None:
    """(template, kwargs) of a Triton template choice id: ``("triton::mm", params)`` or ``("conv2d", kwargs)``;
    None when the id is not of that form. Parsing only: no code is evaluated."""
    if not isinstance(cid, str) or len(cid) > 2000:
        return None
    ktc = parse_ktc_id(cid)
    if ktc is not None:
        uid, params = ktc
        if uid + ":" not in KTC_PREFIXES or not all(isinstance(v, (str, int, float, bool, type(None))) for v in params.values()):
            return None
        return uid, params
    if cid.startswith(CONV_PREFIX):
        kwargs: dict[str, Any] = {}
        for part in cid[len(CONV_PREFIX):].split(", "):
            k, eq, v = part.partition("=")
            if not eq or not k.replace("_", "").isalnum():
                return None
            try:
                kwargs[k] = _desc_value(v)
            except ValueError:
                return None
        return "conv2d", kwargs
    return None


@dataclass(frozen=True)
class Generated:
    """How a site's generated Triton configs are written as ids, and what they may be."""

    prefix: str
    base: tuple[tuple[str, Any], ...]  # an offered Triton choice's params, in its id's order
    m: int
    n: int
    k: int
    dtype_bytes: int

    @property
    def conv(self) -> bool:
        return self.prefix == CONV_PREFIX

    @cached_property
    def params(self) -> tuple[Param, ...]:
        return _params(self.conv)

    def make_id(self, values: dict[str, int]) -> str:
        params = dict(self.base)
        params.update({k: v for k, v in values.items() if k in params})
        if "EVEN_K" in params:
            params["EVEN_K"] = self.k % int(values["BLOCK_K"]) == 0
        if self.conv:
            return self.prefix + ", ".join(f"{k}={v!r}" for k, v in params.items())
        return self.prefix + canonical_json(params)

    def values_of(self, cid: str) -> dict[str, int] | None:
        """The tuned values of a generated id of this site; None when the id is not one."""
        parsed = parse_generated(cid)
        if parsed is None or not cid.startswith(self.prefix):
            return None
        _, params = parsed
        names = [p.name for p in self.params]
        values = {k: params.get(k) for k in names}
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values.values()):
            return None
        return values if self.make_id(values) == cid else None  # every other parameter as the site's own

    def check(self, v: dict[str, int]) -> str | None:
        for name, dim in (("BLOCK_M", self.m), ("BLOCK_N", self.n), ("BLOCK_K", self.k)):
            if v[name] > max(16, pow2_ceil(dim)):
                return f"{name}={v[name]} exceeds its dimension {dim}"
        smem = v["num_stages"] * (v["BLOCK_M"] * v["BLOCK_K"] + v["BLOCK_K"] * v["BLOCK_N"]) * self.dtype_bytes
        if smem > SMEM_BYTES:
            return f"{smem // 1024} KiB of shared memory exceeds {SMEM_BYTES // 1024} KiB"
        acc = v["BLOCK_M"] * v["BLOCK_N"] / (32 * v["num_warps"])
        if acc > MAX_ACC_PER_THREAD:
            return f"{acc:.0f} accumulator values per thread (more than {MAX_ACC_PER_THREAD}) would spill registers"
        if self.conv and not dict(self.base).get("UNROLL", True) and v["num_warps"] > 4:
            return "a non-1x1 conv template runs with at most 4 warps (triton#1254)"
        return None

    def all_values(self) -> list[dict[str, int]]:
        names = [p.name for p in self.params]
        every = (dict(zip(names, vs)) for vs in itertools.product(*(p.values() for p in self.params)))  # type: ignore[attr-defined]
        return [v for v in every if self.check(v) is None]

    def describe(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "base": [list(kv) for kv in self.base], "mnk": [self.m, self.n, self.k], "dtype_bytes": self.dtype_bytes}


def _sizes(row: list[Any]) -> list[int]:
    return list(InputRow.parse(row).sizes)


def generator_context(op: str, inputs: list[list[Any]], choices: list[str]) -> dict[str, Any] | None:
    """What the space needs to generate Triton configs at a site (stored in the task signature), from the
    site's inputs and an offered Triton choice; None when the site offers no Triton template."""
    try:
        dbytes = DTYPE_BYTES.get(str(inputs[-1][1]))
        if dbytes is None:
            return None
        for cid in choices:
            parsed = parse_generated(cid)
            if parsed is None:
                continue
            template, params = parsed
            if template == "conv2d" and op == "convolution":
                x, w = _sizes(inputs[0]), _sizes(inputs[1])
                m, n, k = x[0] * math.prod(x[2:]), w[0], w[1]
                base: list[list[Any]] = [[kk, vv] for kk, vv in params.items()]
                return {"prefix": CONV_PREFIX, "base": base, "mnk": [m, n, k], "dtype_bytes": dbytes}
            if template != "conv2d":
                a, b = _sizes(inputs[-2]), _sizes(inputs[-1])
                base = [[kk, params[kk]] for kk in sorted(params)]
                return {"prefix": template + ":", "base": base, "mnk": [a[-2], b[-1], a[-1]], "dtype_bytes": dbytes}
    except (IndexError, TypeError, ValueError):
        return None
    return None


def _generated(ctx: Any) -> Generated | None:
    """The stored generation context, checked (it may come from an imported file)."""
    if ctx is None:
        return None
    prefix = ctx["prefix"]
    if prefix not in (*KTC_PREFIXES, CONV_PREFIX):
        raise ValueError(f"unknown template prefix {prefix!r}")
    base = tuple((str(k), v) for k, v in ctx["base"])
    if not all(isinstance(v, (str, int, float, bool, type(None))) for _, v in base):
        raise ValueError("template parameters must be scalars")
    if not {"BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps"} <= {k for k, _ in base}:
        raise ValueError("template parameters lack the block sizes")
    m, n, k = (int(x) for x in ctx["mnk"])
    if not 1 <= min(m, n, k) <= max(m, n, k) <= 1 << 40 or int(ctx["dtype_bytes"]) not in (1, 2, 4, 8):
        raise ValueError("bad template dimensions")
    reason = hardware_reason(dict(base))
    if reason:
        raise ValueError(f"template parameters: {reason}")
    return Generated(prefix, base, m, n, k, int(ctx["dtype_bytes"]))


@dataclass(frozen=True)
class TemplateSpace(Space):
    gen: Generated | None = field(default=None, compare=False)

    @property
    def offered(self) -> list[str]:
        return [str(o) for o in self.context["choices"]]

    def validate(self, config: Any) -> dict[str, Any]:
        if not isinstance(config, dict) or set(config) != {"choice"} or not isinstance(config["choice"], str):
            raise InvalidConfig(f"{self.family}: a config is {{'choice': ID}}, got {config!r:.200}")
        cid = config["choice"]
        if cid in self.offered:
            return config
        values = self.gen.values_of(cid) if self.gen else None
        if values is None:
            raise InvalidConfig(f"{self.family}: {cid[:120]!r} is neither offered at this site nor a Triton config of its template")
        for p in self.gen.params:  # type: ignore[union-attr]
            p.check(values[p.name])  # raises with the reason
        reason = self.gen.check(values)  # type: ignore[union-attr]
        if reason:
            raise InvalidConfig(f"{self.family}: {reason}")
        return config

    def absorbs_epilogue(self, cid: str) -> bool:
        """Whether choice ``cid`` takes in the pointwise ops after the site (a Triton template, where the recording saw
        a pointwise op read the site's output), which a library call leaves to a kernel of their own."""
        return bool(self.context.get("epilogue")) and cid.startswith(FUSES_EPILOGUES)

    def leaves_epilogue(self) -> bool:
        """Whether the site's default leaves the pointwise ops after it to a kernel of their own, which a template
        would take in."""
        return bool(self.context.get("epilogue")) and not self.absorbs_epilogue(str(self.default["choice"]))

    def saves_epilogue_kernel(self, cid: str) -> bool:
        """Whether choice ``cid`` takes in the site's epilogue where its default leaves it to a kernel of its own: no
        slower alone, it is then faster in the step by that kernel."""
        return self.absorbs_epilogue(cid) and self.leaves_epilogue()

    @cached_property
    def categories(self) -> list[str]:
        """Optuna's ``choice`` options: the offered ids the generated space cannot express, then ``GEN``."""
        if self.gen is None:
            return self.offered
        gen = self.gen
        inexpressible = [c for c in self.offered if (v := gen.values_of(c)) is None or gen.check(v) is not None or not self._in_ranges(v)]
        return [*inexpressible, GEN]

    def _in_ranges(self, values: dict[str, int]) -> bool:
        try:
            for p in self.gen.params:  # type: ignore[union-attr]
                p.check(values[p.name])
        except InvalidConfig:
            return False
        return True

    def evidence(self) -> list[dict[str, Any]]:
        """The two likeliest split-K choices (the first two of its menu), where a skinny site is offered them
        (``search_spaces/splitk``): its shape is the evidence, as no ranking has seen them."""
        return [{"choice": c} for c in self.offered if splitk.is_id(c)][:2]

    def seeds(self) -> list[dict[str, Any]]:
        """Every choice Inductor offered: measured first, so the search starts from max-autotune's own list."""
        return [{"choice": c} for c in self.offered if c != self.default["choice"]]

    def suggest(self, trial: Any) -> dict[str, Any]:
        picked = trial.suggest_categorical("choice", self.categories)
        if picked != GEN or self.gen is None:
            return {"choice": picked}
        return {"choice": self.gen.make_id({p.name: p.suggest(trial) for p in self.gen.params})}

    def optuna_params(self, config: dict[str, Any]) -> dict[str, Any]:
        cid = config["choice"]
        if cid in self.categories or self.gen is None:
            return {"choice": cid}
        values = self.gen.values_of(cid) or {}
        out: dict[str, Any] = {"choice": GEN}
        for p in self.gen.params:
            out.update(self.optuna_params_of(p, values[p.name]))
        return out

    @cached_property
    def _generated_ids(self) -> list[str]:
        return [self.gen.make_id(v) for v in self.gen.all_values()] if self.gen else []

    @cached_property
    def _all_ids(self) -> list[str]:
        return list(dict.fromkeys(self.offered + self._generated_ids))

    def configs(self) -> list[dict[str, Any]]:
        return [{"choice": c} for c in self._all_ids]

    def optuna_grid(self) -> dict[str, list[Any]]:
        grid: dict[str, list[Any]] = {"choice": list(self.categories)}
        for p in self.gen.params if self.gen else ():
            for v in p.values():  # type: ignore[attr-defined]
                for k, ov in self.optuna_params_of(p, v).items():
                    grid.setdefault(k, []).append(ov)
        return grid

    def size(self) -> int | None:
        return len(self._all_ids)


MAX_CHOICES = 4096
# What a GPU runs: a Triton template's parameters that are sizes, each in a range the hardware allows.
_HW_RANGES = {"BLOCK_M": (1, 1024), "BLOCK_N": (1, 1024), "BLOCK_K": (1, 1024), "num_warps": (1, 32), "GROUP_M": (1, 64)}
_POW2 = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps")


def hardware_reason(params: dict[str, Any]) -> str | None:
    """Why a Triton template config cannot be one Inductor made (None when it can): block sizes and warps powers of
    two within what a GPU runs, 0-16 stages, other numbers within 32 bits."""
    for k, v in params.items():
        if not isinstance(v, (int, bool)) or isinstance(v, bool):
            continue
        low, high = _HW_RANGES.get(k, (0, 16) if k == "num_stages" else (-(1 << 31), 1 << 31))
        if not low <= v <= high or (k in _POW2 and v & (v - 1)):
            return f"{k}={v} is outside what a GPU runs"
    return None


def _checked_choice(cid: Any) -> str:
    if not isinstance(cid, str) or len(cid) > 2000:
        raise ValueError("a choice id is a string of at most 2000 characters")
    splitk.parse(cid)  # raises for a split-K id out of range
    parsed = parse_generated(cid)
    reason = hardware_reason(parsed[1]) if parsed else None
    if reason:
        raise ValueError(f"choice {cid[:80]!r}: {reason}")
    return cid


def space(context: dict[str, Any]) -> Space:
    """``context``: ``choices`` (stable choice ids), ``default`` (the one plain Inductor uses) and, optionally,
    ``generate`` (:func:`generator_context`: how to write Triton configs of the site's template). Every id is
    checked against what a GPU runs (a signature from a file is never trusted)."""
    if not isinstance(context["choices"], list) or len(context["choices"]) > MAX_CHOICES:
        raise ValueError(f"a site offers a list of at most {MAX_CHOICES} choices")
    options = [_checked_choice(c) for c in context["choices"]]
    default = _checked_choice(context["default"])
    if default not in options:
        options = [default, *options]
    gen = _generated(context.get("generate"))
    params: tuple[Param, ...] = (choice("choice", options + ([GEN] if gen else [])), *(gen.params if gen else ()))
    ctx: dict[str, Any] = {"choices": options, "default": default}
    if gen is not None:
        ctx["generate"] = gen.describe()
    if context.get("epilogue") is True:  # absent otherwise: older tasks keep their fingerprint
        ctx["epilogue"] = True
    return TemplateSpace(FAMILY, params, {"choice": default}, (), ctx, gen)


def _chosen(key: str, config: dict[str, Any], signature: dict[str, Any]) -> tuple[str, Any]:
    return key, config["choice"]


KIND = TaskKind(FAMILY, space, SITE_HOOK, phase="template sites", cost="site choice", group="template-site", answer=_chosen)
