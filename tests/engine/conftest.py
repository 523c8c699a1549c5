"""Engine tests that need the real store on both backends use the store tests' fixtures."""

from tests.store.conftest import postgres_server, store_location

__all__ = ["postgres_server", "store_location"]
