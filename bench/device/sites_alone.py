"""What the device scripts that time sites alone (no model compiled) share: their command line (repeatable site
specs, ``--out`` under ``$OUT``), the check that a GPU is there, and the results file with provenance."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any


def parse_args(doc: str, flag: str, help_: str, out_name: str) -> argparse.Namespace:
    import torch

    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument(flag, action="append", help=help_)
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), out_name))
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit(f"error: {sys.argv[0]} needs a CUDA GPU")
    return args


def write(path: str, rows: list[dict[str, Any]]) -> None:
    """The rows as they stand, with where and how they were measured."""
    from tuner.commands.bench import provenance

    with open(path, "w") as f:
        json.dump({**provenance("cuda"), "timing": "CUDA graph of calls over rotated copies", "results": rows}, f, indent=2)
