"""A tuned compile lowers a channels-last 1x1 convolution as Inductor's default does (a convolution), although it sets
``max_autotune_gemm`` to list template choices; Inductor's own ``conv_1x1_as_mm`` still asks for the matrix
multiply, and a plain max-autotune compile in the same process keeps its rewrite. Real Inductor compiles on the CPU,
unfrozen (frozen CPU convolutions go to oneDNN before this lowering)."""

import torch
import torch._inductor.config as inductor_config
from torch._inductor.utils import run_and_get_code

from tuner.backend.compiler import compile_with_context
from tuner.backend.hooks import conv_lowering
from tuner.backend.instrument.context import MeasuringContext
from tuner.core import Forcing


def _pointwise_conv() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(16, 32, 1), torch.nn.ReLU()).eval().to(memory_format=torch.channels_last)


def _input() -> torch.Tensor:
    return torch.randn(2, 16, 8, 8).to(memory_format=torch.channels_last)


def _tuned(model):
    def backend(gm, ex, **_):
        return compile_with_context(gm, ex, MeasuringContext(Forcing(), "cpu"), {"fx_graph_cache": False})

    torch._dynamo.reset()
    return torch.compile(model, backend=backend)


def _code(fn, x) -> str:
    with torch.no_grad(), inductor_config.patch(freezing=False):
        out, code = run_and_get_code(fn, x)
    torch.testing.assert_close(out, _pointwise_conv()(x), rtol=1e-4, atol=1e-4)
    return "\n".join(code)


def test_tuned_compile_keeps_the_1x1_convolution():
    code = _code(_tuned(_pointwise_conv()), _input())
    assert "convolution(" in code
    assert "mm(" not in code and "gemm" not in code.lower()


def test_inductors_own_flag_still_asks_for_the_matrix_multiply():
    with inductor_config.patch(conv_1x1_as_mm=True):
        code = _code(_tuned(_pointwise_conv()), _input())
    assert "convolution(" not in code


def test_plain_max_autotune_keeps_its_rewrite_after_a_tuned_compile():
    _code(_tuned(_pointwise_conv()), _input())  # the view is bound from here on
    assert isinstance(torch._inductor.kernel.conv.config, conv_lowering.ConfigView)
    torch._dynamo.reset()
    fn = torch.compile(_pointwise_conv(), options={"max_autotune_gemm": True, "max_autotune_gemm_backends": "ATEN"})
    code = _code(fn, _input())
    assert "convolution(" not in code
