"""Alembic environment: runs on the connection handed over by models.core.db.upgrade_database."""

from alembic import context

from models.tables import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
context.run_migrations()
