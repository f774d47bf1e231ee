"""Settings read from the environment once, in one place.

``TUNER_DB``        database URL (default: SQLite in the user cache folder)
``TUNER_SHARED_DB`` a team's shared database, read after the local one at compile time
``TUNER_LOG``       log level of the ``tuner`` logger (e.g. ``info``)
``TUNER_CACHE_DIR`` where the default database and scratch files live
``TUNER_LOCK_DIR``  where every tuner process on this machine takes its per-device measurement locks (default: the
                    system's temporary folder, ``tuner-locks``)
``TUNER_SITE_TIMING`` how a sweep times template-site choices on CUDA: ``auto`` (the default: as the workload runs,
                    ``cudagraph`` where the sweep keeps CUDA graphs, else ``pipelined``), ``pipelined`` (calls back to
                    back, host time counted where it exceeds the device's), ``launch`` (Inductor's way) or
                    ``cudagraph`` (replays of a CUDA graph: the device's time alone); ``backend/instrument/site_timing``.
                    On the CPU any value but ``launch`` times each choice beside the site's first ATen choice,
                    interleaved (``backend/instrument/beside_reference``); ``launch`` there too is Inductor's way
``TUNER_SITE_DEFER`` ``0``: a CUDA site batch times each site as Inductor lowers it, its choices compiled only
                    then; ``1`` (the default) lets every site's choices compile in the background while the rest
                    of the graph is lowered, and times them all when Inductor schedules (``hooks/selector``)
``TUNER_COMPILE_THREADS`` threads that compile a batch of Triton kernel configs in parallel (default 8)
``TUNER_TRANSFER``  ``0`` keeps ``backend="tuned"`` to exact entries (no answers from the nearest stored sizes)
``TUNER_PRIOR``     ``0``: a sweep uses only its database's measurements (not the shipped prior, ``tuner.ranking.prior``)
"""

from __future__ import annotations

import functools
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import TunerError

SITE_TIMINGS = ("auto", "pipelined", "launch", "cudagraph")


@dataclass(frozen=True)
class Settings:
    cache_dir: Path
    db_url: str
    log_level: str | None
    shared_db_url: str | None = None
    site_timing: str = "auto"
    compile_threads: int = 8
    transfer: bool = True
    prior: bool = True
    site_defer: bool = True
    bytecode: bool = (
        True  # TUNER_BYTECODE_CACHE: keep bytecode for tuner's processes where Python writes none (tuner.bytecode)
    )
    lock_dir: Path = Path(tempfile.gettempdir()) / "tuner-locks"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> "Settings":
        env = dict(os.environ if env is None else env)
        base = env.get("TUNER_CACHE_DIR") or os.path.join(
            env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tuner"
        )
        cache_dir = Path(base)
        db_url = env.get("TUNER_DB") or f"sqlite:///{cache_dir / 'tuning.db'}"
        site_timing = env.get("TUNER_SITE_TIMING") or "auto"
        if site_timing not in SITE_TIMINGS:
            raise TunerError(f"TUNER_SITE_TIMING must be one of {', '.join(SITE_TIMINGS)}, not {site_timing!r}")
        threads = env.get("TUNER_COMPILE_THREADS") or "8"
        if not threads.isdigit() or int(threads) < 1:
            raise TunerError(f"TUNER_COMPILE_THREADS must be a positive whole number, not {threads!r}")
        transfer, prior, defer = _flag(env, "TUNER_TRANSFER"), _flag(env, "TUNER_PRIOR"), _flag(env, "TUNER_SITE_DEFER")
        return cls(
            cache_dir=cache_dir,
            db_url=db_url,
            log_level=env.get("TUNER_LOG") or None,
            shared_db_url=env.get("TUNER_SHARED_DB") or None,
            site_timing=site_timing,
            compile_threads=int(threads),
            transfer=transfer,
            prior=prior,
            site_defer=defer,
            bytecode=_flag(env, "TUNER_BYTECODE_CACHE"),
            lock_dir=Path(env.get("TUNER_LOCK_DIR") or Path(tempfile.gettempdir()) / "tuner-locks"),
        )


def _flag(env: dict[str, str], name: str) -> bool:
    value = env.get(name, "1").strip().lower()
    if value not in ("0", "1", "false", "true", "no", "yes", ""):
        raise TunerError(f"{name} must be 0 or 1, not {value!r}")
    return value not in ("0", "false", "no")


@functools.lru_cache(maxsize=1)
def settings() -> Settings:
    return Settings.from_env()


def configure_logging() -> None:
    """Attach a stderr handler to the ``tuner`` logger when ``TUNER_LOG`` asks for one."""
    level = settings().log_level
    log = logging.getLogger("tuner")
    if not level or any(getattr(h, "_tuner", False) for h in log.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[tuner] %(levelname)s %(message)s"))
    handler._tuner = True  # type: ignore[attr-defined]
    try:
        log.setLevel(level.upper())
    except ValueError:
        raise TunerError(f"TUNER_LOG must be a logging level (debug, info, warning or error), not {level!r}") from None
    log.addHandler(handler)
