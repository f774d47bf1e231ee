"""Which captured kernel runs a template site's epilogue (``tuner.sweep.epilogues``): a pointwise kernel whose fused
name holds every op the recording saw read the site's output, launched as often as the site is met. The kernels are
BERT-base's on the H100 (b8 x 512, bf16), as its capture listed them."""

import dataclasses

from tuner.sweep.epilogues import Epilogue, site_epilogue, site_epilogues

KERNELS = [
    {
        "name": "triton_per_fused__safe_softmax_add_arange_exp_expand_ge_prepare_softmax_online_scalar_tensor_sub_unsqueeze_view_where_5",
        "default_ms": 0.072,
        "launches": 12,
    },
    {"name": "triton_poi_fused_gelu_view_3", "default_ms": 0.029, "launches": 12},
    {"name": "triton_per_fused_add_native_layer_norm_view_4", "default_ms": 0.011, "launches": 24},
    {"name": "triton_poi_fused__to_copy_clone_split_transpose_view_1", "default_ms": 0.012, "launches": 12},
    {"name": "triton_poi_fused__to_copy_clone_mul_split_transpose_view_2", "default_ms": 0.010, "launches": 12},
]


def _site(key, ops, count=12):
    return {"key": key, "epilogue_ops": ops, "count": count}


def test_the_kernel_named_for_the_sites_epilogue_ops_and_launched_as_often_is_its_epilogue():
    assert site_epilogue(_site("ffn", ["gelu"]), KERNELS) == Epilogue(0.029, "triton_poi_fused_gelu_view_3")
    # an op whose name starts with an underscore, fused first; of two such kernels, the faster
    assert site_epilogue(_site("qkv", ["_to_copy", "clone"]), KERNELS) == Epilogue(
        0.010, "triton_poi_fused__to_copy_clone_mul_split_transpose_view_2"
    )


def test_no_kernel_stands_where_none_matches():
    assert site_epilogue(_site("out", ["add"]), KERNELS) is None, (
        "its add is fused into a reduction a template cannot take in"
    )
    assert site_epilogue(_site("ffn", ["gelu"], count=1), KERNELS) is None, "launched 12 times a step, not once"
    assert site_epilogue(_site("ffn", []), KERNELS) is None and site_epilogue({"key": "old"}, KERNELS) is None
    assert (
        site_epilogue(
            _site("x", ["view"]), [{"name": "triton_poi_fused_gelu_view_3", "default_ms": None, "launches": 12}]
        )
        is None
    )


def test_by_site_a_site_whose_epilogue_a_reduction_kernel_holds_is_credited_nothing():
    """The residual add after BERT's output projection is fused into the layer norm's kernel: a template taking the
    add in leaves that kernel to run, so the site saves no kernel. A site whose ops no kernel holds has no entry (the
    step's median pointwise kernel stands in)."""
    sites = [_site("ffn", ["gelu"]), _site("out", ["add"]), _site("gone", ["sigmoid"])]
    assert site_epilogues(sites, KERNELS) == {
        "ffn": Epilogue(0.029, "triton_poi_fused_gelu_view_3"),
        "out": Epilogue(0.0, "triton_per_fused_add_native_layer_norm_view_4"),
    }


GPT2_KERNELS = [
    {"name": "triton_poi_fused_add_mul_pow_tanh_view_3", "default_ms": 0.0265, "launches": 12},
    {"name": "triton_per_fused_add_native_layer_norm_view_4", "default_ms": 0.012, "launches": 12},
]


def test_a_kernel_is_the_epilogue_of_the_site_naming_most_of_its_ops_and_of_none_where_two_tie():
    # GPT-2 on the H100: the FFN's first GEMM feeds its GELU (add, mul, pow); the projections after it feed the
    # residual add, which the layer norm's reduction takes, yet the GELU kernel's name holds "add" too
    ffn, proj, out = _site("ffn", ["add", "mul", "pow"]), _site("proj", ["add"]), _site("out", ["add"])
    assert site_epilogue(proj, GPT2_KERNELS) is not None, "alone, the name matches"
    nothing = Epilogue(0.0, "triton_per_fused_add_native_layer_norm_view_4")
    assert site_epilogues([ffn, proj, out], GPT2_KERNELS) == {
        "ffn": Epilogue(0.0265, "triton_poi_fused_add_mul_pow_tanh_view_3"),
        "proj": nothing,
        "out": nothing,
    }
    # SwiGLU's gate and up projections each name one op of the kernel both feed: which one a template takes it into
    # is not known, so neither is credited
    swiglu = [{"name": "triton_poi_fused_mul_silu_2", "default_ms": 0.02, "launches": 12}]
    assert site_epilogues([_site("gate", ["silu"]), _site("up", ["mul"])], swiglu) == {}
    assert site_epilogues([_site("gate", ["silu"])], swiglu) == {"gate": Epilogue(0.02, "triton_poi_fused_mul_silu_2")}


def test_an_epilogue_kernel_launched_as_often_with_the_winners_forced_was_kept_apart():
    from tuner.sweep.epilogues import still_apart

    found = site_epilogues([_site("ffn", ["gelu"]), _site("qkv", ["_to_copy", "clone"])], KERNELS)
    taken_in = [k for k in KERNELS if k["name"] != "triton_poi_fused__to_copy_clone_mul_split_transpose_view_2"]
    assert still_apart(found, KERNELS, taken_in) == {"ffn"}, "the GELU kernel still runs 12 times; the qkv one is gone"
    fewer = [*taken_in[:1], {**KERNELS[1], "launches": 6}, *taken_in[2:]]
    assert still_apart(found, KERNELS, fewer) == set(), "half the GELU's launches were taken in"


def test_a_template_won_on_its_epilogue_kernel_that_still_runs_goes_back_to_the_default(db_url):
    """The Triton-kernel phase's capture with every winner forced finds the site's epilogue kernel still launched as
    often: the template, slower alone, took nothing in, and goes back to Inductor's default; a template that was no
    slower alone stays."""
    from tests.tuner.test_check_transfers import _sweep, _site as _mm
    from tuner.core import TaskOutcome
    from tuner.sweep.credited import unfused_epilogues

    from tuner.db import Database

    db = Database.open(db_url)
    sweep, (slow, fast) = _sweep(db_url, db, _mm("s64", 64), _mm("s128", 128))
    sweep.kernels = KERNELS
    sweep.epilogues = {"s64": Epilogue(0.029, KERNELS[1]["name"]), "s128": Epilogue(0.029, KERNELS[1]["name"])}
    for rec, best in ((slow, 0.039), (fast, 0.030)):
        db.set_winner(rec.id, sweep.tuning.device_id, None, {"choice": "triton::mm a"}, best, 0.0337)
        sweep.outcomes[rec.id] = TaskOutcome(rec, {"choice": "triton::mm a"}, False, 0.0337, best, 4, 4)
    unfused_epilogues(sweep, KERNELS)  # the capture with the winners forced: the GELU kernel as before
    assert (
        db.winner_config(slow.id, sweep.tuning.device_id) == {"choice": "aten::mm"}
        and sweep.outcomes[slow.id].is_default
    )
    assert db.winner_config(fast.id, sweep.tuning.device_id) == {"choice": "triton::mm a"}
    assert any("still runs with every winner forced" in n for n in sweep.progress.notes), sweep.progress.notes
    db.close()


def _credited_sweep(db_url, db):
    """Three sites with templates won: two slower alone than cuBLAS (0.039 and 0.036 ms against 0.0337), on their
    epilogue kernel's credit, and one faster alone."""
    from tests.tuner.test_check_transfers import _sweep, _site as _mm
    from tuner.core import TaskOutcome

    sweep, recs = _sweep(db_url, db, _mm("s64", 64), _mm("s96", 96), _mm("s128", 128))
    sweep.kernels = KERNELS
    sweep.epilogues = {"s64": Epilogue(0.029, KERNELS[1]["name"]), "s96": Epilogue(0.010, KERNELS[4]["name"])}
    for rec, best in zip(recs, (0.039, 0.036, 0.030)):
        db.set_winner(rec.id, sweep.tuning.device_id, None, {"choice": "triton::mm a"}, best, 0.0337)
        sweep.outcomes[rec.id] = TaskOutcome(rec, {"choice": "triton::mm a"}, False, 0.0337, best, 4, 4)
    return sweep, recs


def test_a_capture_with_the_winners_forced_confirms_the_epilogues_it_finds_taken_in(db_url):
    from tuner.db import Database
    from tuner.sweep.credited import unfused_epilogues

    db = Database.open(db_url)
    sweep, (gelu, qkv, fast) = _credited_sweep(db_url, db)
    unfused_epilogues(sweep, [k for k in KERNELS if k["name"] != KERNELS[4]["name"]])
    assert sweep.fused_epilogues == {"s96"}, "the qkv epilogue's kernel is gone; the GELU's still runs"
    device = sweep.tuning.device_id
    assert db.winner_config(gelu.id, device) == {"choice": "aten::mm"}
    assert db.winner_config(qkv.id, device) == db.winner_config(fast.id, device) == {"choice": "triton::mm a"}
    db.close()


def test_a_sweep_that_ends_with_no_check_drops_the_credited_templates_no_capture_confirmed(db_url):
    """The whole-workload check finds no time (its deadline has passed): a template won slower alone whose epilogue no
    capture with the winners forced showed taken in goes back to the default; one confirmed stays, as does one that
    was faster alone."""
    from tests.tuner.test_check_transfers import _Timed
    from tuner.db import Database
    from tuner.budget import clock
    from tuner.sweep.phases import WholeCheckPhase

    db = Database.open(db_url)
    sweep, (gelu, qkv, fast) = _credited_sweep(db_url, db)
    sweep.fused_epilogues = {"s96"}
    now = clock.now()
    sweep.tuning = dataclasses.replace(sweep.tuning, deadline=now - 1, settle_by=now - 1)
    sweep.worker = _Timed("s64", "s96")
    WholeCheckPhase().run(sweep, None)
    assert any("no room to measure the whole workload" in n for n in sweep.progress.notes), sweep.progress.notes
    device = sweep.tuning.device_id
    assert db.winner_config(gelu.id, device) == {"choice": "aten::mm"} and sweep.outcomes[gelu.id].is_default
    assert db.winner_config(qkv.id, device) == db.winner_config(fast.id, device) == {"choice": "triton::mm a"}
    reverted = [n for n in sweep.progress.notes if "back to Inductor's default" in n]
    assert len(reverted) == 1 and "no compile with the winners forced has shown" in reverted[0], sweep.progress.notes
    db.close()
