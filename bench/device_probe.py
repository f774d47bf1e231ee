"""Device probe (one call): what the GPU side of Inductor looks like on this torch, for the issue-3 adapters.

Records the template sites and Triton kernels of resnet50 bf16 b32 channels_last inference through tuner's
record-mode backend, and checks the hooks INDUCTOR_HOOKS.md names. Writes $OUT/probe.json.
"""

import json
import os
import sys
import time

import torch


def main() -> None:
    out_dir = os.environ.get("OUT", ".")
    info: dict = {"torch": torch.__version__, "cuda": torch.cuda.is_available()}
    import triton

    info["triton"] = triton.__version__
    info["cache_key_tag"] = hasattr(torch.compiler.config, "cache_key_tag")
    from torch._inductor import config as ic
    from torch._inductor.codecache import PyCodeCache

    info["autotune_lookup_table"] = hasattr(ic, "autotune_lookup_table")
    try:
        from torch._inductor.runtime.triton_heuristics import generate_lookup_hash_from_source_code

        info["lookup_hash_fn"] = generate_lookup_hash_from_source_code.__module__
    except ImportError as e:
        info["lookup_hash_fn"] = f"missing: {e}"
    if not torch.cuda.is_available():
        print(json.dumps(info, indent=2))
        return
    info["gpu"] = torch.cuda.get_device_name()
    from tuner.backend.compiler import compile_with_context
    from tuner.backend.context import CompileContext, Recorder
    from tuner.backend.forcing import Forcing

    model_name = sys.argv[1] if len(sys.argv) > 1 else "resnet50"
    import torchvision

    ic.freezing = True
    m = torchvision.models.get_model(model_name).cuda().to(torch.bfloat16).eval().to(memory_format=torch.channels_last)
    x = torch.randn(32, 3, 224, 224, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    rec = Recorder()
    mods_before = list(getattr(PyCodeCache, "modules", []) or [])

    def backend(gm, ex, **_):
        return compile_with_context(gm, ex, CompileContext(Forcing(), "cuda", rec), {"autotune_local_cache": False, "fx_graph_cache": False})

    fn = torch.compile(m, backend=backend)
    t0 = time.time()
    with torch.no_grad():
        y = fn(x)
        torch.cuda.synchronize()
    info["compile_s"] = time.time() - t0
    with torch.no_grad():
        ref = m(x)
    info["rel_err"] = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
    info["sites"] = [{"op": s.op, "choices": len(s.choices), "ids": s.choices[:6], "default": s.default, "inputs": s.inputs} for s in rec.sites.values()]
    info["graphs"] = [{"kind": g.kind, "lines": g.lines} for g in rec.graphs.values()]
    mods = getattr(PyCodeCache, "modules", [])
    info["pycodecache_type"] = type(mods).__name__
    new_mods = [mm for mm in (mods.values() if isinstance(mods, dict) else mods) if mm not in mods_before]
    kernels = []
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    for mod in new_mods:
        for name, obj in vars(mod).items():
            if isinstance(obj, CachingAutotuner):
                cfgs = obj.configs
                kernels.append({
                    "name": name,
                    "heuristic": str(getattr(obj, "heuristic_type", "")),
                    "size_hints": str(obj.size_hints),
                    "configs": None if cfgs is None else len(cfgs),
                    "launchers": len(obj.launchers or []),
                    "chosen": [str(l.config) for l in (obj.launchers or [])][:1],
                    "src_len": len(obj.fn.src) if getattr(obj, "fn", None) is not None and getattr(obj.fn, "src", None) else None,
                    "has_run": hasattr(obj, "run"),
                })
    info["kernels"] = kernels
    info["kernel_count"] = len(kernels)
    with open(os.path.join(out_dir, "probe.json"), "w") as f:
        json.dump(info, f, indent=2, default=str)
    print(json.dumps({k: v for k, v in info.items() if k not in ("kernels", "sites")}, indent=2, default=str))
    print("sites:", [(s["op"], s["choices"]) for s in info["sites"]][:20])
    print("kernels by heuristic:", {h: sum(1 for k in kernels if k["heuristic"] == h) for h in {k["heuristic"] for k in kernels}})


if __name__ == "__main__":
    main()
