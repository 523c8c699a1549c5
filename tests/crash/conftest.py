"""Server tests that run on PostgreSQL too use the store tests' throwaway server."""

from tests.store.conftest import postgres_server

__all__ = ["postgres_server"]
