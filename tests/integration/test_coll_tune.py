"""tune coll with real MPIs: Open MPI reads the rules file the tuner writes and runs the algorithm
it names (proved with the pml monitoring component's per-peer counts of the collective's internal
messages); tune coll on 2 local ranks with a small budget; MPICH applies the CVAR (an unknown
value aborts MPI_Init, a known one runs and is recorded); bad input is one line, stores nothing
and leaves no process."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterbench import session
from clusterbench.cli import main as cli_main
from clusterbench.errors import KernelFailed
from clusterbench.store import Store
from clusterbench.tuning.coll import rules as R

pytestmark = pytest.mark.integration  # every test here starts real processes

PROGRAM = r"""
#include <mpi.h>
int main(int argc, char **argv) {
    double a[1024], b[1024]; int r;
    MPI_Init(&argc, &argv); MPI_Comm_rank(MPI_COMM_WORLD, &r);
    for (int i = 0; i < 1024; i++) a[i] = r + i;
    MPI_Allreduce(a, b, 1024, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize(); return 0;
}
"""


@pytest.fixture(autouse=True)
def _root_ok(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTERBENCH_ALLOW_RUN_AS_ROOT", "1")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


def _children() -> list[str]:
    """Processes whose parent is this test process (none may be left)."""
    me, out = str(os.getpid()), []
    for st in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = st.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            out.append(st.parent.name)
    return out


def _sends(mon: Path) -> set[tuple[int, int]]:
    """(from, to) pairs of the collective's internal messages ("I" lines of pml monitoring)."""
    pairs = set()
    for f in mon.glob("prof.*.prof"):
        for line in f.read_text().splitlines():
            w = line.split("\t")
            if w[0] == "I" and int(w[4].split()[0]) > 0:
                pairs.add((int(w[1]), int(w[2])))
    return pairs


def test_open_mpi_reads_the_rules_file_and_runs_its_algorithm(mpi, tmp_path: Path) -> None:
    src = tmp_path / "ar.c"
    src.write_text(PROGRAM)
    subprocess.run([mpi.mpicc, "-o", str(tmp_path / "ar"), str(src)], check=True, timeout=120)
    seen = {}
    for alg in (1, 4):  # basic linear (reduce to 0, then bcast) against ring
        rules = tmp_path / f"r{alg}.rules"
        rules.write_text(R.format_ompi_rules("allreduce", 3, [R.MsgRule(0, alg), R.MsgRule(1 << 20, 0)],
                                             comment="clusterbench test"))
        mon = tmp_path / f"mon{alg}"
        mon.mkdir()
        cp = subprocess.run([mpi.mpirun, "--oversubscribe", "-n", "3", "--mca", "coll_tuned_use_dynamic_rules", "1",
                             "--mca", "coll_tuned_dynamic_rules_filename", str(rules),
                             "--mca", "pml_monitoring_enable", "2", "--mca", "pml_monitoring_enable_output", "3",
                             "--mca", "pml_monitoring_filename", str(mon / "prof"), str(tmp_path / "ar")],
                            capture_output=True, text=True, timeout=120)
        assert cp.returncode == 0, cp.stderr[-2000:]
        seen[alg] = _sends(mon)
    assert seen[1] == {(1, 0), (2, 0), (0, 1), (0, 2)}, seen  # linear: everything through rank 0
    assert seen[4] == {(0, 1), (1, 2), (2, 0)}, seen  # ring: each rank to the next only


def test_the_file_tune_writes_is_what_open_mpi_runs(mpi, live_probe, tmp_path: Path) -> None:
    """tune() with the real MPI's candidates and a synthetic measurement (ring 30% faster from
    4 KiB; the verification reads the rules file the tuner wrote): the file written makes Open
    MPI run ring at 8 KiB and its own choice at 8 B."""
    from clusterbench.tuning.coll import tune
    from clusterbench.tuning.coll.algorithms import Algorithm
    from clusterbench.tuning.coll.tuner import RulesFile

    def measure(op, sizes, setting):
        if isinstance(setting, RulesFile):
            rules = R.parse_ompi_rules(Path(setting.path).read_text())["allreduce"][3]
            fast = {s for s in sizes if max((r for r in rules if r.msg_size <= s), key=lambda r: r.msg_size).algorithm}
        else:
            fast = {s for s in sizes if s >= 4096} if isinstance(setting, Algorithm) and setting.value == 4 else set()
        measure.n += 1
        return {s: (10.0 + s / 1000) * (0.7 if s in fast else 1.0) * (1 + 0.01 * (measure.n % 3)) for s in sizes}

    measure.n = 0
    out = tmp_path / "t.rules"
    rep = tune("allreduce", budget_s=600, base={"ranks": 3}, sizes=[8, 1024, 4096, 65536], algorithms=["1", "ring"],
               output=str(out), store=Store(tmp_path / "t.db"), probe=live_probe, oversubscribe=True, measure=measure)
    assert [(r["from_bytes"], r["to_bytes"], r["algorithm"]) for r in rep.ranges] == [(8, 1024, "default"),
                                                                                    (4096, 65536, "4:ring")]
    assert rep.default_best == [8, 1024] and rep.output["written"]
    assert R.parse_ompi_rules(out.read_text()) == {"allreduce": {3: [R.MsgRule(0, 0), R.MsgRule(4096, 4),
                                                                     R.MsgRule(65537, 0)]}}
    src = tmp_path / "ar.c"
    src.write_text(PROGRAM)
    subprocess.run([mpi.mpicc, "-o", str(tmp_path / "ar"), str(src)], check=True, timeout=120)
    mon = tmp_path / "mon"
    mon.mkdir()
    cp = subprocess.run([mpi.mpirun, "--oversubscribe", "-n", "3", "--mca", "coll_tuned_use_dynamic_rules", "1",
                         "--mca", "coll_tuned_dynamic_rules_filename", str(out), "--mca", "pml_monitoring_enable", "2",
                         "--mca", "pml_monitoring_enable_output", "3", "--mca", "pml_monitoring_filename",
                         str(mon / "prof"), str(tmp_path / "ar")], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert _sends(mon) == {(0, 1), (1, 2), (2, 0)}  # 8 KiB: ring, as the file says


def test_tune_coll_two_ranks_small_budget(mpi, tmp_path: Path, capsys) -> None:
    db, out = tmp_path / "t.db", tmp_path / "ar.rules"
    code = cli_main(["--db", str(db), "tune", "coll", "--op", "allreduce", "--ranks", "2", "--oversubscribe",
                     "--sizes", "8,65536", "--algorithms", "4", "--budget", "100s", "--max-rounds", "4",
                     "--output", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["op"] == "allreduce" and doc["processes"] == 2 and doc["mpi"]["name"] == "openmpi"
    assert [c["value"] for c in doc["candidates"]] == [4] and doc["search"]["rounds"] >= 1
    runs = Store(db).list_runs()
    assert len(runs) == len(doc["runs"]) >= 2 and all(f"--tune-id={doc['tune_id']}" in r.command for r in runs)
    forced = [r for r in runs if "/4:ring" in r.command]
    assert forced and all(res.params["algorithm"] == {"mpi": "openmpi", "param": "coll_tuned_allreduce_algorithm",
                                                      "value": 4}
                          for res in Store(db).results(forced[0].id))
    if doc["output"]["written"]:  # a gain verified against the default: the file holds exactly those sizes
        parsed = R.parse_ompi_rules(out.read_text())["allreduce"][2]
        kept = [r for r in doc["ranges"] if r["algorithm"] != "default"]
        assert kept and any(rule.algorithm == 4 for rule in parsed)
        assert all(row["verify"]["verdict"] == "better" for row in doc["per_size"] if row["kept"] != "default")
    else:  # the tuner says the default was best, with the figures
        assert not out.exists() and sorted(doc["default_best"] + doc["undecided"]) == [8, 65536]
        assert all(row["search"]["median_default"] > 0 for row in doc["per_size"])
    assert not list(tmp_path.glob("ar.rules.verify*")) and _children() == []


def test_bad_input_is_one_line_stores_nothing_leaves_nothing(mpi, tmp_path: Path, capsys) -> None:
    db = tmp_path / "t.db"
    cases = {("--op", "allsum"): "unknown collective 'allsum'",
             ("--op", "allreduce", "--algorithms", "99"): "has no allreduce algorithm '99'",
             ("--op", "allreduce", "--output", str(tmp_path / "no" / "x.rules")): "is not a directory",
             ("--op", "allreduce", "--output", str(tmp_path)): "is a directory",
             ("--op", "allreduce", "--sizes", "12"): "12 B is not a multiple of 8 B",
             ("--op", "allreduce", "--sizes", "4294967296"): "message size 4294967296 B is out of range",
             ("--op", "bcast", "--ranks", "1"): "--ranks 1 is not allowed; use 2 to 4096"}
    for args, message in cases.items():
        ranks = [] if "--ranks" in args else ["--ranks", "2"]
        code = cli_main(["--db", str(db), "tune", "coll", *ranks, "--budget", "30s", *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and message in err[0], (args, err)
    assert not db.exists() or Store(db).list_runs() == []
    assert list(tmp_path.iterdir()) in ([], [db]) and _children() == []


def test_mpich_applies_the_cvar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    if not shutil.which("mpiexec.mpich") and not shutil.which("mpiexec.hydra"):
        pytest.skip("no mpiexec.mpich on PATH: install mpich and libmpich-dev")
    store = Store(tmp_path / "t.db")
    given = {"allreduce": {"ranks": 2, "sizes": [8, 4096], "time_budget": 0.01, "mpi": "mpich", "allow_root": True}}
    monkeypatch.setenv("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "no_such_algorithm")
    with pytest.raises(KernelFailed, match="Invalid MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"):
        session.run(["allreduce"], given, store=store, timeout=120, oversubscribe=True)
    monkeypatch.setenv("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM", "recursive_doubling")
    rep = session.run(["allreduce"], given, store=store, timeout=120, oversubscribe=True)
    lat = [r for r in rep.results if r.metric == "latency"]
    assert len(lat) == 2 and all(r.params["algorithm"] == {"mpi": "mpich", "param": "MPIR_CVAR_ALLREDUCE_INTRA_"
                                                           "ALGORITHM", "value": "recursive_doubling"} for r in lat)
    monkeypatch.delenv("MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM")
    code = cli_main(["--db", str(tmp_path / "u.db"), "tune", "coll", "--op", "allreduce", "--mpi", "mpich",
                     "--ranks", "2", "--algorithms", "bogus"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "MPICH 4" in err[0] and "recursive_doubling" in err[0]


def _mpich_or_skip():
    if not shutil.which("mpiexec.mpich") and not shutil.which("mpiexec.hydra"):
        pytest.skip("no mpiexec.mpich on PATH: install mpich and libmpich-dev")
    from clusterbench.benchmarks.mpi.common import detect

    return detect({"mpi": "mpich"})


@pytest.mark.parallel
def test_mpich_runs_the_selection_file_the_tuner_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default tree read from the libmpich the run uses, allreduce's intra branch replaced by
    size ranges (and bcast's, in a second file): MPICH reads it (a file naming an algorithm it lacks
    aborts MPI_Init's first collective), and clusterbench's coll kernel runs allreduce and bcast with
    it on 2 and 3 ranks, results validated, the file recorded as the run's algorithm."""
    from clusterbench.tuning.coll import mpich_tree as T

    mpi = _mpich_or_skip()
    tree, why = T.default_for(mpi.mpicc, "allreduce")
    if tree is None:
        pytest.skip(why)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**tree.tree, "collective=allreduce": {"comm_type=intra": {
        "algorithm=MPIR_Allreduce_intra_no_such_algorithm": {}}}}))
    store = Store(tmp_path / "t.db")
    given = {"ranks": 2, "sizes": [8, 1024, 8192, 65536], "time_budget": 0.01, "mpi": "mpich", "allow_root": True}
    monkeypatch.setenv(T.ENV, str(bad))
    with pytest.raises(KernelFailed):
        session.run(["allreduce"], {"allreduce": given}, store=store, timeout=120, oversubscribe=True)
    files = {"allreduce": [(8, 1024, None), (8192, 65536, "reduce_scatter_allgather")],
             "bcast": [(8, 1024, "binomial"), (8192, 65536, "scatter_ring_allgather")]}
    for op, ranges in files.items():
        path = tmp_path / f"{op}.json"
        path.write_text(tree.text(op, ranges))
        monkeypatch.setenv(T.ENV, str(path))
        for ranks in (2, 3):
            rep = session.run(["allreduce", "bcast"], {o: {**given, "ranks": ranks} for o in ("allreduce", "bcast")},
                              store=store, timeout=180, oversubscribe=True)
            lat = [r for r in rep.results if r.metric == "latency"]
            assert len(lat) == 8 and all(r.value > 0 for r in lat), (op, ranks)
            assert all(r.params["algorithm"] == {"mpi": "mpich", "param": T.ENV, "value": str(path)} for r in lat)
    assert _children() == []


def _renamed(tree: dict, old: str, new: str) -> dict:
    return {k.replace(old, new): _renamed(v, old, new) for k, v in tree.items()}


def test_mpichs_size_ranges_decide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Proof that MPICH selects by the file's ranges: a probe file whose tuned range (8 KiB..64 KiB)
    names another collective's algorithm (a valid name, so the file loads; MPICH asserts when
    allreduce's selection returns it: "Internal error") aborts the kernel's allreduce exactly inside the range, and
    the library's own branch (below and above it) runs and validates."""
    from clusterbench.tuning.coll import mpich_tree as T

    mpi = _mpich_or_skip()
    tree, why = T.default_for(mpi.mpicc, "allreduce")
    if tree is None:
        pytest.skip(why)
    doc = json.loads(tree.text("allreduce", [(8, 4096, None), (8192, 65536, "recursive_doubling")]))
    branch = doc["collective=allreduce"]["comm_type=intra"]
    branch["avg_msg_size<=65536"] = _renamed(branch["avg_msg_size<=65536"], "MPIR_Allreduce_intra_recursive_doubling",
                                             "MPIR_Bcast_intra_binomial")
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setenv(T.ENV, str(path))
    store = Store(tmp_path / "t.db")
    given = {"ranks": 2, "time_budget": 0.01, "mpi": "mpich", "allow_root": True}
    for sizes, aborts in (([4096], False), ([8192], True), ([65536], True), ([65544], False)):
        run = {"allreduce": {**given, "sizes": sizes}}
        if aborts:
            with pytest.raises(KernelFailed, match="Internal error"):
                session.run(["allreduce"], run, store=store, timeout=120, oversubscribe=True)
        else:
            rep = session.run(["allreduce"], run, store=store, timeout=120, oversubscribe=True)
            assert [r.value > 0 for r in rep.results if r.metric == "latency"] == [True], sizes
    assert _children() == []


def test_tune_coll_mpich_two_ranks_writes_or_says_default(tmp_path: Path, capsys) -> None:
    """tune coll with MPICH on 2 local ranks: the per-size mode is announced, the verification runs
    the selection file (recorded as the trials' algorithm), and the file written (if any gain was
    verified) is the library's tree with allreduce's ranges; else the default's figures."""
    from clusterbench.tuning.coll import mpich_tree as T

    mpi = _mpich_or_skip()
    tree, why = T.default_for(mpi.mpicc, "allreduce")
    if tree is None:
        pytest.skip(why)
    db, out = tmp_path / "t.db", tmp_path / "ar.json"
    code = cli_main(["--db", str(db), "tune", "coll", "--op", "allreduce", "--mpi", "mpich", "--ranks", "2",
                     "--oversubscribe", "--sizes", "8,65536", "--algorithms", "reduce_scatter_allgather",
                     "--budget", "100s", "--max-rounds", "4", "--output", str(out), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["mpi"]["name"] == "mpich"
    assert any(n.startswith("per-size selection file built on the default tree in") for n in doc["notes"])
    runs = Store(db).list_runs()
    tuned = [r for r in runs if "/tuned" in r.command]
    if doc["verify"].get("rounds"):
        assert tuned and all(res.params["algorithm"]["param"] == T.ENV for res in Store(db).results(tuned[0].id))
    if doc["output"]["written"]:
        assert doc["output"]["format"] == "mpich-selection-json" and doc["output"]["env"] == {T.ENV: str(out)}
        got = json.loads(out.read_text())
        assert all(got[k] == tree.tree[k] for k in tree.tree if k != "collective=allreduce")
    else:
        assert not out.exists() and sorted(doc["default_best"] + doc["undecided"]) == [8, 65536]
    assert not list(tmp_path.glob("ar.json.verify*")) and _children() == []
