"""What a compile renders of a site's template configs (``hooks/templates.trim``), on Inductor's own
KernelTemplateChoices (made, never rendered), and how the recording gets the whole list back (``untrimmed``)."""

import pytest

from tuner.backend.hooks import templates

mm = pytest.importorskip("torch._inductor.kernel.mm")
params = pytest.importorskip("torch._inductor.kernel_template_choice")


def _ktc(template, **kw):
    return params.KernelTemplateChoice(
        template=template, params=params.DictKernelTemplateParams(kw), extra_kwargs={}, layout=None, inputs=None
    )


def _listed():
    """An mm site as Inductor lists it on Hopper: ATen, three Triton tiles, two persistent TMA ones."""
    return [
        _ktc(mm.aten_mm),
        *(_ktc(mm.mm_template, BLOCK_M=b, BLOCK_N=64) for b in (16, 32, 64)),
        *(_ktc(mm.persistent_tma_mm_template, BLOCK_M=b, BLOCK_N=128) for b in (64, 128)),
    ]


def test_a_compile_renders_aten_each_templates_first_config_and_those_it_may_pick():
    listed = _listed()
    ids = [templates.ktc_id(k) for k in listed]
    assert [templates.ktc_id(k) for k in templates.trim(listed, ())] == [ids[0], ids[1], ids[4]]
    assert [templates.ktc_id(k) for k in templates.trim(listed, (ids[3], ids[5]))] == [
        ids[0],
        ids[1],
        ids[3],
        ids[4],
        ids[5],
    ]
    assert templates.trim(listed, ids) == listed
    # a site with no ATen config and one template keeps two: a site of one choice never reaches the selector's hooks
    tiles = listed[1:4]
    assert templates.trim(tiles, ()) == tiles[:2] and templates.trim(tiles, (ids[3],)) == [tiles[0], tiles[2]]


def test_the_recording_gets_every_listed_config_back_in_inductors_order():
    ids = [templates.ktc_id(k) for k in _listed()]
    reached = [ids[0], ids[1], ids[4], "cpp:gemm"]  # what the trim let through, and a choice listed elsewhere
    assert templates.untrimmed(reached, ids) == [*ids, "cpp:gemm"]
    assert templates.untrimmed(reached, []) == reached  # nothing listed under this key: what reached the site
    assert templates.untrimmed([ids[0], ids[3], ids[1]], ids + ids[1:3]) == [
        ids[0],
        ids[3],
        ids[4],
        ids[5],
        ids[1],
        ids[2],
    ]
