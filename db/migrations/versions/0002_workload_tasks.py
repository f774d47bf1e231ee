"""Workload → task links, so a sweep's tasks can be listed and exported per model.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tuner_workload_tasks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("workload", sa.String(300), nullable=False),
        sa.Column("task_id", sa.Integer, nullable=False),
        sa.Column("position", sa.Integer, nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("id", name="pk_tuner_workload_tasks"),
        sa.UniqueConstraint("workload", "task_id", name="uq_tuner_workload_tasks_workload"),
        sa.ForeignKeyConstraint(
            ["task_id"], ["tuner_tasks.id"], name="fk_tuner_workload_tasks_task_id_tuner_tasks", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_tuner_workload_tasks_workload", "tuner_workload_tasks", ["workload"])


def downgrade() -> None:
    op.drop_index("ix_tuner_workload_tasks_workload", "tuner_workload_tasks")
    op.drop_table("tuner_workload_tasks")
