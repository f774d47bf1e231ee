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
