"""MPICH's per-size selection file (tuning/coll/mpich_tree.py) on the default tree recorded from
Debian's mpich 4.0.2 (tests/data/coll/mpich-4.0.2-mpir-default-selection.json, see the README there):
finding it among a library's strings, the surgery on one collective's intra branch, the names
refused, and the tuner's file for MPICH (synthetic measurement, no MPI, no process)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterbench.benchmarks.mpi.coll import algorithm_from_env
from clusterbench.tuning.coll import mpich_tree as T
from clusterbench.tuning.coll.algorithms import Algorithm
from clusterbench.tuning.coll.tuner import SelectionFile

DATA = Path(__file__).resolve().parents[1] / "data" / "coll"
RAW = (DATA / "mpich-4.0.2-mpir-default-selection.json").read_bytes().rstrip(b"\n")
DEFAULT = json.loads(RAW)
POSIX = b'{"collective=bcast":{"comm_type=intra":{"algorithm=MPIDI_POSIX_mpi_bcast_release_gather":{}}}}'
CH4 = b'{"collective=allreduce":{"comm_type=intra":{"composition=MPIDI_Allreduce_intra_composition_alpha":{}}}}'


def fake_library(*strings: bytes) -> bytes:
    """Bytes like a shared library's: binary junk and NUL-terminated strings."""
    return b"\x7fELF\x02\x01\x00junk\x00" + b"\x00\x13\x37".join(s + b"\x00" for s in strings) + b"\xff\x00"


def test_the_mpir_tree_is_found_among_the_librarys_trees() -> None:
    lib = fake_library(POSIX, CH4, b'{"collective=broken', RAW, b"MPIR_Allreduce_intra_ring_symbol")
    assert len(T.candidate_trees(lib)) == 3  # the broken one is not JSON
    assert T.find_default_tree(lib) == DEFAULT
    assert T.find_default_tree(fake_library(POSIX, CH4)) is None  # never a guess
    assert len(DEFAULT) == 44 and "collective=iallreduce" in DEFAULT and "collective=neighbor_alltoall" in DEFAULT


def test_cvar_values_get_the_trees_spelling() -> None:
    assert T.tree_algorithm("allreduce", "recursive_doubling") == "MPIR_Allreduce_intra_recursive_doubling"
    assert T.tree_algorithm("reduce-scatter", "pairwise") == "MPIR_Reduce_scatter_intra_pairwise"
    assert T.tree_algorithm("bcast", "nb") == "MPIR_Bcast_allcomm_nb"
    assert T.known_algorithm("bcast", "scatter_ring_allgather", DEFAULT)
    assert not T.known_algorithm("allreduce", "ring", DEFAULT)
    assert not T.known_algorithm("allreduce", "nb", DEFAULT)  # not in the tree: only the library's names
    assert T.known_algorithm("allreduce", "nb", DEFAULT, frozenset({"MPIR_Allreduce_allcomm_nb"}))


def test_only_the_tuned_collectives_intra_branch_changes() -> None:
    own = DEFAULT["collective=allreduce"]["comm_type=intra"]
    got = T.tuned_tree(DEFAULT, "allreduce", [(8, 1024, None), (4096, 65536, "reduce_scatter_allgather")])
    assert list(got) == list(DEFAULT)  # every collective, in the library's order
    assert all(got[k] == DEFAULT[k] for k in DEFAULT if k != "collective=allreduce")
    assert got["collective=allreduce"]["comm_type=inter"] == DEFAULT["collective=allreduce"]["comm_type=inter"]
    branch = got["collective=allreduce"]["comm_type=intra"]
    # the default's range and the sizes above the largest measured: the library's own branch
    assert list(branch) == ["avg_msg_size<=4095", "avg_msg_size<=65536", "avg_msg_size=any"]
    assert branch["avg_msg_size<=4095"] == own and branch["avg_msg_size=any"] == own
    # the tuned algorithm only for what was measured (built-in commutative op) and what it needs
    leaf = branch["avg_msg_size<=65536"]
    assert list(leaf) == ["is_commutative=yes", "is_commutative=no"] and leaf["is_commutative=no"] == own
    inner = leaf["is_commutative=yes"]["is_op_built_in=yes"]
    assert inner == {"count<pow2": own, "count=any": {"algorithm=MPIR_Allreduce_intra_reduce_scatter_allgather": {}}}
    assert T.parse_branch(got, "allreduce")[1][0] == 65536
    assert DEFAULT["collective=allreduce"]["comm_type=intra"] == own  # the input is not modified


def test_ranges_from_the_first_size_up_to_the_next_as_open_mpis_rules() -> None:
    got = T.tuned_tree(DEFAULT, "bcast", [(8, 8, "smp"), (64, 1024, "binomial"), (4096, 4096, "binomial"),
                                          (32768, 65536, None)])
    own = DEFAULT["collective=bcast"]["comm_type=intra"]
    branch = got["collective=bcast"]["comm_type=intra"]
    assert list(branch) == ["avg_msg_size<=7", "avg_msg_size<=63", "avg_msg_size<=32767",
                            "avg_msg_size=any"]
    assert branch["avg_msg_size<=7"] == own  # below the smallest size measured
    assert branch["avg_msg_size<=63"] == {"comm_hierarchy=parent": {"algorithm=MPIR_Bcast_intra_smp": {}},
                                          "comm_hierarchy=any": own}
    assert branch["avg_msg_size<=32767"] == {"algorithm=MPIR_Bcast_intra_binomial": {}}  # merged ranges
    assert list(T.tuned_tree(DEFAULT, "alltoall", [(4, 4, "brucks")])["collective=alltoall"]["comm_type=intra"]) \
        == ["avg_msg_size<=3", "avg_msg_size<=4", "avg_msg_size=any"]
    text = T.format_tree(got)
    assert json.loads(text) == got and "#" not in text  # JSON: no comment MPICH would take for a key


def test_what_the_tree_cannot_say_is_refused() -> None:
    with pytest.raises(ValueError, match="MPIR_Allreduce_intra_ring"):
        T.tuned_tree(DEFAULT, "allreduce", [(8, 8, "ring")])
    with pytest.raises(ValueError, match="no per-size key for allgather"):
        T.tuned_tree(DEFAULT, "allgather", [(8, 8, "ring")])
    with pytest.raises(ValueError, match="no collective=bcast"):
        T.tuned_tree({"collective=allreduce": {}}, "bcast", [(8, 8, "binomial")])


def test_default_for_names_why_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "libmpich.so.12"
    lib.write_bytes(fake_library(POSIX, CH4))
    monkeypatch.setattr(T, "library_path", lambda mpicc: str(lib))
    tree, why = T.default_for("mpicc.mpich", "allreduce")
    assert tree is None and why == f"no default collective selection tree found in {lib}: one CVAR for all sizes"
    tree, why = T.default_for("mpicc.mpich", "gather")
    assert tree is None and "\n" not in why and "one CVAR for all sizes" in why
    lib.write_bytes(fake_library(POSIX, RAW, b"MPIR_Allreduce_allcomm_nb"))
    tree, why = T.default_for("mpicc.mpich", "allreduce")
    assert tree is not None and tree.tree == DEFAULT and tree.knows("allreduce", "nb") and str(lib) in why
    assert json.loads(tree.text("allreduce", [(8, 8, "nb")]))["collective=bcast"] == DEFAULT["collective=bcast"]


def test_the_verification_setting_is_what_the_benchmark_records() -> None:
    s = SelectionFile("/tmp/x.json")
    assert s.env() == {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": "/tmp/x.json"}
    assert algorithm_from_env("allreduce", "mpich", s.env()) == s.record()
    # a forced CVAR comes first in MPICH, as in the record
    both = {**s.env(), **Algorithm("mpich", "allreduce", "smp", "smp").env()}
    assert algorithm_from_env("allreduce", "mpich", both)["value"] == "smp"
    assert algorithm_from_env("allreduce", "openmpi", s.env()) is None


def test_tune_writes_mpichs_selection_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """tune() for MPICH with a synthetic measurement (recursive doubling 30% faster from 4 KiB;
    the verification reads the selection file the tuner wrote): the file holds the range."""
    from clusterbench.launch.mpi.detect import MpiInstall
    from clusterbench.store import Store
    from clusterbench.tuning.coll import tuner

    lib = tmp_path / "libmpich.so.12"
    lib.write_bytes(fake_library(RAW))
    monkeypatch.setattr(T, "library_path", lambda mpicc: str(lib))
    mpi = MpiInstall("mpich", "4.0.2", "/usr/bin/mpiexec.mpich", "/usr/bin/mpicc.mpich")
    monkeypatch.setattr("clusterbench.benchmarks.mpi.common.detect", lambda given: mpi)
    cands = [Algorithm("mpich", "allreduce", v, v) for v in ("nb", "recursive_doubling", "reduce_scatter_allgather")]
    monkeypatch.setattr(tuner, "enumerate_algorithms", lambda m, op: cands)
    seen = []

    def measure(op, sizes, setting):
        if isinstance(setting, SelectionFile):
            branch = T.parse_branch(json.loads(Path(setting.path).read_text()), "allreduce")
            seen.append([b for b, _ in branch])
            bounds = [b for b, _ in branch]
            fast = {s for s in sizes if bounds[0] < s <= bounds[1]} if len(bounds) == 3 else set()
        else:
            fast = {s for s in sizes if s >= 4096} if getattr(setting, "value", None) == "recursive_doubling" else set()
        measure.n += 1
        return {s: (10.0 + s / 1000) * (0.7 if s in fast else 1.0) * (1 + 0.01 * (measure.n % 3)) for s in sizes}

    measure.n = 0
    out = tmp_path / "t.json"
    rep = tuner.tune("allreduce", budget_s=600, base={"ranks": 2, "mpi": "mpich"}, sizes=[8, 1024, 4096, 65536],
                     output=str(out), store=Store(tmp_path / "t.db"), probe={"cpu": {"logical": 2}},
                     oversubscribe=True, measure=measure)
    assert [c["value"] for c in rep.candidates] == ["recursive_doubling", "reduce_scatter_allgather"]
    assert any("nb: MPIR_Allreduce_allcomm_nb is not in" in n for n in rep.notes)
    assert [(r["from_bytes"], r["to_bytes"], r["algorithm"]) for r in rep.ranges] == [
        (8, 1024, "default"), (4096, 65536, "recursive_doubling")]
    assert rep.output["written"] and rep.output["format"] == "mpich-selection-json"
    assert rep.output["env"] == {"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": str(out)}
    assert seen and seen[0] == [4095, 65536, None]
    doc = json.loads(out.read_text())
    assert [b for b, _ in T.parse_branch(doc, "allreduce")] == [4095, 65536, None]
    assert all(doc[k] == DEFAULT[k] for k in DEFAULT if k != "collective=allreduce")
    assert not list(tmp_path.glob("t.json.verify*"))
