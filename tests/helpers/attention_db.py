"""What a sweep stored for a workload's one attention task: its sites, its trials and its winner."""

from sqlalchemy import select

from tuner.db import Database
from tuner.db.models import Task, Trial, Winner
from tuner.search_spaces.attention import FAMILY


def attention_task(db_url: str) -> tuple[list[dict], list[tuple[dict, str, float | None]], dict]:
    """(sites, [(config, status, median ms)], winner config) of the database's one attention task."""
    db = Database.open(db_url)
    try:
        with db.session() as s:
            (task,) = s.execute(select(Task).where(Task.kind == FAMILY)).scalars().all()
            trials = [
                (t.config, t.status, t.median_ms)
                for t in s.execute(select(Trial).where(Trial.task_id == task.id)).scalars()
            ]
            (winner,) = s.execute(select(Winner.config).where(Winner.task_id == task.id)).scalars().all()
            return task.signature["space"]["sites"], trials, winner
    finally:
        db.close()
