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
    PRUNED = (
        "pruned"  # stopped after a short probe: clearly slower than the best known; never a winner, never re-measured
    )


class Kind(str):
    """What a task tunes: the string stored in the database and in exported files, of a registered kind
    (``tuner.kinds``, which holds all a kind is). ``Kind(s)`` raises ValueError for a string no kind registered."""

    SITE: Kind  # a template selection site: which choice (ATen, CPP GEMM, a Triton config)
    CPP_GRAPH: Kind  # a CPU graph's C++ codegen knobs
    FUSION: Kind  # a graph's fusion grouping
    TRITON_POINTWISE: Kind
    TRITON_REDUCTION: Kind
    TRITON_PERSISTENT_REDUCTION: Kind
    CUDA_GRAPH: Kind  # a CUDA workload's forward graph: whether it runs under CUDA graphs

    def __new__(cls, value: str) -> Kind:
        from tuner.kinds import descriptor

        try:
            descriptor(value)
        except KeyError:
            raise ValueError(f"unknown task kind {value!r}") from None
        return str.__new__(cls, value)

    @property
    def is_kernel(self) -> bool:
        from tuner.kinds import KERNEL_HOOK, descriptor

        return descriptor(self).hook == KERNEL_HOOK

    @classmethod
    def triton(cls, heuristic: str) -> Kind:
        """The kind of a Triton kernel of Inductor's heuristic type (``pointwise``, ``reduction``, …)."""
        return cls(f"triton_{heuristic}")


for _name, _value in (
    ("SITE", "template_choice"),
    ("CPP_GRAPH", "cpp_graph"),
    ("FUSION", "fusion_graph"),
    ("TRITON_POINTWISE", "triton_pointwise"),
    ("TRITON_REDUCTION", "triton_reduction"),
    ("TRITON_PERSISTENT_REDUCTION", "triton_persistent_reduction"),
    ("CUDA_GRAPH", "cuda_graph"),
):
    setattr(Kind, _name, str.__new__(Kind, _value))  # the built-in kinds' names, for code that names one


# A workload's dtype flag -> the dtype its inputs and weights are built in (mixed precision: fp32 ones).
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "amp-bf16": "float32", "amp-fp16": "float32"}


@dataclass(frozen=True)
class WorkloadName:
    """What a stored workload name (``WorkloadSpec.name``) says, read back; never trusted beyond these fields."""

    model: str
    mode: str
    device: str
    dtype: str
    shape: tuple[int, ...]
    channels_last: bool
    frozen: bool
    kv: int | None = None  # a decode step's KV-cache length (``/kvN``)

    @classmethod
    def parse(cls, name: str) -> WorkloadName | None:
        parts = str(name).split("/")
        if len(parts) < 5:
            return None
        try:
            shape = tuple(int(d) for d in parts[4].split("x"))
            kv = [int(f[2:]) for f in parts[5:] if f.startswith("kv")]
        except ValueError:
            return None
        model, mode, device, dtype, flags = parts[0], parts[1], parts[2], parts[3], set(parts[5:])
        return cls(
            model,
            mode,
            device,
            dtype,
            shape,
            "cl" in flags,
            mode == "infer" and "nofreeze" not in flags,
            kv[0] if kv else None,
        )


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
        return cls(
            str(row[0]),
            str(row[1]),
            tuple(int(v) for v in row[2 : 2 + n]),
            tuple(int(v) for v in row[2 + n : 2 + 2 * n]),
            row[-1],
        )


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
    src, hints_str, hints = (
        signature.get("src"),
        signature.get("size_hints_str"),
        signature.get("space", {}).get("size_hints"),
    )
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
    """What a compile should force, by kind: {kind: {lookup key: answer}}. The lookup key and the answer are what the
    kind's descriptor makes of a task's key and config (a Triton kernel's key is Inductor's own lookup hash, as
    ``autotune_lookup_table`` wants; a fusion grouping's answer is Inductor config patches and pair vetoes)."""

    answers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "answers", {str(k): dict(v) for k, v in self.answers.items() if v})

    def get(self, kind: str, key: str) -> Any:
        return self.answers.get(str(kind), {}).get(key)

    def of(self, *kinds: str) -> dict[str, Any]:
        """The answers of these kinds, merged (e.g. every Triton kernel kind's, for Inductor's one lookup table)."""
        out: dict[str, Any] = {}
        for kind in kinds:
            out.update(self.answers.get(str(kind), {}))
        return out

    @property
    def digest(self) -> str:
        return digest(self.to_json())[:16]

    def merged(self, other: Forcing) -> Forcing:
        kinds = dict.fromkeys([*self.answers, *other.answers])
        return Forcing({k: {**self.answers.get(k, {}), **other.answers.get(k, {})} for k in kinds})

    @classmethod
    def union(cls, forcings: Iterable[Forcing]) -> Forcing:
        """Every forcing merged, later ones winning a shared key."""
        out = cls()
        for f in forcings:
            out = out.merged(f)
        return out

    def without(self, *kinds: str) -> Forcing:
        drop = {str(k) for k in kinds}
        return Forcing({k: v for k, v in self.answers.items() if k not in drop})

    def to_json(self) -> dict[str, Any]:
        return {k: dict(v) for k, v in self.answers.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Forcing:
        return cls({str(Kind(k)): dict(v) for k, v in data.items()})

    @classmethod
    def of_task(cls, kind: str, key: str, config: dict[str, Any], signature: dict[str, Any]) -> Forcing:
        """What forcing one task's ``config`` means, by its kind's descriptor (empty where the signature describes
        nothing to force)."""
        from tuner.kinds import descriptor

        slot = descriptor(kind).answer(key, config, signature)
        return cls({str(kind): {slot[0]: slot[1]}}) if slot else cls()

    @classmethod
    def from_winners(cls, winners: Winners) -> Forcing:
        """From ``{task key: (kind, config, signature)}`` of winners validated by :func:`valid_winners`."""
        out: dict[str, dict[str, Any]] = {}
        for key, (kind, config, signature) in winners.items():
            f = cls.of_task(kind, key, config, signature)
            if not f.answers:
                log.warning("ignoring stored winner %s: its signature does not describe what to force", key[:12])
                continue
            out.setdefault(str(kind), {}).update(f.answers[str(kind)])
        return cls(out)


Winners = dict[str, tuple[str, dict[str, Any], dict[str, Any]]]  # {task key: (kind, config, signature)}


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
        return Forcing.of_task(self.kind, self.key, config, self.signature)


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
    "DTYPES",
    "Forcing",
    "InputRow",
    "Kind",
    "Status",
    "TaskOutcome",
    "TaskSpec",
    "Winners",
    "WorkloadName",
    "kernel_lookup_hash",
    "site_name",
]
