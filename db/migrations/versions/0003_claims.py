"""Task claims, so several workers on one database never tune the same task at once.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tuner_claims",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("task_id", sa.Integer, nullable=False),
        sa.Column("device_id", sa.Integer, nullable=False),
        sa.Column("worker", sa.String(200), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_target", sa.Integer),
        sa.PrimaryKeyConstraint("id", name="pk_tuner_claims"),
        sa.UniqueConstraint("task_id", "device_id", name="uq_tuner_claims_task_id"),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tuner_tasks.id"], name="fk_tuner_claims_task_id_tuner_tasks", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["device_id"], ["tuner_devices.id"], name="fk_tuner_claims_device_id_tuner_devices"),
    )


def downgrade() -> None:
    op.drop_table("tuner_claims")
