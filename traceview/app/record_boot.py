"""Runs inside the program ``traceview record`` starts (imported by the sitecustomize it puts on
PYTHONPATH): when the program first imports torch, wrap it in torch.profiler and mark its steps.

It changes nothing else in the program: no import of its own but the standard library until
torch is imported, no output on stdout. Its settings come as JSON in $TRACEVIEW_RECORD; what it
did is written to ``boot.json`` in the output directory (steps seen, the trace written, CUDA or
not) for ``traceview record`` to report.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.abc
import importlib.machinery
import json
import os
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
        self.lock = threading.Lock()

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
        schedule = torch.profiler.schedule(
            wait=s["wait"], warmup=s["warmup"], active=s["active"], repeat=1
        )
        self.profiler = torch.profiler.profile(
            activities=activities,
            schedule=schedule,
            on_trace_ready=self.export,
            record_shapes=s["shapes"],
            profile_memory=s["memory"],
            with_stack=s["stack"],
        )
        self.profiler.start()
        torch.optim.Optimizer.register_global_step_post_hook(lambda *_: self.step())
        every = s.get("step_forwards") or 0
        if every > 0:
            _count_forwards(torch, every, self.step)
        atexit.register(self.finish)

    def step(self) -> None:
        with self.lock:
            if self.profiler is not None and self.written is None:
                self.steps += 1
                self.profiler.step()

    def export(self, profiler: Any) -> None:
        path = self.trace_path()
        profiler.export_chrome_trace(str(path))
        self.written = str(path)

    def finish(self) -> None:
        """At exit (Ctrl-C too): stop the profiler; a run that never completed its schedule
        is written whole, with what it recorded."""
        with self.lock:
            profiler, self.profiler = self.profiler, None
        if profiler is not None:
            with contextlib.suppress(Exception):
                profiler.stop()
            if self.written is None:
                with contextlib.suppress(Exception):
                    self.export(profiler)
        report = {"steps": self.steps, "trace": self.written, "cuda": self.cuda}
        name = "boot.json" if not os.environ.get("RANK") else f"boot-rank{os.environ['RANK']}.json"
        (self.out / name).write_text(json.dumps(report))


def _is_launcher() -> bool:
    """torchrun itself (its ranks, which it starts, record)."""
    main = sys.argv[0] if sys.argv else ""
    return Path(main).name == "torchrun" or main.endswith(os.path.join("distributed", "run.py"))


def _count_forwards(torch: Any, every: int, step: Any) -> None:
    """A step every ``every`` calls of an outermost module's forward (inference)."""
    depth = 0
    calls = 0

    def before(*_: Any) -> None:
        nonlocal depth
        depth += 1

    def after(*_: Any) -> None:
        nonlocal depth, calls
        depth -= 1
        if depth == 0:
            calls += 1
            if calls % every == 0:
                step()

    hooks = torch.nn.modules.module
    hooks.register_module_forward_pre_hook(before)
    hooks.register_module_forward_hook(after)


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
        self.recording.start(module)


def install() -> None:
    """Called by the sitecustomize of ``traceview record``: nothing happens without its
    settings, or when torch is already imported (then the profile starts at once)."""
    text = os.environ.get(ENV)
    if not text:
        return
    recording = _Recording(json.loads(text))
    if "torch" in sys.modules:
        recording.start(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _AfterTorch(recording))
