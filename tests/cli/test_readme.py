"""Every command of the ``sh`` blocks of the README and of the pages of docs/ runs as written:
the traceview commands, and the ``python fixtures/generate.py`` lines that make their inputs,
from a copy of the repository root, one per page (the files a reader brings, such as an nsys
export or the output of a profiled run, are made there first). Blocks marked ``text`` are not
run.

An ``sh`` block of one command followed at once by a ``text`` block shows that command's output
on an 80-column terminal: it must be the real one (when abridged, ``… (N lines above)`` first
and ``… (N more lines)`` last say what is left out). ``pytest tests/cli/test_readme.py
--update-goldens`` rewrites those blocks in place from the current output, keeping how many
lines each shows."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from nsys_writer import kineto_to_nsys, load_kineto

DEMO = ROOT / "fixtures" / "demo.json.gz"
_FENCE = re.compile(r"^```(?:sh|shell|bash|console)\n(.*?)^```", re.M | re.S)
_RUN = ("traceview ", "python fixtures/generate.py ", "python fixtures/generate_run.py ")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# An sh block of one command, and at once the text block of its output.
_SHOWN = re.compile(r"^```sh\n(traceview [^\n]*)\n```\n```text\n(.*?)^```\n", re.M | re.S)
_MORE = re.compile(r"^… \((\d+) more lines?\)$")
_ABOVE = re.compile(r"^… \((\d+) lines? above\)$")
WIDTH = 80


def readme_commands(text: str) -> list[str]:
    """The commands to run from a page's shell blocks, continuation lines joined."""
    commands = []
    for block in _FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith(_RUN):
                commands.append(line)
    return commands


def _page(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


COMMANDS = [
    (_page(path), command)
    for path in PAGES
    for command in readme_commands(path.read_text(encoding="utf-8"))
]


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each page's directory, made when its first command runs."""
    return {}


def _workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory laid out as the pages assume: the repository's fixtures, a profiled run
    (``run.json.gz``, which the CI example's bench.py writes), its committed baseline and an
    nsys export; ``traceview`` and ``python`` on PATH."""
    work = tmp_path_factory.mktemp("readme")
    (work / "fixtures").symlink_to(ROOT / "fixtures")
    shutil.copy(DEMO, work / "run.json.gz")
    kineto_to_nsys(load_kineto(DEMO), work / "report1.sqlite")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    shim = bin_dir / "traceview"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m traceview "$@"\n')
    shim.chmod(0o755)
    _write_power_log(DEMO, work / "power.csv")
    (work / "ci").mkdir()
    _run(f"traceview snapshot {DEMO} -o ci/baseline.json -q", work)
    return work


def _write_power_log(trace: Path, out: Path) -> None:
    """An nvidia-smi log (UTC, every 40 ms, GPUs 0-1) covering the run's window."""
    from datetime import UTC, datetime

    from traceview.columns.parallel import collect_events
    from traceview.read.reader import TraceReader

    gpu = collect_events(TraceReader(trace)).gpu
    start, end = int(gpu.ts.min()) // 10**6 - 100, int((gpu.ts + gpu.dur).max()) // 10**6 + 100
    lines = ["timestamp, index, power.draw.instant [W]"]
    for ms in range(start, end, 40):
        stamp = f"{datetime.fromtimestamp(ms // 1000, UTC):%Y/%m/%d %H:%M:%S}.{ms % 1000:03d}"
        lines += [f"{stamp}, {g}, {150 + ms % 7}.00 W" for g in (0, 1)]
    out.write_text("\n".join(lines) + "\n")


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{cwd / 'bin'}:/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "120",
        "TRACEVIEW_CACHE_DIR": str(cwd / "cache"),  # never the user's
    }
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_readme_has_the_examples_it_promises() -> None:
    readme = "\n".join(c for page, c in COMMANDS if page == "README.md")
    for wanted in ("traceview diff baseline.json new-run.json.gz", "generate.py"):
        assert wanted in readme
    pages = {page for page, _ in COMMANDS}
    assert {"docs/profiler-py.md", "docs/ranks.md", "docs/trim.md"} <= pages
    assert any("--gap-sort avg" in c for page, c in COMMANDS if page == "docs/profiler-py.md")


def test_the_readme_is_a_front_page() -> None:
    """At most 250 lines, and a link to a page of docs/ for every command."""
    from traceview.cli import COMMANDS as CLI_COMMANDS

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for command in CLI_COMMANDS:
        page = ROOT / "docs" / f"{command}.md"
        assert page.exists(), f"no docs/{command}.md"
        assert f"(docs/{command}.md)" in readme, f"the README does not link docs/{command}.md"


@pytest.mark.parametrize(("page", "command"), COMMANDS)
def test_readme_command_runs_as_written(
    page: str,
    command: str,
    workdirs: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    if page not in workdirs:
        workdirs[page] = _workdir(tmp_path_factory)
    workdir = workdirs[page]
    r = _run(command, workdir)
    failed = f"{command}\nexit {r.returncode}\n{r.stderr}"
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, failed
    if r.returncode == 1 and "--max-regression" in command:  # the gate may fail: it works
        assert r.stderr.startswith("traceview: error: regression gate failed:"), failed
    else:
        assert r.returncode == 0, failed


def _shown_output(command: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """What ``command`` prints on a terminal of WIDTH columns, run from the repository root."""
    import shlex

    from rich.console import Console
    from typer.testing import CliRunner

    from traceview.app import commands
    from traceview.cli import app

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(commands, "stdout_is_terminal", lambda: True)
    monkeypatch.setattr(
        commands,
        "_stdout_console",
        lambda wide=False: Console(highlight=False, width=WIDTH, color_system=None),
    )
    args = shlex.split(command)[1:]
    r = CliRunner().invoke(app, args, env={"TRACEVIEW_CACHE_DIR": str(tmp_path / "cache")})
    assert r.exit_code == 0, r.output
    return r.stdout.rstrip("\n").split("\n")


def _shown(lines: list[str], above: int, count: int) -> str:
    """``count`` lines after the first ``above``, with what is left out each side."""
    shown = lines[above : above + count]
    if above:
        shown.insert(0, f"… ({above} line{'s' if above > 1 else ''} above)")
    more = len(lines) - above - count
    if more > 0:
        shown.append(f"… ({more} more line{'s' if more > 1 else ''})")
    return "\n".join(shown) + "\n"


SHOWN = [
    (_page(path), m[1]) for path in PAGES for m in _SHOWN.finditer(path.read_text(encoding="utf-8"))
]


@pytest.mark.parametrize(("page", "command"), SHOWN)
def test_a_shown_output_is_the_real_one(
    page: str,
    command: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    path = ROOT / page
    text = path.read_text(encoding="utf-8")
    match = next(m for m in _SHOWN.finditer(text) if m[1] == command)
    block = match[2].rstrip("\n").split("\n")
    above = _ABOVE.match(block[0])
    count = len(block) - bool(above) - bool(_MORE.match(block[-1]))
    real = _shown(
        _shown_output(command, monkeypatch, tmp_path), int(above[1]) if above else 0, count
    )
    if request.config.getoption("--update-goldens"):
        start, end = match.span(2)
        path.write_text(text[:start] + real + text[end:], encoding="utf-8")
        return
    assert match[2] == real, f"{page}: the output shown for {command!r} is not the real one"


@pytest.mark.parametrize("path", PAGES, ids=_page)
def test_every_link_leads_to_a_file(path: Path) -> None:
    """Relative links of the README and of docs/ lead to files of the repository (the pages
    moved out of the README must not leave a link behind)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)  # code spans: `triton_kernel[grid](x)`
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target:
            continue
        assert (path.parent / target).exists(), f"{_page(path)}: a link to {target}"
