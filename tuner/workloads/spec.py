"""Workloads: a model (a torchvision name, ``timm:NAME``, ``hf:NAME`` or ``pkg.module:factory``; ``tuner.workloads.model_zoo``),
its inputs, device, dtype and mode."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from tuner.core import DTYPES
from tuner.errors import WorkloadError

# Mixed precision, as training usually runs: fp32 weights and inputs, the step computed under torch.autocast.
AUTOCAST = {"amp-bf16": "bfloat16", "amp-fp16": "float16"}
MODES = ("infer", "train", "decode")


@dataclass(frozen=True)
class WorkloadSpec:
    model: str
    device: str = "cpu"
    mode: str = "infer"
    batch: int = 1
    dtype: str = "fp32"
    image_size: int = 224
    input_shape: tuple[int, ...] | None = None  # full shape, batch first; overrides batch/image_size
    channels_last: bool = False
    freezing: bool = True  # inference only: Inductor freezing (constant weights)
    seed: int = 0
    threads: int | None = None  # CPU threads; None: torch's default
    seq_len: int = 128  # token inputs (``hf:`` models): (batch, seq_len); decode: the KV cache's length

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise WorkloadError(f"--mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if self.dtype not in DTYPES:
            raise WorkloadError(f"--dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r}")
        if self.device not in ("cpu", "cuda"):
            raise WorkloadError(f"--device must be cpu or cuda, not {self.device!r}")
        if self.batch < 1 or self.image_size < 1 or self.seq_len < 1:
            raise WorkloadError("--batch, --image-size and --seq-len must be positive")
        if self.threads is not None and not 1 <= self.threads <= 4096:
            raise WorkloadError(f"--threads must be at least 1 (and at most 4096), not {self.threads}")
        if self.input_shape is not None and (not self.input_shape or any(d < 1 for d in self.input_shape)):
            raise WorkloadError(f"--input-shape must be positive integers, got {self.input_shape}")
        if self.mode == "decode" and (not self.model.startswith("hf:") or self.input_shape is not None):
            raise WorkloadError(
                "--mode decode takes a Hugging Face language model (--model hf:gpt2, say) and --batch and "
                "--seq-len (the KV cache's length), not --input-shape"
            )

    @property
    def shape(self) -> tuple[int, ...]:
        from tuner.workloads.model_zoo import takes_tokens

        if self.input_shape:
            return tuple(self.input_shape)
        if self.mode == "decode":
            return (self.batch, 1)  # one new token per sequence
        return (
            (self.batch, self.seq_len)
            if takes_tokens(self.model)
            else (self.batch, 3, self.image_size, self.image_size)
        )

    @property
    def amp(self) -> tuple[str, str] | None:
        """(device type, dtype) of ``torch.autocast`` for a mixed-precision workload (``--dtype amp-bf16``), else None."""
        return (self.device, AUTOCAST[self.dtype]) if self.dtype in AUTOCAST else None

    @property
    def uses_freezing(self) -> bool:
        return self.mode == "infer" and self.freezing

    @property
    def name(self) -> str:
        dims = "x".join(map(str, self.shape))
        cl = "/cl" if self.channels_last else ""
        fz = "" if self.uses_freezing or self.mode != "infer" else "/nofreeze"
        kv = f"/kv{self.seq_len}" if self.mode == "decode" else ""
        return f"{self.model}/{self.mode}/{self.device}/{self.dtype}/{dims}{cl}{fz}{kv}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(p) for p in re.split(r"[,x]", text.strip()))
    except ValueError:
        raise WorkloadError(f"--input-shape must be comma-separated integers like 8,3,224,224, not {text!r}") from None
    if not dims or any(d < 1 for d in dims):
        raise WorkloadError(f"--input-shape must be positive integers like 8,3,224,224, not {text!r}")
    return dims


def torch_dtype(spec: WorkloadSpec) -> Any:
    import torch

    return getattr(torch, DTYPES[spec.dtype])


def check_device(spec: WorkloadSpec) -> None:
    import torch

    if spec.device == "cuda" and not torch.cuda.is_available():
        raise WorkloadError("--device cuda was asked for, but torch sees no CUDA device here")


def build_model(spec: WorkloadSpec) -> Any:
    """The model, seeded, on the device, in the dtype and mode of ``spec``."""
    import torch

    from tuner.workloads import model_zoo

    def construct() -> Any:
        torch.manual_seed(spec.seed)
        if spec.mode == "decode":
            from tuner.workloads.decoder import from_config

            return from_config(
                model_zoo.hf_config(spec.model.removeprefix("hf:"), spec.model), spec.batch, spec.seq_len, spec.seed
            )
        return model_zoo.load(spec.model)

    model = _constructed_on(spec.device, construct)
    if not isinstance(model, torch.nn.Module):
        raise WorkloadError(f"{spec.model!r} did not give a torch.nn.Module")
    _drawn_where_zero(model, spec.seed)
    model = model.to(device=spec.device, dtype=torch_dtype(spec))
    if spec.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model.train(spec.mode == "train")


def _constructed_on(device: str, construct: Any) -> Any:
    """``construct()`` with ``device`` the default device, so that a GPU draws the initial weights (gpt2's decode
    step: 1.0 s on the H200's host, 0.01 on the GPU); on the host where that fails (a model that needs host
    tensors while it is built), said in the log."""
    import logging

    import torch

    if device == "cpu":
        return construct()
    try:
        with torch.device(device):
            return construct()
    except (RuntimeError, TypeError, ValueError) as e:
        logging.getLogger("tuner.workloads").info("built on the host, not the %s (%s: %s)", device, type(e).__name__, e)
        return construct()


def _drawn_where_zero(model: Any, seed: int) -> None:
    """Weights that the model initialises to zeros, drawn at random like the rest (N(0, 0.02)). torchvision's ViT
    zeroes its head: every output was then zero whatever the input, and a numerics check against eager could not
    fail. Biases and norms (one dimension) keep theirs; a zero weight is not faster to multiply by."""
    import torch

    gen = torch.Generator().manual_seed(seed + 2)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and p.is_floating_point() and not p.any():
                p.copy_((torch.randn(p.shape, generator=gen) * 0.02).to(p.dtype))


def make_inputs(spec: WorkloadSpec, sets: int = 3) -> list[Any]:
    """``sets`` different random (never zero) input batches, to rotate while timing."""
    import torch

    from tuner.workloads.model_zoo import token_vocab

    gen = torch.Generator().manual_seed(spec.seed + 1)
    vocab = token_vocab(spec.model)
    out = []
    for _ in range(sets):
        if vocab:  # token ids, below the model's vocabulary size
            out.append(torch.randint(0, vocab, spec.shape, generator=gen).to(spec.device))
            continue
        x = torch.randn(spec.shape, generator=gen).to(device=spec.device, dtype=torch_dtype(spec))
        if spec.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        out.append(x)
    return out
