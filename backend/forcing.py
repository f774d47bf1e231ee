"""What a compile should force: graph-level knobs per graph key, a choice per template-site key."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from tuner.keys import digest

log = logging.getLogger("tuner.backend")

GRAPH_KINDS = ("cpp_graph",)
SITE_KIND = "template_choice"


@dataclass(frozen=True)
class Forcing:
    graphs: dict[str, dict[str, Any]] = field(default_factory=dict)
    sites: dict[str, str] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return digest({"graphs": self.graphs, "sites": self.sites})[:16]

    def merged(self, other: "Forcing") -> "Forcing":
        return Forcing({**self.graphs, **other.graphs}, {**self.sites, **other.sites})

    def to_json(self) -> dict[str, Any]:
        return {"graphs": self.graphs, "sites": self.sites}

    @classmethod
    def from_winners(cls, winners: dict[str, tuple[str, dict[str, Any], dict[str, Any]]]) -> "Forcing":
        """From ``{task key: (kind, config, signature)}``; every config is validated against its space first."""
        from tuner.search_spaces import InvalidConfig, space_for

        graphs: dict[str, dict[str, Any]] = {}
        sites: dict[str, str] = {}
        for key, (kind, config, signature) in winners.items():
            try:
                space_for(kind, signature).validate(config)
            except InvalidConfig as e:
                log.warning("ignoring stored winner %s: %s", key[:12], e)
                continue
            if kind in GRAPH_KINDS:
                graphs[key] = config
            elif kind == SITE_KIND:
                sites[key] = config["choice"]
        return cls(graphs, sites)
