"""Results store (SQLite): runs, their provenance and every measured figure, handed back typed."""
from clusterbench.records import Run
from clusterbench.store.db import STORE_SCHEMA, Store, default_path
from clusterbench.store.rows import StoredFigure

__all__ = ["STORE_SCHEMA", "Run", "Store", "StoredFigure", "default_path"]
