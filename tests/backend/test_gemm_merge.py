"""GEMMs that read one input through frozen weights, merged into one, on the CPU for real. On the CPU, freezing packs
linear weights for oneDNN before any post-grad pass, so the frozen path runs with that packing off in a process of
its own (turning it off in this one would keep Inductor from ever registering it), as the space-to-depth tests do."""

import subprocess
import sys

import pytest
import torch

from tests.backend.test_conv_rewrite import _grouping
from tuner.search_spaces.fusion import MERGE_GEMMS


class Block(torch.nn.Module):
    """A transformer's projections in small: q, k and v with biases (k and v narrower, as grouped-query attention
    has them) and an MLP's gate and up without, each pair read from one input."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.q, self.k, self.v = torch.nn.Linear(64, 64), torch.nn.Linear(64, 16), torch.nn.Linear(64, 16)
        self.gate, self.up = torch.nn.Linear(64, 96, bias=False), torch.nn.Linear(64, 96, bias=False)
        self.down = torch.nn.Linear(96, 64, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.q(x), self.k(x), self.v(x)
        att = torch.softmax(q[..., :16] @ k.transpose(-1, -2), dim=-1) @ v
        h = x + torch.cat([att, q[..., 16:]], dim=-1)
        return h + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h))


def test_weights_that_are_inputs_are_never_merged():
    """Unfrozen, the weights are the graph's inputs: concatenating them would copy every weight at every call."""
    g, task = _grouping(Block().eval(), torch.randn(2, 8, 64))
    assert g.sibling_gemms == 0 and MERGE_GEMMS not in task.space.default


FROZEN = """
import torch, torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code
from tests.backend.test_conv_rewrite import _compiled, _grouping
from tests.backend.test_gemm_merge import Block
from tuner.core import Forcing, Kind
from tuner.search_spaces.fusion import MERGE_GEMMS, to_patches

inductor_config.cpp.weight_prepack = False
model, x = Block().eval(), torch.randn(2, 8, 64)
g, task = _grouping(model, x, freezing=True)
assert g.sibling_gemms == 5, g  # q, k, v; gate, up (down reads another input)
assert sorted(g.sibling_dims) == [["addmm", 16, 64, 16]] * 2 + [["addmm", 16, 64, 64], ["mm", 16, 64, 96], ["mm", 16, 64, 96]], g.sibling_dims
assert task.space.default[MERGE_GEMMS] is False and task.space.evidence()[0] == {**task.space.default, MERGE_GEMMS: True}
merged = Forcing({Kind.FUSION: {g.fusion_key: to_patches({**task.space.default, MERGE_GEMMS: True})}})
with inductor_config.patch(freezing=True), torch.no_grad():
    ref = model(x)
    plain, (plain_code,) = run_and_get_code(_compiled(model), x)
    y, (code,) = run_and_get_code(_compiled(model, merged), x)
torch.testing.assert_close(plain, ref, rtol=1e-4, atol=1e-4)
torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-4)
calls = lambda c: (c.count("extern_kernels.addmm("), c.count("extern_kernels.mm("))
assert calls(plain_code) == (3, 3) and calls(code) == (1, 2), (calls(plain_code), calls(code))
print("ok")
"""


def test_frozen_projections_of_one_input_become_one_gemm_with_eager_numerics(cwd_root):
    done = subprocess.run([sys.executable, "-c", FROZEN], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


@pytest.mark.gpu
def test_on_the_gpu_frozen_bf16_projections_merge_and_match_eager(monkeypatch):
    """As Inductor lowers them on CUDA (bf16, frozen), where the study measures the knob: the forced grouping's pass
    finds the recorded groups in the graph it is handed and leaves none, and the output matches eager. (Counting
    GEMM calls in the generated code would not say it: Inductor's own freezing passes merge some projections of
    equal width first, and a tuned compile may lower a GEMM as a Triton template.)"""
    from tests.backend.test_conv_rewrite import _compiled, _inference
    from tuner.backend.hooks import gemm_merge, rewrites
    from tuner.core import Forcing, Kind
    from tuner.search_spaces.fusion import to_patches

    class Counted(gemm_merge.MergeGemms):
        seen: list[tuple[int, int]] = []

        def __call__(self, graph):
            before = len(gemm_merge.groups(graph))
            super().__call__(graph)
            Counted.seen.append((before, len(gemm_merge.groups(graph))))

        def uuid(self):
            return "counted-" + super().uuid()

    monkeypatch.setitem(rewrites.REWRITES, MERGE_GEMMS, Counted)
    model, x = Block().eval().cuda().to(torch.bfloat16), torch.randn(4, 32, 64, device="cuda", dtype=torch.bfloat16)
    g, task = _grouping(model, x, device="cuda", freezing=True)
    assert g.sibling_gemms >= 3, g  # q, k and v at least: Inductor's own freezing passes may have merged gate and up
    merged = Forcing({Kind.FUSION: {g.fusion_key: to_patches({**task.space.default, MERGE_GEMMS: True})}})
    with _inference(freezing=True):
        plain = _compiled(model, device="cuda")(x)
        y = _compiled(model, merged, device="cuda")(x)
        ref = model.float()(x.float())
    assert Counted.seen and Counted.seen[-1][0] >= 1 and Counted.seen[-1][1] == 0, Counted.seen
    for out in (plain, y):
        assert (out.float() - ref).abs().max() <= 0.03 * ref.abs().max()
