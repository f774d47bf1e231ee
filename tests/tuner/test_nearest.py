"""tuner.nearest: which stored task stands in for one with no exact entry."""

from tuner.core import Kind
from tuner.nearest import Nearest, distance


def _row(sizes, strides, dtype="torch.float32"):
    return ["cpu", dtype, *sizes, *strides, 0]


def _site(m, k, n, choice, *, channels_last=False, dtype="torch.float32"):
    a = _row((m, k), (k, 1), dtype)
    b = _row((k, n), (1, k) if channels_last else (n, 1), dtype)
    return (Kind.SITE, {"choice": choice}, {"op": "mm", "inputs": [a, b], "fp32_precision": "highest"})


def _payload(m, k, n, *, transposed=False, dtype="torch.float32"):
    b = _row((k, n), (1, k) if transposed else (n, 1), dtype)
    return {"op": "mm", "inputs": [_row((m, k), (k, 1), dtype), b], "fp32_precision": "highest"}


def test_the_nearest_sizes_of_the_same_op_and_layout_answer():
    near = Nearest.from_winners(
        {
            "a": _site(16, 64, 64, "aten:mm"),
            "b": _site(256, 64, 64, "cpp:gemm"),
            "c": _site(32, 64, 64, "x", channels_last=True),
        }
    )
    assert near.site(_payload(24, 64, 64)).config == {"choice": "aten:mm"}  # 16 is nearer than 256 in log2
    assert near.site(_payload(200, 64, 64)).source == "b"
    assert near.site(_payload(32, 64, 64, transposed=True)).source == "c"  # a transposed operand only from its own kind
    assert near.site(_payload(16, 64, 64, dtype="torch.bfloat16")) is None
    assert near.site({**_payload(16, 64, 64), "op": "addmm"}) is None


def test_a_batch_of_one_keeps_the_layout_of_the_other_dimensions():
    near = Nearest.from_winners({"a": _site(1, 64, 64, "cpp:gemm")})
    assert near.site(_payload(8, 64, 64)).source == "a" and near.site(_payload(8, 64, 64)).distance == 3.0


def test_symbolic_sizes_and_malformed_signatures_never_transfer():
    broken = {
        "x": (Kind.SITE, {"choice": "c"}, {"op": "mm", "inputs": [["cpu", "f32", "s0", 64, 64, 1, 0]]}),
        "y": (Kind.CPP_GRAPH, {}, {"family": 3, "shapes": [[1]]}),
        "z": (Kind.FUSION, {}, {"family": "f", "shapes": "nope"}),
    }
    near = Nearest.from_winners({**broken, "a": _site(16, 64, 64, "aten:mm")})
    assert len(near.sites) == 1 and near.graphs == ()
    symbolic = _payload(16, 64, 64)
    symbolic["inputs"][0][2] = "s0"
    assert near.site(symbolic) is None


def test_graphs_transfer_within_their_family_and_kind_only():
    near = Nearest.from_winners(
        {
            "g1": (Kind.CPP_GRAPH, {"cpp.simdlen": 0}, {"family": "f", "shapes": [[1, 64]]}),
            "g2": (Kind.CPP_GRAPH, {"cpp.simdlen": 256}, {"family": "f", "shapes": [[64, 64]]}),
            "f1": (Kind.FUSION, {"max_fusion_size": 8}, {"family": "f", "shapes": [[1, 64]]}),
        }
    )
    assert near.graph(Kind.CPP_GRAPH, "f", ((2, 64),)).config == {"cpp.simdlen": 0}
    assert near.graph(Kind.CPP_GRAPH, "f", ((48, 64),)).source == "g2"
    assert near.graph(Kind.FUSION, "f", ((48, 64),)).source == "f1"
    assert near.graph(Kind.CPP_GRAPH, "other", ((2, 64),)) is None and near.graph(Kind.CPP_GRAPH, "f", None) is None
    assert near.without(Kind.FUSION).graph(Kind.FUSION, "f", ((1, 64),)) is None


def test_distance_is_infinite_across_ranks():
    assert distance(((2, 4),), ((2, 4, 1),)) == float("inf") and distance(((2, 4),), ((8, 4),)) == 2.0
