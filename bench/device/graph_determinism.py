"""Is the graph a workload's answers are keyed by the same in every process? (hf:gpt2's tuned compile on
the H200 matched none of its sweep's answers, while the CPU with a small config matched all.)

Compiles the workload RUNS times, each in its own process with fresh Inductor caches, half through the sweep's path
(a capture compile, ``Session.compile`` with a recorder) and half as a user's ``backend="tuned"`` compile with an
empty database; saves each graph's key and code and what Inductor's pad_mm pass decided and timed; then says whether
the keys agree and shows a diff of the first pair that does not.

    python bench/device/graph_determinism.py --model hf:gpt2 --device cuda --dtype bf16 --batch 8 --seq-len 512 --out $OUT
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

WORKLOAD = ("model", "device", "dtype", "batch", "seq_len", "image_size")


def one_run(args: argparse.Namespace, path: str, out: Path) -> None:
    """In this process: compile once, write {graphs: [{key, code}], pad_mm: {...}} to ``out``."""
    import torch
    from torch._dynamo.utils import counters

    from tuner.backend.hooks import graph as graph_hook
    from tuner.backend.process import configure_measuring
    from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

    spec = WorkloadSpec(**{k: getattr(args, k) for k in WORKLOAD if getattr(args, k) is not None})
    seen: list[dict[str, str]] = []
    original = graph_hook.graph_payload

    def payload(gm, example_inputs, is_backward):  # type: ignore[no-untyped-def]
        p = original(gm, example_inputs, is_backward)
        from tuner.keys import digest

        seen.append({"key": digest(p)[:16], "code": p["code"]})
        return p

    graph_hook.graph_payload = payload
    configure_measuring(None, spec.uses_freezing, sweep=path == "sweep")
    if path == "sweep":
        from tuner.backend.instrument.recorder import Recorder
        from tuner.measure.session import Session

        Session(spec).compile({}, recorder=Recorder())
    else:
        model, x = build_model(spec), make_inputs(spec, sets=1)[0]
        with torch.no_grad():
            torch.compile(model, backend="tuned", options={"db": f"sqlite:///{out.parent / 'empty.db'}"})(x)
    from torch._inductor.fx_passes import pad_mm

    decisions = {k: v for k, v in (pad_mm.get_pad_cache().get_local_cache() or {}).items() if isinstance(v, bool)}
    out.write_text(
        json.dumps(
            {
                "path": path,
                "graphs": seen,
                "pad_mm_bench": counters["inductor"]["pad_mm_bench"],
                "pad_decisions": decisions,
            },
            indent=1,
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for k in WORKLOAD:
        ap.add_argument(f"--{k.replace('_', '-')}", type=int if k in ("batch", "seq_len", "image_size") else str)
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--out", required=True)
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # PATH FILE: a child run
    a = ap.parse_args()
    if a.one:
        one_run(a, a.one[0], Path(a.one[1]))
        return
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    for i in range(a.runs):
        path = "sweep" if i % 2 == 0 else "tuned"
        f = out / f"determinism-{i}-{path}.json"
        with tempfile.TemporaryDirectory() as d:
            env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": f"{d}/inductor", "TUNER_CACHE_DIR": f"{d}/tuner"}
            r = subprocess.run(
                [sys.executable, __file__, *sys.argv[1:], "--one", path, str(f)],
                env=env,
                capture_output=True,
                text=True,
            )
        if r.returncode:
            print(f"run {i} ({path}) failed:\n{r.stderr[-3000:]}")
            continue
        runs.append(json.loads(f.read_text()))
        print(
            f"run {i} ({path}): keys {[g['key'] for g in runs[-1]['graphs']]}, pad_mm timed {runs[-1]['pad_mm_bench']} matmuls, "
            f"decided {runs[-1]['pad_decisions']}"
        )
    keys = {tuple(g["key"] for g in r["graphs"]) for r in runs}
    print("the same graph keys in every run" if len(keys) == 1 else f"{len(keys)} different sets of graph keys")
    for r1, r2 in zip(runs, runs[1:]):
        for g1, g2 in zip(r1["graphs"], r2["graphs"]):
            if g1["key"] != g2["key"]:
                diff = difflib.unified_diff(
                    g1["code"].splitlines(), g2["code"].splitlines(), r1["path"], r2["path"], n=1, lineterm=""
                )
                print("\n".join(list(diff)[:60]))
                return


if __name__ == "__main__":
    main()
