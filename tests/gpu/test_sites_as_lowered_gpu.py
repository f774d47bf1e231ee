"""The template-site phase on the GPU for real (``pytest -m gpu``): a kept winner that merges sibling GEMMs (q, k and v;
gate and up, each group read from one input through frozen weights) makes sites the capture never met. The first site
batch, compiled with that winner forced, records them; the capture's sites it never met are dropped unmeasured, and
the new ones are tuned after."""

import pytest

from tests.tuner.test_sites_as_lowered import captured
from tuner.core import Kind
from tuner.db import Database
from tuner.search_spaces.fusion import MERGE_GEMMS
from tuner.budget.clock import now
from tuner.sweep.phases import SitePhase
from tuner.sweep.tasks import site_tasks
from tuner.workloads.spec import WorkloadSpec

pytestmark = pytest.mark.gpu


def test_merged_gemms_are_new_sites_the_first_batch_records_and_tunes(tmp_path, db_url):
    db = Database.open(db_url)
    spec = WorkloadSpec(
        model="tests.backend.test_gemm_merge:Block", device="cuda", dtype="bf16", input_shape=(2, 8, 64)
    )
    sweep, records, before, notes = captured(spec, tmp_path, db)
    try:
        fusion = next(t for t in sweep.workload.tasks if t.kind == Kind.FUSION)
        assert fusion.space.default.get(MERGE_GEMMS) is False, fusion.space.default  # the capture found the siblings
        db.set_winner(
            records[Kind.FUSION].id,
            sweep.tuning.device_id,
            None,
            {**fusion.space.default, MERGE_GEMMS: True},
            None,
            None,
        )
        phase = SitePhase()
        plan = phase.plan(sweep)
        assert {t.key for t in plan.tasks} == before and phase.to_record, notes
        phase.run(sweep, now() + 240.0)
        (recording,) = sweep.recordings.values()
        after = {t.key for t in site_tasks(recording.sites)}
        new, gone = after - before, before - after
        assert new and gone, (sorted(before), sorted(after))  # the merged GEMMs; the unmerged q, k, v, gate and up
        said = next(n for n in notes if n.startswith("the first site batch recorded the graphs"))
        assert f"{len(after & before)} of the capture's {len(before)} and {len(new)} new" in said, said
        pairs = {t.key: r for t, r in sweep.workload.pairs((Kind.SITE,))}
        assert all(db.trials(pairs[k].id, sweep.tuning.device_id) for k in new)  # tuned after the capture's
        assert not any(db.trials(pairs[k].id, sweep.tuning.device_id) for k in gone)  # dropped unmeasured
    finally:
        sweep.worker.close()
        db.close()
