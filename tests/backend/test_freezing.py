"""Freezing as a choice, on the CPU for real: the recording marks a graph compiled frozen, its grouping's space then
holds the ``freezing`` knob (which the study never asks for), and a compile whose answer says ``freezing: false``
stops the frozen compile before lowering and compiles the Dynamo graph again with its weights as inputs."""

import optuna
import pytest
import torch
import torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code

import tuner.backend as tb
from tests.backend.test_conv_rewrite import _compiled, _grouping, _inference, _input, stem
from tuner.backend.hooks import restart as restart_hook
from tuner.core import Forcing, Kind
from tuner.search_spaces.fusion import FREEZING


def test_a_frozen_graph_is_recorded_and_only_its_grouping_can_unfreeze_it():
    model, x = stem(), _input()
    g, task = _grouping(model, x, freezing=True)
    assert g.frozen and task.space.default[FREEZING] is True
    assert task.space.unfrozen() == {**task.space.default, FREEZING: False}
    assert task.space.is_valid(task.space.unfrozen())
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    asked = [task.space.suggest(study.ask()) for _ in range(20)]
    assert all(c[FREEZING] is True for c in asked)  # left to the whole-workload check, never sampled
    unfrozen_g, unfrozen_task = _grouping(model, x, freezing=False)
    assert not unfrozen_g.frozen and FREEZING not in unfrozen_task.space.default and unfrozen_task.space.unfrozen() is None


def test_an_unfrozen_answer_compiles_the_graph_again_with_its_weights_as_inputs():
    model, x = stem(), _input()
    _, task = _grouping(model, x, freezing=True)
    frozen_answer, unfrozen_answer = (Forcing({Kind.FUSION: {task.key: c}}) for c in (task.space.default, task.space.unfrozen()))
    with _inference(freezing=True):
        _, (frozen_code,) = run_and_get_code(_compiled(model, frozen_answer), x)
        tb.reset_stats()
        y, (code,) = run_and_get_code(_compiled(model, unfrozen_answer), x)
        expected = model(x)
    assert "_frozen_param" in frozen_code and "_frozen_param" not in code
    torch.testing.assert_close(y, expected, rtol=1e-4, atol=1e-4)
    s = tb.stats()
    # The frozen graph's grouping answered (a hit; its codegen knobs had no answer: a miss); the graph compiled
    # unfrozen has neither stored (two misses). Nothing benchmarked.
    assert s["hits"] == 1 and s["misses"] == 3 and s["benchmarks"] == 0, s


@pytest.mark.gpu
def test_on_the_gpu_an_unfrozen_answer_compiles_the_graph_unfrozen():
    """As on torch 2.11 with CUDA, bf16 and channels-last, where convnext_tiny ran faster unfrozen."""
    model = stem().cuda().to(torch.bfloat16)
    x = _input().cuda().to(torch.bfloat16)
    g, task = _grouping(model, x, device="cuda", freezing=True)
    assert g.frozen
    with _inference(True):
        y, (code,) = run_and_get_code(_compiled(model, Forcing({Kind.FUSION: {task.key: task.space.unfrozen()}}), device="cuda"), x)
        ref = model.float()(x.float())
    assert "_frozen_param" not in code
    assert (y.float() - ref).abs().max() <= 0.02 * ref.abs().max()


@pytest.mark.parametrize("grad, backward", [(True, False), (False, True)])
def test_a_graph_that_is_not_frozen_is_never_stopped(grad, backward):
    with inductor_config.patch(freezing=True), torch.set_grad_enabled(grad):
        assert restart_hook.take({FREEZING: False, "epilogue_fusion": True}, is_backward=backward) == {"epilogue_fusion": True}
    with inductor_config.patch(freezing=True), torch.no_grad(), pytest.raises(restart_hook.Restart):
        restart_hook.take({FREEZING: False}, is_backward=False)


def test_an_unfrozen_compile_that_fails_says_so_as_a_missing_hook(monkeypatch):
    """As on a torch whose compile_fx cannot compile a frozen trace unfrozen: the error names the second compile and
    is a HookUnavailable, so the tuned backend compiles with plain Inductor and a sweep stores the trial as failed."""
    from tuner.backend.hooks import graph as graph_hook

    model, x = stem(), _input()
    _, task = _grouping(model, x, freezing=True)
    real = graph_hook.compile_graph

    def failing(gm, inputs, *, patches, around_inner):
        if patches.get(FREEZING) is False:
            raise RuntimeError("simulated: this torch cannot")
        return real(gm, inputs, patches=patches, around_inner=around_inner)

    monkeypatch.setattr(graph_hook, "compile_graph", failing)
    with _inference(freezing=True), pytest.raises(Exception) as info:
        _compiled(model, Forcing({Kind.FUSION: {task.key: task.space.unfrozen()}}))(x)
    chain, e = [], info.value
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    failed = [e for e in chain if isinstance(e, restart_hook.RestartFailed)]
    assert failed and "without freezing failed: RuntimeError: simulated" in str(failed[0])
