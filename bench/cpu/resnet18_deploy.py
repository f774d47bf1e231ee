"""Issue-2 acceptance 2: after `tuner sweep --model resnet18 --device cpu --batch 1 --image-size 64 --budget quick
--db sqlite:///x.db`, a fresh process compiles resnet18 with backend="tuned" and reports hits, misses and benchmarks.

Usage: python bench/cpu/resnet18_deploy.py DB_URL [OUT.json]
"""

import datetime as dt
import json
import sys
import time

import torch
import torch._inductor.config as inductor_config
import torchvision

import tuner.backend


def main() -> None:
    url = sys.argv[1]
    inductor_config.freezing = True
    torch.manual_seed(0)
    model = torchvision.models.resnet18().eval()
    x = torch.randn(1, 3, 64, 64)
    t0 = time.perf_counter()
    with torch.no_grad():
        y = torch.compile(model, backend="tuned", options={"db": url})(x)
        compile_s = time.perf_counter() - t0
        ref = model(x)
    rel = ((y - ref).norm() / ref.norm()).item()
    result = {
        "model": "resnet18", "device_kind": "cpu", "torch": torch.__version__, "threads": torch.get_num_threads(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "command": " ".join(sys.argv),
        "stats": tuner.backend.stats(), "compile_s": round(compile_s, 2), "rel_error_vs_eager": rel,
    }
    print(json.dumps(result, indent=2))
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            json.dump(result, f, indent=2)
    assert result["stats"]["benchmarks"] == 0 and result["stats"]["hits"] > 0 and rel < 1e-4


if __name__ == "__main__":
    main()
