import optuna
import pytest

from tuner.search_spaces import InvalidConfig, space_for
from tuner.core import Kind
from tuner.search_spaces import cpp

CPU_CTX = {"isa": "AVX512", "threads": 2, "has_cpp_gemm": True}


def test_cpp_default_is_inductors_own_and_valid():
    s = space_for("cpp_graph", {"space": CPU_CTX})
    from tuner.backend.defaults import values

    assert cpp.DEFAULTS == values(cpp.KNOBS), "the knobs' defaults are this Inductor's own"
    assert s.default == {k: v for k, v in cpp.DEFAULTS.items() if k in s.default}
    assert s.validate(s.default) is s.default
    assert "cpp.gemm_thread_factors" in s.names()
    assert (
        "cpp.gemm_thread_factors" not in space_for("cpp_graph", {"space": {**CPU_CTX, "has_cpp_gemm": False}}).names()
    )


@pytest.mark.parametrize(
    "change, message",
    [
        ({"cpp.simdlen": 3}, "not one of"),
        ({"cpp.simdlen": "256"}, "not one of"),
        ({"cpp.enable_loop_tail_vec": 1}, "true or false"),
        ({"cpp.gemm_thread_factors": "1,1,4"}, "not one of"),  # product must equal the 2 threads
        ({"num_warps": 4}, "unknown parameter"),
    ],
)
def test_cpp_rejects_bad_configs(change, message):
    s = space_for("cpp_graph", {"space": CPU_CTX})
    with pytest.raises(InvalidConfig, match=message):
        s.validate({**s.default, **change})


def test_missing_keys_and_non_dict_rejected():
    s = space_for("cpp_graph", {"space": CPU_CTX})
    with pytest.raises(InvalidConfig, match="missing"):
        s.validate({"cpp.simdlen": None})
    with pytest.raises(InvalidConfig, match="must be an object"):
        s.validate(["cpp.simdlen"])


def test_template_space_and_unknown_kind():
    s = space_for("template_choice", {"space": {"choices": ["cpp:X", "aten:mm"], "default": "aten:mm"}})
    assert s.default == {"choice": "aten:mm"} and s.size() == 2
    with pytest.raises(InvalidConfig):
        s.validate({"choice": "triton:evil"})
    with pytest.raises(InvalidConfig, match="unknown task kind"):
        space_for("pickle", {"space": {}})
    with pytest.raises(InvalidConfig, match="malformed"):
        space_for("template_choice", {"nope": 1})
    assert s.family == Kind.SITE  # the registry's kind and the space's agree


def test_every_kind_is_registered_once_with_its_space():
    from tuner.kinds import TaskKind, register, registered

    kinds = [k.value for k in registered()]
    assert sorted(kinds) == sorted(
        [
            Kind.SITE,
            Kind.CPP_GRAPH,
            Kind.CUDA_GRAPH,
            Kind.FUSION,
            Kind.TRITON_POINTWISE,
            Kind.TRITON_REDUCTION,
            Kind.TRITON_PERSISTENT_REDUCTION,
            "attention",
            "freezing",
        ]
    )
    assert all(
        space_for(k.value, {"space": {}}) is not None for k in registered() if k.value in (Kind.CUDA_GRAPH, "freezing")
    )
    assert Kind("template_choice") == Kind.SITE and f"{Kind.SITE}" == "template_choice"  # stored as the plain string
    with pytest.raises(ValueError, match="unknown task kind"):
        Kind("pickle")
    with pytest.raises(ValueError, match="registered twice"):
        register(TaskKind(Kind.SITE, lambda c: None, "site", "x", "graph", "x"))


def test_fingerprint_stable_and_sensitive():
    a = space_for("cpp_graph", {"space": CPU_CTX}).fingerprint()
    assert a == space_for("cpp_graph", {"space": dict(CPU_CTX)}).fingerprint()
    assert a != space_for("cpp_graph", {"space": {**CPU_CTX, "threads": 4}}).fingerprint()


def test_enqueued_default_round_trips_through_optuna():
    s = space_for("cpp_graph", {"space": CPU_CTX})
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    study.enqueue_trial(s.optuna_params(s.default))
    assert s.suggest(study.ask()) == s.default
    proposals = [s.suggest(study.ask()) for _ in range(5)]
    assert all(set(p) == set(s.names()) for p in proposals)


def test_the_cuda_grouping_offers_multi_kernel_picked_by_value_never_timed_at_run_time():
    import torch._inductor.config as inductor_config

    from tuner.backend.defaults import fusion_defaults
    from tuner.search_spaces.fusion import MULTI_KERNEL

    cuda = fusion_defaults("cuda")
    assert cuda[MULTI_KERNEL] == inductor_config.triton.multi_kernel and type(cuda[MULTI_KERNEL]) is int
    s = space_for(Kind.FUSION, {"space": {"device": "cuda", "defaults": {**cuda, MULTI_KERNEL: 0}, "pairs": []}})
    (param,) = [p for p in s.params if p.name == MULTI_KERNEL]
    assert param.options == (0, 2, 3) and s.default[MULTI_KERNEL] == 0
    assert s.validate({**s.default, MULTI_KERNEL: 3})[MULTI_KERNEL] == 3
    for bad in (1, True, "3", 4):  # 1 times both variants at the first call: a tuned compile benchmarks nothing
        with pytest.raises(InvalidConfig, match="not one of"):
            s.validate({**s.default, MULTI_KERNEL: bad})
    assert (
        MULTI_KERNEL
        not in space_for(
            Kind.FUSION, {"space": {"device": "cpu", "defaults": fusion_defaults("cpu"), "pairs": []}}
        ).names()
    )
    with pytest.raises(InvalidConfig, match=r"not an integer in \[0, 3\]"):
        space_for(Kind.FUSION, {"space": {"device": "cuda", "defaults": {**cuda, MULTI_KERNEL: 7}, "pairs": []}})
