"""The template-site space beyond Inductor's list: generated Triton configs, written exactly as Inductor
writes the ids of its own, validated from untrusted data, searched by Optuna conditionally."""

import json

import optuna
import pytest

from tuner.search_spaces import InvalidConfig, space_for
from tuner.search_spaces.template import GEN, generator_context, parse_generated

BF16 = "torch.bfloat16"
# As recorded on the H200 (torch 2.11): resnet50's first 1x1 conv lowered to addmm, and a 3x3 conv.
MM_PARAMS = {
    "ACC_TYPE": "tl.float32",
    "BLOCK_K": 16,
    "BLOCK_M": 32,
    "BLOCK_N": 32,
    "EVEN_K": True,
    "GROUP_M": 8,
    "USE_FAST_ACCUM": False,
    "hint_override": None,
    "num_stages": 1,
    "num_warps": 2,
}
MM_OFFERED = [
    "aten::bias_addmm:{}",
    "aten::addmm:{}",
    "triton::mm:" + json.dumps(MM_PARAMS, sort_keys=True, separators=(",", ":")),
]
MM_INPUTS = [
    ["cuda", BF16, 100352, 64, 0, 1, 0],
    ["cuda", BF16, 100352, 64, 64, 1, 0],
    ["cuda", BF16, 64, 64, 1, 64, 0],
]
CONV_DESC = (
    "ALLOW_TF32=False, BLOCK_K=32, BLOCK_M=64, BLOCK_N=64, GROUPS=1, KERNEL_H=3, KERNEL_W=3, PADDING_H=1, "
    "PADDING_W=1, STRIDE_H=1, STRIDE_W=1, UNROLL=False, num_stages=2, num_warps=4"
)
CONV_OFFERED = ["aten:convolution", "TritonTemplateCaller:triton_convolution2d:" + CONV_DESC]
CONV_INPUTS = [["cuda", BF16, 32, 64, 56, 56, 200704, 1, 3584, 64, 0], ["cuda", BF16, 64, 64, 3, 3, 576, 1, 192, 64, 0]]


def _space(op, inputs, offered):
    gen = generator_context(op, inputs, offered)
    assert gen is not None
    return space_for("template_choice", {"space": {"choices": offered, "default": offered[0], "generate": gen}})


def _with(cid, **change):
    template, params = parse_generated(cid)
    if template == "conv2d":
        return "TritonTemplateCaller:triton_convolution2d:" + ", ".join(
            f"{k}={change.get(k, v)!r}" for k, v in params.items()
        )
    return f"{template}:" + json.dumps({**params, **change}, sort_keys=True, separators=(",", ":"))


def test_generator_reads_the_gemm_and_conv_dimensions():
    assert generator_context("addmm", MM_INPUTS, MM_OFFERED)["mnk"] == [100352, 64, 64]
    assert generator_context("convolution", CONV_INPUTS, CONV_OFFERED)["mnk"] == [32 * 56 * 56, 64, 64]
    assert (
        generator_context("addmm", MM_INPUTS, MM_OFFERED[:2]) is None
    )  # no Triton template offered: nothing to generate


@pytest.mark.parametrize(
    "op, inputs, offered", [("addmm", MM_INPUTS, MM_OFFERED), ("convolution", CONV_INPUTS, CONV_OFFERED)]
)
def test_space_is_wider_than_inductors_list_and_contains_it(op, inputs, offered):
    s = _space(op, inputs, offered)
    assert all(s.is_valid({"choice": c}) for c in offered)
    ids = [c["choice"] for c in s.configs()]
    assert len(ids) == s.size() > 150 and len(set(ids)) == len(ids)
    # Inductor's own Triton config is also one of the generated ones, written identically.
    assert offered[-1] in ids and s.gen.values_of(offered[-1]) is not None
    assert all(s.is_valid({"choice": c}) for c in ids[:: max(1, len(ids) // 50)])


def test_generated_ids_keep_the_sites_own_parameters():
    s = _space("addmm", MM_INPUTS, MM_OFFERED)
    ok = _with(MM_OFFERED[-1], BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=4, num_stages=4, num_warps=4)
    assert s.validate({"choice": ok})
    uneven = _with(MM_OFFERED[-1], BLOCK_K=128)  # K=64 is not a multiple of 128, so EVEN_K must say False
    assert s.gen.values_of(_with(uneven, EVEN_K=False)) is not None and s.gen.values_of(uneven) is None
    for bad, why in [
        (_with(ok, ACC_TYPE="tl.float16"), "neither offered"),  # a parameter the site fixes
        (_with(ok, BLOCK_M=48), "power of two"),
        (_with(ok, num_stages=7), "outside"),
        (_with(ok, BLOCK_M=256, BLOCK_N=64, BLOCK_K=64, num_stages=6), "shared memory"),
        (_with(ok, BLOCK_M=256, BLOCK_N=64, num_warps=2), "accumulator"),
        (ok[:-1] + ',"evil":1}', "neither offered"),
        ("triton::mm:{not json", "neither offered"),
    ]:
        with pytest.raises(InvalidConfig, match=why):
            s.validate({"choice": bad})
    with pytest.raises(InvalidConfig):
        s.validate({"choice": ok, "extra": 1})


def test_conv_ids_parse_and_reject_what_the_template_cannot_run():
    s = _space("convolution", CONV_INPUTS, CONV_OFFERED)
    ok = _with(CONV_OFFERED[1], BLOCK_M=128, BLOCK_N=32, BLOCK_K=16, num_stages=3)
    assert s.validate({"choice": ok})
    assert parse_generated(ok)[1]["UNROLL"] is False and parse_generated(ok)[1]["num_stages"] == 3
    with pytest.raises(InvalidConfig, match="4 warps"):
        s.validate({"choice": _with(ok, BLOCK_M=128, BLOCK_N=64, num_warps=8)})
    with pytest.raises(InvalidConfig, match="neither offered"):
        s.validate({"choice": _with(ok, KERNEL_H=5)})
    assert parse_generated(ok.replace("UNROLL=False", "UNROLL=__import__('os')")) is None


def test_optuna_asks_block_sizes_only_for_generated_configs():
    s = _space("addmm", MM_INPUTS, MM_OFFERED)
    study = optuna.create_study(
        sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=3, multivariate=True, group=True)
    )
    study.enqueue_trial(s.optuna_params(s.default))
    gen = next(c for c in s.configs() if c["choice"] not in MM_OFFERED)
    study.enqueue_trial(s.optuna_params(gen))
    first, second = study.ask(), study.ask()
    assert s.suggest(first) == s.default and first.params == {"choice": MM_OFFERED[0]}
    assert s.suggest(second) == gen and second.params["choice"] == GEN and "BLOCK_M_log2" in second.params
    study.tell(first, 1.0)
    study.tell(second, 0.5)
    picks = []
    for _ in range(12):
        t = study.ask()
        c = s.suggest(t)
        picks.append(c["choice"])
        study.tell(t, 1.0 if c["choice"] in MM_OFFERED else 0.4 if s.is_valid(c) else 2.0)
    assert sum(p not in MM_OFFERED for p in picks[6:]) >= 4, picks  # TPE learned that generated configs pay off
