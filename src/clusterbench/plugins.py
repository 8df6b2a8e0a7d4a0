"""How registries find their members: every public module of a package (each registers itself on
import; a private ``_x`` module is a helper, imported by its users) and the modules other packages name
in an entry-point group (a plug-in that fails to import is left out with a warning, never the built-in
members with it). Used by the benchmark, launcher and allocation registries."""
from __future__ import annotations

import importlib
import pkgutil
import warnings
from collections.abc import Iterable


def import_package_modules(path: Iterable[str], package: str, *, recursive: bool = False) -> None:
    """Import every public module of the package at ``path`` named ``package`` (its subpackages' too
    with ``recursive``)."""
    found = pkgutil.walk_packages(path, prefix=f"{package}.") if recursive else \
        pkgutil.iter_modules(path, prefix=f"{package}.")
    for mod in found:
        if not mod.name.rsplit(".", 1)[-1].startswith("_"):
            importlib.import_module(mod.name)


def load_entry_points(group: str, what: str) -> None:
    """Import the plug-ins named in entry-point ``group``; ``what`` names them in the warning a broken
    one gets (e.g. "launcher plug-in")."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=group):
        try:
            ep.load()
        except Exception as exc:  # noqa: BLE001 - any failure of a plug-in leaves it out, no more
            warnings.warn(f"{what} {ep.name} ({ep.value}) failed to load: {exc}", stacklevel=2)
