"""docs/audit.md's ``sh`` examples run as written from a directory laid out as the repository
root (fixtures/ there), and say what the page says they do."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from conftest import ROOT, run_cli
from test_readme import readme_commands

PAGE = ROOT / "docs" / "audit.md"


def test_every_example_runs(tmp_path: Path) -> None:
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    commands = [
        c for c in readme_commands(PAGE.read_text(encoding="utf-8")) if c.startswith("traceview ")
    ]
    assert len(commands) == 2
    for command in commands:
        r = run_cli(*shlex.split(command)[1:], cwd=tmp_path)
        assert r.returncode == 0, (command, r.stderr)
    doc = json.loads((tmp_path / "audit.json").read_text())
    assert doc["sound"] is True
    assert doc["figures"]["kernel_time"]["trust"] == "approximate"  # the demo's 2 overlaps
