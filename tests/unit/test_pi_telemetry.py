"""A Raspberry Pi's vcgencmd, parsed on recorded outputs of real boards (tests/data/vcgencmd/SOURCES.md),
and a run's readings judged. Pure: no process."""
from __future__ import annotations

from pathlib import Path

import pytest

from clusterbench.telemetry import board, verdict, watch
from clusterbench.telemetry import vcgencmd as V

DATA = Path(__file__).resolve().parents[1] / "data" / "vcgencmd"


def rec(name: str) -> str:
    return (DATA / name).read_text()


def throttled_line(name: str) -> str:
    return next(ln for ln in rec(name).splitlines() if "throttled" in ln or ln.strip().isalnum())


# ------------------------------------------------------------------ get_throttled: every bit
@pytest.mark.parametrize("name, mask, now, since", [
    ("rpi3-firmware615-a.txt", 0x50000, [], ["under_voltage", "throttled"]),
    ("rpi3-firmware615-b.txt", 0x50005, ["under_voltage", "throttled"], ["under_voltage", "throttled"]),
    ("rpi3bplus-sysfs-get_throttled-a.txt", 0x80000, [], ["soft_temp_limit"]),
    ("rpi3bplus-sysfs-get_throttled-b.txt", 0x80008, ["soft_temp_limit"], ["soft_temp_limit"]),
    ("octoprint-navbartemp75-get_throttled.txt", 0x20002, ["arm_capped"], ["arm_capped"]),
])
def test_get_throttled_of_real_boards(name, mask, now, since) -> None:
    got = V.parse_throttled(throttled_line(name))
    assert got == mask
    flags = V.throttled_flags(got)
    assert flags == {"now": now, "since_boot": since, "unknown_bits": []}
    assert V.throttled_doc(got)["raw"] == f"0x{mask:x}"


def test_the_recordings_cover_every_bit() -> None:
    seen = 0
    for name in ("rpi3-firmware615-b.txt", "rpi3bplus-sysfs-get_throttled-b.txt",
                 "octoprint-navbartemp75-get_throttled.txt"):
        seen |= V.parse_throttled(throttled_line(name))
    assert seen == V.KNOWN_MASK == 0xF000F
    assert [b.bit for b in V.THROTTLED_BITS] == [0, 1, 2, 3]
    for b in V.THROTTLED_BITS:  # each bit alone: now, and its since-boot copy 16 higher
        assert V.throttled_flags(1 << b.bit)["now"] == [b.key]
        assert V.throttled_flags(1 << (b.bit + 16))["since_boot"] == [b.key]


def test_get_throttled_clear_and_garbage() -> None:
    assert V.throttled_flags(V.parse_throttled("throttled=0x0")) == {"now": [], "since_boot": [], "unknown_bits": []}
    assert V.throttled_flags(0x100000)["unknown_bits"] == [20]
    for bad in ("", "throttled=", "error=1 error_msg=\"Command not registered\"", "throttled=0x0\nthrottled=0x0"):
        with pytest.raises(ValueError):
            V.parse_throttled(bad)


# ------------------------------------------------------------------ measure_temp, measure_clock arm
def test_temp_and_clock_of_real_boards() -> None:
    assert V.parse_temp(rec("rpi3-firmware615-a.txt").splitlines()[0]) == 39.2
    assert V.parse_clock(rec("rpi2-dietpi3225-measure_clock_arm.txt")) == 900e6
    s = board.parse_sample(rec("duckietown358-clock-temp-throttled.txt"))  # three commands' output at once
    assert s == {"arm_hz": 1.4e9, "temp_c": 62.3, "throttled": 0}
    for bad, parse in (("temp=hot", V.parse_temp), ("frequency(45)=", V.parse_clock), ("", V.parse_temp)):
        with pytest.raises(ValueError):
            parse(bad)


# ------------------------------------------------------------------ a Pi 5's PMIC
def test_pmic_of_a_real_pi5() -> None:
    p = V.parse_pmic(rec("rpi5-zeus-pmic_read_adc.txt"))
    assert sorted(p.rails) == sorted(["3V7_WL_SW", "3V3_SYS", "1V8_SYS", "DDR_VDD2", "DDR_VDDQ", "1V1_SYS", "0V8_SW",
                                      "VDD_CORE", "3V3_DAC", "3V3_ADC", "0V8_AON", "HDMI"])  # names as printed
    assert p.voltage_only == {"EXT5V": 5.09066, "BATT": 0.0} and p.current_only == {}
    assert p.rails["VDD_CORE"] == (6.22421, 0.861733)
    expected = sum(a * v for a, v in p.rails.values())
    assert p.watts == pytest.approx(expected) and 6.0 < p.watts < 8.0  # VDD_CORE alone is 5.36 W
    assert p.rail_watts()["VDD_CORE"] == pytest.approx(6.22421 * 0.861733)


def test_pmic_refuses_what_is_not_a_pmic_reading() -> None:
    for bad in ("", "error=2 error_msg=\"Invalid arguments\"", " EXT5V_V volt(24)=5.09066000V\n",
                " VDD_CORE_A current(7)=6.2V\n VDD_CORE_V volt(15)=0.86V\n"):
        with pytest.raises(ValueError):
            V.parse_pmic(bad)


# ------------------------------------------------------------------ a run's readings judged
def _snap(mask: int, temp: float = 50.0) -> dict:
    return {"throttled": V.throttled_doc(mask), "temp_c": temp, "arm_hz": 1.5e9}


def test_a_node_that_throttled_mid_run_flags_the_run() -> None:
    readings = {"pi1": {"before": _snap(0), "after": _snap(0x50000), "samples": [
                    {"throttled": 0x50005, "temp_c": 61.0, "arm_hz": 6e8}, {"throttled": 0x50000, "temp_c": 60.0}]},
                "pi2": {"before": _snap(0), "after": _snap(0), "samples": []}}
    ws, notes, summ = verdict.judge(readings)
    assert [w.code for w in ws] == ["pi-throttled"]
    (w,) = ws
    assert "pi1 was under-voltage, throttled during the run" in w.message and "0x0 before, 0x50000 after" in w.message
    assert "power supply" in w.remedy and "cool" not in w.remedy and "pi1" in w.remedy
    assert summ["pi1"]["arm_mhz"] == {"min": 600.0, "max": 1500.0} and summ["pi1"]["samples"] == 2
    assert notes[1].startswith("pi: pi2 get_throttled 0x0 before, 0x0 after; no under-voltage")


@pytest.mark.parametrize("before, after, samples, during, fixes", [
    (0x80000, 0x80008, [], ["soft_temp_limit"], ["thermal"]),        # already since boot: the "now" bit says again
    (0x0, 0x20000, [], ["arm_capped"], ["power", "thermal"]),        # capped, cause unseen: both fixes
    (0x0, 0x40004, [{"temp_c": 84.0}], ["throttled"], ["thermal"]),  # throttled while hot
    (0x50000, 0x50000, [], [], []),                                  # before the run only: not this run's
])
def test_what_counts_as_during_the_run(before, after, samples, during, fixes) -> None:
    s = verdict.node_summary(_snap(before), _snap(after), samples)
    assert s["during"] == during and verdict.causes(s) == fixes
    if not during:
        assert verdict.warning("n", s) is None
        assert "already since boot before it: under-voltage, throttled" in verdict.note("n", s)


def test_flag_adds_the_warning_to_every_figure() -> None:
    from clusterbench.benchmarks.declare import Result

    r = Result(benchmark="stream", metric="triad", value=1.0, unit="GB/s", higher_is_better=True, params={},
               samples=[1.0], summary={})
    ws, _, _ = verdict.judge({"pi1": {"before": _snap(0), "after": _snap(0x10001), "samples": []}})
    (got,) = watch.flag([r], ws)
    assert got.warnings[-1]["code"] == "pi-throttled" and r.warnings == []
    assert watch.flag([r], []) == [r]


# ------------------------------------------------------------------ doctor: pi-throttled
def _evidence(root: Path) -> dict:
    from clusterbench.doctor import evidence as E
    from clusterbench.probe.sysfs import FsRoot

    return {"items": {"pi.throttled": E.pi_throttled(FsRoot(str(root)), live=False)}}


def test_doctor_names_the_node_and_the_fix_on_a_recorded_pi(tmp_path) -> None:
    from clusterbench.doctor import engine
    from clusterbench.doctor import evidence as E

    f = tmp_path / E.PI_THROTTLED.lstrip("/")
    f.parent.mkdir(parents=True)
    f.write_text(rec("rpi3bplus-sysfs-get_throttled-b.txt"))  # the kernel's copy, recorded on a Pi 3B+
    ev = _evidence(tmp_path)
    assert ev["items"]["pi.throttled"]["value"]["raw"] == "0x80008"
    out = engine.evaluate({"pi1": ev, "pi2": _evidence(tmp_path / "not-a-pi")})
    (hit,) = [x for x in out["findings"] if x["rule"] == "pi-throttled"]
    assert hit["node"] == "pi1" and "soft temperature limit since boot; soft temperature limit now" in hit["summary"]
    assert any("cool the board" in x for x in hit["fix"]) and not any("power supply" in x for x in hit["fix"])
    assert hit["apply"] is None  # advice: nothing doctor --fix could run
    assert {"rule": "pi-throttled", "node": "pi2", "title": engine.rule("pi-throttled").title} in out["passed"]


def test_doctor_on_recorded_vcgencmd_outputs() -> None:
    from clusterbench.doctor import engine
    from clusterbench.doctor import evidence as E

    r = engine.rule("pi-throttled")
    uv = {"items": {"pi.throttled": E.item(V.throttled_doc(V.parse_throttled(throttled_line("rpi3-firmware615-b.txt"))),
                                           "vcgencmd get_throttled")}}
    hit = r.check(uv)
    assert "under-voltage, throttled since boot" in hit.summary and "power supply" in hit.fix[0]
    clear = {"items": {"pi.throttled": E.item(V.throttled_doc(0), "vcgencmd get_throttled")}}
    assert r.check(clear) is None
    snap_pi = {"items": {"pi.throttled": E.unreadable("vcgencmd get_throttled", E.LIVE_ONLY)}}
    assert "needs the running machine" in r.check(snap_pi).why


# ------------------------------------------------------------------ a run across hosts (launch.remote replaced)
def test_watch_reads_every_node_with_vcgencmd_through_launch(monkeypatch) -> None:
    import subprocess

    from clusterbench.launch import remote

    masks = {"pi1": [0, 0x50005], "pi2": [0, 0]}
    gathered = []

    def gather(hosts, code, timeout, keep_going):
        assert code == board.SNIPPET and keep_going
        gathered.append(list(hosts))
        out = {}
        for h in hosts:
            if h == "x86":
                out[h] = {"telemetry": None}  # no vcgencmd there
            elif h == "gone":
                out[h] = {"error": "cannot reach gone over ssh: it does not answer"}
            else:
                out[h] = {"telemetry": _snap(masks[h].pop(0))}
        return out

    def run_command(host, argv, timeout):
        assert argv == ["sh", "-c", board.SAMPLE_SH] and host in ("pi1", "pi2")
        return subprocess.CompletedProcess(argv, 0, "throttled=0x0\ntemp=70.1'C\nfrequency(48)=1500345728\n", "")

    monkeypatch.setattr(remote, "gather", gather)
    monkeypatch.setattr(remote, "run_command", run_command)
    monkeypatch.setenv(watch.ENV_INTERVAL, "0.2")
    w = watch.Watch(["pi1", "pi2", "x86", "gone"])
    w.start()
    assert sorted(w.nodes) == ["pi1", "pi2"]
    import time
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all(r["samples"] for r in w.nodes.values()):
        time.sleep(0.05)
    ws, notes = w.stop()
    assert gathered == [["pi1", "pi2", "x86", "gone"], ["pi1", "pi2"]]  # after: only the nodes with vcgencmd
    assert [x.message.split(" was ")[0] for x in ws] == ["pi1"]
    assert notes[0] == "pi: vcgencmd not read on gone (cannot reach gone over ssh: it does not answer)"
    assert any(n.startswith("pi: pi2 get_throttled 0x0 before, 0x0 after; no under-voltage") and "70.1" in n
               for n in notes)


def test_a_machine_without_vcgencmd_is_not_watched(monkeypatch) -> None:
    monkeypatch.setattr(board, "present", lambda: None)
    w = watch.Watch()
    w.start()
    assert w.nodes == {} and w._thread is None
    assert w.stop() == ([], [])


# ------------------------------------------------------------------ the hand-fixed defaults, on a recorded Pi 4
def test_softirq_rule_on_a_recorded_pi4_under_hpl() -> None:
    """The one recording of a Pi 4's receive processing at hand (tests/data/pi4/SOURCES.md): /proc/softirqs
    during HPL across the cluster. Its counts are since boot, not the deltas over a load the rule is given
    by ``doctor --during`` (the boot's share is small next to 1.5e9 NET_RX): the rule names CPU 0 and
    points at RPS/RFS, the fix the dissertation applied by hand."""
    from clusterbench.doctor import engine
    from clusterbench.doctor import evidence as E

    counts = E.parse_softirqs((DATA.parent / "pi4" / "softirqs-during-hpl.txt").read_text())
    assert counts["NET_RX"][0] == 1505715680
    ev = {"items": {"softirqs.load": E.item({**counts, "load": "hpl", "seconds": 60.0}, "/proc/softirqs"),
                    "cpus.online": E.item([0, 1, 2, 3], "/sys/devices/system/cpu/online")}}
    hit = engine.rule("softirq-concentrated").check(ev)
    assert "NET_RX: 100% of 1505719154 on CPU 0" in hit.summary and "NET_TX: 100% of 223238264 on CPU 0" in hit.summary
    assert "rps-single-queue" in hit.fix[0]
