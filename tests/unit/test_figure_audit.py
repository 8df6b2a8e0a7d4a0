"""No figure with a unit enters README.md or docs/ unseen: each is bound to a raw log by speed/claims.toml
(checked by speed/validation.py) or listed, with its kind, in speed/unbound-figures.txt (speed/figure_audit.py;
pure: reads files, starts nothing)."""
from __future__ import annotations

import pytest
from speedscriptkit import speed_script

#: beside speed/validation.py's tests, on one worker: the module (speedscriptkit) and what it compiled are shared
pytestmark = pytest.mark.xdist_group("validation-docs")


@pytest.fixture
def audit():
    return speed_script("figure_audit")


@pytest.fixture
def validation():
    return speed_script("validation")


def test_every_figure_in_the_docs_is_bound_or_listed(audit):
    problems = audit.audit()
    assert not problems, "\n".join(problems)


def test_the_list_names_each_figure_once_with_a_known_kind(audit):
    lines = [ln for ln in audit.LIST.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(lines) == len(set(lines))
    assert {kind for kind in audit.read_list().values()} <= set(audit.KINDS)


PAGE = """A run took 12.3 s here, a setting is ≤ 10 s, and `--budget 30 s` is an option.

<!-- excerpt: speed/x.txt -->
```
done in 4.5 s
```

```
$ clusterbench run fpu --min-time 0.5 s
fpu 81.2 Gflop/s
```

The sweep took 7.5 s on 4 nodes.
"""


def test_a_figure_no_claim_binds_is_found(audit, validation):
    found = [ctx for _, _, ctx in audit.unbound({"docs/x.md": PAGE}, {}, validation)]
    # the measured ones, in prose and in a block that is no excerpt; not the setting, the option, the
    # excerpt or the command line
    assert found == ["A run took [12.3 s] here, a setting is", "fpu [81.2 Gflop/s]", "The sweep took [7.5 s] on 4 nodes."]
    claims = {"figure": [{"doc": "docs/x.md", "quote": "The sweep took {0:.1f} s"}]}
    assert len(audit.unbound({"docs/x.md": PAGE}, claims, validation)) == 2  # a claim's quote binds it


def test_an_unlisted_figure_and_a_stale_entry_fail(audit, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("clusterbench.\n")
    (tmp_path / "docs" / "x.md").write_text("It took 12.3 s.\n")
    problems = audit.audit(tmp_path, claims={}, listed={})
    assert len(problems) == 1 and "docs/x.md:1: It took [12.3 s]. is bound to no log" in problems[0]
    listed = {("docs/x.md", "It took [12.3 s]."): "unlogged", ("docs/x.md", "gone [1 s]"): "setting"}
    problems = audit.audit(tmp_path, claims={}, listed=listed)
    assert problems == ["speed/unbound-figures.txt: docs/x.md no longer has gone [1 s] (drop the entry)"]
    problems = audit.audit(tmp_path, claims={}, listed={("docs/x.md", "It took [12.3 s]."): "unreviewed"})
    assert len(problems) == 1 and "kind is not one of" in problems[0]
