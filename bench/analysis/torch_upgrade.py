"""The torch-upgrade table: per model and task kind, what a database swept on one torch answers on it and on
another (``bench/cpu/torch_upgrade.sh`` writes the ``tuner explain --json`` files this reads).

    python bench/analysis/torch_upgrade.py DIR SWEPT_TORCH OTHER_TORCH > DIR/table.md   (also DIR/summary.json)
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path


def per_kind(report: dict) -> dict[str, Counter]:
    out: dict[str, Counter] = defaultdict(Counter)
    for d in report["decisions"]:
        out[d["kind"]][d["outcome"]] += 1
    return out


def _cell(c: Counter) -> str:
    n = sum(c.values())
    return f"{c['hit']}/{n} hit" + (f", {c['transferred']} transferred" if c["transferred"] else "")


def main(folder: Path, swept: str, other: str) -> None:
    import datetime as dt
    import platform

    rows = []
    summary = {
        "swept_torch": swept,
        "other_torch": other,
        "device": platform.processor() or platform.machine(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "OTHER_PY=<venv with the other torch>/bin/python bash bench/cpu/torch_upgrade.sh",
        "models": {},
    }
    for same_path in sorted(folder.glob("*-swept-torch.json")):
        model = same_path.name.removesuffix("-swept-torch.json")
        same, moved = (json.loads(p.read_text()) for p in (same_path, folder / f"{model}-other-torch.json"))
        a, b = per_kind(same), per_kind(moved)
        reasons = sorted({d["reason"] for d in moved["decisions"] if d["outcome"] == "miss"})
        summary["models"][model] = {
            "workload": same["workload"],
            "swept_torch": {k: dict(v) for k, v in a.items()},
            "other_torch": {k: dict(v) for k, v in b.items()},
            "miss_reasons": reasons,
        }
        for kind in sorted(set(a) | set(b)):
            rows.append(f"| {model} | {kind} | {_cell(a[kind])} | {_cell(b[kind])} |")
    (folder / "summary-2026-12-01.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"| model | task kind | torch {swept} (swept) | torch {other} |\n| --- | --- | --- | --- |")
    print("\n".join(rows))
    for model, s in summary["models"].items():
        for r in s["miss_reasons"]:
            print(f"\n- {model} on torch {other}, a miss: {r}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
