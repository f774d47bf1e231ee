"""Would an Inductor option pay on top of a database's stored winners? One ``tuner bench`` run of Inductor's modes,
tuned, and tuned with each ``--option KEY=VALUE[;KEY=VALUE...]`` (Inductor configs, each value as JSON:
``combo_kernels=true``) as mode ``tuned+KEY=VALUE...``, compiled and timed in one process. Run it on a database the sweep wrote (``tuner db import``
an export first): the option's worth where the sweep had no time to try it.

    python3 bench/device/tuned_options.py --model hf:gpt2 --mode decode --batch 8 --seq-len 512 \\
        --db sqlite:///stored.db --option combo_kernels=true --modes max-autotune,tuned --out $OUT/o.json
"""

from __future__ import annotations

import argparse
import json

import workload_args  # bench/device/workload_args.py, beside this script


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    workload_args.add(p)
    p.add_argument("--db", required=True)
    p.add_argument("--option", action="append", default=[], help="KEY=VALUE[;KEY=VALUE...], values as JSON (repeatable)")
    p.add_argument("--modes", default="max-autotune,tuned")
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    from tuner.commands import bench

    options = {o: tuple((kv.partition("=")[0], json.loads(kv.partition("=")[2])) for kv in o.split(";")) for o in a.option}
    plain = bench.modes_for

    def with_options(spec, db_url, extra_dbs=None):  # type: ignore[no-untyped-def]
        table = plain(spec, db_url, extra_dbs)
        tuned = table["tuned"]
        return {**table, **{f"tuned+{o}": bench.Mode(tuned.backend, None, tuned.freezing, (*tuned.options, *kvs))
                            for o, kvs in options.items()}}

    bench.modes_for = with_options
    names = [*a.modes.split(","), *(f"tuned+{o}" for o in options)]
    result = bench.run_bench(workload_args.spec(a), names, a.db, rounds=a.rounds, progress=print)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    for name, r in result["results"].items():
        print(f"{name:40s} {r.get('median_ms')} ms  compile {r.get('compile_s')} s  benchmarks {r.get('benchmarks')}")
    # A tuned mode that matched no stored answer ran Inductor's defaults (an export swept on another device model,
    # whose winners are kept for it): its options were not timed on top of the winners, and the run says so.
    unmatched = [n for n, r in result["results"].items() if r.get("backend") == "tuned" and not (r.get("lookups") or {}).get("hits")]
    if unmatched:
        raise SystemExit(f"no stored answer matched in {', '.join(unmatched)}: these modes ran Inductor's defaults, not "
                         "the stored winners (an export swept on another device model?); their figures say nothing of the options")


if __name__ == "__main__":
    main()
