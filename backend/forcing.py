"""What a compile should force: graph-level knobs per graph key, a choice per template-site key, and a
config per Triton kernel (keyed by Inductor's own lookup hash, as ``autotune_lookup_table`` wants)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tuner.keys import digest

log = logging.getLogger("tuner.backend")

GRAPH_KINDS = ("cpp_graph",)
SITE_KIND = "template_choice"
FUSION_KIND = "fusion_graph"
KERNEL_KINDS = ("triton_pointwise", "triton_reduction", "triton_persistent_reduction")


def kernel_lookup_hash(signature: dict[str, Any]) -> str | None:
    """Inductor's lookup hash, recomputed here from the stored source and size hints (a stored hash is
    never trusted); None when the signature's size hints disagree with each other."""
    import ast
    import hashlib

    src, hints_str, hints = signature.get("src"), signature.get("size_hints_str"), signature.get("space", {}).get("size_hints")
    if not isinstance(src, str) or not isinstance(hints_str, str) or len(hints_str) > 1000:
        return None
    try:
        if ast.literal_eval(hints_str) != hints:  # literal_eval evaluates literals only, never code
            return None
    except (ValueError, SyntaxError):
        return None
    # = torch._inductor.runtime.triton_heuristics.generate_lookup_hash_from_source_code (src is already name-stripped)
    return hashlib.sha256((hints_str + src).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Forcing:
    graphs: dict[str, dict[str, Any]] = field(default_factory=dict)
    sites: dict[str, str] = field(default_factory=dict)
    kernels: dict[str, dict[str, int]] = field(default_factory=dict)
    fusion: dict[str, dict[str, Any]] = field(default_factory=dict)  # fusion-task key -> grouping

    @property
    def digest(self) -> str:
        return digest(self.to_json())[:16]

    def merged(self, other: "Forcing") -> "Forcing":
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

    def without_fusion(self) -> "Forcing":
        return Forcing(self.graphs, self.sites, self.kernels, {})

    def to_json(self) -> dict[str, Any]:
        return {"graphs": self.graphs, "sites": self.sites, "kernels": self.kernels, "fusion": self.fusion}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Forcing":
        return cls(dict(data.get("graphs", {})), dict(data.get("sites", {})), dict(data.get("kernels", {})), dict(data.get("fusion", {})))

    @classmethod
    def of(cls, kind: str, key: str, config: dict[str, Any], signature: dict[str, Any]) -> "Forcing":
        """What forcing one task's ``config`` means, by the task's kind (empty for a kernel whose signature
        does not describe one)."""
        if kind == SITE_KIND:
            return cls(sites={key: config["choice"]})
        if kind == FUSION_KIND:
            from tuner.search_spaces.fusion import to_patches

            return cls(fusion={key: to_patches(config)})
        if kind in KERNEL_KINDS:
            h = kernel_lookup_hash(signature)
            return cls(kernels={h: dict(config)}) if h else cls()
        return cls(graphs={key: dict(config)})

    @classmethod
    def from_winners(cls, winners: dict[str, tuple[str, dict[str, Any], dict[str, Any]]]) -> "Forcing":
        """From ``{task key: (kind, config, signature)}``; every config is validated against its space first."""
        from tuner.search_spaces import InvalidConfig, space_for

        out = cls()
        for key, (kind, config, signature) in winners.items():
            try:
                space_for(kind, signature).validate(config)
            except InvalidConfig as e:
                log.warning("ignoring stored winner %s: %s", key[:12], e)
                continue
            f = cls.of(kind, key, config, signature)
            if kind in KERNEL_KINDS and not f.kernels:
                log.warning("ignoring stored winner %s: its signature does not describe a kernel", key[:12])
                continue
            out = out.merged(f)
        return out
