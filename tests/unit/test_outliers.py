"""The robust outlier rule shared by the sweeps (hand-computed values)."""
from __future__ import annotations

import pytest

from clusterbench.analysis import outliers as O


def test_modified_z_hand_computed() -> None:
    # median 10, |dev| = 0,1,1,2,6 -> MAD 1; M = 0.6745 * dev
    z = O.modified_z({"a": 10, "b": 11, "c": 9, "d": 12, "e": 4})
    assert z["e"] == pytest.approx(0.6745 * -6)
    assert z["a"] == 0


def test_one_slow_node_among_eight_is_flagged_on_the_bad_side_only() -> None:
    vals = {f"n{i}": 10.0 + 0.1 * i for i in range(7)} | {"n7": 5.0}
    assert set(O.flag(vals, higher_is_better=True)) == {"n7"}
    # the same value on a lower-is-better metric (latency) is the good side: nothing
    assert O.flag(vals, higher_is_better=False) == {}
    fast = {f"n{i}": 10.0 + 0.1 * i for i in range(7)} | {"n7": 20.0}
    assert O.flag(fast, higher_is_better=True) == {}
    assert set(O.flag(fast, higher_is_better=False)) == {"n7"}


def test_identical_peers_and_small_differences_are_not_flagged() -> None:
    same = {"a": 5.0, "b": 5.0, "c": 5.0, "d": 4.9}  # MAD 0: only the 10 % floor decides
    assert O.flag(same, higher_is_better=True) == {}
    assert set(O.flag({"a": 5.0, "b": 5.0, "c": 5.0, "d": 4.0}, higher_is_better=True)) == {"d"}


def test_too_few_peers() -> None:
    assert O.flag({"a": 1.0, "b": 10.0}, higher_is_better=True) == {}


def test_a_node_is_not_flagged_closer_than_the_samples_own_noise():
    """Three nodes sharing two cpus measure 10-30 % apart whatever their health: a node 18 % below the
    median is flagged on quiet samples, not when its samples (or its peers') range over 25 %; a node
    at half speed is flagged either way."""
    vals = {"a": 100.0, "b": 99.0, "c": 82.0}
    quiet = {"a": 0.02, "b": 0.03, "c": 0.02}
    noisy = {"a": 0.25, "b": 0.30, "c": 0.20}
    flag, spread = O.flag, O.spread
    assert set(flag(vals, True, spreads=quiet)) == {"c"}
    assert flag(vals, True, spreads=noisy) == {}
    assert flag(vals, True, spreads={"a": 0.01, "b": 0.01, "c": 0.35}) == {}  # its own samples range 35 %
    half = flag({"a": 100.0, "b": 99.0, "c": 50.0}, True, spreads=noisy)
    assert set(half) == {"c"} and half["c"]["floor"] == pytest.approx(0.25)
    assert flag(vals, True) == flag(vals, True, spreads={"a": None, "b": None, "c": None})  # no samples: as before
    assert spread([10.0, 12.0, 11.0]) == pytest.approx(2 / 11) and spread([3.0]) is None and spread(None) is None
