"""Makes schema_0001.db: a tuning database as tuner's first schema revision wrote it (kept for upgrade tests)."""

import sys
from pathlib import Path

from sqlalchemy import text

from tuner.db import migrate
from tuner.db.engine import make_engine

path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("schema_0001.db"))
path.unlink(missing_ok=True)
engine = make_engine(f"sqlite:///{path}")
migrate.upgrade(engine, "0001")
with engine.begin() as c:
    c.execute(text("INSERT INTO tuner_devices VALUES (1, 'dev-fp', 'cpu', 'Old CPU', '{\"cores\": 2}')"))
    c.execute(text("INSERT INTO tuner_environments VALUES (1, 'env-fp', '2.11.0', '3.6.0', NULL, '3.12.3', '0.0.1')"))
    c.execute(
        text(
            "INSERT INTO tuner_tasks VALUES (1, :k, 'template_choice', 'packed_linear 1x512', :sig, 'sfp', '2026-11-01 00:00:00')"
        ),
        {
            "k": "a" * 64,
            "sig": '{"space": {"choices": ["cpp:CppMicroGemmFP32Vec", "aten:_mkl_linear"], "default": "aten:_mkl_linear"}}',
        },
    )
    c.execute(
        text(
            "INSERT INTO tuner_trials VALUES (1, 'u-1', 1, 1, 1, '{\"choice\": \"cpp:CppMicroGemmFP32Vec\"}', 'h', 'ok', 1.0, 0.9, 0.1, 1.2, NULL, 'old-host', '2026-11-01 00:00:00')"
        )
    )
    c.execute(
        text(
            "INSERT INTO tuner_winners VALUES (1, 1, 1, 1, '{\"choice\": \"cpp:CppMicroGemmFP32Vec\"}', 1.0, 1.2, '2026-11-01 00:00:00')"
        )
    )
engine.dispose()
print(path)
