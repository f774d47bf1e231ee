"""Which captured kernel runs a template site's epilogue (``tuner.sweep.epilogues``): a pointwise kernel whose fused
name holds every op the recording saw read the site's output, launched as often as the site is met. The kernels are
BERT-base's on the H100 (b8 x 512, bf16), as its capture listed them."""

from tuner.sweep.epilogues import Epilogue, site_epilogue, site_epilogues

KERNELS = [
    {"name": "triton_per_fused__safe_softmax_add_arange_exp_expand_ge_prepare_softmax_online_scalar_tensor_sub_unsqueeze_view_where_5",
     "default_ms": 0.072, "launches": 12},
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
    assert site_epilogue(_site("qkv", ["_to_copy", "clone"]), KERNELS) == Epilogue(0.010, "triton_poi_fused__to_copy_clone_mul_split_transpose_view_2")


def test_no_kernel_stands_where_none_matches():
    assert site_epilogue(_site("out", ["add"]), KERNELS) is None, "its add is fused into a reduction a template cannot take in"
    assert site_epilogue(_site("ffn", ["gelu"], count=1), KERNELS) is None, "launched 12 times a step, not once"
    assert site_epilogue(_site("ffn", []), KERNELS) is None and site_epilogue({"key": "old"}, KERNELS) is None
    assert site_epilogue(_site("x", ["view"]), [{"name": "triton_poi_fused_gelu_view_3", "default_ms": None, "launches": 12}]) is None


def test_by_site():
    sites = [_site("ffn", ["gelu"]), _site("out", ["add"])]
    assert site_epilogues(sites, KERNELS) == {"ffn": Epilogue(0.029, "triton_poi_fused_gelu_view_3")}


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
    from tuner.sweep.phases.kernels import unfused_epilogues

    from tuner.db import Database

    db = Database.open(db_url)
    sweep, (slow, fast) = _sweep(db_url, db, _mm("s64", 64), _mm("s128", 128))
    sweep.kernels = KERNELS
    sweep.epilogues = {"s64": Epilogue(0.029, KERNELS[1]["name"]), "s128": Epilogue(0.029, KERNELS[1]["name"])}
    for rec, best in ((slow, 0.039), (fast, 0.030)):
        db.set_winner(rec.id, sweep.tuning.device_id, None, {"choice": "triton::mm a"}, best, 0.0337)
        sweep.outcomes[rec.id] = TaskOutcome(rec, {"choice": "triton::mm a"}, False, 0.0337, best, 4, 4)
    unfused_epilogues(sweep, KERNELS)  # the capture with the winners forced: the GELU kernel as before
    assert db.winner_config(slow.id, sweep.tuning.device_id) == {"choice": "aten::mm"} and sweep.outcomes[slow.id].is_default
    assert db.winner_config(fast.id, sweep.tuning.device_id) == {"choice": "triton::mm a"}
    assert any("still runs with every winner forced" in n for n in sweep.progress.notes), sweep.progress.notes
    db.close()
