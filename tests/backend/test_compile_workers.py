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
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=300, env={**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "2"})
    assert out.returncode == 0, out.stderr[-2000:]
    threads, pools = (int(x) for x in out.stdout.split()[-2:])
    assert threads > 1 and pools == 1, out.stdout
