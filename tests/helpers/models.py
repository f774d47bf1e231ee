"""Small models for tests, loadable as ``tests.helpers.models:NAME``."""

import ctypes
import os

import torch


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32), torch.nn.GELU())


def broken() -> torch.nn.Module:
    raise RuntimeError("this factory is broken on purpose")


@torch._dynamo.disable
def _maybe_crash():
    flag = os.environ.get("TUNER_TEST_CRASH")
    if flag and os.path.exists(flag):
        ctypes.string_at(0)


class _CrashOnRun(torch.nn.Module):
    def forward(self, x):
        _maybe_crash()
        return x * 2 + 1


def crash_in_worker() -> torch.nn.Module:
    """Segfaults the process that runs it while the file named by TUNER_TEST_CRASH exists."""
    return _CrashOnRun()


class _MlpThenCrash(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = mlp()

    def forward(self, x):
        y = self.mlp(x)
        _maybe_crash()
        return y


def mlp_crash_in_worker() -> torch.nn.Module:
    """The mlp, then what :func:`crash_in_worker` does: its process segfaults while the file named by TUNER_TEST_CRASH exists."""
    return _MlpThenCrash()


def convnet() -> torch.nn.Module:
    """A small CNN: convolutions (template sites), batch norm + ReLU (pointwise kernels), pooling and a linear layer."""
    return torch.nn.Sequential(
        torch.nn.Conv2d(16, 64, 3, padding=1),
        torch.nn.BatchNorm2d(64),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, padding=1),
        torch.nn.BatchNorm2d(64),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(64, 256),
        torch.nn.Softmax(dim=-1),
    )


def _ima_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def poke(ptr):
        tl.store(ptr + (1 << 40), 1.0)

    return poke


@torch._dynamo.disable
def _maybe_ima(x):
    flag = os.environ.get("TUNER_TEST_CRASH")
    if flag and os.path.exists(flag) and x.is_cuda:
        _ima_kernel()[(1,)](x)


class _ImaOnRun(torch.nn.Module):
    def forward(self, x):
        _maybe_ima(x)
        return torch.relu(x * 2 + 1)


def ima_in_worker() -> torch.nn.Module:
    """Makes an illegal memory access on the GPU while the file named by TUNER_TEST_CRASH exists."""
    return _ImaOnRun()


def canary() -> torch.nn.Module:
    """Leaves the file named by TUNER_TEST_CANARY behind when called: whether a command ran code a database named."""
    open(os.environ["TUNER_TEST_CANARY"], "w").close()
    return mlp()


def slow_to_build() -> torch.nn.Module:
    """An mlp whose construction takes 90 s: a capture slower than a short time budget, as a cold first compile is."""
    import time

    time.sleep(90)
    return mlp()


class _Attention(torch.nn.Module):
    """One self-attention block (4 heads of 16) through ``scaled_dot_product_attention``, twice with the same shapes."""

    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)

    def _attend(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        mask = self._mask(b, n, x.device)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None)
        return self.out(y.transpose(1, 2).reshape(b, n, d))

    def _mask(self, b, n, device):
        """None: causal through ``is_causal``."""
        return None

    def forward(self, x):
        return self._attend(x + self._attend(x))


class _MaskedAttention(_Attention):
    """The same block with an explicit boolean mask (causal, broadcast over batch and heads), as Transformers passes."""

    def _mask(self, b, n, device):
        return torch.ones(n, n, dtype=torch.bool, device=device).tril()[None, None].expand(b, 1, n, n)


class _BroadcastMaskAttention(_Attention):
    """The same block with a boolean mask broadcast along its key dimension too (strides ``(0, n, 1, 0)``), as
    Transformers builds BERT's under Dynamo on torch before 2.14: on CUDA no fused kernel takes a mask whose last
    dimension is not contiguous, so the dispatcher runs math attention."""

    def _mask(self, b, n, device):
        return torch.ones(1, 1, n, 1, dtype=torch.bool, device=device).expand(b, 1, n, n)


def masked_attention() -> torch.nn.Module:
    """``attention`` with an explicit causal mask, input ``[batch, tokens, 64]``."""
    return _MaskedAttention()


def attention() -> torch.nn.Module:
    """A small causal self-attention model, input ``[batch, tokens, 64]``: two attention calls, one attention site."""
    return _Attention()


def repeated() -> torch.nn.Module:
    """Two identical layers (one template site met twice), then a third of another size."""
    return torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32)
    )


class _BiasedAttention(_Attention):
    """The same block with a learned bias per head (``[heads, tokens, tokens]``, three dimensions, as relative-position
    biases are): a mask the CPU's flash kernel takes only as four dimensions, so the dispatcher runs math attention."""

    def __init__(self, dim: int = 64, heads: int = 4, tokens: int = 32):
        super().__init__(dim, heads)
        self.bias = torch.nn.Parameter(torch.randn(heads, tokens, tokens) * 0.5)

    def _mask(self, b, n, device):
        return self.bias[:, :n, :n]


def biased_attention() -> torch.nn.Module:
    """``attention`` with a per-head bias the dispatcher runs as math attention, input ``[batch, tokens <= 32, 64]``."""
    return _BiasedAttention()
