"""The network model a collective is judged against: fit the network from a ping-pong
sweep, predict each standard algorithm's time, and judge a measured figure.

Pure: numbers in, numbers out (no store, no launch, no process).

**The fit.** Input: a ping-pong sweep, half round-trip time ``t_i`` (us) at ``m_i`` bytes (a
collective record's ``params.p2p``, or ``run pingpong``'s latency figures). Hockney's model (Hockney
1994) ``t(m) = alpha + m * beta``: ``alpha`` the latency (us), ``beta`` the inverse bandwidth (us per
byte). Fitted by least squares on *relative* residuals, ``sum(((t_i - alpha - beta m_i) / t_i)**2)``
(weights ``1 / t_i**2``): a 1 us error at 0 B counts as much as a 1 ms one at 4 MiB, so small sizes
(which set alpha) and large ones (which set beta) both count; alpha and beta are kept >= 0 (a
negative one is set to 0 and the other refitted). Fit quality: the RMS and the largest relative
residual (``rms_rel``, ``max_rel``).

**The alternative: two regimes.** MPI libraries switch protocol at a size (eager below it,
rendezvous above: one more round trip, a different copy path), which shows as a step in ``t(m)``
one straight line cannot follow. :func:`fit` also tries every breakpoint between consecutive sizes
with at least :data:`MIN_POINTS_PER_REGIME` sizes on each side, a Hockney line fitted to each side
(the same weights), and keeps the best breakpoint. The two-regime model wins only when the data
call for it: the single line's RMS relative residual is above :data:`NOISE_REL` (5%: what repeated
ping-pongs on a quiet machine vary by) *and* the two-regime fit cuts it by :data:`GAIN` (2x) or more.
LogGP (Alexandrov et al. 1995) is not fitted: a ping-pong sweep alone cannot separate its overhead
``o`` from its latency ``L`` (it needs LogGP's own message-train measurements), while the two-regime
Hockney captures the protocol switch, the feature the sweep does show.

**Computation.** Reductions also cost ``gamma`` us per byte reduced. The model *ignores* it by
default (``gamma_us_per_byte = 0``): the prediction is then a lower bound on the network time, never
above it. A caller that measured it (e.g. a local sum of doubles) can declare it on the model.

**Prediction.** :func:`predict` gives each standard algorithm's time
(:mod:`clusterbench.analysis.collalgorithms`: the formulas, their sources and how a p that is not a
power of two is handled); the model time of a figure is their minimum (the best the network allows
by any of them). **Judgement**: efficiency = model time / measured time (1 = as fast as the best
algorithm on this network; the p2p sweep is between two ranks, so contention the collective meets
and the sweep did not lowers it too). Below :data:`FAR_OFF` (0.5) the figure is a finding, with the
likely reason from what is known (:func:`judge`).
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from clusterbench.analysis import colllinks
from clusterbench.analysis.collalgorithms import ALGORITHMS, Step, steps

#: the collectives the model knows (the benchmarks' names)
OPS = tuple(ALGORITHMS)
#: the RMS relative residual repeated ping-pongs vary by on a quiet machine: a single line within it is kept
NOISE_REL = 0.05
#: how many times smaller the two-regime fit's RMS relative residual must be to win
GAIN = 2.0
#: sizes each regime of the two-regime fit needs at least
MIN_POINTS_PER_REGIME = 3
#: below this model efficiency a figure is a finding
FAR_OFF = 0.5
#: a fit whose RMS relative residual is above this says the sweep was not steady: the model is not trusted
UNSTEADY_FIT = 0.5


@dataclass(frozen=True)
class Line:
    """One Hockney regime: ``t(m) = alpha_us + m * beta_us_per_byte``."""

    alpha_us: float
    beta_us_per_byte: float

    def t(self, m: float) -> float:
        return self.alpha_us + m * self.beta_us_per_byte

    @property
    def bandwidth_mbs(self) -> float | None:
        """1 / beta in MB/s (1e6 B/s), None for beta = 0."""
        return 1.0 / self.beta_us_per_byte if self.beta_us_per_byte > 0 else None


@dataclass(frozen=True)
class NetModel:
    """A fitted network: ``kind`` "hockney" (one :class:`Line`) or "two-regime" (``small`` below
    ``breakpoint_bytes``, ``large`` from it on); ``rms_rel``/``max_rel`` the fit's relative
    residuals over ``points`` sizes; ``gamma_us_per_byte`` the reduction cost (0: ignored)."""

    kind: str
    small: Line
    large: Line | None = None
    breakpoint_bytes: float | None = None
    rms_rel: float = 0.0
    max_rel: float = 0.0
    points: int = 0
    gamma_us_per_byte: float = 0.0
    #: the single line's residuals when the two-regime fit won (what it was compared with)
    hockney_rms_rel: float | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def alpha_us(self) -> float:
        return self.small.alpha_us

    @property
    def beta_us_per_byte(self) -> float:
        """The large-message inverse bandwidth (the regime that carries the bytes)."""
        return (self.large or self.small).beta_us_per_byte

    def t(self, m: float) -> float:
        """Point-to-point time (us) of one ``m``-byte message."""
        if self.large is not None and self.breakpoint_bytes is not None and m >= self.breakpoint_bytes:
            return self.large.t(m)
        return self.small.t(m)

    def cost(self, path: Sequence[Step]) -> float:
        return sum(c * (self.t(m) + self.gamma_us_per_byte * r) for c, m, r in path)

    def describe(self) -> str:
        s = f"alpha {self.alpha_us:.3g} us, beta {self.small.beta_us_per_byte:.3g} us/B"
        if self.large is not None:
            s += (f" below {self.breakpoint_bytes:.0f} B, alpha {self.large.alpha_us:.3g} us, beta "
                  f"{self.large.beta_us_per_byte:.3g} us/B from it on")
        return f"{'two-regime Hockney' if self.large else 'Hockney'} ({s}; fit RMS {self.rms_rel:.0%})"

    def as_dict(self) -> dict:
        return asdict(self)


# -- fitting -------------------------------------------------------------------------------------
def _wls(ms: Sequence[float], ts: Sequence[float]) -> Line:
    """Least squares of t = a + b m on relative residuals (weights 1/t^2), a, b >= 0."""
    w = [1.0 / (t * t) for t in ts]
    sw = sum(w)
    swm = sum(wi * m for wi, m in zip(w, ms))
    swmm = sum(wi * m * m for wi, m in zip(w, ms))
    swt = sum(wi * t for wi, t in zip(w, ts))
    swmt = sum(wi * m * t for wi, m, t in zip(w, ms, ts))
    det = sw * swmm - swm * swm
    if det > 0:
        a = (swt * swmm - swm * swmt) / det
        b = (sw * swmt - swm * swt) / det
    else:  # one distinct size: latency only
        a, b = swt / sw, 0.0
    if b < 0:
        a, b = swt / sw, 0.0
    if a < 0:
        a, b = 0.0, (swmt / swmm if swmm > 0 else 0.0)
    return Line(a, max(b, 0.0))


def _residuals(model_t: Any, ms: Sequence[float], ts: Sequence[float]) -> list[float]:
    return [(t - model_t(m)) / t for m, t in zip(ms, ts)]


def _quality(res: Sequence[float]) -> tuple[float, float]:
    return math.sqrt(sum(r * r for r in res) / len(res)), max(abs(r) for r in res)


def fit(sizes_bytes: Sequence[float], times_us: Sequence[float], *, two_regime: bool = True,
        gamma_us_per_byte: float = 0.0) -> NetModel:
    """The model of a ping-pong sweep (see the module's docstring: the weights, and when the
    two-regime fit wins). Sizes and times pair up; non-positive or non-finite times are dropped;
    ValueError with fewer than two distinct sizes left."""
    pts = sorted((float(m), float(t)) for m, t in zip(sizes_bytes, times_us)
                 if isinstance(m, (int, float)) and isinstance(t, (int, float))
                 and math.isfinite(t) and t > 0 and math.isfinite(m) and m >= 0)
    if len({m for m, _ in pts}) < 2:
        raise ValueError("the network model needs ping-pong times at two sizes or more")
    ms, ts = [m for m, _ in pts], [t for _, t in pts]
    one = _wls(ms, ts)
    rms, mx = _quality(_residuals(one.t, ms, ts))
    single = NetModel("hockney", one, rms_rel=rms, max_rel=mx, points=len(ms), gamma_us_per_byte=gamma_us_per_byte)
    if not two_regime or rms <= NOISE_REL:
        return single
    # the split is chosen by the median absolute relative residual, which a few
    # preempted sizes (a loaded machine) cannot drag the way they drag the RMS; RMS is still reported
    best: NetModel | None = None
    best_med = math.inf
    k = MIN_POINTS_PER_REGIME
    for i in range(k, len(ms) - k + 1):
        if ms[i] == ms[i - 1]:
            continue
        lo, hi = _wls(ms[:i], ts[:i]), _wls(ms[i:], ts[i:])
        res = _residuals(lo.t, ms[:i], ts[:i]) + _residuals(hi.t, ms[i:], ts[i:])
        med = statistics.median(abs(r) for r in res)
        if med < best_med:
            r2, m2 = _quality(res)
            best, best_med = NetModel("two-regime", lo, hi, ms[i], r2, m2, len(ms), gamma_us_per_byte, rms), med
    # it wins when it halves either the RMS (a step the single line misses at a few sizes) or the
    # median (a single line pulled off most sizes by noisy small ones)
    if best is not None and (best.rms_rel * GAIN <= rms
                             or best_med * GAIN <= statistics.median(abs(r) for r in _residuals(one.t, ms, ts))):
        return best
    return single


def fit_p2p(p2p: Mapping[str, Any] | None, **kw: Any) -> NetModel | None:
    """The model of a collective record's ``params.p2p`` (``size_bytes``, ``half_rtt_us``), or None
    when it is missing or too short to fit."""
    if not isinstance(p2p, Mapping):
        return None
    sizes, times = p2p.get("size_bytes"), p2p.get("half_rtt_us")
    if not isinstance(sizes, (list, tuple)) or not isinstance(times, (list, tuple)) or len(sizes) != len(times):
        return None
    try:
        return fit(sizes, times, **kw)
    except (ValueError, TypeError, ZeroDivisionError):
        return None


# -- prediction ----------------------------------------------------------------------------------
def predict(op: str, p: int, n: float, model: NetModel) -> dict[str, float]:
    """``{algorithm: us}``: each standard algorithm of ``op`` on ``p`` ranks at OSU's size ``n``
    (see :mod:`clusterbench.analysis.collalgorithms` for the size convention of each op), those
    defined for this p. ValueError for an unknown op or p < 2."""
    if op not in ALGORITHMS:
        raise ValueError(f"no network model for collective '{op}'")
    if int(p) < 2:
        raise ValueError(f"a collective needs 2 ranks or more, {p} given")
    out = {}
    for name in ALGORITHMS[op]:
        path = steps(op, name, int(p), n)
        if path:
            out[name] = model.cost(path)
    return out


def lower_bound(op: str, p: int, n: float, model: NetModel) -> tuple[str, float]:
    """(the best algorithm, its time in us): the model's time of the figure."""
    got = predict(op, p, n, model)
    name = min(got, key=lambda a: got[a])
    return name, got[name]


# -- judging -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Judgement:
    best_algorithm: str
    model_us: float
    efficiency: float
    finding: str | None = None
    reason: str | None = None
    #: the figure judged (its op and OSU size)
    op: str = ""
    size_bytes: float = 0.0


def judge(op: str, p: int, n: float, measured_us: float, model: NetModel, *,
          context: Mapping[str, Any] | None = None) -> Judgement:
    """The figure against the model: efficiency = model time / measured time; below
    :data:`FAR_OFF` a finding naming the likely reason, the first that the ``context`` supports:

    * ``slow`` (a list of evidence, e.g. ``["node n3: link x10 below the others"]``, from a
      per-node or per-link measurement): "a slow link or node";
    * ``oversubscribed`` true, or ``cores`` (the cores the ranks may use) below ``p``: ranks share
      cores, so they wait on each other's time slices;
    * the model's own fit misses its sweep by more than :data:`UNSTEADY_FIT` (RMS relative): the
      network (or the cpus) was not steady while it was measured, the model is not to be trusted;
    * ``neighbours`` (``{size: efficiency}`` of the same op and ranks): efficient (>= FAR_OFF) at
      the next smaller or larger size measured but not at this one: the MPI's algorithm switch point
      (its choice at this size is not the best one);
    * otherwise "unexplained"."""
    name, model_us = lower_bound(op, p, n, model)
    eff = model_us / measured_us if measured_us > 0 else 0.0
    if eff >= FAR_OFF:
        return Judgement(name, model_us, eff, op=op, size_bytes=n)
    ctx = context or {}
    head = (f"{op} {n:.0f} B on {p} ranks: {measured_us:.4g} us measured, {eff:.0%} of the network model's "
            f"{model_us:.4g} us ({name})")
    cores = ctx.get("cores")
    nb = {float(k): float(v) for k, v in (ctx.get("neighbours") or {}).items() if float(k) != float(n)}
    below = max((k for k in nb if k < n), default=None)
    above = min((k for k in nb if k > n), default=None)
    if ctx.get("slow"):
        reason = "slow link or node"
        why = "a slow link or node: " + "; ".join(map(str, ctx["slow"]))
    elif ctx.get("oversubscribed") or (isinstance(cores, int) and 0 < cores < p):
        reason = "oversubscription"
        why = (f"oversubscription: {p} ranks on {cores} cores" if isinstance(cores, int) and cores < p
               else "oversubscription: ranks share cores") + ", so they wait for each other's time slices"
    elif model.rms_rel > UNSTEADY_FIT:
        reason = "unsteady sweep"
        why = (f"an unsteady network: the model's ping-pong fit misses its sweep by {model.rms_rel:.0%} RMS "
               "(other load, ranks preempted), so neither the model nor the figure is to be trusted; "
               "rerun on a quiet machine")
    elif any(k is not None and nb[k] >= FAR_OFF for k in (below, above)):
        reason = "algorithm switch point"
        near = ", ".join(f"{nb[k]:.0%} at {k:.0f} B" for k in (below, above) if k is not None)
        why = (f"an algorithm switch point: efficient at the neighbouring sizes ({near}) and not at this one; "
               "the MPI's choice here is not its best (try `tune coll`)")
    else:
        reason = "unexplained"
        why = "unexplained (no per-node or per-link evidence, ranks on their own cores, no efficient neighbour)"
    return Judgement(name, model_us, eff, f"{head}: likely {why}", reason, op, n)


# -- records of the contract's shape (benchmarks' Results or their stored params) -----------------
def model_of_params(params: Mapping[str, Any]) -> NetModel | None:
    """The model of one collective figure's ``params.p2p``."""
    return fit_p2p(params.get("p2p"))


def figure_key(params: Mapping[str, Any]) -> tuple | None:
    """What makes figures one series of sizes: op, ranks, blocking, transport, forced algorithm."""
    op, p = params.get("op"), params.get("processes")
    if op not in ALGORITHMS or not isinstance(p, int) or p < 2:
        return None
    alg = params.get("algorithm")
    return (op, p, bool(params.get("nonblocking")), str(params.get("transport_used") or params.get("transport")),
            repr(sorted(alg.items())) if isinstance(alg, Mapping) else None)


def model_time(params: Mapping[str, Any], model: NetModel | None = None) -> tuple[str, float, NetModel] | None:
    """(best algorithm, model us, model) of one blocking collective figure of the contract's
    shape, or None when the model cannot say (no p2p sweep, an unknown op, a non-blocking figure:
    its latency includes the overlapped compute)."""
    if figure_key(params) is None or params.get("nonblocking"):
        return None
    size = params.get("size_bytes")
    if not isinstance(size, (int, float)) or size < 0:
        return None
    model = model or model_of_params(params)
    if model is None:
        return None
    name, us = lower_bound(str(params["op"]), int(params["processes"]), float(size), model)
    return (name, us, model) if us > 0 else None


def judge_results(results: Iterable[Any], *, slow: Sequence[str] = (), cores: int | None = None) -> list[Judgement]:
    """Judge every blocking collective ``latency`` figure (objects with ``metric``, ``value`` and
    ``params`` of the contract's shape) against the model of its own p2p sweep, each with its
    series' other sizes as neighbours; ``params.shared_cpus`` (ranks sharing cores) counts as
    oversubscription. ``slow``/``cores``: evidence for :func:`judge`'s context; without ``slow``,
    the figures' own per-node evidence (``params.links``: :func:`clusterbench.analysis.colllinks.evidence`)."""
    series: dict[tuple, list[tuple[float, float, Mapping]]] = {}
    for r in results:
        prm = getattr(r, "params", None) or {}
        if getattr(r, "metric", None) != "latency" or model_time(prm) is None:
            continue
        value = getattr(r, "value", None)
        if isinstance(value, (int, float)) and value > 0:
            series.setdefault(figure_key(prm), []).append((float(prm["size_bytes"]), float(value), prm))
    out = []
    for key, pts in series.items():
        effs = {}
        for size, value, prm in pts:
            got = model_time(prm)
            if got:
                effs[size] = got[1] / value
        slowdowns = [] if slow else colllinks.slowdowns(colllinks.judge(pts[0][2].get("links")))
        for size, value, prm in sorted(pts, key=lambda x: x[0]):
            model = model_of_params(prm)
            if model is None:
                continue
            ctx = {"neighbours": effs, "oversubscribed": bool(prm.get("shared_cpus")), "cores": cores,
                   "slow": list(slow) or explaining(slowdowns, key[0], key[1], size, value, model)}
            out.append(judge(key[0], key[1], size, value, model, context=ctx))
    return out


def slowed(model: NetModel, metric: str, factor: float, value: float | None = None) -> NetModel:
    """The network as a slow node or link makes it: for ``metric`` "latency" alpha ``factor`` times
    larger, at least ``value`` (us); for "bandwidth" beta ``factor`` times larger, at least 1 /
    ``value`` (MB/s: the slow link's own figure)."""
    def scale(line: Line | None) -> Line | None:
        if line is None:
            return None
        if metric == "latency":
            return Line(max(line.alpha_us * factor, value or 0.0), line.beta_us_per_byte)
        return Line(line.alpha_us, max(line.beta_us_per_byte * factor, 1.0 / value if value else 0.0))

    return replace(model, small=scale(model.small), large=scale(model.large))


def explaining(slowdowns: Sequence[tuple[str, float, float, str]], op: str, p: int, n: float, measured_us: float,
               model: NetModel) -> list[str]:
    """The per-node evidence (``(metric, factor, value, line)``,
    :func:`clusterbench.analysis.colllinks.slowdowns`) that explains a figure: where the model on the
    network that node or link makes (:func:`slowed`) is within :data:`FAR_OFF` of the measured time and
    accounts for at least half of the gap between the model and the measured time. A node slow on
    bandwidth does not explain an 8 B figure far off the model (its bytes cost next to nothing even on
    the slow link: a figure just past :data:`FAR_OFF` is not pushed over it by that microsecond)."""
    base = lower_bound(op, p, n, model)[1]
    out = []
    for metric, factor, value, line in slowdowns:
        us = lower_bound(op, p, n, slowed(model, metric, factor, value))[1]
        if us >= FAR_OFF * measured_us and us - base >= 0.5 * (measured_us - base):
            out.append(line)
    return out


def findings(results: list[Any]) -> list[str]:
    """A summary rule (``Benchmark.findings``): one line per collective figure far off the model."""
    return [j.finding for j in judge_results(results) if j.finding]


__all__ = ["FAR_OFF", "GAIN", "MIN_POINTS_PER_REGIME", "NOISE_REL", "OPS", "UNSTEADY_FIT", "Judgement", "Line",
           "NetModel", "explaining", "figure_key", "slowed",
           "findings", "fit", "fit_p2p", "judge", "judge_results", "lower_bound", "model_of_params", "model_time",
           "predict"]
