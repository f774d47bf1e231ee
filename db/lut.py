"""Export the mm-family template winners (CUDA) as Inductor's own lookup table (``config.lookup_table.table``).

For users who want tuned GEMM configs without tuner at compile time:

    import json, torch._inductor.config as c
    from torch._inductor.lookup_table import LookupTableChoices
    from torch._inductor.virtualized import V
    c.lookup_table.table = json.load(open("lut.json"))
    c.max_autotune_gemm = True
    V.set_choices_handler(LookupTableChoices())

The key is Inductor's device-agnostic one, ``str(((dtype, [sizes], [strides]), ...))[+alpha=1&beta=1]+op``
(``LookupTableChoices.make_lookup_key``), the value a one-entry list ``[{"template_id": uid, **params}]`` with
the template's complete parameters (2.11 takes the entry as complete; 2.14 merges it over its defaults).
Only CUDA winners are written: Inductor builds no lookup key for other devices.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import select

from tuner.core import InputRow, Kind
from tuner.db.models import Device, Task, Winner
from tuner.db.repository import Database
from tuner.search_spaces import splitk
from tuner.search_spaces.template import parse_ktc_id

MM_OPS = ("mm", "addmm", "bmm", "baddbmm")
_DEFAULT_SCALARS = {"addmm": {"alpha": 1, "beta": 1}, "baddbmm": {"alpha": 1, "beta": 1}}


def _input_key(rows: list[list[Any]]) -> str:
    """``key_of`` rows are (device, dtype, *sizes, *strides, offset); Inductor's key wants (dtype, sizes, strides)."""
    parts = []
    for row in map(InputRow.parse, rows):
        if not re.fullmatch(r"torch\.[a-z0-9_]+", row.dtype):
            raise ValueError(f"unexpected dtype {row.dtype!r}")
        parts.append(f"({row.dtype}, {list(row.sizes)}, {list(row.strides)})")
    return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"


def lookup_key(op: str, inputs: list[list[Any]], scalars: dict[str, Any] | None) -> str:
    key = _input_key(inputs)
    scalars = scalars if scalars is not None else _DEFAULT_SCALARS.get(op, {})
    for k, v in scalars.items():
        if not re.fullmatch(r"[a-z_]+", str(k)) or not isinstance(v, (int, float)) or isinstance(v, bool):
            raise ValueError(f"unexpected scalar {k}={v!r}")
    if scalars:
        key += "+" + "&".join(f"{k}={v}" for k, v in sorted(scalars.items()))
    return f"{key}+{op}"


def lut_entry(choice: str) -> dict[str, Any] | None:
    """``triton::mm:{"BLOCK_M": …}`` -> ``{"template_id": "triton::mm", "BLOCK_M": …}``; None for ids of other kinds."""
    parsed = parse_ktc_id(choice)
    if parsed is None:
        return None
    uid, params = parsed
    return {"template_id": uid, **params}


def export_lut(db: Database, device: str | None = None) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """(table, notes). With several CUDA device models in the database, ``device`` picks one (name or fingerprint)."""
    with db.session() as s:
        rows = s.execute(
            select(Task.signature, Winner.config, Device.name, Device.fingerprint)
            .join(Winner, Winner.task_id == Task.id)
            .join(Device, Device.id == Winner.device_id)
            .where(Task.kind == str(Kind.SITE), Device.kind == "cuda")
        ).all()
    rows = [
        r
        for r in rows
        if (device is None or device in r.fingerprint or device.lower() in r.name.lower())
        and db.intact(r.signature, r.config)
    ]
    models = sorted({r.name for r in rows})
    notes: list[str] = []
    if len(models) > 1:
        raise ValueError(f"winners of several CUDA device models ({', '.join(models)}): pick one with --device")
    table: dict[str, list[dict[str, Any]]] = {}
    assumed = own = 0
    for r in rows:
        sig = r.signature or {}
        op = sig.get("op")
        if op not in MM_OPS:
            continue
        choice = str(r.config.get("choice", ""))
        if splitk.is_id(choice):
            own += 1
            continue
        entry = lut_entry(choice)
        if entry is None:
            continue
        try:
            key = lookup_key(op, sig["inputs"], sig.get("scalars"))
        except (ValueError, TypeError, KeyError) as e:
            notes.append(f"skipped a {op} site with a malformed signature: {e}")
            continue
        if sig.get("scalars") is None and op in _DEFAULT_SCALARS:
            assumed += 1
        table[key] = [entry]
    if own:
        notes.append(
            f"{own} site(s) won by tuner's own split-K kernel, which Inductor's lookup table cannot name, are left out "
            "(Inductor picks there as it would without the table)"
        )
    if assumed:
        notes.append(
            f"{assumed} site(s) swept before tuner recorded alpha/beta: written with Inductor's defaults alpha=1, beta=1"
        )
    return table, notes
