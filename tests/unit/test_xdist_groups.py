"""``--dist loadgroup`` (the unit tier's, bootstrap.sh) keeps an ``xdist_group``'s tests on one pytest-xdist
worker: test_architecture.py parses the source once, test_validation_docs.py and test_figure_audit.py read
the speed logs once. pytest-xdist 3.8 names the group where pytest 9 no longer reads it, so tests/conftest.py
names it; were that lost, the groups would be split again, silently, and each worker pay for them."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("xdist-groups")


def test_a_grouped_test_runs_in_its_group_under_loadgroup(request: pytest.FixtureRequest) -> None:
    config = request.config
    if not (hasattr(config, "workerinput") and getattr(config.option, "loadgroup", False)):
        pytest.skip("checks a pytest-xdist worker under --dist loadgroup (the unit tier: -n 2 --dist loadgroup)")
    # xdist's scheduler takes the group from the id's '@' suffix (LoadGroupScheduling._split_scope)
    assert request.node.nodeid.endswith("@xdist-groups"), request.node.nodeid
