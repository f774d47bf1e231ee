"""A compile renders only the template configs it may pick, on the GPU for real (``pytest -m gpu``): the recording
still records every config Inductor lists at a site, and a forced site still gets its choice."""

import functools
import pytest
import torch

from tests.helpers.compiling import measured, recorded
from tuner.backend import journal
from tuner.backend.hooks import templates
from tuner.core import Forcing, Kind

pytestmark = pytest.mark.gpu


_compiled = functools.partial(measured, device="cuda")


@pytest.fixture
def spied(monkeypatch):
    """(every config id Inductor listed at an mm site, how many Triton template configs were rendered)."""
    from torch._inductor.choices import InductorChoices
    from torch._inductor.select_algorithm import TritonTemplate

    listed, rendered = [], []
    finalize, generate = InductorChoices._finalize_template_configs, TritonTemplate.generate

    def listing(self, *a, **k):
        out = finalize(self, *a, **k)
        listed.extend(templates.ktc_id(x) for x in out)
        return out

    def rendering(self, *a, **k):
        rendered.append(self.uid)
        return generate(self, *a, **k)

    monkeypatch.setattr(InductorChoices, "_finalize_template_configs", listing)
    monkeypatch.setattr(TritonTemplate, "generate", rendering)
    return listed, rendered


def test_the_recording_lists_every_config_and_renders_few(spied):
    listed, rendered = spied
    m = torch.nn.Linear(512, 1024, bias=False).cuda().to(torch.bfloat16).eval()
    x = torch.randn(64, 512, device="cuda", dtype=torch.bfloat16)
    (site,) = recorded(m, x, "cuda").sites.values()
    triton = [c for c in listed if c.startswith("triton::")]
    assert len(triton) >= 8, listed
    assert set(listed) <= set(site.choices) and site.default.startswith("aten")
    assert len(rendered) <= len({c.split(":{")[0] for c in triton}), rendered  # each template's first config

    rendered.clear()
    pick = triton[-1]
    forcing = Forcing({Kind.SITE: {site.key: pick}})
    with torch.no_grad(), journal.recording() as decisions:
        y, ref = _compiled(m, forcing)(x), m(x)
    assert [(d.outcome, d.answer) for d in decisions if d.kind == Kind.SITE] == [(journal.HIT, pick)]
    torch.testing.assert_close(y, ref, rtol=0.05, atol=0.05)
    assert len(rendered) <= len({c.split(":{")[0] for c in triton}) + 1, rendered
