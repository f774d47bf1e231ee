"""The ``tuned`` torch.compile backend: look up stored winners, force them, benchmark nothing.

    torch.compile(model, backend="tuned")                                   # TUNER_DB or the default database
    torch.compile(model, backend="tuned", options={"db": "sqlite:///x.db"})

    torch.compile(model, backend="tuned", options={"db": LOCAL, "shared_db": "postgresql+psycopg://…"})
    torch.compile(model, backend="tuned", options={"fusion": False})   # kernel winners only, Inductor's fusion
    torch.compile(model, backend="tuned", options={"without": ["template-site"]})  # a winner group (or kind) left out
    torch.compile(model, backend="tuned", options={"without": ["merge_gemms"]})  # or one rewrite of the groupings
    torch.compile(model, backend="tuned", options={"transfer": False}) # exact entries only (TUNER_TRANSFER=0)
    torch.compile(model, backend="tuned", options={"cuda_graphs": False})  # never CUDA graphs where the sweep chose
    them torch.compile(model, backend="tuned", mode="reduce-overhead")       # CUDA graphs, the winners inside them
    torch.compile(model, backend="tuned", options={"db": URL, "mode": "reduce-overhead"})  # both (torch.compile
                                                                        # takes mode= or options=, not the two)

Winners are read from the local database first, then the shared one (``TUNER_SHARED_DB``); the local
answer wins where both have one. A task with no exact entry (another batch size, say) gets the winner of the
nearest stored task of the same op or graph family (``tuner.nearest``); else it is a miss and keeps Inductor's default.
A missing or unreachable database, or a hook this torch lacks, never fails the compile: one warning, then the other
database or plain Inductor.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.backend import cache_stats, counters, journal
from tuner.backend.answers import load_answers, stores, warn_once
from tuner.backend.compiler import compile_with_context, device_type_of
from tuner.backend.context import CompileContext
from tuner.backend.errors import HookUnavailable
from tuner.core import Kind
from tuner.errors import StorageError, TunerError
from tuner.kinds import KERNEL_HOOK, named, where
from tuner.search_spaces.fusion import REWRITE_KNOBS
from tuner.settings import configure_logging, settings

log = logging.getLogger("tuner.backend")
SWITCHES = ("fusion", "transfer", "kernels", "cuda_graphs")  # options that are true or false (all true by default)
OPTIONS = ("db", "shared_db", "mode", "without", *SWITCHES)


@dataclass(frozen=True)
class Options:
    """``options=`` of ``backend="tuned"``: the databases (local first), whether to apply fusion groupings and Triton
    kernel configs (off: Inductor's own, to find which kind of answer costs a workload), and whether a task with no
    exact entry gets the nearest stored one's answer. Any other option is Inductor's config, as ``torch.compile`` takes
    it with Inductor: it applies to the whole compile and stands over a stored answer that sets the same flag."""

    urls: list[str]
    fusion: bool = True
    transfer: bool = True
    mode: str | None = None  # one of Inductor's modes (torch._inductor.list_mode_options), as torch.compile's mode=
    kernels: bool = True
    cuda_graphs: bool = True  # an answer may run the workload under CUDA graphs (the sweep measured it faster)
    without: tuple[str, ...] = ()  # kinds whose answers are left to Inductor (``fusion``/``kernels`` off, ``without``)
    rewrites_off: tuple[str, ...] = ()  # rewrite knobs of the fusion groupings left off (``without``)
    inductor: dict[str, Any] = field(default_factory=dict)  # the other options: Inductor's config, as torch.compile's

    @classmethod
    def parse(cls, options: dict[str, Any] | None) -> Options:
        options = dict(options or {})
        inductor = {k: v for k, v in options.items() if k not in OPTIONS}
        unknown = sorted(set(inductor) - _inductor_names())
        if unknown:
            raise TunerError(
                f"backend 'tuned': unknown option(s) {unknown}; known: {list(OPTIONS)} and Inductor's config "
                "names (torch._inductor.config, as torch.compile's options=)"
            )
        for name in SWITCHES:
            if not isinstance(options.get(name, True), bool):
                raise TunerError(f"backend 'tuned': option {name!r} must be true or false")
        shared = options.get("shared_db") or settings().shared_db_url
        urls = [str(options.get("db") or settings().db_url), *([str(shared)] if shared else [])]
        transfer = options.get("transfer", settings().transfer)
        mode = options.get("mode")
        if mode is not None:
            import torch

            modes = list(torch._inductor.list_mode_options())
            if mode not in modes:
                raise TunerError(f"backend 'tuned': option 'mode' must be one of {modes}, not {mode!r}")
        fusion, kernels = options.get("fusion", True), options.get("kernels", True)
        without = options.get("without", ())
        if isinstance(without, str) or not all(isinstance(n, str) for n in without):
            raise TunerError(
                "backend 'tuned': option 'without' must be a list of winner groups, task kinds or rewrites"
            )
        rewrites = tuple(n for n in without if n in REWRITE_KNOBS)
        kinds = _without([n for n in without if n not in REWRITE_KNOBS], fusion, kernels)
        return cls(urls, fusion, transfer, mode, kernels, options.get("cuda_graphs", True), kinds, rewrites, inductor)


def _inductor_names() -> set[str]:
    """Every name ``torch._inductor.config`` takes, dotted as ``triton.cudagraphs``."""
    import torch._inductor.config as inductor_config

    return set(inductor_config.get_config_copy())


def _without(names: list[str], fusion: bool, kernels: bool) -> tuple[str, ...]:
    """The kinds left to Inductor: ``names`` (winner groups or kinds, ``tuner.kinds.named``) and the switches'."""
    try:
        return named([*names, *([] if fusion else [Kind.FUSION]), *([] if kernels else where(hook=KERNEL_HOOK))])
    except KeyError as e:
        raise TunerError(
            f"backend 'tuned': option 'without': {e.args[0]}, nor a rewrite ({', '.join(REWRITE_KNOBS)})"
        ) from None


def tuned(
    gm: Any, example_inputs: Sequence[Any], *, options: dict[str, Any] | None = None, mode: str | None = None, **_: Any
) -> Any:
    """The backend registered as ``torch.compile(backend="tuned")``."""
    configure_logging()
    opts = Options.parse(options)
    counters.bump("tuned_compiles")
    import torch

    device_type = device_type_of(example_inputs)
    index = next(
        (x.device.index or 0 for x in example_inputs if isinstance(x, torch.Tensor) and x.device.type == device_type), 0
    )
    forcing, nearest = load_answers(opts.urls, device_type, index)  # local first, then shared
    if opts.without:
        forcing, nearest = forcing.without(*opts.without), nearest.without(*opts.without)
    ctx = CompileContext(
        forcing,
        device_type,
        nearest=nearest if opts.transfer else None,
        cuda_graphs=opts.cuda_graphs,
        rewrites_off=opts.rewrites_off,
    )
    mode = mode or opts.mode
    mode_patches = torch._inductor.list_mode_options(mode) if mode else {}
    patches = {**mode_patches, **opts.inductor}  # the user's own Inductor options last: they win
    import torch._inductor.config as inductor_config

    key = cache_stats.compile_key(
        gm, example_inputs, ctx.answers_digest, (sorted(patches.items()), bool(inductor_config.freezing))
    )
    before, served_before = counters.stats(), cache_stats.inductor_cache_hits()
    with journal.recording() as decisions:
        try:
            return compile_with_context(gm, example_inputs, ctx, patches, pinned=tuple(opts.inductor))
        except HookUnavailable as e:
            log.error(
                "backend 'tuned' cannot hook Inductor on torch %s: %s; compiling with plain Inductor",
                torch.__version__,
                e,
            )
            from torch._inductor.compile_fx import compile_fx

            return compile_fx(gm, example_inputs, config_patches=patches)
        finally:
            after = counters.stats()
            served = cache_stats.inductor_cache_hits() > served_before
            delta = cache_stats.settle(settings().cache_dir, key, {k: after[k] - before[k] for k in after}, served)
            log.info("compiled a graph%s: %s", " (served from Inductor's cache)" if served else "", delta)
            if ctx.cuda_graphs_on or patches.get("triton.cudagraphs", inductor_config.triton.cudagraphs):
                counters.bump("cuda_graph_compiles")  # what ``tuner bench`` records of a tuned mode
            if ctx.cuda_graphs_on:  # it changes how the step's outputs live: each replay reuses their memory
                warn_once(
                    "backend 'tuned': this workload runs under CUDA graphs, as its sweep measured it faster with "
                    "them (options={'cuda_graphs': False}: not)"
                )
            if counters.matched_nothing(delta):
                _explain(
                    opts.urls, device_type, example_inputs, [d.key for d in decisions if d.outcome == journal.MISS]
                )


def _explain(urls: list[str], device_type: str, example_inputs: Sequence[Any], missed: list[str]) -> None:
    """One warning on why a graph found no stored answer (``backend/explain.py``), when the databases hold any."""
    import torch
    import torch._inductor.config as inductor_config

    from tuner.backend.explain import why_no_hit

    try:
        line = why_no_hit(
            stores(urls), device_type, example_inputs, bool(inductor_config.freezing), torch.is_grad_enabled(), missed
        )
    except StorageError as e:
        line = f"backend 'tuned': no stored answer matched this graph, and the database could not say why ({e})"
    if line:
        warn_once(line)
