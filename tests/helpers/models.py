"""Small models for tests, loadable as ``tests.helpers.models:NAME``."""

import ctypes
import os

import torch


def mlp() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32), torch.nn.GELU())


class _Crash(torch.nn.Module):
    def forward(self, x):
        return x + 1


def crash_in_worker() -> torch.nn.Module:
    """Kills the process that builds it with SIGSEGV once TUNER_TEST_CRASH names a file that exists."""
    flag = os.environ.get("TUNER_TEST_CRASH")
    if flag and os.path.exists(flag):
        ctypes.string_at(0)
    return _Crash()


def broken() -> torch.nn.Module:
    raise RuntimeError("this factory is broken on purpose")
