"""The SDPA backend per attention site, on the CPU for real: the recording lists a graph's sites (a model's repeated
calls as one), the space offers the device's backends, a forced answer rewrites the graph's attention and keeps
eager's numerics, and a sweep measures the backends and stores its answer."""

import functools
import dataclasses

import pytest
import torch
from torch._inductor.utils import run_and_get_code
from typer.testing import CliRunner

from tests.helpers.compiling import measured
from tests.helpers.attention_db import attention_task
from tests.helpers.models import attention, masked_attention
from tuner.backend import journal
from tuner.backend.compiler import compile_with_context
from tuner.backend.instrument.attention_timing import _reference, inputs, time_backends
from tuner.backend.instrument.recorder import Recorder
from tuner.cli import app
from tuner.core import Forcing
from tuner.kinds import descriptor
from tuner.search_spaces import InvalidConfig, space_for
from tuner.search_spaces.attention import ANSWER_KNOB, FAMILY, rebuildable

FLASH_CPU = "_scaled_dot_product_flash_attention_for_cpu"


_compiled = functools.partial(measured, device="cpu")


def _recorded(model, x):
    rec = Recorder()
    _compiled(model, recorder=rec)(x)
    return [g for g in rec.graphs.values() if not g.backward]


def _task_space(graph):
    return space_for(FAMILY, {"space": descriptor(FAMILY).graph_task(dataclasses.asdict(graph), [], {})})


def test_the_recording_lists_a_graphs_attention_sites_once():
    with torch.no_grad():
        (g,) = _recorded(attention().eval(), torch.randn(2, 32, 64))
    (site,) = g.found[FAMILY]
    assert (site["backend"], site["count"], site["causal"], site["mask"]) == ("flash_cpu", 2, True, False)
    assert site["shape"] == [2, 4, 32, 16, 32]
    assert site["strides"][0] == [6144, 16, 192, 1]  # q: a view of the fused projection's output, as timed alone
    space = _task_space(g)
    name = f"site.{site['site']}"
    assert space.default == {name: "flash_cpu"} and space.evidence() == [{name: "math"}]
    space.validate({name: "math"})
    with pytest.raises(InvalidConfig):
        space.validate({name: "cudnn"})  # a CUDA backend is no CPU option


def test_a_site_is_rebuilt_with_its_recorded_strides_and_wrong_strides_are_refused():
    site = {
        "site": "0" * 16,
        "backend": "flash_cpu",
        "count": 1,
        "shape": [2, 4, 32, 16, 32],
        "dtype": "float32",
        "strides": [[6144, 16, 192, 1], [6144, 16, 192, 1], [2048, 0, 64, 1]],
    }  # v: expanded over the heads
    (checked,) = space_for(FAMILY, {"space": {"device": "cpu", "sites": [site]}}).context["sites"]
    a = inputs(checked, "cpu")
    assert [list(a[n].stride()) for n in "qkv"] == site["strides"] and a["q"].abs().sum() > 0
    assert list(inputs({**checked, "strides": None}, "cpu")["q"].stride()) == [
        2048,
        512,
        16,
        1,
    ]  # none recorded: contiguous
    for bad in ([[1, 2, 3]] * 3, [[-1, 1, 1, 1]] * 3, "6144,16", [[1, 1, 1, True]] * 3):
        with pytest.raises(InvalidConfig):
            space_for(FAMILY, {"space": {"device": "cpu", "sites": [{**site, "strides": bad}]}})


def test_a_masked_site_records_its_masks_layout_and_is_rebuilt_with_it():
    """A mask's dtype, sizes and strides are kept as the fused op receives it (the dispatcher has turned the model's
    causal boolean mask into an additive float one), so the site is rebuilt and its reference computed alone; a
    boolean mask broadcast over the heads (stride 0) is rebuilt so too; a site recorded with a mask but no layout is
    not rebuilt."""
    with torch.no_grad():
        (g,) = _recorded(masked_attention().eval(), torch.randn(2, 32, 64))
    (site,) = g.found[FAMILY]
    layout = site["mask_layout"]
    assert site["mask"] and layout == {"dtype": "float32", "shape": [2, 1, 32, 32], "stride": [1024, 1024, 32, 1]}
    (checked,) = _task_space(g).context["sites"]
    assert checked["mask_layout"] == layout and rebuildable(checked)
    assert not rebuildable({**checked, "mask_layout": None})
    a = inputs(checked, "cpu")
    assert (
        a["mask"].dtype == torch.float32 and list(a["mask"].shape) == layout["shape"] and not a["mask"].any()
    )  # masks nothing
    assert torch.isfinite(_reference(a)).all()
    broadcast = {"dtype": "bool", "shape": [2, 1, 32, 32], "stride": [32, 0, 0, 1]}
    b = inputs({**checked, "mask_layout": broadcast}, "cpu")
    assert (
        list(b["mask"].stride()) == broadcast["stride"]
        and bool(b["mask"].all())
        and torch.isfinite(_reference(b)).all()
    )
    wrong = {
        **checked,
        "mask_layout": {"dtype": "bool", "shape": [3, 1, 32, 32], "stride": [1024, 0, 32, 1]},
    }  # 3 batches for 2
    assert all("could not be rebuilt" in t["error"] for t in time_backends(wrong, ["flash_cpu"], device="cpu").values())
    for bad in (
        {**layout, "dtype": "int64"},
        {**layout, "shape": [2, 1, 32]},
        {**layout, "stride": [1, 2, 3, 4, 5]},
        "bool",
    ):
        with pytest.raises(InvalidConfig):
            space_for(FAMILY, {"space": {"device": "cpu", "sites": [{**checked, "mask_layout": bad}]}})


def test_a_training_forward_has_no_site():
    """Its attention's log-sum-exp feeds the backward, which only its own kernel's form fits."""
    m, x = attention().train(), torch.randn(2, 32, 64)
    (g,) = _recorded(m, x)
    assert g.found == {FAMILY: []} and descriptor(FAMILY).graph_task(dataclasses.asdict(g), [], {}) is None


def test_a_forced_backend_rewrites_the_graph_and_keeps_numerics():
    m, x = attention().eval(), torch.randn(2, 32, 64)
    with torch.no_grad():
        (g,) = _recorded(m, x)
        site = g.found[FAMILY][0]["site"]
        forcing = Forcing({FAMILY: {g.keys[FAMILY]: {ANSWER_KNOB: {site: "math"}}}})
        with journal.recording() as decisions:
            y, (code,) = run_and_get_code(_compiled(m, forcing), x)
        torch.testing.assert_close(y, m(x), rtol=1e-4, atol=1e-5)
        _, (plain,) = run_and_get_code(_compiled(m), x)
    assert FLASH_CPU in plain and FLASH_CPU not in code and "bmm" in code  # two batched GEMMs a site
    assert [(d.outcome, d.answer) for d in decisions if d.kind == FAMILY] == [
        (journal.HIT, {ANSWER_KNOB: {site: "math"}})
    ]


def test_a_site_with_a_mask_is_not_offered_flash_on_cuda():
    site = {"site": "0" * 16, "backend": "efficient", "mask": True, "count": 12}
    (param,) = space_for(FAMILY, {"space": {"device": "cuda", "sites": [site]}}).params
    assert param.options == ("efficient", "cudnn", "math")
    with pytest.raises(InvalidConfig):
        space_for(FAMILY, {"space": {"device": "cuda", "sites": [{**site, "backend": "exec('x')"}]}})


@pytest.mark.parametrize(
    "model, default, other", [("attention", "flash_cpu", "math"), ("biased_attention", "math", "flash_cpu")]
)
def test_a_sweep_measures_the_backends_and_stores_its_answer(db_url, cwd_root, model, default, other):
    """A fused site measured against math attention, and a site the dispatcher runs as math measured against the fused
    kernel (its per-head bias given as four dimensions)."""
    args = [
        "sweep",
        "--model",
        f"tests.helpers.models:{model}",
        "--input-shape",
        "2,32,64",
        "--device",
        "cpu",
        "--threads",
        "2",
        "--budget",
        "quick",
        "--trials",
        "2",
        "--no-time-unfrozen",
        "--db",
        db_url,  # its frozen graph's sites
        "--skip",
        "template-sites,fusion-groupings,graph-knobs",
    ]  # the other searches are left out
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "attention backends: 1 tasks" in said and "template sites" not in said and "graph knobs" not in said
    assert "fusion" not in said
    sites, stored, winner = attention_task(db_url)
    trials = [(config, status) for config, status, _ in stored]
    (site,) = sites
    name = f"site.{site['site']}"
    assert site["backend"] == default and ({name: other}, "ok") in trials  # measured against the default
    assert winner in ({name: default}, {name: other})


def test_a_users_own_post_grad_pass_is_kept_and_the_answer_skipped(caplog):
    import types

    from tuner.backend.hooks import attention as hook

    answer = {ANSWER_KNOB: {"0" * 16: "math"}, "max_fusion_size": 32}
    mine = object()
    assert hook.patches(answer, types.SimpleNamespace(post_grad_custom_post_pass=mine)) == {"max_fusion_size": 32}
    assert "already set" in caplog.text
    placed = hook.patches(answer, types.SimpleNamespace(post_grad_custom_post_pass=None))
    assert placed["post_grad_custom_post_pass"].backends == {"0" * 16: "math"} and ANSWER_KNOB not in placed


def test_an_answer_stands_in_at_other_sizes_of_the_same_graph():
    """Stored at batch 2, forced at batch 3 through the nearest stored graph: the sites' ids differ, their class
    (dtype, head size, mask, causality) does, so the batch-3 site takes the stored site's backend."""
    from tuner.backend.context import CompileContext
    from tuner.search_spaces import valid_winners
    from tuner.nearest import Nearest

    m = attention().eval()
    with torch.no_grad():
        (g,) = _recorded(m, torch.randn(2, 32, 64))
        site = g.found[FAMILY][0]["site"]
        sig = {
            "backward": False,
            "lines": g.lines,
            "space": descriptor(FAMILY).graph_task(dataclasses.asdict(g), [], {}),
            "family": g.family,
            "shapes": g.shapes,
        }
        nearest = Nearest.from_winners(valid_winners({g.keys[FAMILY]: (FAMILY, {f"site.{site}": "math"}, sig)}))
        x3 = torch.randn(3, 32, 64)

        def backend(gm, ex, **_):
            return compile_with_context(gm, ex, CompileContext(Forcing(), "cpu", nearest), {"fx_graph_cache": False})

        torch._dynamo.reset()
        with journal.recording() as decisions:
            y, (code,) = run_and_get_code(torch.compile(m, backend=backend), x3)
        torch.testing.assert_close(y, m(x3), rtol=1e-4, atol=1e-5)
    assert [d.outcome for d in decisions if d.kind == FAMILY] == [journal.TRANSFERRED]
    assert FLASH_CPU not in code and "bmm" in code


def test_attention_the_dispatcher_runs_as_math_is_a_site_and_takes_a_fused_backend():
    """A per-head bias of three dimensions: the CPU's flash kernel takes no such mask, so the dispatcher traces math
    attention, which used to leave the graph as two batched GEMMs and a softmax with nothing saying it was attention.
    The pre-grad pass keeps it whole: the recording lists it as a site whose backend is math, Inductor's default
    compile still runs it as math, and an answer of flash_cpu runs the fused kernel (its bias given as four
    dimensions) with eager's numerics, under the same graph key."""
    from tests.helpers.models import biased_attention

    m, x = biased_attention().eval(), torch.randn(2, 32, 64)
    with torch.no_grad():
        (g,) = _recorded(m, x)
        (site,) = g.found[FAMILY]
        assert (site["backend"], site["count"], site["mask"]) == ("math", 2, True)
        assert site["mask_layout"] == {"dtype": "float32", "shape": [4, 32, 32], "stride": [1024, 32, 1]}
        space = _task_space(g)
        name = f"site.{site['site']}"
        assert space.default == {name: "math"} and space.evidence() == [{name: "flash_cpu"}]
        y0, (plain,) = run_and_get_code(_compiled(m), x)
        forcing = Forcing({FAMILY: {g.keys[FAMILY]: {ANSWER_KNOB: {site["site"]: "flash_cpu"}}}})
        with journal.recording() as decisions:
            y, (code,) = run_and_get_code(_compiled(m, forcing), x)
        ref = m(x)
    torch.testing.assert_close(y0, ref, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(y, ref, rtol=1e-4, atol=1e-5)
    assert (
        "bmm" in plain and FLASH_CPU not in plain and "tuner.attention" not in plain
    )  # lowered as math, as Inductor would
    assert FLASH_CPU in code and "bmm" not in code
    assert [d.outcome for d in decisions if d.kind == FAMILY] == [journal.HIT]


def test_math_attention_is_kept_whole_only_in_inference_and_where_the_users_passes_leave_room():
    import types

    from tests.helpers.models import biased_attention
    from tuner.backend.hooks import attention_math

    m, x = biased_attention().train(), torch.randn(2, 32, 64)
    (g,) = _recorded(m, x)
    assert g.found == {FAMILY: []}, "a training graph's attention is traced as PyTorch traces it"
    free = types.SimpleNamespace(pre_grad_custom_pass=None, post_grad_custom_post_pass=None)
    assert isinstance(
        attention_math.pre_grad_patches(free, {})["pre_grad_custom_pass"], attention_math.KeepMathAttention
    )
    assert attention_math.pre_grad_patches(free, {"post_grad_custom_post_pass": object()}) == {}
    assert (
        attention_math.pre_grad_patches(
            types.SimpleNamespace(pre_grad_custom_pass=object(), post_grad_custom_post_pass=None), {}
        )
        == {}
    )
    assert attention_math.pre_grad_patches(types.SimpleNamespace(post_grad_custom_post_pass=None), {}) == {}, (
        "an Inductor without the slot"
    )


def test_the_reference_reads_a_boolean_mask_as_which_keys_to_attend_to():
    """As SDPA's front end does: ATen's math op called with a boolean mask adds it to the scores as 0 and 1."""
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 2, 3, 16), torch.randn(1, 2, 40, 16), torch.randn(1, 2, 40, 16)
    mask = torch.rand(1, 1, 3, 40) > 0.5
    got = _reference({"q": q, "k": k, "v": v, "mask": mask, "causal": False})
    torch.testing.assert_close(got, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask))


class _Grouped(torch.nn.Module):
    """Attention of 4 query heads over 2 key/value heads (SDPA's ``enable_gqa``), as Llama's and Qwen2's."""

    def __init__(self):
        super().__init__()
        self.q, self.kv = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)

    def forward(self, x):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, 4, 16).transpose(1, 2)
        k, v = (y.view(b, t, 2, 16).transpose(1, 2) for y in self.kv(x).split(32, dim=-1))
        return (
            torch.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True).transpose(1, 2).reshape(b, t, 64)
        )


def test_a_site_whose_heads_group_records_its_key_heads_and_is_rebuilt_with_them():
    """Timed alone, a grouped site's keys and values keep their own heads, as its call reads them (rebuilt with the
    query's heads, every backend would read four times what the decode kernel reads at a 32-over-8 site); its
    reference repeats them for each query head, and SDPA's front end is told they group."""
    from tuner.backend.instrument.attention_timing import runner

    with torch.no_grad():
        (g,) = _recorded(_Grouped().eval(), torch.randn(2, 32, 64))
    (site,) = g.found[FAMILY]
    assert site["shape"] == [2, 4, 32, 16, 32] and site["kv_heads"] == 2
    (checked,) = _task_space(g).context["sites"]
    assert checked["kv_heads"] == 2
    a = inputs(checked, "cpu")
    assert a["q"].shape[1] == 4 and a["k"].shape[1] == a["v"].shape[1] == 2
    ref = _reference(a)
    want = torch.nn.functional.scaled_dot_product_attention(a["q"], a["k"], a["v"], enable_gqa=True)
    torch.testing.assert_close(ref, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(runner("math", a, front_end=True)(), want, rtol=1e-4, atol=1e-4)
    for bad in (3, 4, 0, True, "2"):  # must divide the query heads, and be fewer
        with pytest.raises(InvalidConfig):
            space_for(FAMILY, {"space": {"device": "cpu", "sites": [{**checked, "kv_heads": bad}]}})
    (mha,) = space_for(
        FAMILY, {"space": {"device": "cpu", "sites": [{k: v for k, v in checked.items() if k != "kv_heads"}]}}
    ).context["sites"]
    assert "kv_heads" not in mha and inputs(mha, "cpu")["k"].shape[1] == 4  # an older record: the query's heads
