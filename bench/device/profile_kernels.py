"""Where the time goes, kernel by kernel, in several `tuner bench` modes of one workload (torch.profiler).

Used to find why winners that are each faster at their own site can make a whole model slower (vit_b_16 on
the H200): the device time of every kernel, summed over the profiled steps, per mode, side by side.

    python bench/device/profile_kernels.py --model vit_b_16 --device cuda --dtype bf16 --batch 32 \
        --db sqlite:///vit.db --modes default,tuned --out profile.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from typing import Any

from tuner.commands.bench import compile_mode, modes_for, provenance
from tuner.workloads.steps import run_step, synchronizer
from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs


def profile(fn: Any, spec: WorkloadSpec, inputs: list[Any], steps: int) -> dict[str, dict[str, float]]:
    """{kernel name: {"ms": device ms per step, "calls": launches per step}} over ``steps`` steps."""
    import torch
    from torch.profiler import ProfilerActivity

    sync = synchronizer(spec.device)
    for i in range(5):  # warm up
        run_step(spec.mode, fn, inputs[i % len(inputs)], amp=spec.amp)
    sync()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if spec.device == "cuda" else [])
    with torch.profiler.profile(activities=acts) as prof:
        for i in range(steps):
            run_step(spec.mode, fn, inputs[i % len(inputs)], amp=spec.amp)
        sync()
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"ms": 0.0, "calls": 0.0})
    for e in prof.events():
        if spec.device == "cuda" and e.device_type != torch.autograd.DeviceType.CUDA:
            continue
        out[e.name]["ms"] += (
            e.device_time_total / 1e3 / steps if spec.device == "cuda" else e.cpu_time_total / 1e3 / steps
        )
        out[e.name]["calls"] += 1 / steps
    return dict(out)


def wall_ms(fn: Any, spec: WorkloadSpec, inputs: list[Any], steps: int = 50, samples: int = 7) -> float:
    """The median per-step wall time of ``steps`` steps back to back (no profiler), over ``samples`` samples."""
    import statistics
    import time

    sync = synchronizer(spec.device)
    per_step = []
    for _ in range(samples):
        sync()
        t0 = time.perf_counter()
        for i in range(steps):
            run_step(spec.mode, fn, inputs[i % len(inputs)], amp=spec.amp)
        sync()
        per_step.append((time.perf_counter() - t0) * 1e3 / steps)
    return statistics.median(per_step)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--mode", default="infer")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--seq-len", type=int, default=128, help="tokens per sequence (hf: models)")
    ap.add_argument("--db", required=True)
    ap.add_argument(
        "--also-db",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="another database, profiled as mode tuned-NAME (its winners forced, as tuned)",
    )
    ap.add_argument("--modes", default="default,tuned")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out")
    a = ap.parse_args()
    spec = WorkloadSpec(a.model, a.device, a.mode, a.batch, a.dtype, channels_last=a.channels_last, seq_len=a.seq_len)
    from tuner.backend.process import configure_measuring

    configure_measuring(spec.threads, spec.uses_freezing, sweep=False)
    model, inputs = build_model(spec), make_inputs(spec)
    table = modes_for(spec, a.db, dict(x.split("=", 1) for x in a.also_db))
    per_mode, walls = {}, {}
    for name in a.modes.split(","):
        fn, _, _ = compile_mode(spec, table[name], model, inputs[0])
        per_mode[name] = profile(fn, spec, inputs, a.steps)
        walls[name] = wall_ms(fn, spec, inputs)
    names = list(per_mode)
    totals = {n: sum(k["ms"] for k in per_mode[n].values()) for n in names}
    print("device ms per step: " + ", ".join(f"{n} {totals[n]:.3f}" for n in names))
    print("wall ms per step:   " + ", ".join(f"{n} {walls[n]:.3f}" for n in names))
    every = sorted(
        {k for n in names for k in per_mode[n]}, key=lambda k: -max(per_mode[n].get(k, {"ms": 0})["ms"] for n in names)
    )
    print(" | ".join(f"{n:>16}" for n in names) + " | kernel")
    for k in every[: a.top]:
        cells = [per_mode[n].get(k) for n in names]
        print(
            " | ".join(f"{c['ms']:9.4f} ms x{c['calls']:<3.0f}" if c else f"{'-':>16}" for c in cells) + f" | {k[:110]}"
        )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(
                {
                    **provenance(spec.device),
                    "spec": spec.to_json(),
                    "totals_ms": totals,
                    "wall_ms": walls,
                    "kernels": per_mode,
                },
                f,
                indent=1,
            )


if __name__ == "__main__":
    main()
