"""Runs inside the program ``traceview record`` starts (imported by the sitecustomize it puts on
PYTHONPATH): when the program first imports torch, wrap it in torch.profiler and mark its steps.

It changes nothing else in the program: no import of its own but the standard library until
torch is imported, no output on stdout. Its settings come as JSON in $TRACEVIEW_RECORD; what it
did is written to ``.boot.json`` (``.boot-rank<N>.json`` per rank) in the output directory
(steps seen, the trace written, CUDA or not) for ``traceview record`` to report: hidden, so
that a reader of the directory takes only its traces.

The profile starts at once: the part before the first step is a cycle of its own, kept only
when the program never steps (the whole run) and dropped at the first step, when the
schedule's own cycle begins. SIGTERM, which would end the program without its exit handlers,
stops the profiler and writes the trace first.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.machinery
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

ENV = "TRACEVIEW_RECORD"


class _Recording:
    """The profiler around the program and what it has seen."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.out = Path(settings["out"])
        self.profiler: Any = None
        self.steps = 0
        self.written: str | None = None
        self.cuda = False
        self.lock = threading.RLock()
        self.marker: str | None = None  # what steps: the first of the markers to fire
        self.own_profiler = False  # the program started its own: ours stopped, kept out
        self.error: str | None = None  # why the profiler could not be started
        self.ours = False  # inside a call of our profiler (its ProfilerStep ranges)
        self.before_first_step = False  # recording the part before the first step, to drop

    def trace_path(self) -> Path:
        rank = os.environ.get("RANK")
        name = f"trace-rank{int(rank)}.json.gz" if rank and rank.isdigit() else "trace.json.gz"
        return self.out / name

    def start(self, torch: Any) -> None:
        """Start the profiler and hook the step markers (torch is imported); not in a worker
        that multiprocessing started (a DataLoader's): only the program, or each torchrun rank."""
        import multiprocessing

        if multiprocessing.parent_process() is not None or _is_launcher():
            return
        s = self.settings
        activities = [torch.profiler.ProfilerActivity.CPU]
        self.cuda = bool(torch.cuda.is_available())
        if self.cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        schedule = self.whole_until_stepped(torch, s)
        self.profiler = torch.profiler.profile(
            activities=activities,
            schedule=schedule,
            on_trace_ready=self.export,
            record_shapes=s["shapes"],
            profile_memory=s["memory"],
            with_stack=s["stack"],
        )
        _keep_out_of_their_profiler(torch, self)
        with self.calling_ours():
            self.profiler.start()
        every, seconds = s.get("step_forwards") or 0, s.get("step_seconds") or 0.0
        if every > 0 or seconds > 0:  # asked for: the only marker
            _count_forwards(torch, every, seconds, lambda: self.step("forwards"))
        else:
            optimizer = importlib.import_module("torch.optim.optimizer")
            optimizer.register_optimizer_step_post_hook(lambda *_: self.step("optimizer"))
            _watch_step_ranges(torch, self)
        atexit.register(self.finish)
        _finish_on_sigterm(self)
        self.write_report()  # started: a program killed from now on is said so

    def whole_until_stepped(self, torch: Any, s: dict[str, Any]) -> Any:
        """The schedule asked for, but recording from the start: until the first step, a
        cycle of its own (saved if the program never steps, dropped at its first step)."""
        schedule = torch.profiler.schedule(
            wait=s["wait"], warmup=s["warmup"], active=s["active"], repeat=1
        )
        action = torch.profiler.ProfilerAction
        if schedule(0) not in (action.NONE, action.WARMUP):
            return schedule  # recording from the start already
        self.before_first_step = True

        def whole_until_stepped(step: int) -> Any:
            return action.RECORD_AND_SAVE if step == 0 else schedule(step)

        return whole_until_stepped

    @contextlib.contextmanager
    def calling_ours(self) -> Any:
        """Our profiler's own calls: the ProfilerStep ranges they open are not the program's."""
        with self.lock:
            before, self.ours = self.ours, True
            try:
                yield
            finally:
                self.ours = before

    def step(self, marker: str) -> None:
        """A step, from the first marker that fired (the program's step ranges or its
        optimizer): one marker only, so an iteration is never stepped twice."""
        with self.lock:
            if self.profiler is None or self.written is not None:
                return
            if self.marker is None:
                self.marker = marker
            elif marker != self.marker:
                return
            self.steps += 1
            with self.calling_ours():
                self.profiler.step()

    def their_profiler(self) -> None:
        """The program starts its own torch.profiler: two cannot run at once, and theirs is
        what the program wants; ours stops without writing a trace and stays out."""
        with self.lock:
            profiler, self.profiler = self.profiler, None
            self.own_profiler = True
        if profiler is not None:
            with contextlib.suppress(Exception), self.calling_ours():
                profiler.stop()

    def export(self, profiler: Any) -> None:
        if self.error is not None:  # the recording could not start: nothing of it kept
            return
        if self.before_first_step and self.steps > 0:  # the program steps: its schedule rules
            self.before_first_step = False
            return
        path = self.trace_path()
        profiler.export_chrome_trace(str(path))
        self.written = str(path)

    def finish(self) -> None:
        """At exit (Ctrl-C too): stop the profiler; a run that never completed its schedule
        is written whole, with what it recorded. A second Ctrl-C or SIGTERM meanwhile (a
        terminal's and traceview's own) does not cut the trace short."""
        with contextlib.suppress(ValueError):  # not the main thread: nothing to hold back
            for number in (signal.SIGINT, signal.SIGTERM):
                signal.signal(number, signal.SIG_IGN)
        with self.lock:
            profiler, self.profiler = self.profiler, None
        if profiler is not None:
            with contextlib.suppress(Exception), self.calling_ours():
                profiler.stop()
            s = self.settings
            if self.written is None and self.steps > s["wait"] + s["warmup"]:
                with contextlib.suppress(Exception):  # stopped in its active steps
                    self.export(profiler)
        self.write_report(finished=True)

    def write_report(self, finished: bool = False) -> None:
        """What the recording did, for ``traceview record`` (hidden: not one of the traces)."""
        report = {
            "steps": self.steps,
            "trace": self.written,
            "cuda": self.cuda,
            "marker": self.marker,
            "own_profiler": self.own_profiler,
            "error": self.error,
            "finished": finished,
            "settings": {k: self.settings.get(k) for k in ("wait", "warmup", "active")},
        }
        rank = os.environ.get("RANK")
        name = f".boot-rank{rank}.json" if rank else ".boot.json"
        with contextlib.suppress(OSError):
            (self.out / name).write_text(json.dumps(report))


def _finish_on_sigterm(recording: _Recording) -> None:
    """SIGTERM ends a program at once, its exit handlers unrun: unless the program handles it
    itself, the trace is written first, then the program ends by SIGTERM as it would have."""
    with contextlib.suppress(ValueError):  # the main thread only
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def terminated(number: int, frame: Any) -> None:
            recording.finish()
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)

        signal.signal(signal.SIGTERM, terminated)


def _is_launcher() -> bool:
    """torchrun itself (its ranks, which it starts, record)."""
    main = sys.argv[0] if sys.argv else ""
    return Path(main).name == "torchrun" or main.endswith(os.path.join("distributed", "run.py"))


def _count_forwards(torch: Any, every: int, seconds: float, step: Any) -> None:
    """Inference: a step every ``every`` calls of an outermost module's forward, or at the
    end of the first outermost forward ``seconds`` or more after the last step (steps
    fall between forward calls, never inside one)."""
    import time

    depth = 0
    calls = 0
    last = time.monotonic()

    def before(*_: Any) -> None:
        nonlocal depth
        depth += 1

    def after(*_: Any) -> None:
        nonlocal depth, calls, last
        depth -= 1
        if depth != 0:
            return
        calls += 1
        now = time.monotonic()
        if (every and calls % every == 0) or (seconds and now - last >= seconds):
            last = now
            step()

    hooks = torch.nn.modules.module
    hooks.register_module_forward_pre_hook(before)
    hooks.register_module_forward_hook(after)


def _keep_out_of_their_profiler(torch: Any, recording: _Recording) -> None:
    """Learn when the program starts a torch.profiler of its own (not ours)."""
    cls = torch.profiler.profile
    start = cls.start

    def started(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not recording.ours:
            recording.their_profiler()
        return start(self, *args, **kwargs)

    cls.start = started


def is_step_name(name: str) -> bool:
    """A range name with the word "step" among its tokens (``train_step``, ``step[DECODE
    bs=32]``, ``TrainStep``), not torch's own ``Optimizer.step#SGD.step``."""
    if name.startswith("Optimizer."):
        return False
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return "step" in re.split(r"[^a-z0-9]+", words.lower())


def _watch_step_ranges(torch: Any, recording: _Recording) -> None:
    """The program's own step ranges (``record_function("train_step")``): the end of an
    outermost one is a step."""
    cls = getattr(getattr(torch, "autograd", None), "profiler", None)
    cls = getattr(cls, "record_function", None)
    if cls is None:
        return
    enter, leave = cls.__enter__, cls.__exit__
    depth = threading.local()

    def entered(self: Any) -> Any:
        if not recording.ours:
            depth.n = getattr(depth, "n", 0) + 1
        return enter(self)

    def left(self: Any, *args: Any) -> Any:
        result = leave(self, *args)
        if not recording.ours:
            depth.n = getattr(depth, "n", 1) - 1
            if depth.n == 0 and is_step_name(str(getattr(self, "name", ""))):
                recording.step("ranges")
        return result

    cls.__enter__, cls.__exit__ = entered, left


class _AfterTorch(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds nothing itself: once ``torch`` is imported by the program, starts the recording."""

    def __init__(self, recording: _Recording) -> None:
        self.recording = recording
        self.loader: Any = None

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        self.loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec: Any) -> ModuleType | None:
        return self.loader.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        start_or_warn(self.recording, module)


def start_or_warn(recording: _Recording, torch: Any) -> None:
    """Start the recording; a torch it cannot drive gets one line, never a failing program."""
    try:
        recording.start(torch)
    except Exception as e:  # an API this torch lacks: the program runs on, unprofiled
        recording.error = f"{type(e).__name__}: {e}"  # first: no trace from the stop below
        with contextlib.suppress(Exception):
            if recording.profiler is not None:
                recording.profiler.stop()
        recording.profiler = None
        atexit.register(recording.finish)  # says why, for traceview record


def install() -> None:
    """Called by the sitecustomize of ``traceview record``: nothing happens without its
    settings, or when torch is already imported (then the profile starts at once)."""
    text = os.environ.get(ENV)
    if not text:
        return
    recording = _Recording(json.loads(text))
    if "torch" in sys.modules:
        start_or_warn(recording, sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _AfterTorch(recording))
