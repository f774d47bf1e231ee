"""The fingerprints a measurement worker sends its parent: plain data, read back without torch."""

import pickle
import subprocess
import sys

from tuner.db.fingerprint import current_device, current_environment


def test_a_workers_fingerprints_unpickle_without_importing_torch():
    """The sweep's process unpickles what the capture reports; torch's version was a ``TorchVersion`` once, and reading
    it imported torch there, 1.7 s on two cores, counted in the capture's start."""
    data = pickle.dumps((current_environment(), current_device("cpu")))
    code = "import pickle, sys; pickle.loads(sys.stdin.buffer.read()); print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert done.stdout.decode().strip() == "False"
