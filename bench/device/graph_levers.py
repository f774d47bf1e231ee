"""Does a workload's latency go to the device or to launching its kernels, and what does Inductor's C++ wrapper
(``cpp_wrapper``: kernels launched from C++, not from Python) change? One ``tuner bench``-style run: each database's
winners (and freezing + Inductor's defaults, from an empty database) compiled as usual and with ``cpp_wrapper`` on,
timed in the same interleaved rounds; every mode's output checked against eager.

    python bench/device/graph_levers.py --model resnet50 --dtype bf16 --batch 32 --channels-last \
        --db empty=sqlite:///empty.db --db full=sqlite:///full.db --out graph-levers.json
"""

from __future__ import annotations

import argparse
import contextlib
import json

import tuner.commands.bench as bench
from tuner.workloads.spec import WorkloadSpec

_compile = bench.compile_mode


def _compile_with_levers(spec, m, model, example):  # type: ignore[no-untyped-def]
    """``("cpp_wrapper", True)`` among a tuned mode's options: compiled under ``inductor_config.patch``."""
    import torch._inductor.config as inductor_config

    opts = dict(m.options)
    cpp = bool(opts.pop("cpp_wrapper", False))
    m = bench.Mode(m.backend, m.inductor_mode, m.freezing, tuple(opts.items()))
    with inductor_config.patch(cpp_wrapper=True) if cpp else contextlib.nullcontext():
        return _compile(spec, m, model, example)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--db", action="append", required=True, metavar="NAME=URL")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    spec = WorkloadSpec(a.model, "cuda", "infer", a.batch, a.dtype, channels_last=a.channels_last)
    dbs = dict(x.split("=", 1) for x in a.db)
    base = bench.modes_for
    levers = {}
    for name, url in dbs.items():
        tuned = bench.Mode("tuned", None, True, (("db", url),))
        levers[name] = tuned
        levers[f"{name}+cpp"] = bench.Mode("tuned", None, True, (("db", url), ("cpp_wrapper", True)))
    bench.modes_for = lambda *args, **kw: {**base(*args, **kw), **levers}
    bench.compile_mode = _compile_with_levers
    result = bench.run_bench(spec, list(levers), next(iter(dbs.values())), rounds=a.rounds, progress=print)
    for name, r in result["results"].items():
        print(f"{name:>16}: {r['median_ms']:.3f} ms (compile {r['compile_s']:.1f} s, rel. error {r['rel_error']})")
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
