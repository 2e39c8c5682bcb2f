"""Calling a reader's function in the notebook's own process so that whatever it does comes back as an outcome.

    guard = Guard()                      # one per check: the calls share its time and print budgets
    outcome = guard.call(fn, theta, grad, eta)
    outcome.value, outcome.error, outcome.timed_out, outcome.exit_code, outcome.children

A checker must answer in a bounded time with one sentence, whatever the function does: loop forever,
raise any ``BaseException`` (``SystemExit``, ``KeyboardInterrupt``), call ``os._exit``, fork, print
megabytes. Here is how each comes back instead of hanging or ending the kernel:

* **time**: all of one check's calls together get :data:`TIME_LIMIT` seconds. In the main thread
  (where Jupyter, nbgrader and pytest run a cell) a ``SIGALRM`` timer raises :class:`TimeUp` inside
  the function, and again every :data:`REPEAT` seconds until it leaves, in case it catches the
  first; elsewhere a watcher thread raises it there with CPython's ``PyThreadState_SetAsyncExc`` (Python has no
  public way to raise in another thread: :func:`dpviz.engine.private.raise_in_thread` says why). Why not a
  child process: the function stays where the reader defined it (its prints appear in the cell, a
  lambda or a closure over notebook variables works, nothing to pickle), and a call costs
  microseconds, not a fork of a kernel that runs zmq threads. What this cannot stop: a loop that
  catches every ``BaseException`` and goes on, or one long call into C (a huge numpy operation)
  that checks no signal; the kernel's own interrupt button is the way out of those. A SIGALRM timer
  that was already armed (pytest-timeout's) gets its handler and its remaining time back.
* **exits**: ``os._exit`` is replaced while the function runs (in this thread of this process only)
  by one that raises :class:`Exited`; ``SystemExit`` and the rest are caught as any exception is.
* **children**: a process forked while the function runs ends at once, in the child (an at-fork
  hook), and any other child process it started (``subprocess``) is killed and reaped when it
  returns, so nothing it started is left running (Linux; elsewhere forks are only counted).
* **prints**: the first :data:`PRINT_LIMIT` characters it writes to ``sys.stdout`` and
  ``sys.stderr`` pass through; the rest are counted, not shown, so a cell cannot fill with megabytes.

:func:`short_repr` and :func:`error_words` word a returned value or an exception in a few dozen
characters, even when its ``__repr__`` or ``__str__`` raises. Plain Python: no numpy, no torch.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass

from dpviz.engine import private

TIME_LIMIT = 5.0  # seconds, for all of one check's calls of the reader's function together
REPEAT = 0.05  # seconds between further TimeUp raises once the limit has passed
PRINT_LIMIT = 10_000  # characters of the reader's prints shown per check; the rest are counted
REPR_LIMIT = 60  # characters of a returned value's repr quoted in a verdict
ERROR_LIMIT = 160  # characters of an exception's message quoted in a verdict


class TimeUp(BaseException):
    """Raised inside the reader's function when its time is up (a BaseException, so ``except Exception`` lets it by)."""


class Exited(BaseException):
    """Raised in place of ``os._exit(code)`` while the reader's function runs."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


@dataclass
class Outcome:
    """What one call did: returned ``value``, or raised ``error``, or ran out of time, or called ``os._exit``."""

    value: object = None
    error: BaseException | None = None  # what it raised (NotImplementedError and SystemExit included)
    timed_out: bool = False
    exit_code: object = None  # the argument of os._exit, when it called it
    forks: int = 0  # processes it forked (each ended at once)
    children: int = 0  # child processes still there when it returned (forked ones included), killed then


class Guard:
    """The budgets of one check: :data:`TIME_LIMIT` seconds and :data:`PRINT_LIMIT` printed characters in all."""

    def __init__(self, seconds: float = None, print_limit: int = None):
        self.seconds = TIME_LIMIT if seconds is None else float(seconds)
        self.left = self.seconds
        self.print_limit = PRINT_LIMIT if print_limit is None else int(print_limit)
        self.printed = 0  # characters written in all, shown or not

    @property
    def prints_cut(self) -> bool:
        return self.printed > self.print_limit

    def call(self, fn, *args) -> Outcome:
        """``fn(*args)`` under the guard; the time it takes comes off the budget."""
        outcome = Outcome()
        if self.left <= 0:
            outcome.timed_out = True
            return outcome
        begin = time.monotonic()
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Bounded(streams[0], self), _Bounded(streams[1], self)
        before = _child_pids()
        watch = _Watch(self.left)
        _Forks.arm()
        real_exit = os._exit
        os._exit = _exit_raiser(real_exit)
        try:
            try:
                watch.start()
                outcome.value = fn(*args)
            finally:
                watch.stop()
        except TimeUp:
            outcome.timed_out = True
        except Exited as e:
            outcome.exit_code = e.code
        except BaseException as e:  # noqa: BLE001 - whatever the reader's function raised is the answer
            outcome.error = e
        finally:
            watch.stop()  # (again, if a late TimeUp cut the first stop short)
            os._exit = real_exit
            outcome.forks = _Forks.disarm()
            sys.stdout, sys.stderr = streams
            outcome.children = _end_children(before)
            self.left -= time.monotonic() - begin
        if watch.fired:
            outcome.timed_out, outcome.error, outcome.value = True, None, None
        return outcome


# --- the time limit ---------------------------------------------------------------------------------


class _Watch:
    """Raise TimeUp in the calling thread after ``seconds``, then every REPEAT seconds, until stopped."""

    def __init__(self, seconds: float):
        self.seconds = max(seconds, 1e-3)
        self.fired = False
        self.thread = threading.get_ident()
        self.main = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        self.active = False

    def start(self) -> None:
        self.active = True
        if self.main:
            self.old_handler = signal.signal(signal.SIGALRM, self._on_alarm)
            self.armed_at = time.monotonic()
            self.old_timer = signal.setitimer(signal.ITIMER_REAL, self.seconds, REPEAT)
        else:
            self.stopped = threading.Event()
            threading.Thread(target=self._watch_thread, name="dpviz-exercise-watch", daemon=True).start()

    def stop(self) -> None:
        """End the watch and give back any timer it displaced; a second call does nothing."""
        if not self.active:
            return
        self.active = False
        if self.main:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old_handler)
            delay, interval = self.old_timer
            if delay > 0:  # someone else's timer (pytest-timeout's): give it back what is left of it
                left = delay - (time.monotonic() - self.armed_at)
                signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), interval)
        else:
            self.stopped.set()

    def _on_alarm(self, signum, frame):
        if self.active and not _is_ours(frame):  # never interrupt the guard's own bookkeeping
            self.fired = True
            raise TimeUp()

    def _watch_thread(self) -> None:
        wait = self.seconds
        while not self.stopped.wait(wait) and self.active:
            frame = private.thread_frame(self.thread)
            if frame is not None and not _is_ours(frame):
                self.fired = True
                private.raise_in_thread(self.thread, TimeUp)
            wait = REPEAT


def _is_ours(frame) -> bool:
    return frame is not None and frame.f_code.co_filename == __file__


# --- exits, forks and children ------------------------------------------------------------------------


def _exit_raiser(real_exit):
    pid, thread = os.getpid(), threading.get_ident()

    def _exit(code):
        if os.getpid() == pid and threading.get_ident() == thread:
            raise Exited(code)
        real_exit(code)  # another thread, or a forked child: the real thing

    return _exit


class _Forks:
    """An at-fork hook, registered once per process: while armed, a forked child ends at once and is counted."""

    armed_in = None  # the pid of the process whose reader's function is running
    count = 0
    registered = False
    real_exit = os._exit

    @classmethod
    def arm(cls) -> None:
        if not cls.registered and hasattr(os, "register_at_fork"):
            os.register_at_fork(before=cls._before, after_in_child=cls._in_child)
            cls.registered = True
        cls.armed_in, cls.count = os.getpid(), 0

    @classmethod
    def disarm(cls) -> int:
        cls.armed_in = None
        return cls.count

    @classmethod
    def _before(cls) -> None:
        if cls.armed_in == os.getpid():
            cls.count += 1

    @classmethod
    def _in_child(cls) -> None:
        if cls.armed_in is not None and cls.armed_in == os.getppid():
            cls.real_exit(0)


def _child_pids() -> set[int]:
    """This process's children (Linux's /proc), or an empty set where they cannot be listed."""
    pids = set()
    try:
        for tid in os.listdir(f"/proc/{os.getpid()}/task"):
            with open(f"/proc/{os.getpid()}/task/{tid}/children") as f:
                pids.update(int(p) for p in f.read().split())
    except OSError:
        pass
    return pids


def _end_children(before: set[int]) -> int:
    """Kill and reap the children that appeared since ``before``; return how many there were."""
    new = _child_pids() - before
    for pid in new:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for pid in new:
        try:
            os.waitpid(pid, 0)
        except OSError:  # someone else reaped it
            pass
    return len(new)


# --- prints -------------------------------------------------------------------------------------------


class _Bounded:
    """A stream that passes on the first characters of the guard's print budget and counts the rest."""

    def __init__(self, stream, guard: Guard):
        self.stream, self.guard = stream, guard

    def write(self, text) -> int:
        text = str(text)
        room = self.guard.print_limit - self.guard.printed
        if room > 0 and self.stream is not None:
            self.stream.write(text[:room])
        self.guard.printed += len(text)
        return len(text)

    def flush(self) -> None:
        if self.stream is not None:
            self.stream.flush()

    def __getattr__(self, name):  # encoding, isatty, ... as the real stream has them
        return getattr(self.stream, name)


# --- words for what came back -------------------------------------------------------------------------


def short_repr(value, limit: int = REPR_LIMIT) -> str:
    """``repr(value)`` cut to about ``limit`` characters; a repr that raises is named instead of raised."""
    try:
        text = repr(value)
    except BaseException as e:  # noqa: BLE001 - the reader's __repr__, reported not raised
        return f"an object of type {type(value).__name__} whose __repr__ raised {type(e).__name__}"
    if not isinstance(text, str):
        return f"an object of type {type(value).__name__}"
    if len(text) > limit:
        return f"{text[:limit]}… ({len(text):,} characters in all)"
    return text


def error_words(error: BaseException, limit: int = ERROR_LIMIT) -> str:
    """``"TypeError: message"``, the message cut to ``limit`` characters; one whose __str__ raises is named so."""
    try:
        message = str(error)
    except BaseException:  # noqa: BLE001
        message = "(its message could not be shown)"
    if len(message) > limit:
        message = f"{message[:limit]}… ({len(message):,} characters)"
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def count_words(n: int, what: str) -> str:
    """``"1 child process"``, ``"3 child processes"``."""
    plural = what + ("es" if what.endswith("s") else "s")
    return f"{n} {what if n == 1 else plural}"
