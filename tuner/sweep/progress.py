"""What a sweep tells whoever watches it: the CLI draws a progress bar; ``tuner sweep --workers`` forwards each
worker's to the parent."""

from __future__ import annotations


class Progress:
    """What the driver tells whoever watches (the CLI draws a progress bar)."""

    def start(self, total: int, names: list[str]) -> None: ...  # a phase begins: its planned trials and task names
    def task(self, name: str) -> None: ...
    def trial(self, status: str) -> None: ...
    def note(self, text: str) -> None: ...
