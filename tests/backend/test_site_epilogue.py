"""A template site's epilogue: the recording compile says, per site, whether a pointwise op reads its output
(``hooks/epilogue``), and the site's space says which of its choices take that op in (Triton templates)."""

import torch
import torch._inductor.config as inductor_config

from tuner.backend.compiler import compile_with_context
from tuner.backend.instrument.context import MeasuringContext
from tuner.backend.instrument.recorder import Recorder
from tuner.core import Forcing
from tuner.search_spaces import space_for

TRITON = (
    'triton::mm:{"ACC_TYPE":"tl.float32","BLOCK_K":128,"BLOCK_M":16,"BLOCK_N":32,"EVEN_K":true,"GROUP_M":8,'
    '"USE_FAST_ACCUM":false,"hint_override":null,"num_stages":6,"num_warps":4}'
)


class _GeluThenOut(torch.nn.Module):
    """Two linear layers: the first one's output goes through a GELU (an epilogue), the second's out of the graph."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(64, 128), torch.nn.Linear(128, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.gelu(self.a(x)))


def test_the_recording_says_which_sites_feed_a_pointwise_op(monkeypatch):
    monkeypatch.setattr(inductor_config, "freezing", True)
    rec = Recorder()

    def backend(gm, ex, **_):
        return compile_with_context(gm, ex, MeasuringContext(Forcing(), "cpu", rec))

    model, x = _GeluThenOut().eval(), torch.randn(16, 64)
    with torch.no_grad():
        torch.compile(model, backend=backend)(x)
    torch._dynamo.reset()
    by_out = {s.inputs[-1][2]: (s.epilogue, s.epilogue_ops) for s in rec.sites.values()}  # each weight's output width
    assert by_out == {128: (True, ["gelu"]), 32: (False, [])}, by_out


def test_only_a_triton_template_takes_in_a_recorded_epilogue():
    choices = ["aten::bias_addmm:{}", "aten::addmm:{}", TRITON]
    with_op = space_for("template_choice", {"space": {"choices": choices, "default": choices[0], "epilogue": True}})
    without = space_for("template_choice", {"space": {"choices": choices, "default": choices[0]}})
    assert with_op.absorbs_epilogue(TRITON) and not with_op.absorbs_epilogue("aten::addmm:{}")
    assert not without.absorbs_epilogue(TRITON)
    assert "epilogue" not in without.context, "a site with no epilogue keeps the fingerprint it had"
    assert with_op.fingerprint() != without.fingerprint()
