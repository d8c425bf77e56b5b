"""``traceview record -- COMMAND``: run a Python program under torch.profiler (through
traceview.app.record_boot, without editing it), log GPU power beside it, then analyse.

The directory written: ``trace.json.gz`` (``trace-rank<N>.json.gz`` per torchrun rank),
``power.csv`` (with --power: nvidia-smi, timestamps in UTC), ``command.txt``, ``report.html``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from traceview.app import recorded
from traceview.app.record_boot import ENV
from traceview.errors import TraceviewError, UsageError
from traceview.render.output import stderr_console

POWER_QUERY = "timestamp,index,power.draw,power.draw.instant"
POWER_LOG, POWER_TZ = "power.csv", "UTC"
# The program's sitecustomize: record_boot's own source (standard library only, so nothing
# of traceview's environment is put on the program's path), then the environment's own
# sitecustomize, if it has one.
_CHAIN = """
install()
del install


def _theirs():
    import importlib, os, sys

    here = os.path.dirname(os.path.abspath(__file__))
    path = list(sys.path)
    sys.path[:] = [d for d in path if os.path.abspath(d or ".") != here]
    ours = sys.modules.pop("sitecustomize", None)
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = path
        if ours is not None:  # the import of this module ends by looking itself up
            sys.modules["sitecustomize"] = ours


_theirs()
"""


@dataclass(frozen=True)
class RecordOptions:
    """What to record and where (the CLI's options)."""

    out: Path | None = None
    force: bool = False
    wait: int = 5
    warmup: int = 2
    active: int = 5
    shapes: bool = True
    memory: bool = True
    stack: bool = False
    step_forwards: int = 0
    step_seconds: float = 0.0
    power: bool = False
    power_interval_ms: int = 40
    report: bool = True
    quiet: bool = False  # only warnings and the summary on stderr/stdout


def default_dir() -> Path:
    return Path(time.strftime("traceview-%Y%m%d-%H%M%S"))


def check(command: list[str], options: RecordOptions) -> Path:
    """Usage errors before anything runs; the output directory."""
    if not command:
        raise UsageError("record: no program given: traceview record [OPTIONS] -- python train.py")
    for flag, value in (("--wait", options.wait), ("--warmup", options.warmup)):
        if value < 0:
            raise UsageError(f"{flag} {value}: must not be negative")
    if options.active < 1:
        raise UsageError(f"--active {options.active}: must be at least 1")
    if not options.step_seconds >= 0 or options.step_seconds == float("inf"):
        raise UsageError(f"--step-seconds {options.step_seconds}: expected a number of seconds ≥ 0")
    if options.power_interval_ms < 1:
        raise UsageError(f"--power-interval {options.power_interval_ms}: must be at least 1 ms")
    out = options.out or default_dir()
    if out.exists() and not (out.is_dir() and not any(out.iterdir())) and not options.force:
        raise UsageError(f"{out}: exists; use --force to write into it")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: not a directory")
    if options.power and shutil.which("nvidia-smi") is None:
        raise UsageError("--power: nvidia-smi is not on PATH (it comes with the NVIDIA driver)")
    interpreter = python_of(command)
    if interpreter is None:
        raise UsageError(f"record: {command[0]!r} is not a Python program (python, or a script)")
    if not has_torch(interpreter):
        raise TraceviewError(f"record: no torch in {interpreter}'s environment: pip install torch")
    return out


def python_of(command: list[str]) -> str | None:
    """The interpreter that will run ``command``: python itself, or a script's shebang."""
    first = shutil.which(command[0]) or command[0]
    if Path(first).name.startswith("python"):
        return first
    try:
        with open(first, "rb") as f:
            line = f.readline(512)
    except OSError:
        return None
    if not line.startswith(b"#!") or b"python" not in line:
        return None
    words = shlex.split(line[2:].decode(errors="replace"))
    return words[-1] if Path(words[0]).name == "env" else words[0]


def has_torch(interpreter: str) -> bool:
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    try:
        return subprocess.run([interpreter, "-c", probe], check=False, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def record(command: list[str], options: RecordOptions) -> int:
    """Run the program under the profiler, say what it recorded and analyse it; the
    program's exit code (128+N after signal N: 130 after Ctrl-C, 143 after SIGTERM)."""
    out = check(command, options)
    code = _record(command, options, out)
    for line in said(out, code):
        stderr_console().print(f"traceview: warning: {line}", markup=False)
    analyse(out, options.report, options.quiet)
    return code


def _record(command: list[str], options: RecordOptions, out: Path) -> int:
    """The program run with the bootstrap on its path (and nvidia-smi beside it)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "command.txt").write_text(shlex.join(command) + "\n")
    boot = out / ".boot"
    boot.mkdir(exist_ok=True)
    boot_source = (Path(__file__).parent / "record_boot.py").read_text(encoding="utf-8")
    (boot / "sitecustomize.py").write_text(boot_source + _CHAIN, encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(boot), *filter(None, [env.get("PYTHONPATH")])])
    env[ENV] = json.dumps(
        {
            "out": str(out.resolve()),
            "wait": options.wait,
            "warmup": options.warmup,
            "active": options.active,
            "shapes": options.shapes,
            "memory": options.memory,
            "stack": options.stack,
            "step_forwards": options.step_forwards,
            "step_seconds": options.step_seconds,
        }
    )
    if not options.quiet:
        line = f"traceview: recording {shlex.join(command)} into {out}"
        stderr_console().print(line, markup=False)
    logger = None
    if options.power:
        logger = _power_logger(out, options)
        recorded.write_power_zone(out, POWER_LOG, POWER_TZ)
    try:
        code = _run(command, env)
    finally:
        if logger is not None:
            logger.terminate()
            logger.wait(timeout=10)
        shutil.rmtree(boot, ignore_errors=True)
    return code


def _run(command: list[str], env: dict[str, str]) -> int:
    """The program's exit code, 128+N when a signal N ended it (as a shell says). SIGINT and
    SIGTERM sent to traceview alone are passed on to the program, which writes its trace
    and ends; then 130 or 143. A terminal's Ctrl-C reaches the program itself (the same
    process group): not passed on twice."""
    child = subprocess.Popen(command, env=env)
    forwarded = {signal.SIGINT, signal.SIGTERM}
    held = signal.pthread_sigmask(signal.SIG_BLOCK, forwarded)
    got = 0
    try:
        while child.poll() is None:
            info = signal.sigtimedwait(forwarded, 0.2)
            if info is None:
                continue
            got = info.si_signo
            if not _from_the_terminal(info):
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(got)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    code = child.wait()
    if got:
        return 128 + got
    return 128 - code if code < 0 else code


_SI_KERNEL = 0x80  # si_code of a signal the kernel sent: a terminal's Ctrl-C


def _from_the_terminal(info: signal.struct_siginfo) -> bool:
    """A signal the terminal sent to its foreground process group, the program in it too."""
    return info.si_code == _SI_KERNEL


def _power_logger(out: Path, options: RecordOptions) -> subprocess.Popen[bytes]:
    """nvidia-smi logging to power.csv, its timestamps in UTC (TZ=UTC), the zone recorded
    beside it (app.recorded) so that ``energy`` needs no ``--power-tz``."""
    command = [
        "nvidia-smi",
        f"--query-gpu={POWER_QUERY}",
        "--format=csv",
        f"-lms={options.power_interval_ms}",
        f"--filename={out / POWER_LOG}",
    ]
    return subprocess.Popen(
        command,
        env={**os.environ, "TZ": POWER_TZ},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def traces_of(out: Path) -> list[Path]:
    return sorted(out.glob("trace*.json.gz"))


def boot_reports(out: Path) -> list[dict[str, object]]:
    """What the bootstrap wrote in each process it recorded (hidden files: the directory's
    readers take only its traces)."""
    reports = []
    for path in sorted(out.glob(".boot*.json")):
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return reports


def said(out: Path, code: int) -> list[str]:
    """What the run recorded, in warnings (no trace, no step, no GPU), each true of it."""
    reports = boot_reports(out)
    killed = _killed_by(code)
    if not reports:
        if killed:
            return [f"the program was killed by {killed} before it imported torch: nothing "
                    "was recorded"]  # fmt: skip
        return ["the program never imported torch: nothing was recorded"]
    errors = [r["error"] for r in reports if r.get("error")]
    if errors:
        return [f"could not start torch.profiler in the program ({errors[0]}): nothing recorded"]
    if any(r.get("own_profiler") for r in reports):
        return [
            "the program runs its own torch.profiler: traceview stayed out (no trace of its "
            "own; the program's trace is where the program writes it)"
        ]
    unfinished = [r for r in reports if not r.get("finished")]
    if killed and unfinished:
        some = " (the processes that ended wrote theirs)" if len(unfinished) < len(reports) else ""
        return [
            f"the program was killed by {killed} while torch.profiler recorded: a process "
            f"killed so writes no trace{some}"
        ]
    lines = []
    if not any(r.get("trace") for r in reports):
        lines.append(_no_trace(reports))
    if not any(r.get("steps") for r in reports):
        lines.append(
            "the program never stepped (no optimizer.step(), no step range of its own, no "
            "--step-forwards or --step-seconds): the trace holds the whole run"
        )
    if not any(r.get("cuda") for r in reports):
        lines.append("no CUDA device in the program: a CPU-only profile")
    if code not in (0, 130, 143) and not killed:
        lines.append(f"the program exited with code {code}")
    return lines


def _no_trace(reports: list[dict[str, object]]) -> str:
    """Why no trace was written: too few steps for the schedule, else the profiler's error."""
    steps = max(int(str(r.get("steps") or 0)) for r in reports)
    settings = reports[0].get("settings")
    if steps and isinstance(settings, dict):
        wait, warmup = int(settings.get("wait") or 0), int(settings.get("warmup") or 0)
        if steps <= wait + warmup:
            return (
                f"the program stepped {steps} time{'s' * (steps != 1)}, within --wait {wait} "
                f"+ --warmup {warmup}: nothing recorded (lower --wait, or step more)"
            )
    return "the profiler wrote no trace (see the program's own errors above)"


def _killed_by(code: int) -> str | None:
    """The signal that ended the program (its code 128+N), unless it was the Ctrl-C or
    SIGTERM that traceview passed on (the trace written then)."""
    if code <= 128 or code in (130, 143):
        return None
    try:
        return signal.Signals(code - 128).name
    except ValueError:
        return None


def analyse(out: Path, report: bool, quiet: bool = False) -> None:
    """``summary`` of what was recorded, and the HTML report (or the command for a run);
    ``quiet``: without the lines that name the next commands."""
    from traceview.app import commands
    from traceview.options import ReadOptions

    traces = traces_of(out)
    console = stderr_console()
    if len(traces) > 1:
        if not quiet:
            console.print(f"traceview: {len(traces)} ranks: traceview ranks {out}", markup=False)
        return
    if not traces:
        return
    read = ReadOptions(quiet=True)
    commands.summary(traces[0], read, commands.OutputOptions("table"))
    if report:
        from traceview.render.html.documents import ReportOptions

        try:
            commands.report(traces[0], ReportOptions(), read, out / "report.html", True)
        except TraceviewError as e:
            console.print(f"traceview: warning: no report.html: {e.message}", markup=False)
    if (out / POWER_LOG).exists() and not quiet:  # its zone is recorded beside it: no --power-tz
        energy = f"traceview energy {traces[0]} --power {out / POWER_LOG}"
        console.print(f"traceview: energy per kernel: {energy}", markup=False)
