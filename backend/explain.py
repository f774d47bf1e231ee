"""Why a compile under ``backend="tuned"`` found nothing: the stored workloads of this device type set against what
this graph is (its inputs' shapes and dtypes, freezing), said in one line with the fix.

Keys are exact, so a database swept with freezing does not match a compile without it, nor another batch size,
dtype or layout; the user hears which of these differs instead of silence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tuner.core import DTYPES, WorkloadName

MAX_SHOWN = 3


def stored_workloads(dbs: Sequence[Any], device_type: str) -> list[WorkloadName]:
    out = []
    for db in dbs:
        for name in db.workload_names():
            parsed = WorkloadName.parse(name)
            if parsed is not None and parsed.device == device_type and parsed not in out:
                out.append(parsed)
    return out


def reasons(
    stored: list[WorkloadName], shapes: list[tuple[int, ...]], dtypes: set[str], frozen: bool, grad: bool
) -> list[str]:
    """What differs between every stored workload and this graph, with the fix for each."""
    out = []
    infer = [w for w in stored if w.mode == "infer"]
    if not grad and infer and not frozen and all(w.frozen for w in infer):
        out.append(
            "the database's inference workloads were swept with freezing and this compile runs without it: set "
            "torch._inductor.config.freezing = True before torch.compile (Dynamo reads it when it traces)"
        )
    if not any(w.shape in shapes for w in stored):
        out.append(
            f"no stored workload has this graph's input shapes ({_shown(shapes)}); stored: "
            f"{_shown([w.shape for w in stored])}: sweep this batch and input size"
        )
    stored_dtypes = {f"torch.{DTYPES.get(w.dtype, w.dtype)}" for w in stored}
    if dtypes and not dtypes & stored_dtypes:
        out.append(
            f"this graph computes in {', '.join(sorted(dtypes))}, the stored workloads in {', '.join(sorted(stored_dtypes))}"
        )
    return out


def _shown(shapes: Sequence[tuple[int, ...]]) -> str:
    unique = list(dict.fromkeys("x".join(map(str, s)) for s in shapes))
    return ", ".join(unique[:MAX_SHOWN]) + (f", … ({len(unique) - MAX_SHOWN} more)" if len(unique) > MAX_SHOWN else "")


def untuned(dbs: Sequence[Any], missed: Sequence[str], here: Any = None) -> list[str]:
    """The reason when the database knows the tasks this compile missed but holds no winner for them on this device
    (``here``, a ``DeviceInfo``): winners measured on other device models only (kept per model: a config that wins on
    one card is not forced on another), or none yet, as a sweep that captured them ran out of time before tuning them
    (a short ``--time-budget``): not a key that differs."""
    keys = sorted(set(missed))
    known = set().union(*(db.task_names(keys) for db in dbs)) if keys else set()
    if not known:
        return []
    elsewhere: dict[str, int] = {}
    for db in dbs:
        for fp, (name, n) in db.winner_devices(keys).items():
            if here is None or fp != here.fingerprint:
                elsewhere[name] = max(elsewhere.get(name, 0), n)
    head = f"{len(known)} of its {len(keys)} lookups are tasks the database holds with no winner"
    if elsewhere:
        on = ", ".join(f"{n} on the {name}" for name, n in sorted(elsewhere.items()))
        this = f" on this {here.name}" if here is not None else " on this device"
        return [
            f"{head}{this}; it has winners for them measured on other device models ({on}), and winners are kept "
            "per device model: sweep on this one"
        ]
    return [
        f"{head} yet: the sweep captured them and stopped before tuning them; sweep again with a longer --time-budget"
    ]


def why_no_hit(
    dbs: Sequence[Any],
    device_type: str,
    example_inputs: Sequence[Any],
    frozen: bool,
    grad: bool,
    missed: Sequence[str] = (),
) -> str | None:
    """One line on why nothing matched, or None when the databases hold no workload for this device type.
    ``missed``: the task keys this compile looked up and missed, when known."""
    import torch

    stored = stored_workloads(dbs, device_type)
    if not stored:
        return None
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor)]
    shapes = [tuple(int(d) for d in x.shape) for x in tensors if all(isinstance(d, int) for d in x.shape)]
    dtypes = {str(x.dtype) for x in tensors if x.is_floating_point()}
    found = untuned(dbs, missed, _here(device_type)) or reasons(stored, shapes, dtypes, frozen, grad)
    head = f"backend 'tuned': no stored answer matched this graph ({len(stored)} workload(s) stored for {device_type})"
    return head + (
        ": " + "; ".join(found)
        if found
        else "; its graph code differs from every stored one (another model or torch version?)"
    )


def _here(device_type: str) -> Any:
    """This device's ``DeviceInfo`` (its fingerprint keys the winners a compile reads), or None where torch cannot
    say."""
    from tuner.db import current_device

    try:
        return current_device(device_type)
    except Exception:  # noqa: BLE001 - only a finer message depends on it
        return None
