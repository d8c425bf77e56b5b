"""Finding a run's files and each file's rank (header, file name, file order)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from traceview.errors import TraceviewError
from traceview.read.discover import (
    assign_ranks,
    compile_rank_regex,
    header_rank,
    name_rank,
    run_files,
)

DEFAULT = compile_rank_regex(None)


def _trace(path: Path, rank: int | None, tail: bytes = b"]}") -> Path:
    info = b"" if rank is None else b'"distributedInfo": {"rank": %d, "world_size": 8},' % rank
    data = b'{"schemaVersion": 1, ' + info + b' "traceEvents": [' + tail
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def test_header_rank_reads_only_the_top(tmp_path: Path) -> None:
    # Whatever follows the start of the event array is never parsed: garbage there is fine.
    path = _trace(tmp_path / "a.json", 3, b"{" * 1_000_000 + b"not json at all")
    assert header_rank(path) == 3
    assert header_rank(_trace(tmp_path / "b.json.gz", 12)) == 12
    assert header_rank(_trace(tmp_path / "c.json", None)) is None
    (tmp_path / "d.json").write_bytes(b"garbage")
    assert header_rank(tmp_path / "d.json") is None


@pytest.mark.parametrize(
    ("name", "rank"),
    [
        ("rank-0.Apr_03_18_51_38.1102.json.gz", 0),
        ("param__dlrm_8rank_worker7.json.gz", 7),
        ("worker3_step_12.1694128201553.pt.trace.json", 3),
        ("RANK12.json", 12),
        ("trace.json", None),
    ],
)
def test_rank_from_file_name(name: str, rank: int | None) -> None:
    assert name_rank(Path(name), DEFAULT) == rank


def test_directory_glob_and_order(tmp_path: Path) -> None:
    for r in (2, 0, 1):
        _trace(tmp_path / f"t_rank{r}.json", None)
    (tmp_path / "notes.txt").write_text("x")
    files = run_files([tmp_path])
    assert [p.name for p in files] == ["t_rank0.json", "t_rank1.json", "t_rank2.json"]
    assert run_files([tmp_path / "t_rank[01].json"]) == files[:2]
    assert run_files([tmp_path], "*rank2*") == files[2:]
    ranked = assign_ranks(files, DEFAULT)
    assert [(f.rank, f.source) for f in ranked] == [(0, "name"), (1, "name"), (2, "name")]


def test_header_wins_then_name_then_order(tmp_path: Path) -> None:
    a = _trace(tmp_path / "x_rank5.json", 1)  # header says 1
    b = _trace(tmp_path / "y_rank5.json", None)  # name says 5
    c = _trace(tmp_path / "z.json", None)  # nothing: the first free rank
    ranked = assign_ranks([a, b, c], DEFAULT)
    assert [(f.rank, f.path, f.source) for f in ranked] == [
        (0, c, "order"), (1, a, "header"), (5, b, "name")
    ]  # fmt: skip


def test_two_files_one_rank_is_an_error_naming_both(tmp_path: Path) -> None:
    a = _trace(tmp_path / "a.json", 4)
    b = _trace(tmp_path / "b.json", 4)
    with pytest.raises(
        TraceviewError, match=r"rank 4 is claimed by two files: .*a\.json and .*b\.json"
    ):
        assign_ranks([a, b], DEFAULT)


def test_empty_inputs_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceviewError, match="directory without trace files"):
        run_files([tmp_path])
    with pytest.raises(TraceviewError, match="no file matches"):
        run_files([tmp_path / "*.json"])
    with pytest.raises(TraceviewError, match="not a valid regular expression"):
        compile_rank_regex("(")


def test_a_corrupt_gzip_has_no_header_rank(tmp_path: Path) -> None:
    path = tmp_path / "rank3.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}')[:20] + b"\x00garbage" * 20)
    assert header_rank(path) is None
