"""--budget default sizes itself by max-autotune's expected compile time (tuner.budget.presets.within_max_autotune)."""

import dataclasses
import json

import pytest

from tuner.budget.presets import MAX_AUTOTUNE_SHARE, make_budget, within_max_autotune
from tuner.budget.estimate import MAX_AUTOTUNE_CHOICE_S, MAX_AUTOTUNE_TILE_S, choice_s, max_autotune_s


def _mm(m: int, n: int, k: int, stages: int) -> str:
    return "triton::mm:" + json.dumps({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "num_stages": stages, "num_warps": 4})


CONV = ["TritonTemplateCaller:{}"]  # a convolution template's choice: no GEMM tile to size it by


def test_default_budget_takes_a_share_of_max_autotunes_expected_compile():
    expected = max_autotune_s("cuda", 21.0, CONV * 465)
    assert expected is not None and 240 < expected < 260  # resnet50 on the H200 measured 244-325 s
    sized = within_max_autotune(make_budget("default"), expected)
    assert sized.time_budget_s == round(MAX_AUTOTUNE_SHARE * expected)


def test_a_gemm_choice_costs_by_its_tile():
    """Triton compiles the tile it unrolls: gpt2's decode step (8 rows: tiles of BLOCK_M 16) cost max-autotune 0.10 s
    a choice on the H200, the Qwen2 prefill's 0.81-0.89 s; a choice with no tile to read costs the flat figure."""
    small, large = _mm(16, 32, 64, 2), _mm(128, 128, 64, 4)
    assert choice_s("cuda", small) == MAX_AUTOTUNE_TILE_S["cuda"] * 16 * 32 * 64 * 2 / 1e6
    assert choice_s("cuda", large) > 10 * choice_s("cuda", small)
    assert choice_s("cuda", "aten::mm:{}") == choice_s("cuda", CONV[0]) == MAX_AUTOTUNE_CHOICE_S["cuda"]
    assert choice_s("cuda", 'triton::mm:{"BLOCK_M": "x"}') == MAX_AUTOTUNE_CHOICE_S["cuda"]
    decode = max_autotune_s("cuda", 14.4, [_mm(16, 64, 64, 3)] * 90 + ["aten::addmm:{}"] * 9, 10)
    assert decode is not None and abs(decode - 46.3) / 46.3 < 0.3  # measured: 46.3 s


def test_a_first_trial_the_budget_cannot_hold_raises_it():
    """Where max-autotune compiles faster than the sweep's capture and its first trial (gpt2's decode step on the
    H200: 46 s against a 35-s capture), the budget holds that trial anyway, and says so."""
    assert within_max_autotune(make_budget("default"), 50.0, floor_s=64.0).time_budget_s == 64
    assert within_max_autotune(make_budget("default"), 300.0, floor_s=64.0).time_budget_s == round(
        MAX_AUTOTUNE_SHARE * 300
    )


def test_an_explicit_limit_or_trial_count_or_another_preset_is_kept():
    expected = 250.0
    assert within_max_autotune(make_budget("default", time_budget_s=60), expected).time_budget_s == 60
    assert within_max_autotune(make_budget("default", trials=5), expected).time_budget_s is None
    assert within_max_autotune(make_budget("quick"), expected).time_budget_s is None
    assert within_max_autotune(make_budget("full"), expected).time_budget_s is None


def test_no_estimate_where_the_cost_was_never_measured():
    assert max_autotune_s("cpu", 8.0, CONV * 30) is None
    assert max_autotune_s("cuda", 8.0, []) is None


def test_the_estimate_counts_each_triton_kernel_too():
    """max-autotune tunes every Triton kernel too (coordinate descent at its first call), a cost that stopped growing
    past 16 kernels where it was timed (46 small ones took what 13 and 16 took)."""
    from tuner.budget.estimate import MAX_AUTOTUNE_KERNEL_S, MAX_AUTOTUNE_KERNELS

    assert max_autotune_s("cuda", 20.8, CONV * 120, 13) > max_autotune_s("cuda", 20.8, CONV * 120)
    cap = MAX_AUTOTUNE_KERNELS["cuda"]
    assert max_autotune_s("cuda", 20.8, CONV * 120, cap) - max_autotune_s(
        "cuda", 20.8, CONV * 120, cap - 1
    ) == pytest.approx(MAX_AUTOTUNE_KERNEL_S["cuda"])
    assert max_autotune_s("cuda", 20.8, CONV * 120, 46) == max_autotune_s("cuda", 20.8, CONV * 120, cap)
    assert within_max_autotune(make_budget("default"), None).time_budget_s is None


def test_the_estimate_counts_only_the_choices_max_autotune_offers():
    """The sweep's compiles also offer the persistent TMA GEMM templates (where this Inductor has them on CUDA) and
    tuner's split-K kernel at skinny sites; max-autotune does not, so they are no part of its expected compile time."""
    from tuner.backend import process
    from tuner.backend.compiler import WIDER_SITES, base_patches
    from tuner.budget.estimate import max_autotune_choices

    from tuner.search_spaces import splitk

    split = splitk.make_id(splitk.menu(8, 768, 3072, 132)[1])
    sites = [
        {"choices": ["aten::mm:{}", 'triton::mm:{"BLOCK_M":64}', 'triton::mm_persistent_tma:{"BLOCK_M":128}', split]},
        {"choices": ["aten::bmm:{}"]},
    ]
    assert max_autotune_choices(sites) == ["aten::mm:{}", 'triton::mm:{"BLOCK_M":64}', "aten::bmm:{}"]
    flags = [f for f in WIDER_SITES["cuda"] if process.has_inductor_flag(f)]
    assert flags and all(base_patches("cuda")[f] is True for f in flags) and not set(flags) & set(base_patches("cpu"))
    assert not process.has_inductor_flag("triton.no_such_flag")


def test_the_estimate_counts_each_render_a_trimmed_capture_left_out():
    """max-autotune renders every listed choice each time a site is lowered (a site met in each of 12 layers, 12
    times); the capture's default compile renders only what it may pick, so those renders are added back (and none
    of the persistent TMA configs max-autotune does not list)."""
    from tuner.budget.estimate import MAX_AUTOTUNE_RENDER_S, max_autotune_renders

    layer = {
        "count": 12,
        "choices": [
            "aten::addmm:{}",
            *[_mm(16, 32 * i, 64, 3) for i in range(1, 5)],
            'triton::mm_persistent_tma:{"BLOCK_M":128}',
        ],
    }
    head = {"choices": ["aten::mm:{}", _mm(16, 128, 64, 3)]}  # recorded before counts were kept: met once
    renders = max_autotune_renders([layer, head])
    assert renders == 12 * 5 + 2
    listed = [*layer["choices"][:5], *head["choices"]]
    assert max_autotune_s("cuda", 8.0, listed, 10, renders) == pytest.approx(
        max_autotune_s("cuda", 8.0, listed, 10) + renders * MAX_AUTOTUNE_RENDER_S["cuda"]
    )


def test_the_floor_holds_the_cuda_graph_trial_after_the_capture_where_the_gpu_waits_for_the_host():
    """A 35-s capture with a 14.4-s compile, the GPU waiting 78% of the step, and no template site. The floor holds
    the time so far, the CUDA-graph trial and the closing: for an inference step a replay by hand, for a training
    step a compile. Nothing is kept for the end of a budget so raised; a busy GPU, or the CPU, needs no floor."""
    from tuner.budget.clock import CLOSING_S
    from tuner.sweep.options import SweepOptions
    from tuner.budget.shares import deadlines
    from tuner.sweep.plan import floor_s
    from tuner.budget.estimate import REPLAY_S
    from tuner.workloads.spec import WorkloadSpec

    opts = _decode_opts()
    assert floor_s(opts, _capture(0.5, sites=[]), 35.0, 50.0) == (35.0 + REPLAY_S + CLOSING_S, False)
    train = dataclasses.replace(opts, spec=WorkloadSpec("resnet18", device="cuda", mode="train"))
    assert floor_s(train, _capture(0.5, sites=[]), 35.0, 50.0) == (35.0 + 14.4 + CLOSING_S, False)
    assert deadlines(60.0, 0.0, 14.4, 14.4, keep_end=False) == {"deadline": 60.0 - CLOSING_S, "settle_by": 60.0}
    assert deadlines(60.0, 0.0, 14.4, 14.4)["deadline"] == 60.0 - 14.4  # a budget not raised keeps the check's time
    assert floor_s(opts, _capture(2.3), 35.0, 50.0) == (
        0.0,
        False,
    )  # the GPU busy 99% of the step: CUDA graphs are not measured first
    cpu = SweepOptions(WorkloadSpec("resnet18", device="cpu"), make_budget("default"), "sqlite://")
    assert floor_s(cpu, _capture(0.5), 35.0, 50.0) == (0.0, False)


def test_a_floor_past_max_autotunes_compile_holds_a_template_site_batch_too():
    """gpt2's decode step on the H200: max-autotune compiled it in 46 s and the capture alone took 29-35 s; with CUDA
    graphs alone the sweep would equal reduce-overhead. The floor then holds one site batch (max-autotune's own lever:
    a compile and a probe's choices at every site) too; where that fits within max-autotune's expected compile, the
    CUDA-graph trial alone."""
    from tuner.budget.shares import FLOOR_CHOICES, first_trials_s
    from tuner.sweep.plan import floor_s
    from tuner.budget.estimate import PRIOR_MARGIN, SITE_CHOICE_MARGINAL
    from tuner.budget.estimate import REPLAY_S

    opts = _decode_opts()
    one = first_trials_s(35.0, REPLAY_S)
    floor, sites = floor_s(opts, _capture(0.5), 35.0, 50.0)
    probe = (FLOOR_CHOICES + 1) * SITE_CHOICE_MARGINAL["cuda"] * PRIOR_MARGIN  # the share the batch is sized with
    assert sites and floor == pytest.approx(first_trials_s(35.0, REPLAY_S + 14.4 + probe)) and floor > one
    assert floor_s(opts, _capture(0.5), 35.0, 300.0) == (one, False)
    assert within_max_autotune(make_budget("default"), 50.0, floor).time_budget_s == round(floor)
    # ... where the profile expects the sites to gain what a winner must win by (gpt2's decode step's: ~0.07 ms of
    # the ~0.87 left under CUDA graphs); sites of 1 us in a step of 0.5 ms under CUDA graphs do not hold the floor
    from tuner.budget.gain import Profile

    decode = Profile(step_ms=2.32, idle_ms=1.82, triton_ms=0.272, library_ms=0.231, site_macs=1.0, site_rate=0.3)
    tiny = Profile(step_ms=2.32, idle_ms=1.82, triton_ms=0.272, library_ms=0.008, site_macs=1.0)
    assert floor_s(opts, _capture(0.5), 35.0, 50.0, decode) == (floor, True)
    assert floor_s(opts, _capture(0.5), 35.0, 50.0, tiny) == (one, False)


def test_the_first_search_takes_all_the_time_left_where_the_floor_was_sized_for_it():
    from tuner.budget.shares import PHASE_SHARE
    from tuner.sweep.plan import with_shares
    from tuner.sweep.phases import FusionPhase, KernelPhase, SitePhase

    shared = with_shares([SitePhase(), FusionPhase(), KernelPhase("x")])
    assert [p.share for p in shared] == [PHASE_SHARE[SitePhase.name], PHASE_SHARE[FusionPhase.name], 1.0]
    assert [p.share for p in with_shares([SitePhase(), FusionPhase(), KernelPhase("x")], lead=True)] == [
        1.0,
        PHASE_SHARE[FusionPhase.name],
        1.0,
    ]


def _decode_opts():
    from tuner.sweep.options import SweepOptions
    from tuner.workloads.spec import WorkloadSpec

    return SweepOptions(WorkloadSpec("hf:gpt2", device="cuda", mode="decode"), make_budget("default"), "sqlite://")


def _capture(busy_ms: float, sites: list | None = None):
    from tuner.measure.result import CaptureResult

    sites = [{"key": "mm", "choices": ["aten::mm:{}"]}] if sites is None else sites
    return CaptureResult([], sites, {}, {}, {}, 14.4, step_ms=2.32, busy_ms=busy_ms)


def test_a_graph_trial_is_expected_to_cost_at_least_the_workloads_compile():
    """Before any graph trial is timed, one is expected at the device's prior, or at the workload's own compile where
    that took longer (a training step's 66.7-s compile on the CPU); timed, at what it took. A kernel's is unaffected."""
    from tuner.core import Kind
    from tuner.budget.clock import CAPTURE, Costs
    from tuner.budget.estimate import PRIORS, per_trial

    costs = Costs()
    assert per_trial(costs, "cpu", str(Kind.FUSION)) == PRIORS["cpu"]["graph"]
    costs.observe(CAPTURE, 66.7)
    assert per_trial(costs, "cpu", str(Kind.FUSION)) == 66.7
    assert per_trial(costs, "cuda", str(Kind.FUSION)) == 66.7 > PRIORS["cuda"]["graph"]
    assert per_trial(costs, "cpu", str(Kind.TRITON_POINTWISE)) == PRIORS["cpu"]["kernel"]
    costs.observe(str(Kind.FUSION), 70.0)
    assert per_trial(costs, "cpu", str(Kind.FUSION)) == 70.0
