"""``--power pmic``: a Raspberry Pi 5's PMIC rails as a power source, on a recorded pmic_read_adc
(tests/data/vcgencmd/SOURCES.md); vcgencmd itself is replaced in-process (no process starts)."""
from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.energy import figures as E
from clusterbench.energy.build import SOURCES, build_meter
from clusterbench.energy.pmic import MEASURES, PmicSource
from clusterbench.energy.source import Sample
from clusterbench.energy.spec import parse_spec
from clusterbench.energy.text import energy_lines
from clusterbench.errors import UsageError
from clusterbench.report.energy import source_text
from clusterbench.telemetry import board
from clusterbench.telemetry.vcgencmd import parse_pmic

PI5 = (Path(__file__).resolve().parents[1] / "data" / "vcgencmd" / "rpi5-zeus-pmic_read_adc.txt").read_text()


@pytest.fixture
def pi5(monkeypatch):
    """This machine answers vcgencmd pmic_read_adc as the recorded Pi 5 did."""
    calls = []

    def call(*args, timeout=board.TIMEOUT):
        calls.append(args)
        if args != ("pmic_read_adc",):
            raise board.VcgencmdFailed(f"unexpected {args}")
        return PI5
    monkeypatch.setattr(board, "present", lambda: "/usr/bin/vcgencmd")
    monkeypatch.setattr(board, "call", call)
    return calls


def test_pmic_is_a_registered_kind_read_on_this_machine(pi5) -> None:
    assert "pmic" in SOURCES
    m = build_meter(["pmic"])
    (src,) = m.sources
    assert isinstance(src, PmicSource) and src.interval == 1.0  # about 1 Hz
    m.check()
    assert src.read().watts == pytest.approx(parse_pmic(PI5).watts)
    d = src.describe()
    assert d["spec"] == "pmic" and d["measures"] == MEASURES and "VDD_CORE" in d["rails"] and "EXT5V" not in d["rails"]
    assert "no supply loss, no USB devices, no switch" in MEASURES
    assert "no supply loss" in source_text({"pi5": d})


def test_pmic_energy_over_a_phase_is_integrated_like_the_others(pi5) -> None:
    (src,) = build_meter(["pmic"]).sources
    w = parse_pmic(PI5).watts
    src.samples = [Sample(100.0 + i, 10.0 + i, watts=w) for i in range(6)]
    fig = src.energy(101.0, 104.0)
    assert fig["joules"] == pytest.approx(3 * w) and fig["avg_watts"] == pytest.approx(w)
    assert E.implausible_power(fig["joules"], fig["avg_watts"], 1, fig.get("peak_watts")) is None
    lines = energy_lines({"sources": {"pi5": src.describe()}, "basis": "measured", "benchmarks": []}, [])
    assert "pi5 pmic (1 Hz; the board's PMIC rails: no supply loss, no USB devices, no switch)" in lines[0]


def test_pmic_refused_in_one_line_without_vcgencmd(monkeypatch) -> None:
    monkeypatch.setattr(board, "present", lambda: None)
    with pytest.raises(UsageError) as e:
        build_meter(["pmic"]).check()
    assert "vcgencmd is not installed here" in e.value.problem and "\n" not in str(e.value)
    assert "Raspberry Pi 5" in e.value.fix


def test_pmic_refused_on_a_board_without_the_pmic(monkeypatch) -> None:
    monkeypatch.setattr(board, "present", lambda: "/usr/bin/vcgencmd")

    def call(*args, timeout=board.TIMEOUT):  # a Pi 4's firmware does not know the command
        raise board.VcgencmdFailed('`vcgencmd pmic_read_adc`: error=1 error_msg="Command not registered"')
    monkeypatch.setattr(board, "call", call)
    with pytest.raises(UsageError) as e:
        build_meter(["pmic"]).check()
    assert "reads no power rails here" in e.value.problem


def test_pmic_spec_checks() -> None:
    assert parse_spec("pmic").kind == "pmic" and parse_spec("n1=pmic").node == "n1"
    with pytest.raises(UsageError, match="takes no argument"):
        parse_spec("pmic:VDD_CORE")
    with pytest.raises(UsageError, match="reads only the machine clusterbench runs on"):
        build_meter(["pi2=pmic", "pi1=watts:7"], nodes=["pi1", "pi2"], local=[])
