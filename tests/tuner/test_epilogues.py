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
