"""The tuner command line as its console script runs it, for the device scripts (whose PATH was never checked for the
script). Not ``python -m tuner``: started that way on the 2-core Xeon, ``tuner bench`` timed Inductor's own modes 2x
slower than the console script or the API did, cause unknown (bench/README.md, shufflenet_v2_x1_0, session 19).
Usage: python3 bench/device/tuner_cli.py bench --model ... (the same arguments as ``tuner``)."""

import sys

if __name__ == "__main__":  # a spawned sweep worker imports this file again: it must not run the command twice
    from tuner.cli import main

    sys.argv[0] = "tuner"
    sys.exit(main())
