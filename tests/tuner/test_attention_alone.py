"""Attention backends chosen site by site from timings of each site alone (no compile): which tasks are timed so, the
config each site's fastest backend makes, what is stored (a clear gain wins; else the default stays), the phase's
plan, and the profiled attention time its expected gain rests on. The timing itself runs on CUDA
(``tests/gpu/test_attention_alone.py``); here its answer is given as the worker would return it."""

import dataclasses

from tests.helpers.notes import Notes
from tests.helpers.replay import _context
from tests.tuner.test_sweep_gain import ATTENTION, _attention, _capture, _opts, _site
from tuner.db import Database
from tuner.search_spaces import space_for
from tuner.sweep.attention_alone import _settle, fastest, math_sites, ordered, timed_alone
from tuner.sweep.plan import searches_by_gain, with_shares
from tuner.budget.estimate import ALONE
from tuner.budget.gain import FUSION, KERNELS, SITES, Profile
from tuner.sweep.profile import profile_of
from tuner.sweep.phases import GraphStudyPhase, SweepContext, Workload
from tuner.sweep.progress import Progress

A, B = "0123456789abcdef", "fedcba9876543210"


def _task(sites, device="cuda", key="att"):
    task = _attention(8, 12, 1, 64, causal=False, count=12)
    sig = {**task.signature, "space": {"device": device, "sites": sites}}
    return dataclasses.replace(task, key=key, signature=sig, space=space_for("attention", sig))


def _sitedict(site_id, backend="cudnn", count=12, mask=False):
    return {
        "site": site_id,
        "backend": backend,
        "shape": [8, 12, 1, 64, 512],
        "dtype": "bfloat16",
        "mask": mask,
        "causal": False,
        "count": count,
    }


def _timed(**ms):
    return {b: {"ms": t, "spread": 0.0001, "error": 0.001} for b, t in ms.items()}


LAYOUT = {"dtype": "bool", "shape": [8, 1, 1, 512], "stride": [512, 0, 512, 1]}


def test_attention_sites_are_timed_alone_on_cuda_unless_a_mask_has_no_recorded_layout():
    assert timed_alone(_task([_sitedict(A)]), "cuda")
    assert not timed_alone(_task([_sitedict(A, backend="flash_cpu")], device="cpu"), "cpu")
    assert not timed_alone(_task([_sitedict(A), _sitedict(B, backend="efficient", mask=True)]), "cuda")
    assert timed_alone(
        _task([_sitedict(A), {**_sitedict(B, backend="efficient", mask=True), "mask_layout": LAYOUT}]), "cuda"
    )


def test_a_masked_site_never_takes_flash_however_it_timed():
    """Flash takes no mask: a masked site's timings (as a worker that timed it anyway would give) cannot make it win."""
    task = _task([{**_sitedict(A, backend="efficient", mask=True), "mask_layout": LAYOUT}])
    config, m = fastest(task, {A: _timed(flash=0.001, efficient=0.006, cudnn=0.005)})
    assert config == {f"site.{A}": "cudnn"} and m.median_ms < m.baseline_ms


def test_each_site_takes_its_fastest_backend_and_the_task_is_weighed_by_calls():
    task = _task([_sitedict(A, count=12), _sitedict(B, count=2)])
    timings = {
        A: {**_timed(cudnn=0.0072, flash=0.0040, efficient=0.0060)},
        B: {**_timed(cudnn=0.010, efficient=0.012), "flash": {"error": "differs from math attention by 0.5"}},
    }
    config, m = fastest(task, timings)
    assert config == {f"site.{A}": "flash", f"site.{B}": "cudnn"}
    assert (
        abs(m.median_ms - (12 * 0.0040 + 2 * 0.010)) < 1e-12 and abs(m.baseline_ms - (12 * 0.0072 + 2 * 0.010)) < 1e-12
    )
    assert (
        fastest(task, {A: timings[A], B: {"cudnn": {"error": "CUDNN_STATUS_NOT_SUPPORTED"}}}) is None
    )  # a default untimed


def _sweep(db_url, task):
    db = Database.open(db_url)
    workload = Workload(db, "m/infer/cuda/bf16/8")
    (rec,) = workload.register([task])
    sweep = SweepContext(
        _context(db_url, db, trials=4),
        worker=None,
        progress=Progress(),
        workload=workload,
        device_type="cuda",
        model="m",
    )
    return sweep, rec


def test_a_clear_gain_alone_is_stored_as_the_winner_with_both_trials(db_url):
    task = _task([_sitedict(A)])
    sweep, rec = _sweep(db_url, task)
    assert _settle(sweep, task, rec, {A: _timed(cudnn=0.0072, flash=0.0040, efficient=0.0060)})
    assert sweep.db.winner_config(rec.id, sweep.tuning.device_id) == {f"site.{A}": "flash"}
    trials = sweep.db.trials(rec.id, sweep.tuning.device_id)
    assert sorted((t.config[f"site.{A}"], round(t.ratio, 3)) for t in trials) == [
        ("cudnn", 1.0),
        ("flash", round(40 / 72, 3)),
    ]
    (outcome,) = sweep.outcomes.values()
    assert not outcome.is_default


def test_a_gain_under_the_unverified_bar_or_none_keeps_the_default(db_url):
    task = _task([_sitedict(A)])
    sweep, rec = _sweep(db_url, task)
    assert _settle(sweep, task, rec, {A: _timed(cudnn=0.0072, flash=0.0069)})  # 4%: under the bar
    assert sweep.db.winner_config(rec.id, sweep.tuning.device_id) == {f"site.{A}": "cudnn"}
    task_b = _task([_sitedict(B)], key="att-b")
    sweep_b, rec_b = _sweep(db_url, task_b)
    assert _settle(sweep_b, task_b, rec_b, {B: _timed(cudnn=0.0050, flash=0.0069)})  # the default is fastest
    assert sweep_b.db.winner_config(rec_b.id, sweep_b.tuning.device_id) == {f"site.{B}": "cudnn"}


def test_the_phase_plans_one_timing_alone_on_cuda_and_graph_trials_elsewhere(db_url):
    task = _task([_sitedict(A)])
    sweep, _ = _sweep(db_url, task)
    assert GraphStudyPhase.trials(sweep, [task]) == (1, [(ALONE, 1)])
    assert not GraphStudyPhase(ATTENTION, device_type="cuda").whole_step and GraphStudyPhase(ATTENTION).whole_step
    cpu = dataclasses.replace(sweep, device_type="cpu")
    n, each = GraphStudyPhase.trials(cpu, [task])
    assert n > 1 and each == [("attention", n)]


def test_the_profiled_attention_time_is_its_phases_share_and_the_sites_get_the_rest():
    site, att = _site("a", 8, 768, 2304), _attention(8, 12, 1, 64, causal=False, count=12)
    capture = dataclasses.replace(
        _capture(0.5, 0.45, [0.1], [("a", 12)]),
        library=[
            {"op": "_scaled_dot_product_cudnn_attention", "shapes": [[8, 12, 1, 64], [8, 12, 512, 64]], "ms": 0.087},
            {"op": "addmm", "shapes": [[2304], [8, 768]], "ms": 0.2},
        ],
    )
    p = profile_of(capture, [site, att])
    assert p.lever_ms(ATTENTION) == 0.087
    assert (
        abs(p.lever_ms(SITES) - (0.45 - 2 * 0.1 - 0.087)) < 1e-9
    )  # busy less Triton (2 launches of 0.1) less attention


def test_the_cheap_timing_alone_runs_before_the_phase_a_budget_was_raised_to_hold_and_the_sites_keep_all_the_rest():
    """gpt2's decode step: the floor holds a site batch, which takes all the time left; the attention sites timed alone
    (a few seconds, no compile) go before it, not after, where no time would be left."""
    p = Profile(
        step_ms=0.5,
        idle_ms=0.0,
        triton_ms=0.15,
        library_ms=0.35,
        site_macs=1.0,
        study_macs={ATTENTION: 1.0},
        study_ms={ATTENTION: 0.087},
    )
    cost = {SITES: 25.0, ATTENTION: 3.0, FUSION: 20.0, KERNELS: 30.0}
    order = searches_by_gain(_opts(), p, cost, Progress(), held=SITES)
    assert [ph.name for ph in order][:2] == [ATTENTION, SITES]
    shared = with_shares(order, lead=True)
    assert shared[1].share == 1.0 and shared[0].share < 1.0
    # a study expected to take longer is no cheap one: the held phase goes first
    assert [ph.name for ph in searches_by_gain(_opts(), p, {**cost, ATTENTION: 60.0}, Progress(), held=SITES)][
        0
    ] == SITES


def test_attention_run_as_math_is_measured_end_to_end_and_its_phase_given_a_trials_compiles(db_url):
    """BERT-base under a compile on torch 2.11 (H100): its mask kept every fused kernel away, so the dispatcher ran
    math attention, which Inductor compiles into kernels of its own; timed alone, math's eager form would say nothing
    of them. The task is left to whole-workload trials, and the phase is given at least one trial's compiles."""
    from tuner.budget.estimate import TRIAL_COMPILES

    layout = {"dtype": "bool", "shape": [8, 1, 512, 512], "stride": [0, 512, 1, 0]}
    math = _task([{**_sitedict(A, backend="math", mask=True), "mask_layout": layout}])
    assert not timed_alone(math, "cuda")
    sweep, _ = _sweep(db_url, math)
    n, each = GraphStudyPhase.trials(sweep, [math])
    assert n == 4 and each == [(ALONE, 1), ("attention", 3)], (
        "its fused backends timed, then math, efficient and cudnn: flash takes no mask"
    )
    phase = GraphStudyPhase(ATTENTION, device_type="cuda")
    assert phase.plan(sweep) and phase.compiles == TRIAL_COMPILES
    fused, _ = _sweep(db_url, _task([_sitedict(B)], key="att-b"))
    phase.plan(fused)
    assert phase.compiles == 0.0, "sites timed alone need no compile"


BERT_MASK = {"dtype": "bool", "shape": [8, 1, 512, 512], "stride": [0, 512, 1, 0]}


def test_a_site_run_as_math_tries_its_fused_backends_fastest_first_and_never_one_it_refused(db_url):
    """BERT-base's mask, broadcast as Transformers builds it under a compile: the rewrite gives the fused kernels the
    mask through PyTorch's front end, and their times alone there order the whole-workload trials."""
    from tuner.search_spaces import InvalidConfig

    math = _task(
        [
            {**_sitedict(A, backend="math", mask=True), "mask_layout": BERT_MASK},
            {**_sitedict(B, backend="math", mask=True, count=2), "mask_layout": BERT_MASK},
        ]
    )
    assert [s["site"] for s in math_sites(math, "cuda")] == [A, B] and math_sites(math, "cpu") == []
    assert [c[f"site.{A}"] for c in math.space.evidence()] == ["efficient", "cudnn"], "the fixed order"
    sweep, rec = _sweep(db_url, math)
    sweep = dataclasses.replace(sweep, progress=Notes())
    timings = {
        A: {**_timed(efficient=0.089, cudnn=0.036), "flash": {"error": "the flash kernel takes no mask"}},
        B: {**_timed(cudnn=0.030), "efficient": {"error": "RuntimeError: misaligned address"}},
    }
    ((task, same),) = ordered(sweep, [(math, rec)], {rec.id: math_sites(math, "cuda")}, timings)
    assert same is rec and task.key == math.key and task.space.params == math.space.params, (
        "the study's distributions stay"
    )
    assert task.space.evidence() == [
        {f"site.{A}": "cudnn", f"site.{B}": "cudnn"},
        {f"site.{A}": "efficient", f"site.{B}": "math"},
    ]
    try:
        task.space.validate({f"site.{A}": "math", f"site.{B}": "efficient"})
        raise AssertionError("a backend the site refused alone is ruled out")
    except InvalidConfig as e:
        assert "efficient" in str(e)
    assert task.space.validate({f"site.{A}": "efficient", f"site.{B}": "cudnn"})
    # memory-efficient ran only site A, faster there than cuDNN ran both: cuDNN, which runs both, is tried first
    fewer = {
        A: _timed(efficient=0.010, cudnn=0.036),
        B: {**_timed(cudnn=0.030), "efficient": {"error": "misaligned address"}},
    }
    ((task, _),) = ordered(sweep, [(math, rec)], {rec.id: math_sites(math, "cuda")}, fewer)
    assert [c[f"site.{A}"] for c in task.space.evidence()] == ["cudnn", "efficient"]
    refused = {
        A: {"efficient": {"error": "x"}, "cudnn": {"error": "y"}},
        B: {"cudnn": {"error": "z"}, "efficient": {"error": "w"}},
    }
    assert ordered(sweep, [(math, rec)], {rec.id: math_sites(math, "cuda")}, refused) == [], (
        "nothing left to try: it stays math"
    )
    assert "no fused backend took" in sweep.progress.notes[-1]
