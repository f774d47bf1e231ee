"""Initial schema: devices, environments, tasks, trials, winners.

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

J = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "tuner_devices",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("info", J, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tuner_devices"),
        sa.UniqueConstraint("fingerprint", name="uq_tuner_devices_fingerprint"),
    )
    op.create_table(
        "tuner_environments",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("torch", sa.String(64), nullable=False),
        sa.Column("triton", sa.String(64)),
        sa.Column("cuda", sa.String(64)),
        sa.Column("python", sa.String(32), nullable=False),
        sa.Column("tuner", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tuner_environments"),
        sa.UniqueConstraint("fingerprint", name="uq_tuner_environments_fingerprint"),
    )
    op.create_table(
        "tuner_tasks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("signature", J, nullable=False),
        sa.Column("space_fingerprint", sa.String(64), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tuner_tasks"),
        sa.UniqueConstraint("key", name="uq_tuner_tasks_key"),
    )
    op.create_index("ix_tuner_tasks_kind", "tuner_tasks", ["kind"])
    op.create_table(
        "tuner_trials",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("uid", sa.String(36), nullable=False),
        sa.Column("task_id", sa.Integer, nullable=False),
        sa.Column("device_id", sa.Integer, nullable=False),
        sa.Column("environment_id", sa.Integer, nullable=False),
        sa.Column("config", J, nullable=False),
        sa.Column("config_hash", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("median_ms", sa.Float),
        sa.Column("min_ms", sa.Float),
        sa.Column("spread_ms", sa.Float),
        sa.Column("baseline_ms", sa.Float),
        sa.Column("error", sa.Text),
        sa.Column("host", sa.String(200), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tuner_trials"),
        sa.UniqueConstraint("uid", name="uq_tuner_trials_uid"),
        sa.ForeignKeyConstraint(["task_id"], ["tuner_tasks.id"], name="fk_tuner_trials_task_id_tuner_tasks", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["device_id"], ["tuner_devices.id"], name="fk_tuner_trials_device_id_tuner_devices"),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["tuner_environments.id"], name="fk_tuner_trials_environment_id_tuner_environments"
        ),
    )
    op.create_index("ix_tuner_trials_lookup", "tuner_trials", ["task_id", "device_id", "config_hash"])
    op.create_table(
        "tuner_winners",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("task_id", sa.Integer, nullable=False),
        sa.Column("device_id", sa.Integer, nullable=False),
        sa.Column("trial_id", sa.Integer),
        sa.Column("config", J, nullable=False),
        sa.Column("median_ms", sa.Float),
        sa.Column("baseline_ms", sa.Float),
        sa.Column("updated_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_tuner_winners"),
        sa.UniqueConstraint("task_id", "device_id", name="uq_tuner_winners_task_id"),
        sa.ForeignKeyConstraint(["task_id"], ["tuner_tasks.id"], name="fk_tuner_winners_task_id_tuner_tasks", ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["device_id"], ["tuner_devices.id"], name="fk_tuner_winners_device_id_tuner_devices"),
        sa.ForeignKeyConstraint(
            ["trial_id"], ["tuner_trials.id"], name="fk_tuner_winners_trial_id_tuner_trials", ondelete="SET NULL"
        ),
    )


def downgrade() -> None:
    op.drop_table("tuner_winners")
    op.drop_index("ix_tuner_trials_lookup", "tuner_trials")
    op.drop_table("tuner_trials")
    op.drop_index("ix_tuner_tasks_kind", "tuner_tasks")
    op.drop_table("tuner_tasks")
    op.drop_table("tuner_environments")
    op.drop_table("tuner_devices")
