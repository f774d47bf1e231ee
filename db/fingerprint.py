"""Device and environment fingerprints: what a measurement was taken on."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass, field
from typing import Any

from tuner.keys import digest


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # "cpu" | "cuda"
    name: str
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        return digest({"kind": self.kind, "name": self.name, "info": self.info})


@dataclass(frozen=True)
class EnvironmentInfo:
    torch: str
    triton: str | None
    cuda: str | None
    python: str
    tuner: str

    @property
    def fingerprint(self) -> str:
        return digest(self.__dict__)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def current_device(kind: str, index: int = 0) -> DeviceInfo:
    import torch

    if kind == "cuda":
        p = torch.cuda.get_device_properties(index)
        return DeviceInfo(
            "cuda",
            p.name,
            {"capability": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count},
        )
    return DeviceInfo(
        "cpu",
        _cpu_model(),
        {
            "cores": os.cpu_count() or 1,
            "threads": torch.get_num_threads(),
            "isa": torch.backends.cpu.get_cpu_capability(),
        },
    )


def _triton_version() -> str | None:
    from importlib import metadata

    for dist in ("triton", "pytorch-triton"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def current_environment() -> EnvironmentInfo:
    import torch

    from tuner.version import __version__

    return EnvironmentInfo(
        torch=str(torch.__version__),  # a plain str: unpickled elsewhere, a TorchVersion would import torch there
        triton=_triton_version(),
        cuda=torch.version.cuda,
        python=platform.python_version(),
        tuner=__version__,
    )
