"""Usage errors, click's own included, are one ``traceview: error:`` line with exit 2 that names
the option as the user typed it, and quotes durations in the user's unit."""

from __future__ import annotations

import pytest
from conftest import ROOT, run_cli

DEMO = str(ROOT / "fixtures" / "demo.json.gz")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["kernels", DEMO, "--top", "-1"],
            "--top -1: must be at least 0 (see traceview kernels -h)",
        ),
        (["kernels", DEMO, "-t", "-1"], "-t -1: must be at least 0 (see traceview kernels -h)"),
        (["kernels", DEMO, "--top=abc"], "--top 'abc': not an integer (see traceview kernels -h)"),
        (["gaps", DEMO, "--bins", "0"], "--bins 0: must be at least 1 (see traceview gaps -h)"),
        (
            ["gaps", DEMO, "--gap-top", "-2"],
            "--gap-top -2: must be at least 0 (see traceview gaps -h)",
        ),
        (
            ["gaps", DEMO, "--largest", "-1"],
            "--largest -1: must be at least 0 (see traceview gaps -h)",
        ),
        (["ops", DEMO, "--top", "-1"], "--top -1: must be at least 0 (see traceview ops -h)"),
        (["diff", DEMO, DEMO, "-t", "-3"], "-t -3: must be at least 0 (see traceview diff -h)"),
        (
            ["kernels", DEMO, "--groupby", "short"],
            "no such option: --groupby; did you mean --glob or --group-by? "
            "(see traceview kernels -h)",
        ),
        (["kernels"], "missing argument 'trace' (see traceview kernels -h)"),
        (["diff", DEMO], "missing argument 'new' (see traceview diff -h)"),
        (["bogus"], "no such command 'bogus' (see traceview -h)"),
        (["cache", "prune", "--max-size"], "option '--max-size' requires an argument"),
        (
            ["kernels", DEMO, "--format", "xml"],
            "--format 'xml': expected one of table, json, csv, md",
        ),
    ],
)
def test_click_usage_errors_are_one_line(args: list[str], line: str) -> None:
    r = run_cli(*args)
    assert (r.returncode, r.stderr, r.stdout) == (2, f"traceview: error: {line}\n", "")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--gap-sort", "bogus"], "--gap-sort 'bogus': expected one of count, avg, max, min, "
                                  "stdev, total, avggap, maxgap"),
        (["--hist-min", "5us", "--hist-max", "1us"], "--hist-min 5us must be below --hist-max 1us"),
        (["--hist-min", "2ms", "--hist-max", "900"], "--hist-min 2ms must be below --hist-max 900"),
        (["--min-gap", "5xs"], "--min-gap '5xs': expected a number with ns, us, ms or s "
                               "(e.g. 5us)"),
        (["--hist-max", "-1ms"], "--hist-max '-1ms': must not be negative"),
    ],
)  # fmt: skip
def test_gaps_errors_name_the_option_typed_in_its_unit(args: list[str], line: str) -> None:
    r = run_cli("gaps", DEMO, "-q", *args)
    assert (r.returncode, r.stderr) == (2, f"traceview: error: {line}\n")


def test_diff_min_time_error_names_the_option() -> None:
    r = run_cli("diff", DEMO, DEMO, "-q", "--min-time", "5 parsecs")
    assert r.returncode == 2
    assert r.stderr.startswith("traceview: error: --min-time '5 parsecs': expected a number")


def test_help_version_and_no_arguments_are_unchanged() -> None:
    assert run_cli("--version").stdout.startswith("traceview ")
    assert run_cli("--version").returncode == 0
    r = run_cli("kernels", "-h")
    assert r.returncode == 0 and "--top" in r.stdout and r.stderr == ""
    r = run_cli()
    assert r.returncode == 2 and "Usage" in r.stdout + r.stderr and "error" not in r.stderr
