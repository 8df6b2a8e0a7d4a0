"""Launch-layer input handling: binary hostfiles (unit tier, no processes)."""
import pytest

from clusterbench.errors import UsageError
from clusterbench.launch import mpi as M


def test_binary_hostfile_is_one_line_usage_error(tmp_path):
    f = tmp_path / "hosts.bin"
    f.write_bytes(b"\xff\xfe\x00\x81garbage\x9c\n")
    with pytest.raises(UsageError) as ei:
        M.parse_hostfile(f)
    msg = str(ei.value)
    assert str(f) in msg and "not text" in msg
    assert "\n" not in msg

