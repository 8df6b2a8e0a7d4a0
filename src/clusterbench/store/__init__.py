"""Results store (an SQLite file or a PostgreSQL database): runs, their provenance and every measured figure, handed back typed."""
from clusterbench.records import Run, StoredFigure
from clusterbench.store.db import STORE_SCHEMA, Store
from clusterbench.store.opening import default_path

__all__ = ["STORE_SCHEMA", "Run", "Store", "StoredFigure", "default_path"]
