"""Compile one Dynamo graph with Inductor under a :class:`CompileContext`."""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Collection, Iterator, Sequence
from typing import Any

from tuner.backend import counters, process
from tuner.backend.context import CompileContext
from tuner.backend.hooks import choices as choices_hook
from tuner.backend.hooks import conv_epilogue, conv_lowering, rewrites
from tuner.backend.hooks import fusion as fusion_hook
from tuner.backend.hooks import graph as graph_hook
from tuner.backend.hooks import kernels as kernel_hook
from tuner.backend.hooks import passes as passes_hook
from tuner.backend.hooks import restart as restart_hook
from tuner.backend.hooks import selector as selector_hook
from tuner.backend.hooks import splitk as splitk_hook
from tuner.kinds import GRAPH_HOOK, adapted

log = logging.getLogger("tuner.backend")


def device_type_of(example_inputs: Sequence[Any]) -> str:
    import torch

    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type != "meta":
            return x.device.type
    return "cpu"


# Inductor's flags that offer template choices max-autotune leaves out: on CUDA the persistent TMA GEMM templates
# (Hopper and later; elsewhere Inductor offers none). They are set in every compile, the sweep's and the user's, so
# that a stored winner among them is offered again where it is forced.
WIDER_SITES = {"cuda": ("triton.enable_persistent_tma_matmul",)}


def base_patches(device_type: str) -> dict[str, Any]:
    """Offer every template backend at selection sites (the context picks one, so nothing is benchmarked)
    and keep Inductor from moving away from forced configs."""
    wider = {name: True for name in WIDER_SITES.get(device_type, ()) if process.has_inductor_flag(name)}
    return {
        "max_autotune_gemm": True,
        "max_autotune_gemm_backends": "ATEN,CPP" if device_type == "cpu" else "ATEN,TRITON",
        "coordinate_descent_tuning": False,
        **wider,
    }


@contextlib.contextmanager
def _cache_tag(tag: str) -> Iterator[None]:
    """Put the answer's digest into the keys of Inductor's FX-graph and AOTAutograd caches."""
    import torch

    cfg = getattr(torch.compiler, "config", None)
    if cfg is None or not hasattr(cfg, "cache_key_tag"):
        yield
        return
    with cfg.patch(cache_key_tag=f"{cfg.cache_key_tag}|tuner-{tag}|{conv_lowering.CACHE_TAG}"):
        yield


def install_hooks(device_type: str = "cpu") -> None:
    """Raises :class:`~tuner.backend.errors.HookUnavailable` when this torch lacks a hook."""
    graph_hook.check()
    fusion_hook.check()
    selector_hook.install()
    conv_lowering.install()
    if device_type == "cuda":
        kernel_hook.check()
        kernel_hook.count_runtime_autotuning()
        kernel_hook.count_multi_kernel_timing()
        conv_epilogue.ops()  # code compiled with the rewrite, loaded from Inductor's cache, calls them
        splitk_hook.install()  # ... and code compiled with a split-K choice calls its extern kernels
    for _, adapter in adapted(device_type):  # the adapters of kinds that no hook point above applies
        if hasattr(adapter, "install"):
            adapter.install(device_type)


def _adapter_patches(device_type: str, knobs: dict[str, Any], config: Any) -> dict[str, Any]:
    """A graph's knobs with each graph-hooked kind's own answer turned into Inductor config by its adapter."""
    for _, adapter in adapted(device_type, GRAPH_HOOK):
        if hasattr(adapter, "patches"):
            knobs = adapter.patches(knobs, config)
    return knobs


def _compile_patches(device_type: str, config: Any, given: dict[str, Any]) -> dict[str, Any]:
    """Inductor config for a whole compile from each graph-hooked kind's adapter that sets some before AOT tracing
    (``given``: the compile's own options, which stand)."""
    out: dict[str, Any] = {}
    for _, adapter in adapted(device_type, GRAPH_HOOK):
        if hasattr(adapter, "compile_patches"):
            out.update(adapter.compile_patches(config, given))
    return out


def _unpinned(knobs: dict[str, Any], pinned: Collection[str]) -> dict[str, Any]:
    """A graph's stored knobs less those the user set as options of their own (``pinned``): the user's value stands."""
    kept = {k: v for k, v in knobs.items() if k not in pinned}
    if len(kept) < len(knobs):
        log.info("the options given to torch.compile override the stored %s", sorted(set(knobs) - set(kept)))
    return kept


def compile_with_context(
    gm: Any,
    example_inputs: Sequence[Any],
    ctx: CompileContext,
    extra_patches: dict[str, Any] | None = None,
    pinned: Collection[str] = (),
) -> Any:
    """``extra_patches``: Inductor config for the whole compile; those named in ``pinned`` (the user's own options)
    also stand over a graph's stored knobs."""
    import torch._inductor.config as inductor_config

    install_hooks(ctx.device_type)
    ambient = (
        conv_lowering.flags_now()
    )  # the lowering's 1x1 decision reads these, not base_patches' (hooks/conv_lowering)
    patches = {
        **base_patches(ctx.device_type),
        **_compile_patches(ctx.device_type, inductor_config, extra_patches or {}),
        **(extra_patches or {}),
        **kernel_hook.lookup_table_patch(ctx.kernel_table),
    }
    tag = ctx.answers_digest
    if ctx.fresh_kernels:
        kernel_hook.forget_loaded_kernels()  # else kernels loaded earlier in this process keep their configs

    @contextlib.contextmanager
    def around_inner(gm_: Any, inputs_: Sequence[Any], is_backward: bool) -> Iterator[None]:
        # Entered again for the backward graph, which Inductor compiles later, outside this call.
        with ctx.activated(), _cache_tag(tag):
            knobs = restart_hook.take(ctx.graph_knobs(graph_hook.graph_payload(gm_, inputs_, is_backward)), is_backward)
            knobs = rewrites.patches(knobs, inductor_config.post_grad_custom_pre_pass)
            knobs = _unpinned(_adapter_patches(ctx.device_type, knobs, inductor_config), pinned)
            ctx.lowering(gm_, is_backward)
            mark = kernel_hook.modules_mark()
            hook = choices_hook.handler() if ctx.wants_choices_hook else contextlib.nullcontext()
            with inductor_config.patch(knobs), hook, conv_lowering.as_before(ambient):
                yield
            if ctx.device_type == "cuda":
                kernels = kernel_hook.kernels_since(mark)
                ctx.kernels_lowered(kernel_hook.tunable(kernels))
                ctx.kernels_built(kernels)

    def compile_graph(more: dict[str, Any]) -> Any:
        with ctx.activated(), _cache_tag(tag):
            return graph_hook.compile_graph(gm, example_inputs, patches={**patches, **more}, around_inner=around_inner)

    before = passes_hook.benchmarks_so_far()
    try:
        try:
            return compile_graph({})
        except restart_hook.Restart as r:  # the graph's answer: unfrozen, or under CUDA graphs; nothing was lowered yet
            again = r.patches
            ctx.restarting(again)
        with restart_hook.second_compile(again):
            return compile_graph(again)
    finally:
        counters.bump("benchmarks", passes_hook.benchmarks_so_far() - before)


@contextlib.contextmanager
def isolated_compile(freezing: bool) -> Iterator[None]:
    """A fresh Inductor cache folder and code cache, and freezing set the way Dynamo reads it (at trace time);
    both put back afterwards."""
    import torch._inductor.config as inductor_config

    old_dir, old_freezing = os.environ.get("TORCHINDUCTOR_CACHE_DIR"), inductor_config.freezing
    with tempfile.TemporaryDirectory(prefix="tuner-bench-") as d:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = d
        inductor_config.freezing = freezing
        kernel_hook.forget_loaded_kernels()  # Inductor's in-memory code and kernel caches
        try:
            yield
        finally:
            inductor_config.freezing = old_freezing
            if old_dir is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = old_dir
