"""A template site's epilogue credit (``site_batches.EpilogueCredit``): where a library default leaves the pointwise
ops after it to a kernel of its own, a Triton tile that takes them in saves that kernel, which the site's own timing
cannot see. Sites tuned in batches against a simulated clock, as in ``test_site_batches``."""

import pytest

from tests.tuner.test_site_batches import _SimulatedClock
from tuner.measure.result import SiteTimings, Status


TRITON = (
    'triton::mm:{"ACC_TYPE":"tl.float32","BLOCK_K":128,"BLOCK_M":16,"BLOCK_N":32,"EVEN_K":true,"GROUP_M":8,'
    '"USE_FAST_ACCUM":false,"hint_override":null,"num_stages":6,"num_warps":4}'
)


@pytest.mark.parametrize("in_graph, wins", [(False, True), (True, False)])
def test_inside_a_cuda_graph_an_epilogue_kernel_is_credited_its_device_time_in_the_step(
    db_url, monkeypatch, in_graph, wins
):
    """A Triton tile runs 1.2x its library default alone (1 us), and takes in the site's own epilogue kernel: 0.5 us
    timed alone, launch and all, 0.1 us on the device inside the step. Launched, the kernel saved is worth its 0.5:
    1.2 <= 0.9 x 1.5, the tile wins. Timed as CUDA-graph replays, no launch is left to save: 1.2 > 0.9 x 1.1."""
    import dataclasses

    from tuner.sweep.epilogues import Epilogue
    from tuner.sweep.site_batches import EpilogueCredit, tune_sites

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _epilogue_sites(db_url, True)

    def measure(request):
        clock.t += 0.2 * sum(len(v) for v in request.values())
        return SiteTimings(
            Status.OK, {k: {c: (1.0 if i == 0 else 1.2) for i, c in enumerate(v)} for k, v in request.items()}
        )

    at = {t.key: Epilogue(0.5, "triton_poi_fused_gelu_view_1", device_ms=0.1) for t, _ in group}
    tuning = dataclasses.replace(tuning, deadline=clock.t + 1.0, settle_by=clock.t + 1.0)
    credit = EpilogueCredit(0.5, at=at, in_graph=in_graph, device_ms=0.1)
    outcomes, _, _, _ = tune_sites(tuning, group, measure, batch=16, credit=credit)
    assert [o.winner["choice"] == TRITON for o in outcomes] == [wins, wins]
    assert Epilogue(0.0, "triton_per_fused_add_native_layer_norm_view_4", 0.3).cost(True) == 0.0, (
        "a reduction's: nothing"
    )
    db.close()


SPLITK = 'tuner::splitk:{"BLOCK_K":128,"BLOCK_M":16,"BLOCK_N":32,"SPLIT_K":16,"num_stages":3,"num_warps":4}'


def _epilogue_sites(db_url, epilogue, extra=()):
    """Two addmm sites (the library call Inductor's default, a Triton tile, the ``extra`` choices), a pointwise op
    after each or not."""
    from tests.helpers.replay import _context
    from tuner.core import Kind, TaskSpec
    from tuner.db import Database
    from tuner.search_spaces import space_for

    db = Database.open(db_url)
    group = []
    for i in range(2):
        space = {
            "choices": ["aten::bias_addmm:{}", TRITON, *extra],
            "default": "aten::bias_addmm:{}",
            **({"epilogue": True} if epilogue else {}),
        }
        sig = {"op": "addmm", "inputs": [], "space": space}
        t = TaskSpec(f"{i + 200:064x}", Kind.SITE, f"epilogue site {i}", sig, space_for(Kind.SITE, sig))
        group.append((t, db.upsert_task(t.key, t.kind, t.name, t.signature, t.space.fingerprint())))
    return db, _context(db_url, db, trials=4), group


@pytest.mark.parametrize(
    "epilogue, alone, credit_ms, own, wins",
    [
        (True, 0.97, 0.5, False, True),  # no slower alone, and a kernel fewer: far past the noise counted so
        (True, 0.97, 0.0, False, False),  # no kernel measured to credit (the CPU): 3% alone is inside the noise
        (False, 0.97, 0.5, False, False),  # nothing reads the output pointwise: nothing to take in
        (
            True,
            1.04,
            0.5,
            False,
            False,
        ),  # slower alone, credited the step's median kernel: not, whatever it might take in
        (
            True,
            1.2,
            0.5,
            True,
            True,
        ),  # slower alone, but the site's own epilogue kernel (0.5) costs more: 1.2 <= 0.9 x 1.5
        (True, 1.4, 0.5, True, False),  # ... not by the margin: 1.4 > 0.9 x 1.5
    ],
)
def test_a_template_no_slower_alone_wins_where_it_takes_in_the_epilogue(
    db_url, monkeypatch, epilogue, alone, credit_ms, own, wins
):
    """A site's Triton tile times ``alone`` x its library default in one compile; no time is left to verify. Where a
    pointwise op reads the site's output, the library call leaves it to a kernel of its own (``credit_ms``: the step's
    median pointwise kernel, or with ``own`` the site's own epilogue kernel, found in the capture), which the tile
    takes in: counted so, a tile no slower alone wins and is said to; credited its own kernel, one slower alone too."""
    import dataclasses

    from tuner.sweep.epilogues import Epilogue
    from tuner.sweep.site_batches import EpilogueCredit, tune_sites

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _epilogue_sites(db_url, epilogue)

    def measure(request):
        clock.t += 0.2 * sum(len(v) for v in request.values())
        return SiteTimings(
            Status.OK, {k: {c: (1.0 if i == 0 else alone) for i, c in enumerate(v)} for k, v in request.items()}
        )

    said = []
    tuning = dataclasses.replace(tuning, deadline=clock.t + 1.0, settle_by=clock.t + 1.0)
    at = {t.key: Epilogue(credit_ms, "triton_poi_fused_gelu_view_1") for t, _ in group} if own else {}
    outcomes, _, _, _ = tune_sites(tuning, group, measure, batch=16, credit=EpilogueCredit(credit_ms, said.append, at))
    assert [o.winner["choice"] == TRITON for o in outcomes] == [wins, wins]
    assert all(
        db.winner_config(r.id, tuning.device_id)["choice"] == (TRITON if wins else t.space.default["choice"])
        for t, r in group
    )
    assert len(said) == (2 if wins else 0) and all("takes in" in s for s in said)
    assert all(
        ("its kernel triton_poi_fused_gelu_view_1" if own else "the step's median pointwise kernel") in s for s in said
    ), said
    db.close()


@pytest.mark.parametrize(
    "kernels, wins",
    [
        # the add runs in the layer norm's kernel after it: a tile taking it in saves no kernel, and split-K, faster
        # alone, wins
        ([{"name": "triton_per_fused_add_native_layer_norm_view_4", "default_ms": 0.0012, "launches": 12}], SPLITK),
        # the add has a kernel of its own: the tile takes it in, a kernel fewer than split-K's call leaves
        ([{"name": "triton_poi_fused_add_view_2", "default_ms": 0.005, "launches": 12}], TRITON),
    ],
)
def test_a_site_whose_epilogue_runs_in_a_reduction_kernel_is_won_by_its_fastest_choice_alone(
    db_url, monkeypatch, kernels, wins
):
    """gpt2's decode step (H200): at the FFN's second GEMM (8 x 3072 x 768) cuBLAS ran 8.06 us, a Triton tile 7.98 and
    split-K 6.23. The residual add after it is fused into the next layer norm's reduction; credited the step's median
    pointwise kernel (4.4 us) as if the tile saved a kernel, the tile had won."""
    import dataclasses

    from tuner.sweep.epilogues import site_epilogues
    from tuner.sweep.site_batches import EpilogueCredit, tune_sites

    clock = _SimulatedClock()
    monkeypatch.setattr("tuner.budget.clock.now", clock.now)
    db, tuning, group = _epilogue_sites(db_url, True, extra=(SPLITK,))
    alone = {"aten::bias_addmm:{}": 8.06, TRITON: 7.98, SPLITK: 6.23}

    def measure(request):
        clock.t += 0.2 * sum(len(v) for v in request.values())
        return SiteTimings(Status.OK, {k: {c: alone[c] * 1e-3 for c in v} for k, v in request.items()})

    at = site_epilogues([{"key": t.key, "epilogue_ops": ["add"], "count": 12} for t, _ in group], kernels)
    tuning = dataclasses.replace(tuning, deadline=clock.t + 2.0, settle_by=clock.t + 2.0)
    outcomes, _, _, _ = tune_sites(
        tuning, group, measure, batch=16, credit=EpilogueCredit(0.0044, lambda said: None, at)
    )
    assert [o.winner["choice"] for o in outcomes] == [wins, wins]
    db.close()
