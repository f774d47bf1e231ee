"""Is the thread count a lever for CPU inference at batch 1? One compile (frozen, Inductor's
defaults), then 40 interleaved rounds at torch.set_num_threads(2) and (1). ``python bench/cpu/threads.py resnet18 64``
(results: bench/results/cpu-xeon-2c/cpu-levers-2026-12-01.json)."""

import time, torch, torchvision, statistics, sys
import torch._inductor.config as c

c.freezing = True
name, size = sys.argv[1], int(sys.argv[2])
m = getattr(torchvision.models, name)().eval()
x = torch.randn(1, 3, size, size)
out = {}
with torch.no_grad():
    f = torch.compile(m)
    f(x)
    times = {"torch 2 threads": [], "torch 1 thread": []}
    for r in range(40):
        for k in times:
            torch.set_num_threads(2 if "2" in k else 1)
            f(x)
            t = time.perf_counter()
            f(x)
            f(x)
            times[k].append((time.perf_counter() - t) * 500)
for k, v in times.items():
    q = statistics.quantiles(v, n=4)
    print(name, size, k, "median %.2f IQR %.2f" % (statistics.median(v), q[2] - q[0]))
