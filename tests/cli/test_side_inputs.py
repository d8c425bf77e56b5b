"""Side inputs (issue #34): a power log or peaks file is never an -o, is read once through the
bounded reader (no device, no hang on a FIFO), and every bad power log is one clear line."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_cli

T0_TEXT = "2024/05/01 10:00"  # T0 of the trace below, in UTC
HEADER = "timestamp, index, power.draw [W]"


def _trace(path: Path, devices: tuple[int, ...] = (0,)) -> Path:
    """A kernel on each device 1 ms after 2024-05-01 10:00:00 UTC (epoch µs)."""
    kernels = [
        {"ph": "X", "cat": "kernel", "name": f"k{d}", "pid": d, "tid": 7,
         "ts": 1_714_557_600_001_000, "dur": 1000, "args": {"device": d, "stream": 7}}
        for d in devices
    ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": kernels}))
    return path


def _log(path: Path, rows: list[str], header: str = HEADER, bom: bool = False) -> Path:
    text = "\n".join([header, *rows]) + "\n"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return path


def _covering(gpus: tuple[int, ...] = (0,)) -> list[str]:
    return [f"{T0_TEXT}:{s:02d}.000, {g}, 100 W" for s in (0, 1) for g in gpus]


def _energy(trace: Path, log: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("energy", str(trace), "--power", str(log), "--power-tz", "UTC",
                   "-f", "json", "--no-cache", *extra)  # fmt: skip


def _one_line(r: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code, r.stderr
    assert len(lines) == 1 and lines[0].startswith("traceview: error: "), r.stderr
    assert fragment in lines[0], r.stderr


# ------------------------------------------------------------------------- -o never a side input


@pytest.mark.parametrize("command", ["unique", "energy"])
def test_o_never_replaces_the_power_log(tmp_path: Path, command: str) -> None:
    trace = _trace(tmp_path / "t.json")
    log = _log(tmp_path / "power.csv", _covering())
    before = log.read_bytes()
    r = run_cli(command, str(trace), "--power", str(log), "--power-tz", "UTC", "-o", str(log),
                "--force", "--no-cache")  # fmt: skip
    _one_line(r, 2, "it is never overwritten")
    assert log.read_bytes() == before


def test_o_never_replaces_the_peaks_file(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.json")
    peaks = tmp_path / "peaks.json"
    peaks.write_text('{"devices": [{"tb_per_s": 1}]}')
    r = run_cli("ops", str(trace), "--peaks", str(peaks), "-o", str(peaks), "--force", "--no-cache")
    _one_line(r, 2, "it is never overwritten")
    assert peaks.read_text() == '{"devices": [{"tb_per_s": 1}]}'


# ------------------------------------------------------------------------------ power log rows


def test_a_bom_header_is_read(tmp_path: Path) -> None:
    r = _energy(_trace(tmp_path / "t.json"), _log(tmp_path / "p.csv", _covering(), bom=True))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["devices"][0]["mean_power_w"] == pytest.approx(100)


def test_two_loggers_in_one_file_are_refused(tmp_path: Path) -> None:
    rows = [row for row in _covering() for _ in range(2)]
    r = _energy(_trace(tmp_path / "t.json"), _log(tmp_path / "p.csv", rows))
    _one_line(r, 1, "repeat the time of another (two loggers")


def test_minute_or_second_out_of_range_is_not_rolled_over(tmp_path: Path) -> None:
    # 09:59:99 would roll over to 10:00:39 and cover the kernel; it is skipped instead.
    rows = ["2024/05/01 09:59:99.000, 0, 100 W", "2024/05/01 10:00:01.000, 0, 100 W"]
    r = _energy(_trace(tmp_path / "t.json"), _log(tmp_path / "p.csv", rows))
    _one_line(r, 1, "log 2024-05-01 10:00:01.000 – 2024-05-01 10:00:01.000")


@pytest.mark.parametrize(
    ("rows", "fragment"),
    [
        (["9999/12/31 23:59:59.000, 0, 100 W"], "within the years 1677-2262"),
        ([f"{T0_TEXT}:00.000, 0, 100 W"], "leave the years 1677-2262"),
    ],
)
def test_times_beyond_int64_are_one_line(tmp_path: Path, rows: list[str], fragment: str) -> None:
    offset = ("--power-offset", "9000000000s") if "leave" in fragment else ()
    r = _energy(_trace(tmp_path / "t.json"), _log(tmp_path / "p.csv", rows), *offset)
    _one_line(r, 1, fragment)


def test_a_huge_header_field_is_one_line(tmp_path: Path) -> None:
    log = _log(tmp_path / "p.csv", _covering(), header=HEADER + ", " + "x" * (200 << 10))
    _one_line(_energy(_trace(tmp_path / "t.json"), log), 1, "first line is longer than 64 KiB")


def test_a_latin1_byte_in_a_bad_row_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "p.csv"
    rows = _covering()
    text = "\n".join([HEADER, rows[0], f"{T0_TEXT}:00.500, 0, 100 W, caf\xe9", rows[1]]) + "\n"
    log.write_bytes(text.encode("latin-1"))
    r = _energy(_trace(tmp_path / "t.json"), log)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "1 power log rows" in r.stderr


def test_a_bad_row_is_skipped_on_the_reading_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The skipping handler (Python) runs on the thread that reads, not Arrow's pool: called
    from there it once aborted the process at exit."""
    import threading

    import pyarrow.csv as pa_csv

    from traceview.columns.power import read_power_log

    threads: list[int] = []
    parse_options = pa_csv.ParseOptions

    def watched(*args: object, invalid_row_handler: object = None, **kwargs: object) -> object:
        assert callable(invalid_row_handler)

        def handler(row: object) -> object:
            threads.append(threading.get_ident())
            return invalid_row_handler(row)

        return parse_options(*args, invalid_row_handler=handler, **kwargs)

    monkeypatch.setattr(pa_csv, "ParseOptions", watched)
    rows = _covering()
    bad = [f"{T0_TEXT}:00.{ms:03d}, 0, 100 W, extra" for ms in range(1, 200)]
    log = _log(tmp_path / "p.csv", [rows[0], *bad, rows[1]])
    read_power_log(log, None, "", 0)
    assert threads and set(threads) == {threading.get_ident()}


@pytest.mark.parametrize(
    ("gpus", "code", "fragment"),
    [
        (["0=7"], 2, "no device 7 in the trace (0, 1)"),
        (["1=0"], 2, "would both get GPU 1's power"),
        (["0=1", "2=1"], 2, "device 1 is given two GPUs"),
        (["0=1", "0=0"], 2, "GPU 0 is mapped twice"),
    ],
)
def test_power_gpu_is_checked(tmp_path: Path, gpus: list[str], code: int, fragment: str) -> None:
    trace = _trace(tmp_path / "t.json", (0, 1))
    log = _log(tmp_path / "p.csv", _covering((0, 1, 2)))
    flags = [x for g in gpus for x in ("--power-gpu", g)]
    _one_line(_energy(trace, log, *flags), code, fragment)


def test_power_offset_is_quoted_with_its_sign(tmp_path: Path) -> None:
    r = _energy(_trace(tmp_path / "t.json"), _log(tmp_path / "p.csv", _covering()),
                "--power-offset", "-1e30s")  # fmt: skip
    _one_line(r, 2, "--power-offset '-1e30s'")


# ------------------------------------------------------------------------ the bounded reader


def test_a_device_is_no_power_log_or_peaks_file(tmp_path: Path) -> None:
    trace = _trace(tmp_path / "t.json")
    _one_line(_energy(trace, Path("/dev/zero")), 1, "not a regular file or a pipe")
    r = run_cli("ops", str(trace), "--peaks", "/dev/zero", "--no-cache")
    _one_line(r, 2, "--peaks /dev/zero: not a regular file or a pipe")


def test_side_files_over_their_maximum_are_refused(tmp_path: Path) -> None:
    peaks = tmp_path / "peaks.json"
    peaks.write_text(" " * (1 << 20) + '{"devices": [{"tb_per_s": 1}]}')
    r = run_cli("ops", str(_trace(tmp_path / "t.json")), "--peaks", str(peaks), "--no-cache")
    _one_line(r, 2, "larger than the 1 MiB a peaks file may be")


def test_a_fifo_without_a_writer_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "power.fifo"
    os.mkfifo(fifo)
    _one_line(_energy(_trace(tmp_path / "t.json"), fifo), 1, "a FIFO with no writer?")


def test_a_power_log_from_a_pipe_is_read_once(tmp_path: Path) -> None:
    log = _log(tmp_path / "p.csv", _covering())
    trace = _trace(tmp_path / "t.json")
    cmd = f'"$PY" -m traceview energy {trace} --power <(cat {log}) --power-tz UTC -f json'
    env = {**os.environ, "PY": sys.executable, "PYTHONPATH": str(Path(__file__).parents[2])}
    r = subprocess.run(["bash", "-c", cmd + " --no-cache"], capture_output=True, text=True,
                       timeout=60, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["devices"][0]["mean_power_w"] == pytest.approx(100)


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_deeply_nested_peaks_are_one_line(tmp_path: Path, suffix: str) -> None:
    peaks = tmp_path / f"peaks{suffix}"
    deep = "[" * 100_000 + "]" * 100_000
    peaks.write_text(f'{{"devices": {deep}}}' if suffix == ".json" else f"devices = {deep}\n")
    r = run_cli("ops", str(_trace(tmp_path / "t.json")), "--peaks", str(peaks), "--no-cache")
    _one_line(r, 2, "nested too deeply")


def test_o_at_a_fifo_without_a_reader_says_it_waits(tmp_path: Path) -> None:
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    trace = _trace(tmp_path / "t.json")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    command = [sys.executable, "-m", "traceview", "snapshot", str(trace), "-o", str(fifo),
               "--no-cache"]  # fmt: skip
    with subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env) as p:
        assert p.stderr is not None
        said, _, _ = select.select([p.stderr], [], [], 30)  # said before it blocks
        if not said:
            p.kill()
            with fifo.open("rb"):  # let it go
                pass
            pytest.fail("blocked on the FIFO without a word")
        line = p.stderr.readline()
        assert line == f"traceview: waiting for a reader of the FIFO {fifo}\n"
        with fifo.open("rb") as reader:
            data = reader.read()
        assert p.wait(timeout=60) == 0
    assert json.loads(data)["kind"] == "traceview-snapshot"
