"""speed/osu_why.py's named patches still apply to the sources they change (the kernel of this tree, OSU
7.4's reference tarball), and its OSU row parser reads ``-f -z`` rows: a patch that no longer applies must
stop the script, not measure an unpatched build under a patched name."""
from __future__ import annotations

import importlib.util
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("osu_why", REPO / "speed" / "osu_why.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["osu_why"] = mod
    spec.loader.exec_module(mod)
    return mod


osu_why = _load()
OURS = ("pagealign", "float", "nobcast", "char")
OSU = ("double", "tailmax", "align2m")


def test_every_patch_is_for_one_side():
    assert set(osu_why.PATCHES) == set(OURS) | set(OSU)


@pytest.mark.parametrize("name", OURS)
def test_the_kernels_patches_apply_and_change_it(tmp_path, name):
    (tmp_path / "coll.c").write_text(osu_why.KERNEL.read_text())
    osu_why.patch(tmp_path, [name])
    assert (tmp_path / "coll.c").read_text() != osu_why.KERNEL.read_text()


def test_the_float_patch_leaves_the_kernels_own_double_reductions_alone(tmp_path):
    (tmp_path / "coll.c").write_text(osu_why.KERNEL.read_text())
    osu_why.patch(tmp_path, ["float"])
    text = (tmp_path / "coll.c").read_text()
    assert "MPI_Reduce(&mine, &avg, 1, MPI_DOUBLE, MPI_SUM" in text  # the timing's reduction stays double
    assert "n8, MPI_FLOAT, MPI_SUM" in text and "n8, MPI_DOUBLE, MPI_SUM" not in text


def test_a_patch_that_does_not_apply_stops_the_script(tmp_path):
    (tmp_path / "coll.c").write_text("int main(void) { return 0; }\n")
    with pytest.raises(SystemExit, match="does not apply"):
        osu_why.patch(tmp_path, ["pagealign"])
    with pytest.raises(SystemExit, match="unknown patch"):
        osu_why.patch(tmp_path, ["nosuch"])


@pytest.mark.parametrize("name", OSU)
def test_the_osu_patches_apply_to_the_reference_source(tmp_path, name):
    tarballs = sorted(osu_why.TARBALLS.glob("osu-micro-benchmarks-7.4-*.tar.gz"))
    if not tarballs:
        pytest.skip(f"no OSU 7.4 tarball in {osu_why.TARBALLS}")
    with tarfile.open(tarballs[-1]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("c/util/osu_util_mpi.c"))
        text = tar.extractfile(member).read().decode()
    f = tmp_path / "c" / "util" / "osu_util_mpi.c"
    f.parent.mkdir(parents=True)
    f.write_text(text)
    osu_why.patch(tmp_path, [name])
    assert f.read_text() != text


def test_osu_rows_with_and_without_percentiles():
    plain = osu_why.ROW.match("8192                    5.04              4.80              5.28        1000")
    tail = osu_why.ROW.match("8192                 2111.85           1997.72           2225.98        1000"
                              "              6.67              7.32             78.01")
    assert plain and plain[1] == "8192" and plain[2] == "5.04" and plain[6] is None
    assert tail and tail[2] == "2111.85" and tail[6] == "6.67"
    assert osu_why.ROW.match("# Size       Avg Latency(us)") is None


def test_variants_and_sizes_are_parsed_or_refused():
    assert osu_why.parse_variant("osu-dbl=osu+double -T mpi_float") == ("osu-dbl", "osu", ["double"],
                                                                        ["-T", "mpi_float"])
    with pytest.raises(SystemExit, match="the side is 'ours', 'osu' or 'cb'"):
        osu_why.parse_variant("x=imb")
    assert osu_why.parse_variant("cb=cb --validate-every 100") == ("cb", "cb", [], ["--validate-every", "100"])
    with pytest.raises(SystemExit, match="takes no patch"):  # clusterbench's own run coll: nothing to patch
        osu_why.parse_variant("cb=cb+float")
    with pytest.raises(SystemExit, match="give LABEL=SIDE"):
        osu_why.parse_variant("ours")
    assert osu_why.sizes_arg("2048:16384") == [2048, 4096, 8192, 16384]
    assert osu_why.sizes_arg("8") == [8]
