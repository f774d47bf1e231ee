"""What rendering every template config Inductor lists costs a sweep's recording compile, against rendering only
those it may pick (``backend/hooks/templates.trim``), in one process: after a warm-up compile, recording compiles
alternate between the two (Inductor's and Triton's caches warm for both), each timed, its Triton template renders
counted and its recorded choices compared.

    python bench/device/render_trim.py --model hf:gpt2 --mode decode --dtype bf16 --batch 8 --seq-len 512 --out $OUT/trim.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import workload_args


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    workload_args.add(p)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    import torch
    from torch._inductor.select_algorithm import TritonTemplate

    from tuner.backend.hooks import templates
    from tuner.backend.instrument.recorder import Recorder
    from tuner.measure.session import Session

    session = Session(workload_args.spec(a))
    renders = [0]
    generate, trim = TritonTemplate.generate, templates.trim

    def counted(self, *args, **kwargs):
        renders[0] += 1
        return generate(self, *args, **kwargs)

    TritonTemplate.generate = counted
    arms = {"all listed": lambda ktcs, keep: ktcs, "trimmed": trim}
    rows: dict[str, list[dict]] = {k: [] for k in arms}
    for r in range(a.rounds + 1):
        for name, fn in arms.items():
            templates.trim, renders[0], rec = fn, 0, Recorder()
            t0 = time.perf_counter()
            session.compile({}, recorder=rec, check=False)
            row = {
                "compile_s": round(time.perf_counter() - t0, 3),
                "renders": renders[0],
                "choices": {s.key: len(s.choices) for s in rec.sites.values()},
            }
            print(
                name,
                "warm-up" if r == 0 else r,
                row["compile_s"],
                "s,",
                row["renders"],
                "renders,",
                sum(row["choices"].values()),
                "choices recorded",
                flush=True,
            )
            if r:
                rows[name].append(row)
    same = all(x["choices"] == rows["all listed"][0]["choices"] for k in rows for x in rows[k])
    out = {
        "model": a.model,
        "mode": a.mode,
        "batch": a.batch,
        "seq_len": a.seq_len,
        "dtype": a.dtype,
        "device": torch.cuda.get_device_name(),
        "torch": str(torch.__version__),
        "date": time.strftime("%Y-%m-%d"),
        "command": "python bench/device/render_trim.py "
        + " ".join(
            f"--{k.replace('_', '-')}" + ("" if v is True else f" {v}")
            for k, v in vars(a).items()
            if v not in (None, False)
        ),
        "same_choices_recorded": same,
        **{
            k: {
                "median_compile_s": statistics.median(x["compile_s"] for x in v),
                "renders": v[0]["renders"],
                "compile_s": [x["compile_s"] for x in v],
            }
            for k, v in rows.items()
        },
    }
    print(json.dumps(out, indent=1))
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
