"""What a recording compile saw: every template site and every graph, in order, each once (the sweep's capture turns
them into tasks, ``tuner/sweep/tasks.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner.backend.defaults import fusion_defaults
from tuner.backend.hooks import graph as graph_hook


@dataclass
class SiteRecord:
    key: str
    op: str
    inputs: list[Any]
    choices: list[str]
    default: str
    graph: str | None = None  # key of the graph being lowered when the site was met
    scalars: dict[str, Any] | None = None  # e.g. addmm's alpha and beta (not part of the key)
    fp32_precision: str = ""
    count: int = 1  # the nodes met at this site (a transformer's repeated layers share one)
    epilogue: bool = False  # a pointwise op reads the output of one of them (``hooks/epilogue``)
    epilogue_ops: list[str] = field(default_factory=list)  # ... those ops' names (``hooks/epilogue.pointwise_users``)


@dataclass
class GraphRecord:
    key: str
    kind: str
    backward: bool
    index: int
    lines: int
    fusion_key: str = ""
    device: str = "cpu"
    pairs: dict[str, int] = field(default_factory=dict)  # fusions Inductor made or considered: pair id -> score
    unshared: list[str] = field(default_factory=list)  # template epilogues refused for sharing no indexed data
    s2d_convs: int = 0  # convolutions the space-to-depth rewrite applies to (``hooks/conv_rewrite``)
    s2d_shapes: list[list[list[int]]] = field(default_factory=list)  # ... each one's input and weight shapes
    epilogue_convs: int = 0  # convolutions whose ReLU epilogue cuDNN could run (``hooks/conv_epilogue``)
    sibling_gemms: int = 0  # GEMMs that read one input through constant weights, mergeable (``hooks/gemm_merge``)
    sibling_dims: list[list[Any]] = field(default_factory=list)  # ... each one's op, M, K and N
    broadcast_values: int = 0  # transcendental values kernels read broadcast, recomputed (``hooks/compute_once``)
    broadcast_ops: list[str] = field(default_factory=list)  # ... each one's op (``cos``)
    frozen: bool = False  # compiled with Inductor's freezing (``hooks/restart``)
    found: dict[str, Any] = field(
        default_factory=dict
    )  # what it holds for kinds with an adapter (``TaskKind.adapter``)
    family: str = ""  # the graph at any sizes (``hooks/graph.graph_family``), for answers at other sizes
    shapes: list[list[int]] | None = None  # its inputs' sizes
    keys: dict[str, str] = field(default_factory=dict)  # its task key for each kind a graph of its device looks up
    fusion_defaults: dict[str, Any] = field(default_factory=dict)  # this Inductor's fusion knobs (``backend/defaults``)


@dataclass
class Recorder:
    """What a record-mode compile saw: every template site and every graph, in order, each once."""

    sites: dict[str, SiteRecord] = field(default_factory=dict)
    graphs: dict[str, GraphRecord] = field(default_factory=dict)
    current_graph: str | None = None
    # Inductor's fusion knobs by device, read before the compile patches any: the sweep's process then builds the
    # fusion tasks without importing Inductor itself (7 s on the H200's host, inside a 100-s budget).
    defaults: dict[str, dict[str, Any]] = field(
        default_factory=lambda: {d: fusion_defaults(d) for d in ("cpu", "cuda")}
    )

    def site(
        self,
        key: str,
        payload: dict[str, Any],
        ids: list[str],
        default: int,
        scalars: dict[str, Any] | None = None,
        epilogue: list[str] | None = None,
    ) -> None:
        """One node met at a template site; ``epilogue``: the pointwise ops that read its output, by name."""
        ops = list(epilogue or [])
        if key in self.sites:
            site = self.sites[key]
            site.count += 1
            site.epilogue |= bool(ops)
            site.epilogue_ops = sorted(set(site.epilogue_ops) | set(ops))
            return
        precision = str(payload.get("fp32_precision", ""))
        self.sites[key] = SiteRecord(
            key,
            payload["op"],
            payload["inputs"],
            list(ids),
            ids[default],
            self.current_graph,
            scalars,
            precision,
            epilogue=bool(ops),
            epilogue_ops=sorted(ops),
        )

    def graph(
        self,
        key: str,
        kind: str,
        payload: dict[str, Any],
        fusion_key: str = "",
        device: str = "cpu",
        keys: dict[str, str] | None = None,
    ) -> None:
        self.current_graph = key
        index = sum(1 for g in self.graphs.values() if g.backward == payload["backward"])
        lines = payload["code"].count("\n")
        family, shapes = graph_hook.graph_family(payload), graph_hook.graph_shapes(payload)
        self.graphs.setdefault(
            key,
            GraphRecord(
                key,
                kind,
                payload["backward"],
                index,
                lines,
                fusion_key,
                device,
                family=family,
                shapes=shapes,
                keys=dict(keys or {}),
                fusion_defaults=dict(self.defaults.get(device, {})),
            ),
        )

    def forget_current(self) -> None:
        """The graph met last is not lowered after all (its compile restarts): no record of it."""
        self.graphs.pop(self.current_graph or "", None)
        self.current_graph = None

    def _current(self) -> GraphRecord | None:
        return self.graphs.get(self.current_graph or "")

    def fusion_pair(self, pid: str, score: int) -> None:
        if (g := self._current()) is not None:
            g.pairs[pid] = max(score, g.pairs.get(pid, score))

    def unshared_epilogue(self, pid: str) -> None:
        if (g := self._current()) is not None and pid not in g.unshared:
            g.unshared.append(pid)

    def lowering(self, frozen: bool, found: dict[str, Any], rewrites: dict[str, Any]) -> None:
        """What the graph about to be lowered holds: whether it is compiled frozen, what kinds with an adapter found in
        it, and where each graph rewrite applies (by knob: a count, or a list of the places, kept where the rewrite
        names a field for them)."""
        from tuner.search_spaces.fusion import REWRITE_KNOBS

        if (g := self._current()) is not None:
            g.frozen, g.found = frozen, found
            for knob, places in rewrites.items():
                r = REWRITE_KNOBS[knob]
                setattr(g, r.seen, places if isinstance(places, int) else len(places))
                if r.places:
                    setattr(g, r.places, list(places))


__all__ = ["GraphRecord", "Recorder", "SiteRecord"]
