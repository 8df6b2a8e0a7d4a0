"""tune coll, pure parts: the algorithm enumerators on captured ompi_info/mpivars output (Open MPI
4.1.4 and MPICH 4.0.2 of Debian 12, tests/data/coll/), the rules file writer and parser, and the
search on a synthetic measurement (no MPI, no process)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from clusterbench.errors import UsageError
from clusterbench.tuning.coll import rules as R
from clusterbench.tuning.coll import search as S
from clusterbench.tuning.coll.algorithms import OMPI_COLL_IDS, Algorithm, parse_mpivars, parse_ompi_info, select
from clusterbench.tuning.coll.tuner import mpich_choice, rules_for

DATA = Path(__file__).resolve().parents[1] / "data" / "coll"


def test_ompi_info_enumerator_gives_each_ops_algorithms_without_ignore() -> None:
    algs = parse_ompi_info((DATA / "ompi_info-4.1.4-coll-tuned.txt").read_text())
    assert algs["allreduce"] == {1: "basic_linear", 2: "nonoverlapping", 3: "recursive_doubling", 4: "ring",
                                 5: "segmented_ring", 6: "rabenseifner"}
    assert algs["reduce-scatter"][3] == "ring" and algs["bcast"][9] == "scatter_allgather_ring"
    assert all(0 not in v for v in algs.values())
    assert set(OMPI_COLL_IDS) <= set(algs)


def test_mpivars_values_are_cut_from_the_glued_descriptions() -> None:
    vals = parse_mpivars((DATA / "mpivars-4.0.2-intra-algorithm.txt").read_text())
    assert vals["allreduce"] == ["nb", "smp", "recursive_doubling", "reduce_scatter_allgather"]
    assert vals["bcast"] == ["binomial", "nb", "smp", "scatter_recursive_doubling_allgather", "scatter_ring_allgather"]
    assert vals["reduce-scatter"] == ["nb", "noncommutative", "pairwise", "recursive_doubling", "recursive_halving"]
    assert set(vals) == set(OMPI_COLL_IDS)


def test_an_algorithm_the_mpi_lacks_is_one_line() -> None:
    have = [Algorithm("openmpi", "allreduce", i, n) for i, n in ((1, "basic_linear"), (4, "ring"))]
    assert select(have, ["ring", "1"], "Open MPI 4.1.4", "allreduce") == have[::-1]
    with pytest.raises(UsageError) as exc:
        select(have, ["9"], "Open MPI 4.1.4", "allreduce")
    assert "\n" not in str(exc.value) and "no allreduce algorithm '9'" in str(exc.value)
    assert "1:basic_linear" in (exc.value.fix or "")


def test_forcing_env_matches_what_the_benchmark_records() -> None:
    from clusterbench.benchmarks.mpi.coll import algorithm_from_env

    for a in (Algorithm("openmpi", "reduce-scatter", 3, "ring"), Algorithm("mpich", "allreduce", "smp", "smp")):
        assert algorithm_from_env(a.op, a.mpi, a.env()) == a.record()


def test_rules_file_round_trip_and_open_mpis_count_for_block_ops() -> None:
    text = R.format_ompi_rules("allgather", 4, [R.MsgRule(0, 0), R.MsgRule(4096, 4), R.MsgRule(65537, 0)],
                               comment="tune 1\n2 lines")
    assert text.splitlines()[2].split()[0] == "1" and text.splitlines()[3].split()[0] == "0"  # allgather is id 0
    assert R.parse_ompi_rules(text) == {"allgather": {4: [R.MsgRule(0, 0), R.MsgRule(4096, 4), R.MsgRule(65537, 0)]}}
    with pytest.raises(ValueError):
        R.parse_ompi_rules("1\n2\n1\n4\n3\n0 1 0 0\n")
    with pytest.raises(ValueError):
        R.format_ompi_rules("allreduce", 2, [R.MsgRule(8, 1)])
    algs = {"4:ring": Algorithm("openmpi", "allgather", 4, "ring")}
    # per-rank block ops: Open MPI counts P x the OSU size; default outside the measured sizes
    got = rules_for("allgather", 4, {16: "default", 1024: "4:ring", 4096: "4:ring"}, algs)
    assert got == [R.MsgRule(0, 0), R.MsgRule(4096, 4), R.MsgRule(16385, 0)]
    got = rules_for("allreduce", 2, {8: "4:ring"}, {"4:ring": Algorithm("openmpi", "allreduce", 4, "ring")})
    assert got == [R.MsgRule(0, 0), R.MsgRule(8, 4), R.MsgRule(9, 0)]


def test_unwritable_output_is_refused_before_anything(tmp_path: Path) -> None:
    for bad in (tmp_path / "no" / "such" / "x.rules", tmp_path):
        with pytest.raises(UsageError) as exc:
            R.check_writable(str(bad))
        assert "\n" not in str(exc.value)
    assert list(tmp_path.iterdir()) == []
    assert R.check_writable(str(tmp_path / "ok.rules")) == str(tmp_path / "ok.rules")
    assert not (tmp_path / "ok.rules").exists()


SIZES = [8, 64, 512, 4096, 32768]


class Synthetic:
    """Latency per (setting, size): 'fast-small' 30% faster below 1 KiB, 'fast-large' 30% faster
    from 4 KiB, 'slow' twice the default; 3% Gaussian noise; a clock advanced 2 s per launch."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.now = 0.0
        self.calls: list[str] = []

    def clock(self) -> float:
        return self.now

    def __call__(self, op: str, sizes, setting) -> dict[int, float]:
        self.now += 2.0
        name = setting if isinstance(setting, str) or setting is None else "tuned"
        self.calls.append(str(name))
        out = {}
        for s in sizes:
            base = 5.0 + s / 100.0
            f = {None: 1.0, "slow": 2.0, "fast-small": 0.7 if s < 1024 else 1.1,
                 "fast-large": 0.7 if s >= 4096 else 1.2}.get(name, 1.0)
            if name == "tuned":
                f = 0.7 if s < 1024 or s >= 4096 else 1.0
            out[s] = base * f * (1 + self.rng.gauss(0, 0.03))
        return out


def test_search_finds_each_ranges_winner_drops_the_loser_and_verifies() -> None:
    m = Synthetic()
    settings = {S.DEFAULT: None, "fast-small": "fast-small", "fast-large": "fast-large", "slow": "slow"}
    events: list[dict] = []
    ph = S.run_rounds("allreduce", SIZES, settings, m, budget_s=1000, clock=m.clock, progress=events.append)
    win = S.winners(ph, SIZES)
    assert win == {8: "fast-small", 64: "fast-small", 512: "fast-small", 4096: "fast-large", 32768: "fast-large"}
    assert ph.stopped == "decided" and ph.rounds >= S.MIN_ROUNDS and "slow" in ph.dropped
    # interleaved: every round measures every active setting once, in a rotated order
    assert m.calls[:4] == ["None", "fast-small", "fast-large", "slow"] and m.calls[4] == "fast-small"
    assert events[-1]["undecided"] == 0 and all(e["eta_s"] >= 0 for e in events)
    assert S.ranges(win) == [(8, 512, "fast-small"), (4096, 32768, "fast-large")]
    vph, kept = S.verify("allreduce", SIZES, "tuned", win, m, budget_s=1000, clock=m.clock)
    assert kept == win and vph.stopped == "decided"
    assert all(v.verdict == S.BETTER and v.gain_pct > 20 for v in vph.verdicts.values())


def test_default_best_where_no_candidate_beats_it_with_figures() -> None:
    m = Synthetic(3)
    ph = S.run_rounds("bcast", [512, 4096], {S.DEFAULT: None, "slow": "slow"}, m, budget_s=1000, clock=m.clock)
    assert S.winners(ph, [512, 4096]) == {512: S.DEFAULT, 4096: S.DEFAULT}
    v = ph.verdicts[4096]
    assert v.verdict == S.WORSE and v.best == "slow" and v.gain_pct < -50 and v.median_default > 0
    vph, kept = S.verify("bcast", [512, 4096], "tuned", S.winners(ph, [512, 4096]), m, budget_s=100, clock=m.clock)
    assert vph.stopped == "nothing to verify" and kept == {512: S.DEFAULT, 4096: S.DEFAULT}


def test_budget_ends_the_rounds_and_undecided_sizes_keep_the_default() -> None:
    m = Synthetic(5)
    same = {S.DEFAULT: None, "same": "same"}  # no difference at all: never decided
    ph = S.run_rounds("allreduce", SIZES, same, m, budget_s=30, reserve_s=10, clock=m.clock)
    assert ph.stopped == "budget" and 4 <= ph.rounds <= 5 and m.now <= 30 - 10 + 4
    assert set(S.winners(ph, SIZES).values()) == {S.DEFAULT}
    ph = S.run_rounds("allreduce", SIZES, same, m, budget_s=1e9, clock=m.clock, max_rounds=6)
    assert ph.stopped == "max-rounds" and ph.rounds == 6


def test_verification_drops_a_range_that_does_not_hold() -> None:
    m = Synthetic(11)
    chosen = {8: "fast-small", 64: "fast-small", 512: "fast-small", 4096: "x", 32768: "x"}

    def measure(op, sizes, setting):  # the tuned configuration is only faster at the small sizes
        got = m(op, sizes, None)
        return {s: v * (0.7 if setting == "tuned" and s < 1024 else 1.0) for s, v in got.items()}

    _, kept = S.verify("allreduce", SIZES, "tuned", chosen, measure, budget_s=1000, clock=m.clock, max_rounds=8)
    assert kept == {8: "fast-small", 64: "fast-small", 512: "fast-small", 4096: S.DEFAULT, 32768: S.DEFAULT}


def test_mpich_cvar_is_the_winner_of_most_sizes() -> None:
    assert mpich_choice({8: "smp", 64: "smp", 512: "nb", 4096: "default"}) == "smp"
    assert mpich_choice({8: "default"}) is None


def test_text_report_names_the_winners_and_where_the_default_is_best() -> None:
    from clusterbench.tuning.coll import CollTuneReport, format_report

    rep = CollTuneReport("abc", "allreduce", {"name": "openmpi", "version": "4.1.4"}, 4, None, [8, 4096, 65536],
                         [{"label": "4:ring", "mpi": "openmpi", "param": "coll_tuned_allreduce_algorithm", "value": 4,
                           "name": "ring"}], 600.0, search={"rounds": 5, "stopped": "decided", "dropped": {}},
                         verify={"rounds": 4, "stopped": "decided"})
    row = {"median_default": 10.0, "best": "4:ring", "median_best": 7.0, "gain_pct": 30.0, "verdict": "better"}
    rep.per_size = [{"size_bytes": 8, "search": {**row, "verdict": "worse", "gain_pct": -5.0}, "verify": None,
                     "kept": "default"},
                    {"size_bytes": 4096, "search": row, "verify": {"gain_pct": 28.0, "verdict": "better"},
                     "kept": "4:ring"},
                    {"size_bytes": 65536, "search": {**row, "verdict": "no significant difference"}, "verify": None,
                     "kept": "default"}]
    rep.ranges = [{"from_bytes": 8, "to_bytes": 8, "algorithm": "default", "verified_gain_pct": []},
                  {"from_bytes": 4096, "to_bytes": 4096, "algorithm": "4:ring", "verified_gain_pct": [28.0]}]
    rep.default_best, rep.undecided = [8], [65536]
    rep.output = {"path": "/x.rules", "written": True, "format": "openmpi-dynamic-rules", "use": "mpirun ..."}
    text = format_report(rep)
    assert "4096..4096 B: 4:ring (verified gain +28.0%)" in text
    assert "already best at 8 B" in text and "not decided at 65536 B" in text and "wrote /x.rules" in text
    assert rep.document()["tune_coll_schema"] == 1


def test_forced_environment_is_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from clusterbench.tuning.coll.tuner import RulesFile, forced

    monkeypatch.setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "0")
    monkeypatch.delenv("OMPI_MCA_coll_tuned_dynamic_rules_filename", raising=False)
    with forced(RulesFile("/x.rules").env()):
        assert os.environ["OMPI_MCA_coll_tuned_dynamic_rules_filename"] == "/x.rules"
        assert os.environ["OMPI_MCA_coll_tuned_use_dynamic_rules"] == "1"
    assert os.environ["OMPI_MCA_coll_tuned_use_dynamic_rules"] == "0"
    assert "OMPI_MCA_coll_tuned_dynamic_rules_filename" not in os.environ
