"""What every tuning store answers, and the ordered union of several (local first, then shared), after TVM's
``OrderedUnionDatabase``: a union is just another store, so the compile-time read path asks one object."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from tuner.core import Winners
from tuner.errors import StorageError


class Storage(Protocol):
    """The read side of a tuning store."""

    def winners_for_device(self, device_fingerprint: str) -> Winners:
        """Every stored winner on this device model: what a compile needs."""

    def count(self) -> dict[str, int]:
        """How many tasks, trials and winners the store holds."""

    def close(self) -> None: ...


def first_answers(answers: Iterable[Winners]) -> Winners:
    """The winners of several stores' answers, in order: for each task key, the first store's that has one."""
    merged: Winners = {}
    for each in answers:
        for key, answer in each.items():
            merged.setdefault(key, answer)
    return merged


class OrderedUnion:
    """Several stores, asked in order: for each task key the first store that has a winner answers it.
    A store that fails while answering is reported through ``on_error`` and skipped; the others still answer."""

    def __init__(self, stores: Sequence[Storage], on_error: Callable[[StorageError], None] | None = None):
        self.stores = list(stores)
        self.on_error = on_error

    def _each(self, ask: Callable[[Storage], Any]) -> list[Any]:
        out = []
        for s in self.stores:
            try:
                out.append(ask(s))
            except StorageError as e:
                if self.on_error is None:
                    raise
                self.on_error(e)
        return out

    def winners_for_device(self, device_fingerprint: str) -> Winners:
        return first_answers(self._each(lambda s: s.winners_for_device(device_fingerprint)))

    def count(self) -> dict[str, int]:
        """Summed over the stores (a task held by two stores counts twice)."""
        total: dict[str, int] = {}
        for c in self._each(lambda s: s.count()):
            for k, v in c.items():
                total[k] = total.get(k, 0) + v
        return total

    def close(self) -> None:
        for s in self.stores:
            s.close()


__all__ = ["OrderedUnion", "Storage", "first_answers"]
