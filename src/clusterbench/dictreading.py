"""Read access by key to a typed record, deprecated: for scripts written against the dicts the store
handed back before 0.2.0 (see :mod:`clusterbench.records`)."""
from __future__ import annotations

import warnings
from typing import Any


class DictReading:
    """Read access by key, deprecated: ``obj["name"]``, ``obj.get("name")``, ``"name" in obj``,
    ``obj.keys()`` (so ``{**obj}`` and ``dict(obj)`` give the JSON form)."""

    __slots__ = ()

    def as_json(self) -> dict:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _warn(self, key: object) -> None:
        warnings.warn(f"reading {type(self).__name__}[{key!r}] as a dict is deprecated: use the attribute "
                      f"(.{key}) or .as_json()", DeprecationWarning, stacklevel=3)

    def __getitem__(self, key: str) -> Any:
        self._warn(key)
        d = self.as_json()
        return d[key]

    def get(self, key: str, default: Any = None) -> Any:
        self._warn(key)
        return self.as_json().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._warn(key)
        return key in self.as_json()

    def keys(self) -> Any:
        self._warn("keys")
        return self.as_json().keys()
