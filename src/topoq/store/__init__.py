"""Durable state: SQLAlchemy 2 on SQLite (default, WAL) or PostgreSQL, Alembic migrations."""
