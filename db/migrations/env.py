"""Alembic environment for tuner's schema. Run through :mod:`tuner.db.migrate`, never by hand."""

from alembic import context

from tuner.db.migrate import VERSION_TABLE
from tuner.db.models import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    version_table=VERSION_TABLE,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
