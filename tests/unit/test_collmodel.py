"""The network model of issue 26 (analysis/collmodel.py, analysis/collalgorithms.py): each
algorithm's cost against hand-computed values for small p, the fit recovering alpha and beta from
noisy synthetic sweeps (and choosing the two-regime fit only when it is better), judge and its
findings, and the collective_model limit on hand-made figures of the record contract. Pure."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest

from clusterbench.analysis import collmodel as cm
from clusterbench.analysis.collalgorithms import ALGORITHMS, binomial_root_blocks
from clusterbench.analysis.collmodel import Line, NetModel

import collmodelkit as kit

#: alpha 1 us, beta 0.01 us/B: t(100 B) = 2 us, t(200 B) = 3 us, t(400 B) = 5 us
NET = NetModel("hockney", Line(1.0, 0.01))

# (op, p, size) -> {algorithm: us}, computed by hand from the formulas (docstrings of collalgorithms)
HAND = {
    ("allreduce", 4, 400): {"recursive doubling": 10.0, "ring": 12.0, "rabenseifner": 10.0,
                            "binomial reduce + bcast": 20.0},
    ("allreduce", 5, 400): {"recursive doubling": 20.0, "ring": 14.4, "rabenseifner": 20.0,
                            "binomial reduce + bcast": 30.0},
    ("bcast", 4, 400): {"binomial tree": 10.0, "scatter + ring allgather": 11.0, "linear": 15.0},
    ("bcast", 3, 300): {"binomial tree": 8.0, "scatter + ring allgather": 8.0, "linear": 8.0},
    ("reduce", 4, 400): {"binomial tree": 10.0, "rabenseifner": 10.0},
    ("allgather", 4, 100): {"ring": 6.0, "recursive doubling": 5.0, "bruck": 5.0},
    ("allgather", 5, 100): {"ring": 8.0, "bruck": 7.0},  # recursive doubling: powers of two only
    ("alltoall", 4, 100): {"pairwise exchange": 6.0, "bruck": 6.0, "linear": 6.0},
    ("alltoall", 5, 100): {"pairwise exchange": 8.0, "bruck": 8.0, "linear": 8.0},
    ("reduce-scatter", 4, 400): {"ring": 6.0, "recursive halving": 5.0},
    ("reduce-scatter", 5, 500): {"ring": 8.0, "recursive halving": 13.75},
    ("gather", 4, 100): {"binomial tree": 5.0, "linear": 6.0},
    ("scatter", 4, 100): {"binomial tree": 5.0, "linear": 6.0},
    ("barrier", 4, 0): {"dissemination": 2.0, "recursive doubling": 2.0},
    ("barrier", 5, 0): {"dissemination": 3.0, "recursive doubling": 4.0},
}


@pytest.mark.parametrize("key", list(HAND), ids=lambda k: f"{k[0]}-p{k[1]}-{k[2]}B")
def test_each_formula_against_hand_computed_values(key):
    op, p, n = key
    assert cm.predict(op, p, n, NET) == pytest.approx(HAND[key])


def test_every_op_has_its_standard_algorithms_and_the_lower_bound_is_their_minimum():
    assert set(ALGORITHMS) == {"allreduce", "bcast", "alltoall", "allgather", "reduce", "reduce-scatter", "gather",
                               "scatter", "barrier"}
    assert cm.lower_bound("allgather", 5, 100, NET) == ("bruck", 7.0)
    assert cm.lower_bound("allreduce", 5, 400, NET) == ("ring", 14.4)


def test_closed_forms_for_a_power_of_two():
    a, b, p, n = 3.0, 0.002, 16, 1 << 16
    net = NetModel("hockney", Line(a, b))
    got = cm.predict("allreduce", p, n, net)
    assert got["ring"] == pytest.approx(2 * (p - 1) * a + 2 * (p - 1) / p * n * b)
    assert got["rabenseifner"] == pytest.approx(2 * 4 * a + 2 * (p - 1) / p * n * b)
    assert got["recursive doubling"] == pytest.approx(4 * (a + n * b))
    assert cm.predict("bcast", p, n, net)["scatter + ring allgather"] == pytest.approx((4 + p - 1) * a + 2 * (p - 1) / p * n * b)
    assert cm.predict("alltoall", p, 64, net)["bruck"] == pytest.approx(4 * a + p / 2 * 4 * 64 * b)
    assert binomial_root_blocks(8) == [4, 2, 1] and binomial_root_blocks(6) == [2, 2, 1]


def test_reductions_computation_is_ignored_unless_declared():
    with_gamma = NetModel("hockney", Line(1.0, 0.01), gamma_us_per_byte=0.001)
    assert cm.predict("allreduce", 4, 400, with_gamma)["ring"] == pytest.approx(12.0 + 0.75 * 400 * 0.001)
    assert cm.predict("bcast", 4, 400, with_gamma) == cm.predict("bcast", 4, 400, NET)  # nothing reduced


def test_bad_op_or_ranks_refused():
    with pytest.raises(ValueError, match="no network model"):
        cm.predict("alltoallw", 4, 8, NET)
    with pytest.raises(ValueError, match="2 ranks"):
        cm.predict("bcast", 1, 8, NET)


# -- the fit ------------------------------------------------------------------------------------
def _noisy(fn, sizes, rel: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [fn(s) * (1 + rng.gauss(0, rel)) for s in sizes]


@pytest.mark.parametrize("seed", range(5))
def test_fit_recovers_alpha_and_beta_within_10_and_5_percent_from_3_percent_noise(seed):
    """Hockney with 3% multiplicative noise, 0 B .. 1 MiB: alpha within 10%, beta within 5%, one line kept."""
    sizes = kit.P2P_SIZES
    m = cm.fit(sizes, _noisy(lambda s: 5.0 + s * 1e-3, sizes, 0.03, seed))
    assert m.kind == "hockney" and m.large is None
    assert m.alpha_us == pytest.approx(5.0, rel=0.10) and m.beta_us_per_byte == pytest.approx(1e-3, rel=0.05)
    assert m.rms_rel < cm.NOISE_REL and m.points == len(sizes)


def test_the_weights_let_small_sizes_set_alpha():
    """Unweighted least squares would let the MiB sizes' absolute error swamp a 1 us latency."""
    sizes = kit.P2P_SIZES
    ts = [1.0 + s * 1e-3 for s in sizes]
    ts[-1] *= 1.05  # 52 us off at 1 MiB
    assert cm.fit(sizes, ts).alpha_us == pytest.approx(1.0, rel=0.1)


@pytest.mark.parametrize("seed", range(3))
def test_two_regimes_win_only_where_the_data_show_a_protocol_switch(seed):
    sizes = kit.P2P_SIZES
    step = cm.fit(sizes, _noisy(lambda s: 2.0 + s * 1e-3 if s < 16384 else 30.0 + s * 0.8e-3, sizes, 0.02, seed))
    assert step.kind == "two-regime" and step.breakpoint_bytes == 16384
    assert step.rms_rel * cm.GAIN <= step.hockney_rms_rel
    assert step.large.beta_us_per_byte == pytest.approx(0.8e-3, rel=0.05)
    assert step.t(1 << 20) == pytest.approx(30.0 + (1 << 20) * 0.8e-3, rel=0.03)
    assert "two-regime" in step.describe()
    plain = cm.fit(sizes, _noisy(lambda s: 2.0 + s * 1e-3, sizes, 0.02, seed))
    assert plain.kind == "hockney"  # noise alone never buys a second regime


def test_fit_refuses_too_little_and_drops_bad_points():
    with pytest.raises(ValueError, match="two sizes"):
        cm.fit([8, 8], [1.0, 1.1])
    m = cm.fit([0, 8, 1024, 4096], [1.0, float("nan"), 2.024, -1.0])
    assert m.points == 2 and m.alpha_us == pytest.approx(1.0) and m.beta_us_per_byte == pytest.approx(1e-3)
    assert cm.fit_p2p(None) is None and cm.fit_p2p({"size_bytes": [0, 8], "half_rtt_us": [1.0]}) is None
    assert cm.fit_p2p(kit.p2p()).alpha_us == pytest.approx(kit.ALPHA_US)


def test_fit_keeps_alpha_and_beta_non_negative():
    m = cm.fit([0, 1024, 4096], [5.0, 4.0, 3.0])  # a falling line: beta 0, alpha the weighted mean
    assert m.beta_us_per_byte == 0 and m.alpha_us > 0


# -- judge and findings --------------------------------------------------------------------------
def test_judge_efficient_figures_have_no_finding():
    j = cm.judge("allreduce", 4, 400, 12.5, NET)
    assert (j.best_algorithm, j.model_us, j.finding) == ("recursive doubling", 10.0, None)
    assert j.efficiency == pytest.approx(0.8)


@pytest.mark.parametrize("context, reason, words", [
    ({"slow": ["node n3: links x10 below the others"]}, "slow link or node", "n3"),
    ({"cores": 2}, "oversubscription", "4 ranks on 2 cores"),
    ({"oversubscribed": True, "neighbours": {200: 0.9}}, "oversubscription", "share cores"),
    ({"neighbours": {200: 0.9, 400: 0.1, 800: 0.3}}, "algorithm switch point", "90% at 200 B"),
    ({"neighbours": {200: 0.9}, "model": NetModel("hockney", Line(1.0, 0.01), rms_rel=0.9)}, "unsteady sweep", "90% RMS"),
    ({"neighbours": {200: 0.3, 800: 0.2}}, "unexplained", "unexplained"),
    (None, "unexplained", "unexplained"),
])
def test_far_off_figures_are_findings_with_the_likely_reason(context, reason, words):
    context = dict(context or {})
    j = cm.judge("allreduce", 4, 400, 100.0, context.pop("model", NET), context=context)
    assert j.efficiency == pytest.approx(0.1) and j.reason == reason
    assert j.finding.startswith("allreduce 400 B on 4 ranks: 100 us measured, 10% of the network model's 10 us")
    assert words in j.finding


def test_findings_over_a_run_use_the_series_neighbours_and_shared_cpus():
    rs = [r for size, eff in ((8, 0.9), (1024, 0.2), (65536, 0.8)) for r in kit.at_efficiency("allreduce", size, eff)]
    (line,) = cm.findings(rs)
    assert "allreduce 1024 B on 4 ranks" in line and "algorithm switch point" in line
    shared = [r for size in (8, 1024) for r in kit.at_efficiency("bcast", size, 0.3, shared_cpus=True)]
    assert all("oversubscription" in f for f in cm.findings(shared)) and len(cm.findings(shared)) == 2
    nb = kit.at_efficiency("bcast", 8, 0.1, nonblocking=True)
    assert cm.findings(nb) == [] and nb[0].limits == []  # its latency includes the overlapped compute


# -- the limit -----------------------------------------------------------------------------------
@pytest.mark.parametrize("op", list(ALGORITHMS))
def test_the_limit_gives_the_model_efficiency_for_latency_and_busbw(op):
    size = 0 if op == "barrier" else 1024
    figs = kit.at_efficiency(op, size, 0.4)
    _, us = cm.lower_bound(op, 4, size, kit.model())
    lat = figs[0]
    (lim,) = lat.limits
    assert lim["name"] == "collective_model" and lim["value"] == pytest.approx(us)
    assert lim["fraction"] == pytest.approx(0.4) and "network model" in lim["description"]
    assert "Hockney (alpha 2 us" in lim["description"]
    if op != "barrier":
        (blim,) = figs[1].limits
        assert blim["fraction"] == pytest.approx(0.4) and blim["value"] == pytest.approx(figs[1].value / 0.4)


def test_the_limit_says_nothing_without_a_sweep_or_for_unknown_figures():
    assert kit.latency("allreduce", 1024, 10.0, p2p=None).limits == []
    assert kit.latency("allreduce", 1024, 10.0, p2p={"size_bytes": [8], "half_rtt_us": [1.0]}).limits == []
    other = kit.latency("allreduce", 1024, 10.0)
    assert kit.judged(replace(other, params={**other.params, "op": "pingpong"}, limits=[])).limits == []
    assert kit.latency("allreduce", 1024, 10.0, processes=1).limits == []


def test_a_higher_is_better_limit_keeps_its_fraction():
    from clusterbench.analysis import limits

    r = kit.busbw("allreduce", 1024, 10.0)
    got = limits.judge(None, r, ("collective_model",))  # type: ignore[arg-type]
    assert got[0]["fraction"] == pytest.approx(r.value / got[0]["value"])


def test_noisy_small_sizes_do_not_hide_the_rate_of_a_limited_link():
    """A sweep measured over a 100 Mbit/s tbf link at load 28 (this machine, 2026-11-27): the small
    sizes jumped (105 us at 1 KiB), the single line fell to 0.0047 us/B; the large regime is the link's."""
    sizes = [0, 1024, 4096, 16384, 65536, 262144, 524288, 1 << 20, 1 << 21]
    times = [15.6, 105.2, 24.7, 80.6, 2344.6, 19322.3, 42131.9, 83600.7, 168521.4]
    m = cm.fit(sizes, times)
    assert m.kind == "two-regime" and m.large.beta_us_per_byte == pytest.approx(0.08, rel=0.05)
