"""Where a sweep's capture spends its first seconds, part by part, in one fresh process: the imports a measurement
worker makes, CUDA's start, the model built on the host then moved (as ``build_model`` does) and built on the device
instead, Inductor's default compile with Dynamo's own breakdown, a second compile of a copy under CUDA graphs (what
the CUDA-graph trial costs in a warm process), and that trial done by hand: the default compile captured as one
``torch.cuda.CUDAGraph`` and timed against the compile launched normally, with its output checked.

    python bench/device/capture_parts.py --model hf:gpt2 --mode decode --dtype bf16 --batch 8 --seq-len 512 --out $OUT/parts.json
"""

from __future__ import annotations

import argparse
import copy
import json
import time

import workload_args

T0 = time.perf_counter()
PARTS: dict[str, float] = {}


def done(name: str, since: list[float]) -> None:
    now = time.perf_counter()
    PARTS[name] = round(now - since[0], 3)
    since[0] = now
    print(f"{name}: {PARTS[name]:.2f} s", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    workload_args.add(p)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    since = [T0]
    import torch

    done("import torch", since)
    torch.zeros(1, device="cuda")
    done("CUDA start", since)
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    done("import Dynamo and Inductor", since)
    from tuner.backend.process import configure_measuring
    from tuner.workloads.spec import build_model, make_inputs

    spec = workload_args.spec(a)
    configure_measuring(None, spec.uses_freezing, sweep=True)
    done("tuner imports, measuring setup", since)
    from tuner.workloads import model_zoo

    if spec.mode == "decode":
        model_zoo.hf_config(spec.model.removeprefix("hf:"), spec.model)
        done("model config (Transformers)", since)
    model = build_model(spec)
    done("model build (host, then moved)", since)
    try:
        with torch.device("cuda"):
            if spec.mode == "decode":
                from tuner.workloads.decoder import from_config

                from_config(
                    model_zoo.hf_config(spec.model.removeprefix("hf:"), spec.model), spec.batch, spec.seq_len, spec.seed
                )
            else:
                model_zoo.load(spec.model)
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - a model whose build needs the host: said, not fatal
        print(f"built on the device: {type(e).__name__}: {e}", flush=True)
    done("model build on the device (no move, no zero scan)", since)
    xs = make_inputs(spec, 3)
    from tuner.workloads.steps import run_step

    def step(fn, i):
        return run_step(spec.mode, fn, xs[i % 3], grads=False, amp=spec.amp)

    with torch.no_grad():
        ref = step(model, 0)
        torch.cuda.synchronize()
        done("eager reference", since)
        from torch._dynamo.utils import compile_times

        fn = torch.compile(copy.deepcopy(model))
        step(fn, 0)
        torch.cuda.synchronize()
        done("default compile", since)
        breakdown = compile_times(repr="csv", aggregate=True)
        print(breakdown, flush=True)
        g = torch.compile(copy.deepcopy(model), options={"triton.cudagraphs": True})
        for i in range(3):
            step(g, i)
        torch.cuda.synchronize()
        done("second compile, CUDA graphs (3 calls)", since)
        static = xs[0].clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                run_step(spec.mode, fn, static, grads=False, amp=spec.amp)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = run_step(spec.mode, fn, static, grads=False, amp=spec.amp)
        graph.replay()
        torch.cuda.synchronize()
        done("by-hand graph capture", since)
        err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        from tuner.backend.instrument.timing import interleaved

        def by_hand(i):
            static.copy_(xs[i % 3])
            graph.replay()

        times = interleaved(
            {"default": lambda i: step(fn, i), "trees": lambda i: step(g, i), "by-hand": by_hand},
            rounds=15,
            min_sample_ms=25.0,
            sync=torch.cuda.synchronize,
        )
        done("timing", since)
    row = {
        "model": a.model,
        "mode": a.mode,
        "batch": a.batch,
        "seq_len": a.seq_len,
        "parts_s": PARTS,
        "dynamo_compile_times": breakdown,
        "by_hand_rel_error": err,
        "torch": str(torch.__version__),
        "device": torch.cuda.get_device_name(),
        "date": time.strftime("%Y-%m-%d"),
        **{k: {"median_ms": t.median_ms, "spread_ms": t.spread_ms} for k, t in times.items()},
    }
    print(json.dumps({k: v for k, v in row.items() if k != "dynamo_compile_times"}, indent=1))
    with open(a.out, "w") as f:
        json.dump(row, f, indent=1)


if __name__ == "__main__":
    main()
