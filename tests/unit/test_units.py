"""clusterbench.units: one figure prints the same everywhere (pure; no process)."""
from __future__ import annotations

import math

import pytest

from clusterbench.units import clock_duration, format_value, format_values, human_bytes, plain_number


@pytest.mark.parametrize("v, text", [
    (0, "0"), (0.0, "0"), (-0.0, "0"), (0.001234, "0.00123"), (0.5, "0.5"), (3.14159, "3.14"), (1, "1.00"),
    (42.42, "42.4"), (999.96, "1,000.0"), (1000, "1,000"), (12345.6, "12,346"), (-12345.6, "-12,346"),
    (-0.5, "-0.5"), (-3.14159, "-3.14"), (1.23e-9, "1.23e-09"), (123456789012.0, "123,456,789,012"),
    (1.2345e20, "1.234e+20"), (-1e16, "-1.000e+16"), (None, "-"), (math.nan, "nan"), (math.inf, "inf"),
    (-math.inf, "-inf"), ("n/a", "n/a"), (True, "True")])
def test_format_value(v, text):
    assert format_value(v) == text


def test_format_value_with_unit():
    assert format_value(12345.6, "MB/s") == "12,346 MB/s"
    assert format_value(12.5, "%") == "12.5%"
    assert format_value(math.inf, "s") == "inf s"
    assert format_value(None, "s") == "-"  # no unit after a missing figure
    assert format_value(49152, "B") == "48 KiB" and format_value(1536.0, "bytes") == "1.5 KiB"


def test_format_values_share_one_precision():
    assert format_values(None, [15000.4, 12.34, 0]) == ["15,000", "12", "0"]
    assert format_values(None, [42.42, 3.14159]) == ["42.4", "3.1"]
    assert format_values(None, [0.01234, 0.5]) == ["0.012", "0.500"]
    assert format_values("ns", [1.5, None, math.nan]) == ["1.50 ns", "-", "nan ns"]
    assert format_values(None, [-2.5, 1.0]) == ["-2.50", "1.00"]
    assert format_values(None, [2e20, 1.0]) == ["2.000e+20", "1.000e+00"]
    assert format_values(None, [None, math.inf]) == ["-", "inf"]
    assert format_values(None, []) == []


def test_format_values_bytes_share_one_scale():
    assert format_values("B", [2 ** 20, 512 * 1024]) == ["1.0 MiB", "0.5 MiB"]
    assert format_values("B", [2 ** 21, 2 ** 20]) == ["2 MiB", "1 MiB"]
    assert format_values("B", [100, 0]) == ["100 B", "0 B"]
    assert format_values("B", [None, 2 ** 40]) == ["-", "1 TiB"]


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (512, "512 B"), (1024, "1 KiB"), (1536.0, "1.5 KiB"), (16387, "16387 B"), (48 * 1024, "48 KiB"),
    (float(1 << 30), "1 GiB"), (3 << 40, "3 TiB"), (1 << 50, "1024 TiB"), (-2048, "-2 KiB"), (None, "-"),
    (math.nan, "nan"), (math.inf, "inf"), (11 * 2 ** 20 + 1, "11.0 MiB")])
def test_human_bytes(n, text):
    assert human_bytes(n) == text


def test_plain_number_and_clock_duration():
    assert [plain_number(v) for v in (None, 1073741824, 0.5, 2.0, 1e20, -3)] == ["", "1073741824", "0.5", "2", "1e+20",
                                                                                 "-3"]
    assert [clock_duration(s) for s in (0, 0.4, 65, 3599.6, -5)] == ["0m00s", "0m00s", "1m05s", "60m00s", "0m00s"]
