"""Results store (SQLite): runs, their provenance and every measured figure, handed back typed."""
from clusterbench.records import Run, StoredFigure
from clusterbench.store.db import STORE_SCHEMA, Store, default_path

__all__ = ["STORE_SCHEMA", "Run", "Store", "StoredFigure", "default_path"]
