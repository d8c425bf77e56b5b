"""A JSON file of another format is named from its first keys, within the first megabytes,
not after its whole top-level value has been walked (a 37 MB rocprofiler file took 11.9 s)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_cli


@pytest.mark.parametrize(
    ("head", "said"),
    [
        (b'{"rocprofiler-sdk-tool": [', "a rocprofiler JSON file, not a Chrome trace"),
        (b'{"schema": "1.0.1", "pid": 7, "nodes": [', "a PyTorch Execution Trace, not a"),
    ],
)
def test_another_format_is_named_from_its_first_keys(
    tmp_path: Path, head: bytes, said: str
) -> None:
    """Said before its big value is walked: this one is cut off after 8 MB and never ends."""
    path = tmp_path / "other.json"
    path.write_bytes(head + b'{"kernel_name": "k", "start": 1, "end": 2},' * 200_000)
    r = run_cli("kernels", str(path), "-q", "--no-cache")
    assert r.returncode == 1 and said in r.stderr and r.stderr.count("\n") == 1, r.stderr
