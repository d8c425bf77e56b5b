"""Forked worker processes that leave Ctrl-C to their parent, the pipes they answer by, and
the command line's start-up frozen out of the collector (and so out of what a child copies).

A terminal sends Ctrl-C to every process of the command. The parent answers it with one
line (``traceview: interrupted``) and stops its children; a child that took it too would
print a traceback of its own. So the signal is held back while a child is forked, and the
child ignores it before letting it through.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import os
import pickle
import select
import signal
import struct
import sys
import time
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:  # multiprocessing is imported only where a pool of workers is used
    from multiprocessing.process import BaseProcess

T = TypeVar("T")
_LENGTH = struct.Struct("<Q")  # before each message: its length in bytes
# While the command line starts: a young collection once per this many new objects, not 700.
_START_UP_THRESHOLD = 100_000
_held: tuple[int, int, int] | None = None
# How long this process waits for a forked child's answer before taking it as stuck (e.g. a
# lock another thread held at the fork, which no thread of the child will release): at least
# PATIENCE_S, and PATIENCE_FACTOR times as long as this process went on since it asked. A
# stuck child is stopped and its work done here; nothing waits for ever on a child.
PATIENCE_S = 30.0
PATIENCE_FACTOR = 10.0
# Work a child must not inherit half done (a split read's worker still mapping its CPU rows):
# each finished before a fork (weak: an owner dropped unfinished needs no finishing).
_before_fork: list[weakref.WeakMethod[Callable[[], None]]] = []


def finish_before_fork(method: Callable[[], None]) -> None:
    """Call the bound ``method`` before the next fork, unless its object is gone by then."""
    _before_fork.append(weakref.WeakMethod(method))


def _finish_pending() -> None:
    while _before_fork:
        method = _before_fork.pop()()
        if method is not None:
            method()


if hasattr(os, "register_at_fork"):  # a fork by other means too (Child calls it first)
    os.register_at_fork(before=_finish_pending)


def patience(since: float) -> float:
    """Seconds to wait now for a child asked at ``since`` (time.monotonic())."""
    return max(PATIENCE_S, PATIENCE_FACTOR * (time.monotonic() - since))


def hold_collections() -> None:
    """The command line starts: its imports make ~10^5 objects that live to the end and next
    to no cyclic garbage, so the collector would scan them again and again for nothing
    (~8% of a short command's instructions). Collections wait until ``start_up_done``."""
    global _held
    if _held is None:
        _held = gc.get_threshold()
        gc.set_threshold(_START_UP_THRESHOLD, *_held[1:])


def start_up_done() -> None:
    """The work starts (a trace is read): what start-up made is frozen (no collection scans it
    again, and a forked reader never copies its pages by touching it) and collections run as
    usual. Nothing unless ``hold_collections`` held them."""
    global _held
    if _held is not None:
        gc.freeze()
        gc.set_threshold(*_held)
        _held = None


_fork_cache_writes = False


def fork_cache_writes() -> None:
    """This process is the command line: it writes cache entries in forked processes
    (traceview.cache.publish_in_background), which print on its stderr."""
    global _fork_cache_writes
    _fork_cache_writes = True


def cache_writes_forked() -> bool:
    """Whether ``fork_cache_writes`` was called."""
    return _fork_cache_writes


def start_child(process: BaseProcess) -> None:
    """``process.start()`` (a fork) with Ctrl-C held back until it is done."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def in_child() -> None:
    """First thing in a child started by ``start_child``: ignore Ctrl-C from now on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


_unreaped: list[int] = []  # children that said they were done, not waited for yet


def _reap(block: bool = False) -> None:
    """Wait for the children of ``_unreaped`` that have exited (none is waited on), or with
    ``block`` for each of them."""
    for pid in list(_unreaped):
        try:
            ended = os.waitpid(pid, 0 if block else os.WNOHANG)[0] != 0
        except ChildProcessError:  # waited for elsewhere
            ended = True
        if ended:
            _unreaped.remove(pid)


# At exit, each child that said it was done is waited for: it is ending (an exit of a few
# ms, now that this process ends too). One left unwaited would be reaped by init, and the
# peak memory of the children a command waited for (/usr/bin/time's) would miss it (an
# entry child: benchmarks/RESULTS-rust-43c.md). A forked process inherits the list but
# exits by ``os._exit``, past this.
atexit.register(_reap, block=True)


class Child:
    """A forked process that runs ``target(*args)`` and ends there (``os._exit``: the
    interpreter's exit, with its collections and this process's atexit handlers, is this
    process's; the child writes nothing but through its pipes). Without multiprocessing,
    whose import and start a split read would otherwise wait for."""

    def __init__(
        self,
        target: Callable[..., object],
        args: tuple[Any, ...],
        close: Iterable[Channel] = (),
        says_done: bool = False,
    ) -> None:
        _reap()
        _finish_pending()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered is written twice
            if stream is not None:
                stream.flush()
        # ``says_done``: the child closes this pipe once target returns, and join waits for
        # that, not for its exit: the end of a process forked from a large one (its copied
        # page tables freed) took 5-8 ms of a cache fill's wait.
        done, says = os.pipe() if says_done else (-1, -1)
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            pid = os.fork()
        except BaseException:  # e.g. no process left: Ctrl-C is let through again
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            if says_done:
                os.close(done)
                os.close(says)
            raise
        if pid == 0:  # the child
            code = 1
            try:
                in_child()
                for channel in close:  # the parent's ends: EOF reaches each side
                    channel.close()
                if says_done:
                    os.close(done)
                target(*args)
                code = 0
            finally:
                if says_done:
                    os.close(says)
                os._exit(code)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        if says_done:
            os.close(says)
        self.pid = pid
        self._done = done
        self._ended = False

    def join(self) -> None:
        """Wait for it to end (``says_done``: for its target to return; it is reaped once
        it has exited, here or when another Child starts or is joined)."""
        if self._ended:
            return
        if self._done < 0:
            os.waitpid(self.pid, 0)
        else:
            while os.read(self._done, 1):  # EOF: closed by the child, or by its end
                pass
            os.close(self._done)
            self._done = -1
            _unreaped.append(self.pid)
            _reap()
        self._ended = True

    def done(self) -> bool:
        """Whether it has ended (``says_done``: its target has returned), without waiting."""
        if self._ended:
            return True
        if self._done < 0:
            return False
        return bool(select.select([self._done], [], [], 0)[0])

    def stop(self) -> None:
        """Wait for it once it has ended; kill it first if it has not (not wanted any more)."""
        if self._ended:
            return
        if self._done >= 0:
            os.close(self._done)
            self._done = -1
        if os.waitpid(self.pid, os.WNOHANG)[0] == 0:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        self._ended = True


class Channel:
    """One end of a pipe carrying messages: pickled objects or raw bytes, each after its
    length (what multiprocessing's Connection does, for what a split read sends)."""

    def __init__(self, fd: int, mode: str) -> None:
        self._file = io.FileIO(fd, mode)

    @classmethod
    def pipe(cls) -> tuple[Channel, Channel]:
        """(the end read from, the end written to)."""
        read, write = os.pipe()
        return cls(read, "r"), cls(write, "w")

    def close(self) -> None:
        self._file.close()

    def poll(self, seconds: float) -> bool:
        """Whether a message, or the end of the pipe, is there to read within ``seconds``
        (as multiprocessing's Connection.poll)."""
        poller = select.poll()
        poller.register(self._file.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        deadline = time.monotonic() + seconds
        while True:
            if poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                return True
            if time.monotonic() >= deadline:
                return False

    def send(self, obj: Any) -> None:
        self.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def recv(self) -> Any:
        """The next object; EOFError if the other end closed before sending it whole."""
        return pickle.loads(self.recv_bytes())

    def send_bytes(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        self._write(memoryview(_LENGTH.pack(len(view))))
        self._write(view)

    def recv_bytes(self) -> bytes:
        data = bytearray(self._length())
        self._read_into(memoryview(data))
        return bytes(data)

    def recv_bytes_into(self, buffer: Any) -> int:
        """Read the next message into ``buffer`` (it must hold it); its length."""
        length = self._length()
        view = memoryview(buffer).cast("B")
        if length > len(view):
            raise ValueError(f"a message of {length} bytes for a buffer of {len(view)}")
        self._read_into(view[:length])
        return length

    def _length(self) -> int:
        head = bytearray(_LENGTH.size)
        self._read_into(memoryview(head))
        length: int = _LENGTH.unpack(head)[0]
        return length

    def _write(self, view: memoryview) -> None:
        while view:
            view = view[self._file.write(view) :]

    def _read_into(self, view: memoryview) -> None:
        while view:
            got = self._file.readinto(view)
            if not got:
                raise EOFError
            view = view[got:]


_ANSWER = b"traceview.forked.Aside"  # the first item of a child's answer


class Aside(Generic[T]):
    """``work()`` computed in a forked child while this process goes on; ``result()`` is its
    value, received through a pipe (pickled). Any failure of the child (an exception, a
    crash, a kill, an answer cut short, garbled or not a ``kind``) or of the fork makes
    ``result()`` compute ``work()`` here instead: it is only a way to use a second core. So
    does a child that does not answer in time (``patience``): it is stopped.
    The child writes nothing on this process's standard output or error (both go to
    /dev/null; it exits by ``os._exit``) and sends no more than its answer."""

    def __init__(self, work: Callable[[], T], kind: type[T]) -> None:
        self.work, self.kind = work, kind
        self._child: Child | None = None
        self._receiver: Channel | None = None
        self._asked = time.monotonic()
        try:
            receiver, sender = Channel.pipe()
        except OSError:  # no file descriptor left: worked out in result()
            return
        try:
            self._child = Child(_answer, (work, sender), (receiver,))
            self._receiver = receiver
        except Exception:  # no fork here (e.g. no process left): worked out in result()
            receiver.close()
        finally:
            sender.close()

    def result(self) -> T:
        """The child's answer, else ``work()`` worked out here."""
        if self._receiver is not None:
            try:
                if self._receiver.poll(patience(self._asked)):  # else stuck: worked out here
                    tag, value = self._receiver.recv()
                    if tag == _ANSWER and isinstance(value, self.kind):
                        return value
            except Exception:  # cut short (EOFError) or garbled: worked out here
                pass
            finally:
                self.cancel()
        return self.work()

    def cancel(self) -> None:
        """The answer is not wanted (any more): the child is stopped, the pipe closed."""
        if self._child is not None:
            child, self._child = self._child, None
            with contextlib.suppress(OSError):  # e.g. already waited for
                child.stop()
        if self._receiver is not None:
            self._receiver.close()
            self._receiver = None


def _answer(work: Callable[[], object], sender: Channel) -> None:
    """In an Aside's child: work it out, send it, write nowhere else."""
    gc.disable()  # a short life: no collection copies the pages of objects shared with the parent
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    sys.stdout = sys.stderr = open(quiet, "w")  # noqa: SIM115 (ends with the child)
    sender.send((_ANSWER, work()))
