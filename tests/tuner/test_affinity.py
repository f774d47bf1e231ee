"""CPU workers' cores: disjoint sets, sized by --threads or an even split, refused when they do not fit."""

import pytest

from tuner.measure.affinity import core_sets, describe
from tuner.errors import TunerError


def test_workers_get_disjoint_cores_of_their_thread_count():
    assert core_sets(2, None, [0, 1, 2, 3]) == [[0, 1], [2, 3]]
    assert core_sets(2, 1, [0, 1, 2, 3]) == [[0], [1]]
    assert core_sets(3, None, [4, 5, 6, 7]) == [[4], [5], [6]]


def test_more_threads_than_cores_is_one_clear_error():
    with pytest.raises(TunerError, match="--workers 2 with 2 thread.*needs 4 cores.*may use 2"):
        core_sets(2, 2, [0, 1])
    with pytest.raises(TunerError, match="needs 3 cores"):
        core_sets(3, None, [0, 1])


def test_the_plan_says_where_each_worker_runs_and_what_the_winners_are_for():
    line = describe([[0], [1]])
    assert "worker 1 on core 0, worker 2 on core 1" in line and "torch.set_num_threads(1)" in line
