"""Broadcast transcendental values stored once instead of computed in every kernel that reads them, on the CPU for
real: a rotary embedding's cos and sin, read by q and k."""

import re

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from tests.backend.test_conv_rewrite import _compiled, _grouping, _inference
from tuner.core import Forcing, Kind
from tuner.search_spaces.fusion import COMPUTE_ONCE, to_patches


class Rotary(torch.nn.Module):
    """q and k rotated by the cos and sin of their positions' angles, as a Llama-style attention does it."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, qk: torch.Tensor) -> torch.Tensor:
        q, k = qk.unbind(0)
        angles = torch.outer(torch.arange(q.shape[2], device=q.device).float(), self.inv_freq)
        emb = torch.cat([angles, angles], dim=-1)
        cos, sin = emb.cos(), emb.sin()
        half = q.shape[-1] // 2

        def rotate(x: torch.Tensor) -> torch.Tensor:
            return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin

        return rotate(q).sum(1) + rotate(k).sum(1)


def _qk():
    torch.manual_seed(0)
    return torch.randn(2, 4, 8, 64, 16)


def test_the_recording_counts_broadcast_values_and_storing_them_computes_each_once_with_eager_numerics():
    model, qk = Rotary(), _qk()
    g, task = _grouping(model, qk)
    assert sorted(g.broadcast_ops) == ["cos", "sin"] and g.broadcast_values == 2, g
    assert task.space.default[COMPUTE_ONCE] is False and task.space.evidence()[0] == {
        **task.space.default,
        COMPUTE_ONCE: True,
    }
    once = Forcing({Kind.FUSION: {g.fusion_key: to_patches({**task.space.default, COMPUTE_ONCE: True})}})
    with _inference():
        ref = model(qk)
        plain, (plain_code,) = run_and_get_code(_compiled(model), qk)
        y, (code,) = run_and_get_code(_compiled(model, once), qk)
    torch.testing.assert_close(plain, ref)
    torch.testing.assert_close(y, ref)
    stored = "empty_strided_cpu((64, 16)"  # a buffer of the angles' size: the cos, then the sin
    assert plain_code.count(stored) == 0 and code.count(stored) == 2, (plain_code.count(stored), code.count(stored))


class Gated(torch.nn.Module):
    """An MLP with an erf GELU, then a squeeze-excitation gate over a feature map."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.out = torch.nn.Linear(16, 64), torch.nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.out(torch.nn.functional.gelu(self.fc(x)))  # (8, 16)
        fmap = h.view(8, 16, 1, 1) * torch.ones(8, 16, 4, 4)
        return fmap * torch.sigmoid(fmap.mean((2, 3), keepdim=True))


def test_values_computed_for_their_own_elements_and_cheap_gates_are_left_alone():
    """GELU's erf is read once per element it was computed for; a squeeze-excitation gate's sigmoid is read broadcast,
    but is cheap on a GPU's special-function units and Inductor stores it on the CPU itself: nothing to store."""
    g, task = _grouping(Gated().eval(), torch.randn(8, 16))
    assert g.broadcast_values == 0 and COMPUTE_ONCE not in task.space.default


@pytest.mark.gpu
def test_on_the_gpu_the_cos_and_sin_are_computed_in_a_kernel_of_their_size_and_match_eager():
    """As Inductor lowers them on CUDA (bf16): inlined, the kernels that write q and k compute the cos and sin for
    each of their elements; stored, one kernel over the angles' 64 x 16 elements does."""
    model, qk = Rotary().cuda(), _qk().cuda().to(torch.bfloat16)
    g, task = _grouping(model, qk, device="cuda")
    assert g.broadcast_values == 2, g
    once = Forcing({Kind.FUSION: {g.fusion_key: to_patches({**task.space.default, COMPUTE_ONCE: True})}})
    with _inference():
        ref = model(qk.float())
        plain, (plain_code,) = run_and_get_code(_compiled(model, device="cuda"), qk)
        y, (code,) = run_and_get_code(_compiled(model, once, device="cuda"), qk)

    def sizes(code: str) -> list[int]:  # the element counts of the kernels that compute a cos
        return [
            int(n)
            for k in code.split("@triton.jit")[1:]
            if "tl_math.cos" in k
            for n in re.findall(r"xnumel = (\d+)", k)[:1]
        ]

    assert sizes(code) == [64 * 16] and all(n > 64 * 16 for n in sizes(plain_code)), (sizes(code), sizes(plain_code))
    for out in (plain, y):
        assert (out.float() - ref).abs().max() <= 0.03 * ref.abs().max()
