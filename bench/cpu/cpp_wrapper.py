"""Is Inductor's C++ wrapper (``cpp_wrapper=True``) a lever for CPU inference at batch 1 (issue 16, item 3)? One
process: the model compiled frozen with Inductor's defaults and with the C++ wrapper, then 30 interleaved calls of
each; median and IQR. ``python bench/cpu/cpp_wrapper.py resnet18`` (results: bench/results/cpu-xeon-2c/cpu-levers.json).
"""
import time, torch, torchvision, statistics, sys
import torch._inductor.config as c
c.freezing = True
torch.manual_seed(0)
name = sys.argv[1]
m = getattr(torchvision.models, name)().eval()
x = torch.randn(1, 3, 224, 224)
res = {}
fns = {}
with torch.no_grad():
    for label, patch in [("default", {}), ("cpp_wrapper", {"cpp_wrapper": True})]:
        torch._dynamo.reset()
        with c.patch(patch):
            f = torch.compile(m, options=None)
            t = time.perf_counter(); f(x); ct = time.perf_counter() - t
        fns[label] = (f, ct)
    times = {k: [] for k in fns}
    for r in range(30):
        for k, (f, _) in fns.items():
            t = time.perf_counter(); f(x); times[k].append((time.perf_counter() - t) * 1e3)
for k, v in times.items():
    q = statistics.quantiles(v, n=4)
    print(name, k, "median %.2f ms IQR %.2f compile %.1f s" % (statistics.median(v), q[2] - q[0], fns[k][1]))
