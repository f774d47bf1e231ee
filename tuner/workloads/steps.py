"""One step of a workload, the same for sweeps and benchmarks: inference under no_grad, or forward + backward."""

from __future__ import annotations

import contextlib
from typing import Any


def run_step(mode: str, fn: Any, x: Any, *, grads: bool = False, amp: tuple[str, str] | None = None) -> Any:
    """With ``grads``, return what numerics compare: the output (and, training, every parameter's gradient).
    ``amp``: (device type, dtype) to run the forward under ``torch.autocast`` (``WorkloadSpec.amp``)."""
    import torch

    autocast = torch.autocast(amp[0], dtype=getattr(torch, amp[1])) if amp else contextlib.nullcontext()
    if mode != "train":  # inference, or a decode step
        with torch.no_grad(), autocast:
            return fn(x)
    params = list((getattr(fn, "_orig_mod", None) or fn).parameters())
    for p in params:
        p.grad = None
    with autocast:
        out = fn(x)
    out.float().mean().backward()
    if grads:
        return [out.detach(), *[p.grad.detach().clone() for p in params if p.grad is not None]]
    return None


OPTIMIZERS = {"AdamW": {"lr": 1e-5}, "SGD": {"lr": 1e-4, "momentum": 0.9}}  # torch.optim class name -> its arguments


def eager_reference(spec: Any, model: Any, x: Any) -> Any:
    """The eager step's output on ``x``: the reference every compiled mode is checked against. A model that rejects
    its input (a wrong ``--input-shape``, say) is one line, as a sweep says it, not torch's traceback."""
    from tuner.errors import WorkloadError

    try:
        return run_step(spec.mode, model, x, grads=True, amp=spec.amp)
    except Exception as e:  # the model's own code: any failure means these inputs do not fit it
        lines = str(e).strip().splitlines()
        raise WorkloadError(
            f"{spec.model} rejects its input of shape {tuple(spec.shape)} ({type(e).__name__}: "
            f"{lines[0] if lines else ''}); check --input-shape, --batch, --image-size or --seq-len"
        ) from None


def optimizer_name(mode: str, model_name: str) -> str | None:
    """The optimizer a timed training step ends with, as users train: AdamW for a language model (token
    inputs), SGD with momentum otherwise. None for inference."""
    from tuner.workloads.model_zoo import takes_tokens

    return None if mode != "train" else ("AdamW" if takes_tokens(model_name) else "SGD")


def optimizer_for(mode: str, model_name: str, fn: Any) -> Any:
    """That optimizer, eager, over ``fn``'s parameters (None for inference)."""
    import torch

    name = optimizer_name(mode, model_name)
    if name is None:
        return None
    params = list((getattr(fn, "_orig_mod", None) or fn).parameters())
    return getattr(torch.optim, name)(params, **OPTIMIZERS[name])


def synchronizer(device: str) -> Any:
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)
