"""--budget default sizes itself by max-autotune's expected compile time (tuner.budget.within_max_autotune)."""

from tuner.budget import MAX_AUTOTUNE_SHARE, make_budget, within_max_autotune
from tuner.estimate import max_autotune_s


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
    assert within_max_autotune(make_budget("default"), None).time_budget_s is None


def test_the_end_of_a_time_budget_is_kept_for_the_whole_workload_check():
    """15% of the budget, or the check's expected cost where that is more, up to half the budget."""
    from tuner.sweep import _deadlines

    assert _deadlines(None, 0.0, 50.0) == {"deadline": None, "settle_by": None}
    assert _deadlines(200.0, 10.0, 20.0) == {"deadline": 10.0 + 170.0, "settle_by": 210.0}  # 15% (30 s) is more
    assert _deadlines(231.0, 0.0, 47.4)["deadline"] == 231.0 - 47.4  # the check's cost: resnet50 on the H200
    assert _deadlines(60.0, 0.0, 48.0)["deadline"] == 30.0  # never more than half the budget
