"""tune hpl and hpl-scaling: real Open MPI, real OpenBLAS/BLIS, tiny N (400-640) so the file stays short.

The tuner on a small budget returns parameters it measured, stored as a normal hpl run; stage 0
prunes NBs whose dgemm is slower (k = 8 against k >= 64 differ several-fold on any BLAS); an
interrupted tune resumes without measuring any trial twice; a budget too small for one trial is a
one-line UsageError with nothing stored; hpl-scaling gives one Rmax per node count on a 2-node
virtual cluster."""
from __future__ import annotations

from collections import Counter

import pytest

from clusterbench.cli import main as cli_main
from clusterbench.errors import UsageError
from clusterbench.store import Store
from clusterbench.tuning.hpl import Space, tune

N = 640


@pytest.fixture(autouse=True)
def _root_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")


def _trial_keys(store: Store, tune_id: str) -> list[str]:
    keys = []
    for run in store.list_runs():
        words = run.command.split()
        if f"--tune-id={tune_id}" in words:
            keys += [w.split("=", 1)[1] for w in words if w.startswith("--tune-trial=")]
    return keys


@pytest.fixture(scope="module")
def small_tune(mpi, live_probe, tmp_path_factory: pytest.TempPathFactory):
    """One tune on a small budget from an empty store, (report, store): the tests of what a fresh tune
    returns and of its stage 0 read the same one (stage 0 measures each BLAS's dgemm whatever the
    topologies and top_k)."""
    store = Store(tmp_path_factory.mktemp("tune") / "t.db")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")
        rep = tune(Space(nbs=(32, 64), topologies=("pure", "hybrid"), blas=("openblas",)), n=N, budget_s=60,
                   store=store, probe=live_probe, top_k=2)
    return rep, store


@pytest.mark.integration
def test_small_budget_returns_a_measured_stored_trial(small_tune) -> None:
    rep, store = small_tune
    assert rep.best is not None and rep.best.status == "measured" and rep.best.value > 0
    measured = [t for t in rep.trials if t.kind == "hpl" and t.status == "measured"]
    assert rep.best in measured
    bp = rep.best_params()
    assert bp is not None and (bp["nb"], bp["grid"], bp["topology"]) in {
        (t.config.nb, t.config.grid, t.config.topology) for t in measured if t.config}
    # the best trial is a normal stored hpl run with exactly those parameters
    res = {r.metric: r for r in store.results(rep.best.run_id)}
    assert res["rmax"].value == pytest.approx(rep.best.value)
    assert (res["rmax"].params["nb"], res["rmax"].params["grid"], res["rmax"].params["n"]) == (
        bp["nb"], bp["grid"], bp["n"])
    assert res["rmax"].params["passed"] and rep.best.percent_rpeak and rep.best.percent_rpeak > 0
    if rep.confirmed:
        assert rep.best.n == N and rep.best.predicted is not None
    assert f"--tune-id={rep.tune_id}" in store.get_run(rep.best.run_id).command


@pytest.mark.integration
def test_pruning_removes_the_slow_nb(mpi, live_probe, tmp_path) -> None:
    """k = 2 (a rank-2 update, memory-bound) runs a fraction of k >= 96's dgemm rate on any BLAS (and
    at least 3 NBs are always kept):
    stage 0 drops it and never runs HPL with it."""
    store = Store(tmp_path / "t.db")
    rep = tune(Space(nbs=(2, 96, 128, 160), topologies=("hybrid",), blas=("openblas",)), n=N, budget_s=60,
               store=store, probe=live_probe, stop_after=1)
    rates = rep.dgemm["openblas"]
    assert rates[2] < 0.85 * max(rates[96], rates[128], rates[160])
    assert any(p["what"] == "openblas NB 2" for p in rep.pruned)
    tried = {t.config.nb for t in rep.trials if t.kind == "hpl" and t.status in ("measured", "reused") and t.config}
    assert 2 not in tried and tried  # pruned configurations were never run
    assert not any(t.stage == 2 for t in rep.trials)  # stop_after=1


@pytest.mark.integration
def test_interrupted_tune_resumes_without_repeating_a_trial(mpi, live_probe, tmp_path) -> None:
    store = Store(tmp_path / "t.db")
    space = Space(nbs=(32, 64), topologies=("pure", "hybrid"), blas=("openblas",))

    def interrupt_at_stage_2(ev: dict) -> None:
        if ev["event"] == "start" and ev["trial"].stage == 2:
            raise KeyboardInterrupt("test: interrupted before the confirmation")

    with pytest.raises(KeyboardInterrupt):
        tune(space, n=N, budget_s=60, store=store, probe=live_probe, progress=interrupt_at_stage_2, top_k=2)
    first = store.list_runs()
    assert first and all(r.status == "complete" for r in first)  # nothing half-stored

    rep = tune(space, n=N, budget_s=60, store=store, probe=live_probe, top_k=2)
    keys = _trial_keys(store, rep.tune_id)
    assert keys and max(Counter(keys).values()) == 1  # no trial measured twice
    reused = [t for t in rep.trials if t.status == "reused"]
    assert {t.stage for t in reused} >= {0, 1} and all(t.stage != 2 for t in reused)
    assert any(t.stage == 2 and t.status == "measured" for t in rep.trials)  # it carried on where it stopped
    assert rep.best is not None and rep.best.stage == 2

    again = tune(space, n=N, budget_s=60, store=store, probe=live_probe, top_k=2)  # all from the store
    assert not [t for t in again.trials if t.status == "measured"]
    assert again.best is not None and again.best.run_id == rep.best.run_id


@pytest.mark.integration
def test_budget_too_small_is_one_line_and_stores_nothing(live_probe, tmp_path, capsys) -> None:
    db = tmp_path / "t.db"
    with pytest.raises(UsageError, match="too small for even one trial") as exc:
        tune(Space(nbs=(64,)), n=N, budget_s=0.5, store=Store(db), probe=live_probe)
    assert "\n" not in str(exc.value) and "--budget" in str(exc.value)
    assert Store(db).list_runs() == []
    code = cli_main(["--db", str(db), "tune", "hpl", "--n", str(N), "--nb-list", "64", "--budget", "1s"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "too small for even one trial" in err
    assert Store(db).list_runs() == []
    with pytest.raises(UsageError, match="cannot be fixed"):
        tune(Space(nbs=(64,)), n=N, budget_s=60, store=Store(db), probe=live_probe, base={"nb": 64})


@pytest.mark.integration
def test_cli_tune_prints_the_table(mpi, tmp_path, capsys) -> None:
    db = tmp_path / "t.db"
    code = cli_main(["--db", str(db), "tune", "hpl", "--n", "400", "--nb-list", "32,64", "--topologies", "hybrid",
                     "--blas-list", "openblas", "--budget", "1m", "--top", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "stage  blas" in out and "%Rpeak" in out and "best: NB=" in out and "run it: clusterbench run hpl" in out


@pytest.mark.integration
def test_hpl_scaling_one_rmax_per_node_count(mpi, live_probe, sim_cluster, tmp_path) -> None:
    from clusterbench import session

    c = sim_cluster(2)
    hosts = ",".join(f"{n.name}:1" for n in c.nodes)
    store = Store(tmp_path / "s.db")
    rep = session.run(["hpl-scaling"], {"hpl-scaling": {"hosts": hosts, "nodes": "1..2", "n_per_node": 400,
                                                        "nb": 64, "allow_root": True}},
                      store=store, timeout=120, probe_data=live_probe)
    rmax = [r for r in rep.results if r.benchmark == "hpl-scaling" and r.metric == "rmax"]
    assert [r.params["nodes"] for r in rmax] == [1, 2]
    assert [r.params["ranks"] for r in rmax] == [1, 2]
    assert rmax[1].params["n"] == int(400 * 2 ** 0.5) and rmax[0].params["n"] == 400
    assert set(rmax[1].params["node_hosts"]) == {n.name for n in c.nodes}
    assert all(r.value > 0 and r.params["passed"] and r.limit and r.limit["name"] == "rpeak" for r in rmax)
    assert rmax[1].params["percent_of_rpeak_nodes"] > 0
    # each node count's grid runs are full hpl results in the same run
    assert len([r for r in rep.results if r.benchmark == "hpl" and r.metric == "rmax"]) == 2
    assert len(store.results(rep.run.id)) == len(rep.results)
    with pytest.raises(UsageError, match="asks for 3 nodes"):
        session.run(["hpl-scaling"], {"hpl-scaling": {"hosts": hosts, "nodes": "1..3", "allow_root": True}},
                    store=store, probe_data=live_probe)


@pytest.mark.integration
def test_stage0_measures_openblas_none_only_when_auto_changes_the_core(live_probe, small_tune) -> None:
    """openblas:auto vs openblas:none are rival candidates only when auto applied a core type."""
    from clusterbench.probe.blas import choose_coretype, installed_blas, openblas_corename

    path = installed_blas().get("openblas")
    if not path:
        pytest.skip("OpenBLAS not installed")
    rep, _store = small_tune
    keys = [t.key for t in rep.trials if t.kind == "dgemm"]
    cpu = live_probe["cpu"]
    changes = choose_coretype(set(cpu.get("isa") or []), cpu.get("vendor"), openblas_corename(path)) is not None
    assert any("/openblas/auto/" in k for k in keys)
    assert any("/openblas/none/" in k for k in keys) == changes
    assert rep.coretypes["openblas"] in (("auto", "none") if changes else ("auto",))
