"""The kernels' shared harness (kernels/include/cb_common.h): the declarative options table parses
each option by its variable's C type, keeps the default when the option is absent and fails with
a JSON error record on a malformed value; the info/result/validation helpers print the records
Python parses. Compiled with the kernels' compiler and warnings."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from clusterbench.kernels import build

pytestmark = pytest.mark.parallel  # nothing timing-sensitive, no time bound: the integration tier's parallel pass


PROGRAM = r"""
#include "cb_common.h"
int main(int argc, char **argv) {
    int i = 7; long l = -1; long long ll = 1LL << 40; unsigned long u = 3; double d = 0.5;
    const char *s = "dflt", *none = NULL;
    CB_OPTIONS(argc, argv, CB_OPT("i", i), CB_OPT("l", l), CB_OPT("ll", ll), CB_OPT("u", u), CB_OPT("d", d),
               CB_OPT("s", s), CB_OPT("none", none));
    long sizes[4];
    int n = cb_parse_longs(cb_arg(argc, argv, "sizes", "1,2"), "sizes", sizes, 4, cb_fail);
    cb_json_begin("info");
    cb_json_int("i", i); cb_json_int("l", l); cb_json_int("ll", ll); cb_json_int("u", (long long)u);
    cb_json_num("d", d); cb_json_str("s", s); cb_json_bool("none", none == NULL); cb_json_int("nsizes", n);
    cb_json_end();
    double samples[2] = {1.5, 2.5}, times[2] = {0.1, 0.2};
    cb_result_begin("m", "u", "{\"k\":1}", samples, times, 2);
    cb_json_str_pair("pair", "a", "b");
    cb_json_end();
    cb_validation(1, "fine");
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("harness")
    (d / "t.c").write_text(PROGRAM)
    subprocess.run([cc, "-O2", *build.WARN_FLAGS, "-Werror", "-I", str(build.INCLUDE_DIR), "-o", str(d / "t"),
                    str(d / "t.c"), "-lm"], check=True, timeout=120)
    return d / "t"


def records(program: Path, *args: str) -> tuple[int, list[dict]]:
    p = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=30)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines()]


def test_defaults_when_no_option_is_given(program):
    rc, recs = records(program)
    assert rc == 0
    info, result, validation = recs
    assert info == {"type": "info", "i": 7, "l": -1, "ll": 1 << 40, "u": 3, "d": 0.5, "s": "dflt", "none": True,
                    "nsizes": 2}
    assert result == {"type": "result", "metric": "m", "unit": "u", "params": {"k": 1}, "samples": [1.5, 2.5],
                      "times_s": [0.1, 0.2], "pair": ["a", "b"]}
    assert validation == {"type": "validation", "ok": True, "detail": "fine"}


def test_each_option_is_parsed_by_its_type(program):
    rc, recs = records(program, "--i=-3", "--l=5", "--ll=123456789012", "--u=9", "--d=1e-3", "--s=x=y",
                       "--none=given", "--sizes=0,8,1024", "--unknown=1")
    assert rc == 0
    assert recs[0] == {"type": "info", "i": -3, "l": 5, "ll": 123456789012, "u": 9, "d": 0.001, "s": "x=y",
                       "none": False, "nsizes": 3}


@pytest.mark.parametrize("arg, message", [("--i=abc", "bad integer for --i: 'abc'"),
                                          ("--d=1x", "bad number for --d: '1x'"),
                                          ("--sizes=1,x", "bad --sizes near 'x'")])
def test_a_malformed_value_is_a_json_error(program, arg, message):
    rc, recs = records(program, arg)
    assert rc == 1 and recs == [{"type": "error", "message": message}]
