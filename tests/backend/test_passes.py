"""Hook (g): the benchmarks Inductor's graph passes run are read from a counter this torch's pad_mm bumps (on the GPU,
tests/gpu: a compile that pads counts them in stats())."""

import logging

from tuner.backend.hooks import passes


def test_this_torchs_pad_mm_bumps_the_counter_read():
    passes._counted.cache_clear()
    assert passes._counted()
    assert passes.benchmarks_so_far() >= 0


def test_a_torch_without_the_counter_is_said_once_and_counts_nothing(monkeypatch, caplog):
    monkeypatch.setattr(passes, "PAD_MM", ("inductor", "no_such_counter_in_pad_mm"))
    passes._counted.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="tuner"):
            assert passes.benchmarks_so_far() == 0
            assert passes.benchmarks_so_far() == 0
    finally:
        passes._counted.cache_clear()
    said = [r for r in caplog.records if "no_such_counter_in_pad_mm" in r.getMessage()]
    assert len(said) == 1 and "not counted in stats()" in said[0].getMessage()
