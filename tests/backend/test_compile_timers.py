"""Inductor's own timers around one compile: what ``tuner bench`` records as ``compile_regions``."""

import logging

import torch

from tuner.backend import compile_timers


def test_a_compile_is_split_into_the_regions_it_entered():
    before = compile_timers.totals()
    torch._dynamo.reset()
    fn = torch.compile(lambda x: torch.relu(x) * 2 + 1, backend="inductor")
    fn(torch.randn(8, 8))
    regions = compile_timers.since(before)
    spent, entered = regions["_compile.compile_inner"]
    assert spent > 0 and entered == 1
    assert all(s >= compile_timers.SHOWN_S for s, _ in regions.values())
    assert compile_timers.since(compile_timers.totals()) == {}  # nothing ran since
    torch._dynamo.reset()  # clears the table: what ran before is not taken off what runs after
    fn(torch.randn(8, 8))
    assert compile_timers.since(before)["_compile.compile_inner"][1] == 1


def test_a_torch_without_the_timers_table_says_so_and_reports_nothing(monkeypatch, caplog):
    import torch._dynamo.utils as dynamo_utils

    from tuner import once

    monkeypatch.setattr(once, "_said", set())
    with monkeypatch.context() as m, caplog.at_level(logging.WARNING):  # put back before Dynamo's reset at teardown
        m.setattr(dynamo_utils, "compilation_time_metrics", None)  # not the table this reads
        assert compile_timers.totals() == {} and compile_timers.since({}) == {}
    assert "compilation_time_metrics is missing" in caplog.text
