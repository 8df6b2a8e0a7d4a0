"""speed/'s scripts (validation.py, figure_audit.py) loaded as modules, once per process: speed/ is no
package, and validation.py memoises what it reads of the raw logs (a first ``--check`` compiles about a
thousand patterns, seconds; a second takes a tenth of that), so every test of a pytest-xdist worker reuses one
module and its memo, across test modules and whatever order the tests run in."""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

SPEED = Path(__file__).resolve().parents[1] / "speed"


@functools.cache
def speed_script(name: str):
    """speed/NAME.py as a module (``speed_NAME``), loaded at its first use in this process."""
    spec = importlib.util.spec_from_file_location(f"speed_{name}", SPEED / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
