"""The ``InductorChoices`` handler of a tuner compile, installed with ``V.set_choices_handler`` for the
compile's thread: fusion vetoes (``hooks/fusion.py``), template choices built from ids and the configs a
compile renders trimmed to those it may pick (``hooks/templates.py``). Everything else is Inductor's own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tuner.backend.context import active
from tuner.backend.hooks import fusion, templates
from tuner.backend.hooks.fusion import V, _Base
from tuner.backend.hooks.selector import site_payload
from tuner.core import Kind
from tuner.keys import task_key


class TunedChoices(_Base):  # type: ignore[misc, valid-type]
    @staticmethod
    def can_fuse(scheduler: Any, node1: Any, node2: Any, shared_data_score: int) -> bool:
        return fusion.allowed(
            _Base.can_fuse(scheduler, node1, node2, shared_data_score), node1, node2, shared_data_score
        )

    def _finalize_template_configs(
        self, template_choices: Any, kernel_inputs: Any, templates_: Any, op_name: str, *args: Any, **kwargs: Any
    ) -> Any:
        out = super()._finalize_template_configs(template_choices, kernel_inputs, templates_, op_name, *args, **kwargs)
        ctx = active()
        if ctx is None:
            return out
        try:
            payload = site_payload(op_name, list(kernel_inputs.nodes()))
        except Exception:  # noqa: BLE001 - unrealized inputs have no key (INDUCTOR_HOOKS); leave the site alone
            return out
        key = task_key(Kind.SITE, payload)
        wants = ctx.site_wants(key, payload)
        ids = [templates.ktc_id(k) for k in out]
        if ctx.builds_choices:
            missing = [c for c in wants if c not in ids]
            if missing:
                ctx.refused.clear()  # this site's refusals alone
                extra = templates.extra_ktcs(self, kernel_inputs, list(templates_), op_name, missing)
                out, ids = [*out, *extra], [*ids, *(templates.ktc_id(k) for k in extra)]
        ctx.site_listed(key, ids)
        return templates.trim(out, wants, ids)

    def get_conv_configs(self, *args: Any, **kwargs: Any) -> Any:
        ctx = active()
        if ctx is not None and ctx.trims_conv():
            return lambda *a, **k: iter(())  # forced conv configs are built from their ids at the site
        return super().get_conv_configs(*args, **kwargs)


@contextlib.contextmanager
def handler() -> Iterator[None]:
    """Inductor consults ``TunedChoices`` while this is active (this thread)."""
    fusion.check()
    with V.set_choices_handler(TunedChoices()):
        yield
