"""A sweep's measuring process starts Inductor's compile workers before it builds the model
(``process.warm_compile_workers``): on this torch the helper exists and the pool is made, in a process of its own."""

import os
import subprocess
import sys

CHECK = """
from torch._inductor.async_compile import AsyncCompile, get_compile_threads
from tuner.backend.process import warm_compile_workers

warm_compile_workers()
print(get_compile_threads(), AsyncCompile.process_pool.cache_info().currsize)
"""


def test_the_compile_workers_start_when_asked():
    out = subprocess.run(
        [sys.executable, "-c", CHECK],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "2"},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    threads, pools = (int(x) for x in out.stdout.split()[-2:])
    assert threads > 1 and pools == 1, out.stdout


LEAVE = """
import os
from torch._inductor.async_compile import AsyncCompile, _pool_set
from tuner.backend.process import release_compile_workers, warm_compile_workers

warm_compile_workers()
AsyncCompile.process_pool()
print(*[p.process.pid for p in _pool_set], flush=True)
release_compile_workers(0.05)
os._exit(0)
"""


def test_compile_workers_asked_to_leave_go_after_their_process_ends_at_once():
    """A measuring process ends at once when stopped (``tuner.measure.worker._leave``), without waiting on its
    compile-worker pools' shutdown (2.4 s here): the pools it asked to shut down leave by themselves."""
    import time

    env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "2"}
    out = subprocess.run([sys.executable, "-c", LEAVE], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    pids = [int(p) for p in out.stdout.split()]
    assert pids
    deadline = time.monotonic() + 60
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) has left
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False
