"""A time budget is spent by expected gain per second: the capture's profile of the default step says what each phase
acts on, and the searches run in order of expected gain over expected cost."""

import dataclasses
from types import SimpleNamespace

from tuner.core import Kind, TaskSpec
from tuner.measure.result import CaptureResult
from tuner.search_spaces import space_for
from tuner.budget import gain
from tuner.budget.presets import make_budget
from tuner.sweep.options import SweepOptions
from tuner.sweep.plan import searches, searches_by_gain, with_shares
from tuner.budget.gain import CUDA_GRAPHS, FUSION, KERNELS, SITES, Profile
from tuner.sweep import profile
from tuner.sweep.profile import profile_of
from tuner.sweep.progress import Progress
from tuner.workloads.spec import WorkloadSpec

ATTENTION = "attention backends"


class Notes(Progress):
    def __init__(self):
        self.notes = []

    def note(self, text):
        self.notes.append(text)


def _site(key: str, m: int, k: int, n: int) -> TaskSpec:
    rows = [["cuda", "bf16", m, k, k, 1, 0], ["cuda", "bf16", k, n, n, 1, 0]]  # (device, dtype, sizes, strides, offset)
    sig = {"op": "mm", "inputs": rows, "space": {"choices": ["aten::mm"], "default": "aten::mm"}}
    return TaskSpec(key, Kind.SITE, f"mm {m}x{k}", sig, space_for(Kind.SITE, sig))


def _attention(b: int, h: int, s: int, d: int, causal: bool, count: int) -> TaskSpec:
    site = {
        "site": "0123456789abcdef",
        "backend": "cudnn",
        "shape": [b, h, s, d, s],
        "dtype": "bfloat16",
        "mask": False,
        "causal": causal,
        "class": "class:0",
        "count": count,
    }
    sig = {"backward": False, "lines": 10, "space": {"device": "cuda", "sites": [site]}}
    return TaskSpec("att", Kind("attention"), "graph 0 attention", sig, space_for("attention", sig))


def _capture(step_ms: float, busy_ms: float, kernels_ms: list[float], sites: list[tuple[str, int]]) -> CaptureResult:
    return CaptureResult(
        graphs=[],
        sites=[{"key": k, "count": c} for k, c in sites],
        graph_breaks={},
        device={},
        environment={},
        compile_s=10.0,
        kernels=[{"default_ms": ms, "launches": 2} for ms in kernels_ms],
        step_ms=step_ms,
        busy_ms=busy_ms,
    )


def test_the_profile_splits_the_step_by_what_each_phase_acts_on():
    # 4 ms a step, 3.6 busy: 0.4 waiting, 2 x (0.1 + 0.2) = 0.6 in Triton kernels, 3.0 in library calls, shared by
    # multiply-adds: a site met twice (2 x 4096 x 1024 x 1024) and a causal attention (2 x 8 x 16 x 512 x 512 x 64 / 2,
    # 8 layers)
    sites, att = [_site("a", 4096, 1024, 1024)], _attention(8, 16, 512, 64, causal=True, count=8)
    p = profile_of(_capture(4.0, 3.6, [0.1, 0.2], [("a", 2)]), [*sites, att])
    assert (p.step_ms, round(p.idle_ms, 9), round(p.triton_ms, 9), round(p.library_ms, 9)) == (4.0, 0.4, 0.6, 3.0)
    site_macs, att_macs = 2 * 4096 * 1024 * 1024, 8 * 2 * 8 * 16 * 512 * 512 * 64 / 2
    assert p.site_macs == site_macs and p.study_macs == {ATTENTION: att_macs}
    assert abs(p.lever_ms(SITES) - 3.0 * site_macs / (site_macs + att_macs)) < 1e-9
    assert abs(p.lever_ms(SITES) + p.lever_ms(ATTENTION) - 3.0) < 1e-9
    assert p.lever_ms(CUDA_GRAPHS) == p.idle_ms and p.lever_ms(KERNELS) == p.lever_ms(FUSION) == p.triton_ms
    assert p.site_rate == gain.LARGE_GEMM_RATE  # a 4096x1024 output: a large GEMM, where cuBLAS held its sites
    assert abs(p.gain_ms(SITES) - gain.LARGE_GEMM_RATE * p.lever_ms(SITES)) < 1e-12


def test_skinny_gemm_sites_keep_the_sites_rate_and_a_mix_is_weighted_by_multiply_adds():
    """A decode step's 8-row GEMM keeps the sites' rate; a large GEMM's is lower; together, weighted by work."""
    skinny, large = _site("s", 8, 768, 2304), _site("l", 4096, 1024, 1024)
    assert profile.site_rate(skinny) == gain.RATES[SITES] and profile.site_rate(large) == gain.LARGE_GEMM_RATE
    p = profile_of(_capture(4.0, 3.6, [0.1], [("s", 1), ("l", 1)]), [skinny, large])
    ws, wl = 8 * 768 * 2304, 4096 * 1024 * 1024
    assert abs(p.site_rate - (ws * gain.RATES[SITES] + wl * gain.LARGE_GEMM_RATE) / (ws + wl)) < 1e-12


def test_without_the_devices_busy_time_there_is_no_profile():
    assert profile_of(_capture(4.0, None, [], []), []) is None
    assert profile_of(_capture(None, None, [], []), []) is None


def test_the_phase_with_more_gain_per_second_goes_first():
    library_bound = Profile(step_ms=4.0, idle_ms=0.0, triton_ms=0.2, library_ms=3.8, site_macs=1.0)
    kernel_bound = Profile(step_ms=4.0, idle_ms=0.0, triton_ms=3.8, library_ms=0.2, site_macs=1.0)
    cost = {SITES: 40.0, KERNELS: 40.0, FUSION: 100.0}
    assert gain.by_gain([SITES, FUSION, KERNELS], library_bound, cost) == [SITES, FUSION, KERNELS]
    assert gain.by_gain([SITES, FUSION, KERNELS], kernel_bound, cost) == [FUSION, KERNELS, SITES]
    # a phase with no expected cost (nothing known to tune yet) goes last, whatever its share
    assert gain.by_gain([SITES, KERNELS], kernel_bound, {SITES: 40.0}) == [SITES, KERNELS]


def _opts(time_budget_s=None) -> SweepOptions:
    spec = WorkloadSpec(model="tests.helpers.models:mlp", device="cuda", input_shape=(8, 64))
    return SweepOptions(spec=spec, budget=make_budget("default", time_budget_s=time_budget_s), db_url="sqlite://")


def test_a_whole_workload_phase_expected_to_gain_less_than_a_win_needs_is_left_out_within_a_time_budget():
    # fusion: 10% of 0.4 ms of Triton kernels is 1% of the 4-ms step, under the 2% a whole-workload winner must beat
    p = Profile(step_ms=4.0, idle_ms=0.0, triton_ms=0.4, library_ms=3.6, site_macs=1.0)
    cost = {SITES: 20.0, FUSION: 60.0, KERNELS: 30.0}
    progress = Notes()
    kept = [ph.name for ph in searches_by_gain(_opts(100.0), p, cost, progress)]
    assert FUSION not in kept and kept[0] == SITES and KERNELS in kept
    assert any(n.startswith(f"{FUSION}: expected gain") for n in progress.notes)
    assert any(n.startswith("expected gains on the default step's 4 ms") for n in progress.notes)
    # without a time budget every phase runs, in order of gain per second
    assert FUSION in [ph.name for ph in searches_by_gain(_opts(), p, cost, Progress())]
    own = [ph.name for ph in searches(_opts(100.0))]  # no profile: the phases' own order, all of them
    assert [ph.name for ph in searches_by_gain(_opts(100.0), None, cost, Progress())] == own


def test_the_phase_a_time_budget_was_raised_to_hold_goes_first_whatever_its_rate():
    """gpt2's decode step: the budget was raised to hold a batch of template sites after CUDA graphs (max-autotune's
    own lever); a fusion grouping's first trial (combo kernels) may promise more per second, but runs after them."""
    kernel_bound = Profile(step_ms=4.0, idle_ms=0.0, triton_ms=3.6, library_ms=0.4, site_macs=1.0)
    cost = {SITES: 40.0, FUSION: 20.0, KERNELS: 30.0}
    progress = Notes()
    assert [ph.name for ph in searches_by_gain(_opts(), kernel_bound, cost, Progress())][0] != SITES
    order = [ph.name for ph in searches_by_gain(_opts(), kernel_bound, cost, progress, held=SITES)]
    assert order[0] == SITES and {SITES, FUSION, KERNELS} <= set(order)
    assert any(n.startswith("expected gains") and n.index(SITES) < n.index(FUSION) for n in progress.notes), (
        progress.notes
    )
    assert [ph.name for ph in searches_by_gain(_opts(), None, cost, Progress(), held=SITES)][0] == SITES


def test_each_phase_takes_its_share_of_the_time_left_and_the_last_all_of_it():
    middle = with_shares(searches(_opts()))
    assert [ph.name for ph in middle][0] == SITES and middle[-1].name == KERNELS
    assert middle[-1].share == 1.0 and all(0 < ph.share < 1.0 for ph in middle[:-1])
    reordered = with_shares(list(reversed(middle)))
    assert reordered[-1].name == SITES and reordered[-1].share == 1.0 and reordered[0].share < 1.0


def test_a_site_met_at_every_layer_is_counted_each_time():
    """(A session configures its process as a measuring one: its thread count, which keys CPU winners, and freezing
    are put back, or a later test's compile looks up another device.)"""
    import torch
    import torch._inductor.config as inductor_config

    from tuner.measure.session import Session

    threads, freezing = torch.get_num_threads(), inductor_config.freezing
    try:
        session = Session(
            WorkloadSpec(model="tests.helpers.models:repeated", device="cpu", input_shape=(16, 64), threads=1)
        )
        counts = sorted(int(s.get("count", 1)) for s in session.capture().sites)
    finally:
        torch.set_num_threads(threads)
        inductor_config.freezing = freezing
    assert counts == [1, 2]


def test_a_study_whose_kinds_claim_no_work_runs_after_the_known_gains_and_is_never_left_out():
    p = Profile(step_ms=4.0, idle_ms=0.0, triton_ms=0.4, library_ms=3.6, site_macs=1.0)  # no kind claims work
    assert p.gain_ms("a new study") is None and gain.worth_a_trial(p, "a new study", 0.02)
    cost = {SITES: 20.0, "a new study": 10.0, KERNELS: 30.0, FUSION: 0.0}
    assert gain.by_gain([FUSION, "a new study", KERNELS, SITES], p, cost) == [SITES, KERNELS, "a new study", FUSION]
    assert "a new study ~? ms in ~10 s" in gain.gains_line(p, [SITES, "a new study"], cost)


def test_a_rewrite_of_slow_convolutions_keeps_the_fusion_study_in():
    """vit_b_32's default step on the H200: 3.61 ms, 0.616 in Triton kernels, 0.835 in library calls, 0.43 of them at
    its patchify convolution, which the fusion study's space-to-depth rewrite turns into a GEMM. By its kernels alone
    the study would be left out (10% of 0.616 ms is under 2% of the step); the convolution's time keeps it in."""
    without = Profile(step_ms=3.61, idle_ms=2.16, triton_ms=0.616, library_ms=0.835, site_macs=1.0)
    with_s2d = Profile(step_ms=3.61, idle_ms=2.16, triton_ms=0.616, library_ms=0.835, site_macs=1.0, s2d_ms=0.43)
    assert not gain.worth_a_trial(without, FUSION, 0.02) and gain.worth_a_trial(with_s2d, FUSION, 0.02)
    assert with_s2d.gain_ms(SITES) == without.gain_ms(SITES) and with_s2d.gain_ms(KERNELS) == without.gain_ms(KERNELS)


def test_a_rewrite_measured_first_puts_the_fusion_study_before_cheaper_searches():
    """vit_b_32's default step on the H200 (bench/results/h200/sweep-vit_b_32-bf16-b32-ablation-default-2026-12-04.log): the
    sites expected ~0.096 ms in ~16 s, the fusion study ~0.25 ms in ~125 s, so by its whole cost the study came after
    the sites and found no time. Its first trial is the rewrite of the 0.43-ms patchify convolution (~0.19 ms of
    that gain) and costs one trial, ~20 s: at that rate the study goes first."""
    p = Profile(step_ms=2.87, idle_ms=1.47, triton_ms=0.59, library_ms=0.806, site_macs=1.0, s2d_ms=0.43)
    cost = {SITES: 16.0, FUSION: 125.0, KERNELS: 43.0}
    assert gain.by_gain([SITES, FUSION, KERNELS], p, cost) == [SITES, FUSION, KERNELS]
    assert gain.by_gain([SITES, FUSION, KERNELS], p, cost, {FUSION: 20.0}) == [FUSION, SITES, KERNELS]
    assert p.front_ms(FUSION) == 0.43 * gain.S2D_RATE and p.front_ms(SITES) == 0.0
    without = Profile(step_ms=2.87, idle_ms=1.47, triton_ms=0.59, library_ms=0.806, site_macs=1.0)
    assert gain.by_gain([SITES, FUSION, KERNELS], without, cost, {FUSION: 20.0}) == [SITES, FUSION, KERNELS]


def test_convolutions_ending_in_a_relu_put_the_fusion_study_first_by_its_first_trial():
    """resnext50_32x4d-like: the sites' expected gain per second beats the fusion study's by its whole cost, but its
    first trial is cuDNN's fused epilogue, weighed by the Triton kernels' time (the pointwise kernels it removes)."""
    kw = dict(step_ms=1.8, idle_ms=0.05, triton_ms=0.7, library_ms=1.0, site_macs=1.0)
    p, plain = Profile(**kw, epilogues=True), Profile(**kw)
    assert p.front_ms(FUSION) == 0.7 * gain.EPILOGUE_RATE and plain.front_ms(FUSION) == 0.0
    assert p.gain_ms(FUSION) == plain.gain_ms(FUSION) + 0.7 * gain.EPILOGUE_RATE
    cost = {SITES: 60.0, FUSION: 125.0, KERNELS: 60.0}
    assert gain.by_gain([SITES, FUSION, KERNELS], plain, cost, {FUSION: 20.0}) == [SITES, FUSION, KERNELS]
    assert gain.by_gain([SITES, FUSION, KERNELS], p, cost, {FUSION: 20.0}) == [FUSION, SITES, KERNELS]


def test_the_gemm_merge_is_weighed_by_the_profiled_time_of_the_gemms_it_merges():
    """A Qwen2-like prefill layer: q, k and v read one input through frozen weights (addmm, profiled as bias and
    input), the output projection reads another (mm). Only the three merged GEMMs' time counts, k's and v's profiled
    together, as the profiler keys calls by their shapes."""
    library = [
        {"op": "addmm", "shapes": [[4096, 1024], [4096, 1024]], "ms": 0.017},
        {"op": "addmm", "shapes": [[4096, 256], [4096, 1024]], "ms": 0.020},
        {"op": "mm", "shapes": [[4096, 1024], [1024, 1024]], "ms": 0.017},
        {"op": "convolution", "shapes": [[8, 3, 32, 32], [16, 3, 3, 3]], "ms": 0.5},
    ]
    dims = [["addmm", 4096, 1024, 1024], ["addmm", 4096, 1024, 256], ["addmm", 4096, 1024, 256]]
    capture = dataclasses.replace(
        _capture(4.0, 3.6, [0.1], []), library=library, graphs=[{"sibling_gemms": 3, "sibling_dims": dims}]
    )
    p = profile_of(capture, [])
    assert abs(p.merge_ms - 0.037) < 1e-12
    assert abs(p.front_ms(FUSION) - 0.037 * gain.MERGE_RATE) < 1e-12 and p.front_ms(SITES) == 0.0
    assert (
        profile_of(dataclasses.replace(capture, graphs=[{"sibling_gemms": 0, "sibling_dims": []}]), []).merge_ms == 0.0
    )


def test_a_sites_epilogue_is_credited_with_the_steps_median_pointwise_kernel():
    """What a library call's epilogue costs: the launch-weighted median of the captured pointwise kernels (``_poi_``),
    not of the reductions or templates; nothing where none was captured (the CPU)."""
    kernels = [
        {"name": "triton_poi_fused_add", "default_ms": 0.003, "launches": 24},
        {"name": "triton_poi_fused_gelu", "default_ms": 0.004, "launches": 12},
        {"name": "triton_per_fused_native_layer_norm", "default_ms": 0.009, "launches": 50},
    ]
    capture = dataclasses.replace(_capture(0.57, 0.3, [], []), kernels=kernels)
    assert profile.epilogue_ms(capture) == 0.003
    assert profile.epilogue_ms(dataclasses.replace(capture, kernels=kernels[1:])) == 0.004
    assert profile.epilogue_ms(_capture(0.57, 0.3, [], [])) == 0.0


def test_inside_a_cuda_graph_the_median_pointwise_kernel_costs_its_device_time_in_the_step():
    """Profiled in the step, a pointwise kernel costs its device time there (``busy.kernel_ms``), without the launch
    its timing alone holds; unknown where any pointwise kernel was not profiled."""
    from tuner.measure.busy import kernel_ms

    events = [
        SimpleNamespace(name="triton_poi_fused_add_3", device_time_total=1.0),
        SimpleNamespace(name="triton_poi_fused_add_7", device_time_total=1.4),
        SimpleNamespace(name="triton_poi_fused_gelu_2", device_time_total=1.5),
        SimpleNamespace(name="ampere_bf16_gemm", device_time_total=9.0),
    ]
    in_step = kernel_ms(events)
    assert (
        set(in_step) == {"triton_poi_fused_add", "triton_poi_fused_gelu"}
        and abs(in_step["triton_poi_fused_add"] - 0.0012) < 1e-12
    )
    kernels = [
        {"name": n, "default_ms": alone, "launches": k, "device_ms": in_step.get(n)}
        for n, alone, k in (("triton_poi_fused_add", 0.0044, 24), ("triton_poi_fused_gelu", 0.0046, 12))
    ]
    capture = dataclasses.replace(_capture(0.57, 0.3, [], []), kernels=kernels)
    assert profile.epilogue_ms(capture) == 0.0044 and abs(profile.epilogue_device_ms(capture) - 0.0012) < 1e-12
    unprofiled = dataclasses.replace(capture, kernels=[{**kernels[0], "device_ms": None}, kernels[1]])
    assert profile.epilogue_device_ms(unprofiled) is None


def _with_epilogue(site: TaskSpec, default: str = "aten::mm") -> TaskSpec:
    sig = {**site.signature, "space": {**site.signature["space"], "default": default, "epilogue": True}}
    return dataclasses.replace(site, signature=sig, space=space_for(Kind.SITE, sig))


def test_the_sites_are_weighed_by_the_epilogue_kernels_their_library_calls_leave():
    """A library call leaves the pointwise op that reads its output to a kernel of its own, which a template takes in:
    each such call counts the step's median pointwise kernel at the sites' epilogue rate, scaled down at a large GEMM
    as its own rate is; a site with no epilogue, or whose default is a template already, counts nothing; nor does a
    step with no pointwise kernel captured (the CPU)."""
    poi = [{"name": "triton_poi_fused_add_relu", "default_ms": 0.004, "launches": 10}]
    capture = dataclasses.replace(_capture(2.0, 1.5, [], [("e", 12), ("l", 2), ("n", 5), ("t", 3)]), kernels=poi)
    skinny, large = _with_epilogue(_site("e", 8, 768, 768)), _with_epilogue(_site("l", 4096, 1024, 1024))
    plain, templated = _site("n", 8, 768, 768), _with_epilogue(_site("t", 8, 768, 768), default="triton::mm:{}")
    p = profile_of(capture, [skinny, large, plain, templated])
    scale = gain.LARGE_GEMM_RATE / gain.RATES[SITES]
    expected = 0.004 * gain.SITE_EPILOGUE_RATE * (12 + 2 * scale)
    assert abs(p.site_epilogues_ms - expected) < 1e-12
    assert abs(p.gain_ms(SITES) - (p.lever_ms(SITES) * p.site_rate + expected)) < 1e-12
    without = profile_of(capture, [plain, templated])
    assert (
        without.site_epilogues_ms == 0.0
        and abs(without.gain_ms(SITES) - without.lever_ms(SITES) * without.site_rate) < 1e-12
    )
    assert profile_of(dataclasses.replace(capture, kernels=[]), [skinny]).site_epilogues_ms == 0.0


def test_a_step_of_short_kernels_measures_combo_kernels_first_and_weighs_them_by_their_launches():
    """gpt2's decode step: ~65 Triton launches of ~5 us. Combo kernels (off in every Inductor mode) are the first
    fusion trial there, weighed by the launches; a prefill whose kernels run ~17 us (Qwen2's) gets neither."""
    from tuner.backend.defaults import fusion_defaults
    from tuner.sweep.tasks import fusion_tasks

    decode = _capture(0.57, 0.3, [0.005] * 6 + [0.02], [])
    prefill = _capture(2.6, 2.5, [0.005, 0.017, 0.02, 0.022], [])
    assert profile.short_launches(decode) == 14 and profile.short_launches(prefill) == 0
    assert abs(profile_of(decode, []).front_ms(FUSION) - 14 * gain.COMBO_MS_PER_LAUNCH) < 1e-12
    graph = {
        "fusion_key": "k",
        "backward": False,
        "lines": 10,
        "index": 0,
        "device": "cuda",
        "fusion_defaults": fusion_defaults("cuda"),
    }
    (short,), (plain,) = fusion_tasks([graph], "m", short_kernels=14), fusion_tasks([graph], "m")
    assert short.space.default["combo_kernels"] is False
    assert short.space.evidence() == [{**short.space.default, "combo_kernels": True}] and plain.space.evidence() == []
    assert plain.space.fingerprint() == fusion_tasks([graph], "m", short_kernels=0)[0].space.fingerprint()
    (cpu,) = fusion_tasks(
        [{**graph, "device": "cpu", "fusion_defaults": fusion_defaults("cpu")}], "m", short_kernels=14
    )
    assert "short_kernels" not in cpu.space.context and cpu.space.evidence() == []


def test_values_stored_once_are_weighed_by_the_kernels_that_recompute_them():
    """A rotary prefill: the kernels whose fused names hold the recorded values' ops (cos, sin) count, by their
    launches; a kernel whose name only holds the op's letters elsewhere (``cosh``) does not."""
    names = [
        "triton_poi_fused_add_cat_cos_mul_neg_sin_slice_4",
        "triton_poi_fused_cosh_mul_1",
        "triton_red_fused_add_mean_pow_rsqrt_2",
    ]
    kernels = [{"name": n, "default_ms": ms, "launches": 8} for n, ms in zip(names, (0.017, 0.01, 0.005))]
    capture = dataclasses.replace(
        _capture(2.6, 2.5, [], []), kernels=kernels, graphs=[{"broadcast_ops": ["cos", "sin"]}]
    )
    p = profile_of(capture, [])
    assert abs(p.recompute_ms - 8 * 0.017) < 1e-12
    assert abs(p.front_ms(FUSION) - 8 * 0.017 * gain.RECOMPUTE_RATE) < 1e-12
    assert profile_of(dataclasses.replace(capture, graphs=[{"broadcast_ops": []}]), []).recompute_ms == 0.0


def _typed_site(key: str, m: int, k: int, n: int) -> TaskSpec:
    rows = [["cuda", "torch.bfloat16", m, k, k, 1, 0], ["cuda", "torch.bfloat16", k, n, 1, k, 0]]
    sig = {"op": "mm", "inputs": rows, "space": {"choices": ["aten::mm:{}"], "default": "aten::mm:{}"}}
    return TaskSpec(key, Kind.SITE, f"mm {m}x{k}", sig, space_for(Kind.SITE, sig))


def test_a_gemm_whose_rows_are_not_16_byte_aligned_is_weighed_at_the_unaligned_rate():
    """gpt2's vocabulary projection (8 x 768 x 50257, bf16): 50257 columns of 2 bytes leave each output row unaligned,
    where cuBLAS ran a slow kernel; the same GEMM at 50304 columns, or its 768-wide siblings, keep the sites' rate."""
    head, padded, layer = (
        _typed_site("h", 8, 768, 50257),
        _typed_site("p", 8, 768, 50304),
        _typed_site("l", 8, 768, 2304),
    )
    assert profile.site_rate(head) == gain.UNALIGNED_RATE > gain.RATES[SITES]
    assert profile.site_rate(padded) == profile.site_rate(layer) == gain.RATES[SITES]
    assert profile.site_rate(_typed_site("k", 8, 1001, 768)) == gain.UNALIGNED_RATE  # K: the first input's rows


def test_a_whole_workload_phase_is_judged_against_the_step_under_cuda_graphs_where_they_come_first():
    """gpt2's decode step on the H200: 2.32 ms launched by the host, 1.82 of it waiting. The fusion study's expected
    gain (~0.03 ms, combo kernels) is under 2% of the launched step but over 2% of the step CUDA graphs leave."""
    p = Profile(step_ms=2.32, idle_ms=1.82, triton_ms=0.272, library_ms=0.231, site_macs=1.0, short_launches=0)
    p = dataclasses.replace(p, short_launches=int((0.03 - p.gain_ms(FUSION)) / gain.COMBO_MS_PER_LAUNCH))
    assert 0.02 * (2.32 - 0.8 * 1.82) < p.gain_ms(FUSION) < 0.02 * 2.32
    assert not gain.worth_a_trial(p, FUSION, 0.02) and gain.worth_a_trial(p, FUSION, 0.02, graphs_first=True)


def test_attention_run_as_math_is_weighed_by_its_batched_gemms():
    """BERT-base's attention as the dispatcher ran it under a compile (H100, b8 x 512, 12 heads of 64): float32 bmm
    of the scores and of their product with the values. Their profiled time is the attention study's lever at
    ``MATH_ATTENTION_RATE``; the FFN's GEMM is no part of it, nor is a site whose backend is fused."""
    att = _attention(8, 12, 512, 64, causal=False, count=12)
    site = {**att.signature["space"]["sites"][0], "backend": "math"}
    sig = {**att.signature, "space": {"device": "cuda", "sites": [site]}}
    math = TaskSpec("att", Kind("attention"), "graph 0 attention", sig, space_for("attention", sig))
    library = [
        {"op": "bmm", "shapes": [[96, 512, 64], [96, 64, 512]], "ms": 1.242},
        {"op": "bmm", "shapes": [[96, 512, 512], [96, 512, 64]], "ms": 1.043},
        {"op": "addmm", "shapes": [[3072], [4096, 768]], "ms": 0.4},
    ]
    capture = dataclasses.replace(_capture(5.4, 5.0, [0.1], []), library=library)
    p = profile_of(capture, [math])
    assert p.math_attention[0] == ATTENTION and abs(p.math_attention[1] - 2.285) < 1e-9
    assert (
        abs(p.gain_ms(ATTENTION) - (p.lever_ms(ATTENTION) * gain.STUDY_RATE + 2.285 * gain.MATH_ATTENTION_RATE)) < 1e-9
    )
    assert profile_of(capture, [att]).math_attention is None
