"""``traceview record`` without torch: a stand-in ``torch`` package (its profiler writes the demo
trace) and a stand-in ``nvidia-smi`` test the orchestration — the bootstrap, steps, exit codes,
Ctrl-C, the output directory, the power log — and, where torch is installed, a real CPU run."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

DEMO = ROOT / "fixtures" / "demo.json.gz"
FAKE_TORCH = f"""
import enum, json, os, shutil, sys, types

class ProfilerActivity:
    CPU, CUDA = "cpu", "cuda"

class ProfilerAction(enum.Enum):
    NONE, WARMUP, RECORD, RECORD_AND_SAVE = range(4)

def schedule(wait, warmup, active, repeat):  # as torch's, for repeat=1
    def action(step):
        if step < wait:
            return ProfilerAction.NONE
        if step < wait + warmup:
            return ProfilerAction.WARMUP
        if step < wait + warmup + active - 1:
            return ProfilerAction.RECORD
        if step == wait + warmup + active - 1:
            return ProfilerAction.RECORD_AND_SAVE
        return ProfilerAction.NONE
    return action

RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)

class profile:
    \"\"\"As torch's: a cycle's trace is ready when RECORD_AND_SAVE ends, or at stop() while
    recording; nothing to export before the schedule first warmed up or recorded.\"\"\"
    def __init__(self, activities, schedule, on_trace_ready, record_shapes, profile_memory,
                 with_stack):
        self.plan, self.ready, self.steps = schedule, on_trace_ready, 0
        self.kwargs = dict(record_shapes=record_shapes, profile_memory=profile_memory,
                           with_stack=with_stack)
        self.prepared = False
    def _act(self, action):
        self.action = action
        self.prepared |= action is not ProfilerAction.NONE
    def start(self):  # as torch's: a ProfilerStep range open from start to stop
        self._act(self.plan(0))
        self.range = record_function("ProfilerStep#0")
        self.range.__enter__()
    def step(self):
        self.steps += 1
        self.range.__exit__(None, None, None)
        before = self.action
        self._act(self.plan(self.steps))
        self.range = record_function(f"ProfilerStep#{{self.steps}}")
        self.range.__enter__()
        if before is ProfilerAction.RECORD_AND_SAVE and self.ready:
            self.ready(self)
    def stop(self):
        self.range.__exit__(None, None, None)
        if self.action in RECORDING and self.ready:
            self.ready(self)
        self.action = ProfilerAction.NONE
    def export_chrome_trace(self, path):
        if not self.prepared:
            raise AssertionError("Profiler must be initialized before exporting chrome trace")
        shutil.copyfile({str(DEMO)!r}, path)
        with open(path + ".kwargs", "w") as f:
            json.dump(dict(self.kwargs, steps=self.steps), f)

class record_function:
    def __init__(self, name):
        self.name = name
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return None

profiler = types.SimpleNamespace(ProfilerActivity=ProfilerActivity, schedule=schedule,
                                 profile=profile, record_function=record_function,
                                 ProfilerAction=ProfilerAction)
autograd = types.SimpleNamespace(profiler=types.SimpleNamespace(record_function=record_function))

pre_hooks, post_hooks = [], []

class Module:
    def __call__(self, *args):
        for hook in pre_hooks:
            hook(self, args)
        out = self.forward(*args)
        for hook in post_hooks:
            hook(self, args, out)
        return out

nn = types.SimpleNamespace(Module=Module, modules=types.SimpleNamespace(
    module=types.SimpleNamespace(register_module_forward_pre_hook=pre_hooks.append,
                                 register_module_forward_hook=post_hooks.append)))
cuda = types.SimpleNamespace(is_available=lambda: False)

post_step_hooks = []

class Optimizer:
    def step(self):
        for hook in post_step_hooks:
            hook(self, (), {{}})

# as torch.optim.optimizer: the global hook is the module's function, not the class's
optim = types.ModuleType("torch.optim")
optim.Optimizer = Optimizer
optim.optimizer = types.ModuleType("torch.optim.optimizer")
optim.optimizer.register_optimizer_step_post_hook = post_step_hooks.append
sys.modules.update({{"torch.optim": optim, "torch.optim.optimizer": optim.optimizer}})
"""
PROGRAM = """
import sys, time
import torch
steps = int(sys.argv[1])
for _ in range(steps):
    torch.optim.Optimizer().step()
if len(sys.argv) > 3:
    open("ready", "w").close()  # stepped: the test may interrupt now
    time.sleep(float(sys.argv[3]))
sys.exit(int(sys.argv[2]))
"""
FAKE_SMI = """#!/bin/sh
for a in "$@"; do case "$a" in --filename=*) out="${a#--filename=}";; esac; done
echo "timestamp, index, power.draw [W], power.draw.instant [W]" > "$out"
echo "$TZ" > "$out.tz"
trap 'exit 0' TERM
while true; do sleep 0.05; done
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A stand-in torch on PYTHONPATH, the program beside it, a PATH without nvidia-smi."""
    lib = tmp_path / "lib" / "torch"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(FAKE_TORCH)
    (tmp_path / "train.py").write_text(PROGRAM)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return {
        **os.environ,
        "PYTHONPATH": str(tmp_path / "lib"),
        "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
        "COLUMNS": "120",
    }


def _record(
    env: dict[str, str], cwd: Path, *args: str, program: tuple[str, ...] = ("12", "0")
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "traceview", "record", "--no-report", *args, "--"]
    command += [sys.executable, "train.py", *program]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_torch_it_cannot_drive_leaves_the_program_running(
    env: dict[str, str], tmp_path: Path
) -> None:
    """A torch without the global optimizer hook (before 2.0): the program runs to its own end
    and exit code, unprofiled, and record says why in one line."""
    torch = tmp_path / "lib" / "torch" / "__init__.py"
    old_torch = "\ndel optim.optimizer.register_optimizer_step_post_hook\n"
    torch.write_text(torch.read_text() + old_torch)
    r = _record(env, tmp_path, "-o", "out", program=("3", "4"))
    assert r.returncode == 4, r.stderr
    assert "could not start torch.profiler in the program (AttributeError" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out" / "trace.json.gz").exists()


def test_a_run_is_recorded_and_summarised(env: dict[str, str], tmp_path: Path) -> None:
    r = _record(env, tmp_path, "-o", "out")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    assert (out / "trace.json.gz").read_bytes() == DEMO.read_bytes()
    assert "train.py 12 0" in (out / "command.txt").read_text()
    kwargs = (out / "trace.json.gz.kwargs").read_text()
    assert '"record_shapes": true' in kwargs and '"profile_memory": true' in kwargs
    assert '"steps": 12' in kwargs  # wait 5 + warmup 2 + active 5: written at the 12th step
    assert '"steps": 12' in (out / ".boot.json").read_text()
    assert "window" in r.stdout  # the summary of what was recorded
    assert "CPU-only profile" in r.stderr
    assert not (out / ".boot").exists()
    assert "sitecustomize" not in r.stderr


def test_the_environment_s_own_sitecustomize_still_runs(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "lib" / "sitecustomize.py").write_text("import os\nos.environ['THEIRS'] = '1'\n")
    (tmp_path / "train.py").write_text(
        "import os, sys\nimport torch\nsys.exit(int(os.environ['THEIRS']) + 4)\n"
    )
    r = _record(env, tmp_path, "-o", "out")
    assert r.returncode == 5, r.stderr


def test_the_program_s_exit_code_is_traceview_s(env: dict[str, str], tmp_path: Path) -> None:
    r = _record(env, tmp_path, "-o", "out", program=("12", "3"))
    assert r.returncode == 3
    assert "exited with code 3" in r.stderr


def test_a_program_that_never_steps_is_recorded_whole(env: dict[str, str], tmp_path: Path) -> None:
    """torch's schedule records nothing in its wait steps: the part before the first step is
    recorded too, and written when no step comes; one warning, a true one."""
    r = _record(env, tmp_path, "-o", "out", program=("0", "0"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "trace.json.gz").exists()
    assert "never stepped" in r.stderr and "the trace holds the whole run" in r.stderr
    assert "wrote no trace" not in r.stderr, r.stderr


def test_the_part_before_the_first_step_is_dropped(env: dict[str, str], tmp_path: Path) -> None:
    """A program that steps: only the schedule's cycle is written (at its 12th step)."""
    r = _record(env, tmp_path, "-o", "out", program=("13", "0"))
    assert r.returncode == 0, r.stderr
    kwargs = json.loads((tmp_path / "out" / "trace.json.gz.kwargs").read_text())
    assert kwargs["steps"] == 12


def test_too_few_steps_for_the_schedule_say_so(env: dict[str, str], tmp_path: Path) -> None:
    r = _record(env, tmp_path, "-o", "out", program=("3", "0"))
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "out" / "trace.json.gz").exists()
    assert "stepped 3 times, within --wait 5 + --warmup 2: nothing recorded" in r.stderr


def test_a_recorded_directory_reads_back_as_a_run(env: dict[str, str], tmp_path: Path) -> None:
    """What record leaves beside the traces (its bookkeeping) is hidden: every command that
    reads the directory takes only the traces, one rank or several."""
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    r = _record(env, tmp_path, "-o", "one", "--power", program=("12", "0", "0.2"))
    assert r.returncode == 0, r.stderr
    steps = subprocess.run([sys.executable, "-m", "traceview", "steps", "one", "--no-cache"],
                           env=env, cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert steps.returncode == 0, steps.stderr
    for rank in ("0", "1"):
        r = _record({**env, "RANK": rank}, tmp_path, "-o", "run", "--force")
        assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in (tmp_path / "run").iterdir()
                   if not p.name.startswith(".") and not p.name.endswith(".kwargs"))  # fmt: skip
    assert names == ["command.txt", "trace-rank0.json.gz", "trace-rank1.json.gz"], names
    from traceview.read.discover import run_files  # the stand-in's traces are all rank 0

    assert [p.name for p in run_files([tmp_path / "run"])] == names[1:]


def test_an_output_directory_that_exists_needs_force(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old.txt").write_text("kept")
    r = _record(env, tmp_path, "-o", "out")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--force" in r.stderr
    r = _record(env, tmp_path, "-o", "out", "--force")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "old.txt").read_text() == "kept"


def test_power_is_logged_in_utc_beside_the_run(env: dict[str, str], tmp_path: Path) -> None:
    r = _record(env, tmp_path, "-o", "out", "--power")
    assert r.returncode == 2 and "nvidia-smi is not on PATH" in r.stderr
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    r = _record(env, tmp_path, "-o", "out", "--power", program=("12", "0", "0.5"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "power.csv").read_text().startswith("timestamp, index")
    assert (tmp_path / "out" / "power.csv.tz").read_text().strip() == "UTC"
    recorded = json.loads((tmp_path / "out" / ".record.json").read_text())
    assert recorded == {"power_log": "power.csv", "power_tz": "UTC"}  # the logger's TZ
    assert "--power out/power.csv\n" in r.stderr and "--power-tz" not in r.stderr


def test_quiet_keeps_the_warnings_and_drops_the_rest(env: dict[str, str], tmp_path: Path) -> None:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    loud = _record(env, tmp_path, "-o", "loud", "--power", program=("12", "0", "0.2"))
    quiet = _record(env, tmp_path, "-o", "quiet", "-q", "--power", program=("12", "0", "0.2"))
    assert loud.returncode == quiet.returncode == 0, quiet.stderr
    assert "recording" in loud.stderr and "energy per kernel" in loud.stderr
    assert quiet.stderr.splitlines() == [
        "traceview: warning: no CUDA device in the program: a CPU-only profile"
    ]
    assert quiet.stdout == loud.stdout.replace("loud/", "quiet/")
    assert (tmp_path / "quiet" / "power.csv").exists()


def test_no_torch_is_one_line(env: dict[str, str], tmp_path: Path) -> None:
    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here")
    env = {**env, "PYTHONPATH": ""}
    r = _record(env, tmp_path, "-o", "out")
    assert r.returncode == 1 and "no torch" in r.stderr and r.stderr.count("\n") == 1


def test_no_program_is_a_usage_error(env: dict[str, str], tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "traceview", "record"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 2


def _ctrl_c_default() -> None:
    """SIGINT as in a terminal: a background job (nohup, ``cmd &``) inherits it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_still_writes_the_trace(env: dict[str, str], tmp_path: Path) -> None:
    command = [sys.executable, "-m", "traceview", "record", "--no-report", "-o", "out", "--"]
    command += [sys.executable, "train.py", "8", "0", "60"]  # recording (steps 7-11)
    p = subprocess.Popen(
        command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, text=True, preexec_fn=_ctrl_c_default,
    )  # fmt: skip
    deadline = time.monotonic() + 120  # the program has imported torch and stepped
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert (tmp_path / "out" / "trace.json.gz").exists()
    # the program's own KeyboardInterrupt traceback is its to print; none comes from traceview
    assert "sitecustomize" not in err and f"{os.sep}traceview{os.sep}" not in err, err


@pytest.mark.parametrize(("number", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_traceview_alone_reaches_the_program(
    env: dict[str, str], tmp_path: Path, number: int, code: int
) -> None:
    """``kill -INT`` / ``kill -TERM`` of traceview's pid, not its group: passed on to the
    program, which writes its trace and ends (long before its 60 s sleep)."""
    command = [sys.executable, "-m", "traceview", "record", "--no-report", "-o", "out", "--"]
    command += [sys.executable, "train.py", "8", "0", "60"]
    p = subprocess.Popen(
        command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, text=True, preexec_fn=_ctrl_c_default,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(p.pid, number)
    try:
        _, err = p.communicate(timeout=50)
    finally:
        if p.poll() is None:  # never passed on: the program sleeps on
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    assert p.returncode == code, err
    assert (tmp_path / "out" / "trace.json.gz").exists(), err
    assert "killed" not in err and "exited with code" not in err, err


KILLED = """
import os, signal, sys
if sys.argv[1] == "torch":
    import torch
    torch.optim.Optimizer().step()
os.kill(os.getpid(), getattr(signal, sys.argv[2]))
"""


@pytest.mark.parametrize("name", ["SIGKILL", "SIGSEGV"])
@pytest.mark.parametrize("imports", ["torch", "nothing"])
def test_a_program_killed_by_a_signal_is_said_so(
    env: dict[str, str], tmp_path: Path, name: str, imports: str
) -> None:
    """128+N as a shell says, and a sentence that is true: killed, not "never imported"."""
    (tmp_path / "train.py").write_text(KILLED)
    r = _record(env, tmp_path, "-o", "out", program=(imports, name))
    assert r.returncode == 128 + getattr(signal, name), r.stderr
    when = "while torch.profiler recorded" if imports == "torch" else "before it imported torch"
    assert f"the program was killed by {name} {when}" in r.stderr, r.stderr
    assert "never imported" not in r.stderr and "never stepped" not in r.stderr, r.stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_a_real_cpu_training_run(tmp_path: Path) -> None:  # pragma: no cover - needs torch
    (tmp_path / "real.py").write_text(
        "import torch\nm = torch.nn.Linear(8, 8)\no = torch.optim.SGD(m.parameters(), 0.1)\n"
        "for _ in range(10):\n    o.zero_grad(); m(torch.randn(4, 8)).sum().backward(); o.step()\n"
    )
    command = [sys.executable, "-m", "traceview", "record", "--no-report", "-o", "out", "--"]
    r = subprocess.run([*command, sys.executable, "real.py"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "trace.json.gz").stat().st_size > 0


def test_each_rank_writes_its_own_trace(env: dict[str, str], tmp_path: Path) -> None:
    r = _record({**env, "RANK": "3"}, tmp_path, "-o", "out")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "trace-rank3.json.gz").exists()
    assert not (tmp_path / "out" / "trace.json.gz").exists()


@pytest.mark.parametrize(
    ("argv0", "launcher"),
    [("/usr/bin/torchrun", True), ("/x/torch/distributed/run.py", True), ("train.py", False)],
)
def test_torchrun_itself_is_not_profiled(
    argv0: str, launcher: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traceview.app import record_boot

    monkeypatch.setattr(sys, "argv", [argv0])
    assert record_boot._is_launcher() is launcher


def _boot(out: Path) -> dict[str, object]:
    report: dict[str, object] = json.loads((out / ".boot.json").read_text())
    return report


def _program(tmp_path: Path, body: str) -> None:
    (tmp_path / "train.py").write_text("import sys, time\nimport torch\n" + body)


RANGES = """
rf = torch.autograd.profiler.record_function
for _ in range(12):
    with rf(sys.argv[1]):
        with rf("inner_step"):  # not outermost: no second step
            pass
        if len(sys.argv) > 2:
            torch.optim.Optimizer().step()
"""


def test_the_program_s_own_step_ranges_are_its_steps(env: dict[str, str], tmp_path: Path) -> None:
    _program(tmp_path, RANGES)
    r = _record(env, tmp_path, "-o", "out", program=("decode_step",))
    assert r.returncode == 0, r.stderr
    assert (_boot(tmp_path / "out")["steps"], _boot(tmp_path / "out")["marker"]) == (12, "ranges")
    assert "never stepped" not in r.stderr


def test_step_ranges_and_optimizer_steps_never_double_step(
    env: dict[str, str], tmp_path: Path
) -> None:
    _program(tmp_path, RANGES)
    r = _record(env, tmp_path, "-o", "out", program=("train_step", "optimizer"))
    assert r.returncode == 0, r.stderr
    assert _boot(tmp_path / "out")["steps"] == 12  # one a loop, not 24


@pytest.mark.parametrize("name", ["data_loading", "stepper", "Optimizer.step#SGD.step"])
def test_ranges_not_named_step_are_no_steps(env: dict[str, str], tmp_path: Path, name: str) -> None:
    _program(tmp_path, RANGES)
    r = _record(env, tmp_path, "-o", "out", program=(name,))
    assert r.returncode == 0, r.stderr
    assert _boot(tmp_path / "out")["steps"] == 0
    assert "never stepped" in r.stderr


@pytest.mark.parametrize(
    ("name", "step"),
    [("train_step", True), ("step[DECODE bs=32]", True), ("TrainStep", True), ("step", True),
     ("ProfilerStep#3", True), ("steps", False), ("misstep", False), ("forward", False),
     ("Optimizer.step#AdamW.step", False)],
)  # fmt: skip
def test_step_range_names_match_the_word(name: str, step: bool) -> None:
    from traceview.app.record_boot import is_step_name

    assert is_step_name(name) is step


OWN_PROFILER = """
for _ in range(3):
    torch.optim.Optimizer().step()
prof = torch.profiler.profile([], torch.profiler.schedule(0, 0, 1, 1), None, False, False, False)
prof.start()
for _ in range(12):
    torch.optim.Optimizer().step()
prof.stop()
"""


def test_a_program_with_its_own_profiler_is_left_alone(env: dict[str, str], tmp_path: Path) -> None:
    _program(tmp_path, OWN_PROFILER)
    r = _record(env, tmp_path, "-o", "out")
    assert r.returncode == 0, r.stderr
    boot = _boot(tmp_path / "out")
    assert boot["own_profiler"] is True and boot["steps"] == 3  # none after theirs started
    assert not (tmp_path / "out" / "trace.json.gz").exists()
    assert "runs its own torch.profiler: traceview stayed out" in r.stderr
    assert "never stepped" not in r.stderr


FORWARDS = """
class Inner(torch.nn.Module):
    def forward(self, x):
        return x

class Outer(torch.nn.Module):
    def __init__(self):
        self.inner = Inner()
    def forward(self, x):
        time.sleep(0.05)
        return self.inner(x) + self.inner(x)

model = Outer()
start = time.monotonic()
for _ in range(int(sys.argv[1])):
    model(1)
open("elapsed", "w").write(str(time.monotonic() - start))
"""


def test_step_seconds_steps_between_forward_calls(env: dict[str, str], tmp_path: Path) -> None:
    _program(tmp_path, FORWARDS)
    r = _record(env, tmp_path, "-o", "out", "--step-seconds", "0.3", program=("40",))
    assert r.returncode == 0, r.stderr
    boot = _boot(tmp_path / "out")
    elapsed = float((tmp_path / "elapsed").read_text())  # ≥ 2 s: 40 calls of ≥ 50 ms
    steps = boot["steps"]
    assert isinstance(steps, int) and boot["marker"] == "forwards"
    # a step at the first forward end ≥ 0.3 s after the last: at most elapsed / 0.3 steps;
    # at least half that many (a call is ~50 ms, however loaded the machine)
    assert elapsed / 0.3 / 2 - 1 <= steps <= elapsed / 0.3, (steps, elapsed)
    assert steps >= 2


def test_step_seconds_is_checked(env: dict[str, str], tmp_path: Path) -> None:
    for bad in ("-1", "nan", "inf"):
        r = _record(env, tmp_path, "-o", "out", "--step-seconds", bad)
        assert r.returncode == 2, (bad, r.stderr)
        assert r.stderr.count("\n") == 1 and "--step-seconds" in r.stderr, r.stderr
