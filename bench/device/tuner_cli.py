"""The tuner command line as its console script runs it, for the device scripts (whose PATH was never checked for the
script). ``python -m tuner`` now times alike (``backend/instrument/timing.py``: every sample in a frame-stack chunk of
its own); this stays so the device scripts need no installed script. Usage: python3 bench/device/tuner_cli.py bench
--model ... (the same arguments as ``tuner``)."""

import sys

if __name__ == "__main__":  # a spawned sweep worker imports this file again: it must not run the command twice
    from tuner.cli import main

    sys.argv[0] = "tuner"
    sys.exit(main())
