"""The split-K kernel and its choices, on the CPU: the kernel runs in Triton's interpreter (a subprocess, as the
interpreter is chosen when Triton's JIT is imported); ids, menus and the site space are checked as they are."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tuner.search_spaces import space_for, splitk
from tuner.search_spaces.base import InvalidConfig
from tuner.core import Kind

_INTERPRETED = textwrap.dedent("""
    import json, torch
    from tuner.backend.splitk_mm import COUNTS_BY_DEVICE, splitk_addmm, splitk_mm
    torch.manual_seed(0)
    errors = []
    for m, k, n, split, bn, bk, alpha, beta in [(8, 768, 300, 4, 32, 64, 1.0, 1.0), (5, 100, 70, 3, 16, 32, 0.5, 2.0),
                                                (33, 96, 40, 1, 32, 32, 1.0, 1.0), (8, 3072, 96, 8, 64, 128, 1.0, 1.0)]:
        a, w, bias = torch.randn(m, k), torch.randn(n, k), torch.randn(n)
        config = dict(BLOCK_M=16 if m <= 16 else 64, BLOCK_N=bn, BLOCK_K=bk, SPLIT_K=split, num_warps=4, num_stages=2)
        out = torch.empty(m, n)
        for _ in range(2):  # the second call finds the workspace the first one left
            splitk_addmm(bias.expand(m, n), a, w.t(), out=out, alpha=alpha, beta=beta, **config)
            errors.append(float((out - torch.addmm(bias, a, w.t(), alpha=alpha, beta=beta)).abs().max()))
            splitk_mm(a, w.t(), out=out, **config)
            errors.append(float((out - a @ w.t()).abs().max()))
    left = [float(counts.abs().sum()) for counts in COUNTS_BY_DEVICE._by_device.values()]
    print(json.dumps({"errors": errors, "left": left}))
""")


def test_the_kernel_adds_up_and_leaves_its_counts_zero():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", _INTERPRETED], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(got["errors"]) == 16 and max(got["errors"]) < 1e-3, got
    assert got["left"] and max(got["left"]) == 0.0, got


def test_ids_round_trip_and_bad_ones_are_refused():
    config = splitk.menu(8, 768, 3072, 132)[0]
    assert config["SPLIT_K"] > 1
    assert splitk.parse(splitk.make_id(config)) == config
    assert splitk.parse("aten::addmm:{}") is None
    from tuner.cli.render import short_choice

    assert short_choice(splitk.make_id(config)) == "tuner::splitk M16 N16 K128 split8 s3 w4"  # the sweep's table
    for bad in (
        '{"BLOCK_M":16}',
        '{"BLOCK_K":128,"BLOCK_M":16,"BLOCK_N":24,"SPLIT_K":8,"num_stages":4,"num_warps":2}',
        '{"BLOCK_K":128,"BLOCK_M":16,"BLOCK_N":32,"SPLIT_K":128,"num_stages":4,"num_warps":2}',
        "not json",
    ):
        with pytest.raises(ValueError):
            splitk.parse(splitk.PREFIX + bad)


@pytest.mark.parametrize("m, n, k", [(8, 2304, 768), (8, 768, 3072), (8, 50257, 768), (32, 1000, 768), (64, 64, 64)])
def test_a_menu_covers_the_rows_and_leaves_each_split_a_share_of_k(m, n, k):
    made = splitk.menu(m, n, k, 132)
    assert made and len(made) == len({splitk.make_id(c) for c in made}) <= 4
    for c in made:
        splitk.parse(splitk.make_id(c))
        assert m <= c["BLOCK_M"] < 2 * max(m, 16) and c["BLOCK_K"] <= k
        assert k // c["SPLIT_K"] >= min(k, 128)
        programs = -(-m // c["BLOCK_M"]) * -(-n // c["BLOCK_N"]) * c["SPLIT_K"]
        assert c["SPLIT_K"] == 1 or programs <= splitk.PROGRAMS_PER_SM * 132
    first = [(c["BLOCK_N"], c["SPLIT_K"] > 1) for c in made[:2]]
    assert first == ([(16, True), (32, True)] if k >= splitk.SPLIT_FIRST * n else [(16, False), (32, False)])
    assert splitk.applies(m, n, k) and not splitk.applies(128, n, k) and not splitk.applies(m, n, 32)


def _site_space(choices):
    inputs = [
        ["cuda", "torch.bfloat16", [8, 3072], [3072, 1], 0],
        ["cuda", "torch.bfloat16", [3072, 768], [1, 3072], 0],
    ]
    return space_for(Kind.SITE, {"op": "mm", "inputs": inputs, "space": {"choices": choices, "default": "aten::mm:{}"}})


def test_a_site_measures_two_split_k_choices_first_and_refuses_a_bad_one():
    menu = [splitk.make_id(c) for c in splitk.menu(8, 768, 3072, 132)]
    space = _site_space(["aten::mm:{}", *menu])
    assert space.evidence() == [{"choice": c} for c in menu[:2]]
    assert space.validate({"choice": menu[3]})
    assert _site_space(["aten::mm:{}"]).evidence() == []
    with pytest.raises(InvalidConfig):
        _site_space(["aten::mm:{}", menu[0].replace('"SPLIT_K":8', '"SPLIT_K":3')])


def _nodes(m, k, n, device="cuda", dtype=None):
    import torch
    from torch._inductor import ir

    dev, dtype = torch.device(device, 0) if device == "cuda" else torch.device(device), dtype or torch.bfloat16
    a = ir.InputBuffer(name="a", layout=ir.FixedLayout(dev, dtype, [m, k], [k, 1]))
    b = ir.InputBuffer(name="b", layout=ir.FixedLayout(dev, dtype, [k, n], [1, k]))
    return [a, b], ir.FixedLayout(dev, dtype, [m, n], [n, 1])


def test_a_skinny_cuda_site_is_offered_its_menu_and_a_wanted_config_by_id():
    import torch

    from tuner.backend.hooks import selector
    from tuner.backend.hooks import splitk as hook

    nodes, layout = _nodes(8, 3072, 768)
    wanted = splitk.make_id(
        {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 2, "num_warps": 4, "num_stages": 2}
    )
    bad = wanted.replace('"SPLIT_K":2', '"SPLIT_K":3')
    too_many = splitk.make_id(
        {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 64, "SPLIT_K": 2, "num_warps": 4, "num_stages": 2}
    )
    wide_nodes, wide_layout = _nodes(8, 3072, 1 << 21)  # 131072 output tiles of 16 columns: more than the kernel counts
    assert all(
        hook.id_of(c) != too_many for c in hook.choices("mm", wide_nodes, wide_layout, (too_many,), None, sms=132)
    )
    made = hook.choices("mm", nodes, layout, (wanted, bad, "aten::mm:{}"), None, sms=132)
    ids = [selector.choice_id(c) for c in made]
    assert ids == [*(splitk.make_id(c) for c in splitk.menu(8, 768, 3072, 132)), wanted]
    assert all(type(c).__name__ == "ExternKernelCaller" for c in made)
    assert hook.choices("bmm", nodes, layout, (), None, sms=132) == []
    assert hook.choices("mm", *_nodes(128, 3072, 768), (), None, sms=132) == []
    assert hook.choices("mm", *_nodes(8, 3072, 768, dtype=torch.float32), (), None, sms=132) == []
    assert hook.choices("mm", *_nodes(8, 3072, 768, device="cpu"), (), None, sms=132) == []
    from torch._inductor.kernel.mm import aten_mm

    aten = aten_mm.bind(tuple(nodes), layout)
    assert selector.default_index([*made, aten]) == len(made)  # Inductor's own extern call, not tuner's
