"""``--dist loadgroup`` (the unit tier's, bootstrap.sh) hands a test module without an ``xdist_group`` to one
pytest-xdist worker as one unit of work (tests/conftest.py's scheduler): the module's imports and its
module-wide fixtures are paid once, not on both workers. No group here, on purpose."""
from __future__ import annotations

import pytest


def _same_worker_as_my_neighbour(request: pytest.FixtureRequest, me: str, other: str) -> None:
    """Under --dist loadgroup a module without a group is one unit of work (tests/conftest.py's
    scheduler): its tests run on one worker. Each of two tests writes its worker's name where both
    workers see it; the second to run finds the first's and compares."""
    config = request.config
    if not (hasattr(config, "workerinput") and getattr(config.option, "loadgroup", False)):
        pytest.skip("checks pytest-xdist workers under --dist loadgroup (the unit tier: -n 2 --dist loadgroup)")
    import os

    shared = request.getfixturevalue("tmp_path_factory").getbasetemp().parent  # the workers' common folder
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    (shared / f"module-unit-{me}").write_text(worker)
    there = shared / f"module-unit-{other}"
    if there.exists():
        assert there.read_text() == worker, "a module's tests were split across the workers"


def test_a_module_stays_on_one_worker_first(request: pytest.FixtureRequest) -> None:
    _same_worker_as_my_neighbour(request, "first", "second")


def test_a_module_stays_on_one_worker_second(request: pytest.FixtureRequest) -> None:
    _same_worker_as_my_neighbour(request, "second", "first")
