"""Results store (SQLite): runs, their provenance and every measured figure."""
from clusterbench.store.db import STORE_SCHEMA, Store, default_path

__all__ = ["STORE_SCHEMA", "Store", "default_path"]
