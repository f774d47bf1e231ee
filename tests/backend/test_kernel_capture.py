"""Kernel capture wraps a kernel's ``run`` on the instance; Inductor's template benchmark reads ``run.__self__``
(``TritonBenchmarkRequest.make_run_fn``), so the wrapper must stay a method of the kernel. The Triton side is
tested on the GPU; the wrapper's contract is plain Python."""

from tuner.backend import process
from tuner.backend.instrument.capture import capture_first_call, stop_counting


class _Kernel:
    def __init__(self):
        self.calls = []
        self.with_bandwidth_info = True

    def run(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return "ran"


def test_a_captured_kernels_run_is_still_its_bound_method_and_keeps_its_first_arguments():
    import torch

    k = _Kernel()
    (cap,) = capture_first_call([k])
    try:
        run = k.run
        assert run.__self__ is k  # what make_run_fn sets with_bandwidth_info on
        x = torch.arange(6.0).reshape(2, 3)
        assert run(x, 3, stream=None) == "ran" and run(x + 1, 4) == "ran"
        assert cap.called and torch.equal(cap.args[0], x) and cap.args[0] is not x and cap.args[1] == 3
        assert len(k.calls) == 2 and "stream" not in cap.kwargs
        assert cap.calls == 2  # launches in the captured step (a kernel shared by repeated blocks runs once per block)
        stop_counting([cap])
        run(x, 5)
        assert cap.calls == 2 and len(k.calls) == 3  # the step is over: later calls still run, uncounted
    finally:
        process.restore()
    assert "run" not in vars(k)  # the instance's shadow is gone: the class's method again
