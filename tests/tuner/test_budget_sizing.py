"""--budget default sizes itself by max-autotune's expected compile time (tuner.sweep.budget.within_max_autotune)."""

from tuner.sweep.budget import MAX_AUTOTUNE_SHARE, make_budget, within_max_autotune
from tuner.sweep.estimate import max_autotune_s


def test_default_budget_takes_a_share_of_max_autotunes_expected_compile():
    expected = max_autotune_s("cuda", 21.0, 465)
    assert expected is not None and 240 < expected < 260  # resnet50 on the H200 measured 253-298 s
    sized = within_max_autotune(make_budget("default"), expected)
    assert sized.time_budget_s == round(MAX_AUTOTUNE_SHARE * expected)


def test_an_explicit_limit_or_trial_count_or_another_preset_is_kept():
    expected = 250.0
    assert within_max_autotune(make_budget("default", time_budget_s=60), expected).time_budget_s == 60
    assert within_max_autotune(make_budget("default", trials=5), expected).time_budget_s is None
    assert within_max_autotune(make_budget("quick"), expected).time_budget_s is None
    assert within_max_autotune(make_budget("full"), expected).time_budget_s is None


def test_no_estimate_where_the_cost_was_never_measured():
    assert max_autotune_s("cpu", 8.0, 30) is None
    assert max_autotune_s("cuda", 8.0, 0) is None


def test_the_estimate_counts_each_triton_kernel_too():
    """max-autotune tunes every Triton kernel too (coordinate descent at its first call): vit_b_32 on the H200 took
    110 s with 120 template choices and 13 kernels after a 20.8-s default compile."""
    assert abs(max_autotune_s("cuda", 20.8, 120, 13) - 110) / 110 < 0.1
    assert max_autotune_s("cuda", 20.8, 120, 13) > max_autotune_s("cuda", 20.8, 120)
    assert within_max_autotune(make_budget("default"), None).time_budget_s is None


def test_the_estimate_counts_only_the_choices_max_autotune_offers():
    """The sweep's compiles also offer the persistent TMA GEMM templates (where this Inductor has them on CUDA);
    max-autotune does not, so they are no part of its expected compile time."""
    from tuner.backend import process
    from tuner.backend.compiler import WIDER_SITES, base_patches
    from tuner.sweep.estimate import max_autotune_choices

    sites = [{"choices": ["aten::mm:{}", 'triton::mm:{"BLOCK_M":64}', 'triton::mm_persistent_tma:{"BLOCK_M":128}']}, {"choices": ["aten::bmm:{}"]}]
    assert max_autotune_choices(sites) == 3
    flags = [f for f in WIDER_SITES["cuda"] if process.has_inductor_flag(f)]
    assert flags and all(base_patches("cuda")[f] is True for f in flags) and not set(flags) & set(base_patches("cpu"))
    assert not process.has_inductor_flag("triton.no_such_flag")
