"""A real tuner compile of a model under a sweep's measuring context (forcing, recording), for the backend tests."""

import torch

from tuner.backend.compiler import compile_with_context
from tuner.backend.instrument.context import MeasuringContext
from tuner.core import Forcing


def measured(model, forcing=Forcing(), recorder=None, device="cpu"):
    """``model`` compiled through tuner's backend with ``forcing`` applied and ``recorder`` recording, Inductor's FX
    graph cache off (each compile lowers); Dynamo reset first, so nothing compiled before is served."""

    def backend(gm, ex, **_):
        return compile_with_context(gm, ex, MeasuringContext(forcing, device, recorder), {"fx_graph_cache": False})

    torch._dynamo.reset()
    return torch.compile(model, backend=backend)


def recorded(model, x, device="cpu"):
    """The recorder of a measuring compile of ``model`` run once on ``x`` (no grad): its graphs and sites."""
    from tuner.backend.instrument.recorder import Recorder

    rec = Recorder()
    with torch.no_grad():
        measured(model, recorder=rec, device=device)(x)
    return rec
