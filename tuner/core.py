"""The project's vocabulary, shared by ``backend/``, ``tuner/``, ``search_spaces/`` and ``db/``: task kinds, a task
(what is tuned), a site's input row, a forcing (what a compile applies), a trial's status and an outcome (what a
task's tuning settled on).

Plain data with no torch import, so the compile-time read path stays cheap.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.keys import digest

if TYPE_CHECKING:
    from tuner.db import TaskRecord
    from tuner.search_spaces import Space

log = logging.getLogger("tuner.backend")


class Status(str, enum.Enum):
    """How a measurement ended: the closed set stored with every trial."""

    OK = "ok"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    INVALID = "invalid"
    INACCURATE = "inaccurate"
    WORKER_DIED = "worker_died"
    PRUNED = "pruned"  # stopped after a short probe: clearly slower than the best known; never a winner, never re-measured


class Kind(str, enum.Enum):
    """What a task tunes. The values are the strings stored in the database and in exported files."""

    SITE = "template_choice"  # a template selection site: which choice (ATen, CPP GEMM, a Triton config)
    CPP_GRAPH = "cpp_graph"  # a CPU graph's C++ codegen knobs
    FUSION = "fusion_graph"  # a graph's fusion grouping
    TRITON_POINTWISE = "triton_pointwise"
    TRITON_REDUCTION = "triton_reduction"
    TRITON_PERSISTENT_REDUCTION = "triton_persistent_reduction"
    CUDA_GRAPH = "cuda_graph"  # a CUDA workload's forward graph: whether it runs under CUDA graphs

    __str__ = str.__str__
    __format__ = str.__format__
    __hash__ = str.__hash__  # a Kind and its stored string are the same dict key

    @property
    def is_kernel(self) -> bool:
        return self in KERNEL_KINDS

    @property
    def is_graph(self) -> bool:
        """A graph's codegen knobs (not its fusion grouping)."""
        return self in GRAPH_KINDS

    @classmethod
    def triton(cls, heuristic: str) -> Kind:
        """The kind of a Triton kernel of Inductor's heuristic type (``pointwise``, ``reduction``, …)."""
        return cls(f"triton_{heuristic}")

    @classmethod
    def graph_for(cls, device_type: str) -> Kind:
        """The kind a compiled graph of this device type is recorded as."""
        return cls.CPP_GRAPH if device_type == "cpu" else cls.CUDA_GRAPH


GRAPH_KINDS = (Kind.CPP_GRAPH, Kind.CUDA_GRAPH)  # Inductor config patches per graph
# Kinds whose every trial compiles and times the whole workload beside its base (a GraphTrial): their studies measure
# no separate default trial, whose time each trial's baseline already gives (31 s of a 231-s resnet50 sweep, H200).
BESIDE_BASE = (*GRAPH_KINDS, Kind.FUSION)
KERNEL_KINDS = (Kind.TRITON_POINTWISE, Kind.TRITON_REDUCTION, Kind.TRITON_PERSISTENT_REDUCTION)
# The kinds of winner the whole-workload check can drop, as the sweep reports them.
WINNER_GROUPS = {"template-site": (Kind.SITE,), "Triton-kernel": KERNEL_KINDS, "graph-knob": GRAPH_KINDS, "fusion-grouping": (Kind.FUSION,)}


@dataclass(frozen=True)
class InputRow:
    """One input of a template site as Inductor's ``AlgorithmSelectorCache.key_of`` describes it:
    (device, dtype, *sizes, *strides, offset)."""

    device: str
    dtype: str
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: Any

    @classmethod
    def parse(cls, row: list[Any]) -> InputRow:
        """Raises ValueError on a row of the wrong shape (rows from a file are never trusted)."""
        n = (len(row) - 3) // 2
        if n < 0 or len(row) != 2 * n + 3:
            raise ValueError(f"unexpected input row {row!r}")
        return cls(str(row[0]), str(row[1]), tuple(int(v) for v in row[2 : 2 + n]), tuple(int(v) for v in row[2 + n : 2 + 2 * n]), row[-1])


def site_name(op: str, inputs: list[list[Any]]) -> str:
    """A site's readable name: its op and its inputs' sizes ("?" for an input with symbolic sizes)."""
    out = []
    for row in inputs:
        try:
            out.append("x".join(map(str, InputRow.parse(row).sizes)))
        except ValueError:
            out.append("?")
    return f"{op} {','.join(out)}"


def kernel_lookup_hash(signature: dict[str, Any]) -> str | None:
    """Inductor's lookup hash, recomputed here from the stored source and size hints (a stored hash is
    never trusted); None when the signature's size hints disagree with each other."""
    src, hints_str, hints = signature.get("src"), signature.get("size_hints_str"), signature.get("space", {}).get("size_hints")
    if not isinstance(src, str) or not isinstance(hints_str, str) or len(hints_str) > 1000:
        return None
    try:
        if ast.literal_eval(hints_str) != hints:  # literal_eval evaluates literals only, never code
            return None
    except (ValueError, SyntaxError):
        return None
    # = Inductor's triton_heuristics.generate_lookup_hash_from_source_code (src is already name-stripped)
    return hashlib.sha256((hints_str + src).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Forcing:
    """What a compile should force: graph-level knobs per graph key, a choice per template-site key, a config per
    Triton kernel (keyed by Inductor's own lookup hash, as ``autotune_lookup_table`` wants), a fusion grouping
    per fusion-task key."""

    graphs: dict[str, dict[str, Any]] = field(default_factory=dict)
    sites: dict[str, str] = field(default_factory=dict)
    kernels: dict[str, dict[str, int]] = field(default_factory=dict)
    fusion: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return digest(self.to_json())[:16]

    def merged(self, other: Forcing) -> Forcing:
        return Forcing(
            {**self.graphs, **other.graphs}, {**self.sites, **other.sites}, {**self.kernels, **other.kernels}, {**self.fusion, **other.fusion}
        )

    @classmethod
    def union(cls, forcings: Iterable[Forcing]) -> Forcing:
        """Every forcing merged, later ones winning a shared key."""
        out = cls()
        for f in forcings:
            out = out.merged(f)
        return out

    def without_fusion(self) -> Forcing:
        return Forcing(self.graphs, self.sites, self.kernels, {})

    def without_kernels(self) -> Forcing:
        return Forcing(self.graphs, self.sites, {}, self.fusion)

    def to_json(self) -> dict[str, Any]:
        return {"graphs": self.graphs, "sites": self.sites, "kernels": self.kernels, "fusion": self.fusion}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Forcing:
        return cls(dict(data.get("graphs", {})), dict(data.get("sites", {})), dict(data.get("kernels", {})), dict(data.get("fusion", {})))

    @classmethod
    def of(cls, kind: str, key: str, config: dict[str, Any], signature: dict[str, Any]) -> Forcing:
        """What forcing one task's ``config`` means, by the task's kind (empty for a kernel whose signature
        does not describe one)."""
        kind = Kind(kind)
        if kind is Kind.SITE:
            return cls(sites={key: config["choice"]})
        if kind is Kind.FUSION:
            from tuner.search_spaces.fusion import to_patches

            return cls(fusion={key: to_patches(config)})
        if kind.is_kernel:
            h = kernel_lookup_hash(signature)
            return cls(kernels={h: dict(config)}) if h else cls()
        return cls(graphs={key: dict(config)})

    @classmethod
    def from_winners(cls, winners: Winners) -> Forcing:
        """From ``{task key: (kind, config, signature)}`` of winners validated by :func:`valid_winners`."""
        out = cls()
        for key, (kind, config, signature) in winners.items():
            f = cls.of(kind, key, config, signature)
            if Kind(kind).is_kernel and not f.kernels:
                log.warning("ignoring stored winner %s: its signature does not describe a kernel", key[:12])
                continue
            out = out.merged(f)
        return out


Winners = dict[str, tuple[str, dict[str, Any], dict[str, Any]]]  # {task key: (kind, config, signature)}


def valid_winners(winners: Winners) -> Winners:
    """The winners whose config is valid in the space its signature describes (one warning for each other)."""
    from tuner.search_spaces import InvalidConfig, space_for

    out = {}
    for key, (kind, config, signature) in winners.items():
        try:
            space_for(kind, signature).validate(config)
        except InvalidConfig as e:
            log.warning("ignoring stored winner %s: %s", key[:12], e)
            continue
        out[key] = (kind, config, signature)
    return out


@dataclass(frozen=True)
class TaskSpec:
    """One tuning task: its key, kind, readable name, signature (what the key was made of) and search space."""

    key: str
    kind: Kind
    name: str
    signature: dict[str, Any]
    space: Space

    def forcing(self, config: dict[str, Any]) -> Forcing:
        """The forcing that applies ``config`` to this task alone."""
        return Forcing.of(self.kind, self.key, config, self.signature)


@dataclass(frozen=True)
class TaskOutcome:
    """What a task's tuning settled on for one device."""

    task: TaskRecord
    winner: dict[str, Any]
    is_default: bool
    default_ms: float | None
    best_ms: float | None
    measured: int  # trials measured by this run
    total: int  # trials stored for this task and device

    @property
    def speedup(self) -> float | None:
        if not self.default_ms or not self.best_ms:
            return None
        return self.default_ms / self.best_ms

    def reverted(self, default: dict[str, Any]) -> TaskOutcome:
        """This outcome with its winner put back to the task's ``default`` (by the whole-workload check)."""
        return dataclasses.replace(self, winner=default, is_default=True, best_ms=self.default_ms)


__all__ = [
    "BESIDE_BASE", "GRAPH_KINDS", "KERNEL_KINDS", "WINNER_GROUPS", "Forcing", "InputRow", "Kind", "Status", "TaskOutcome", "TaskSpec",
    "Winners", "kernel_lookup_hash", "site_name", "valid_winners",
]
