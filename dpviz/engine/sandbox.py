"""The one sandbox for a reader's function: in a fresh process for the notebook's checks, in the ranks for collectives.

    with FreshProcess("sgd_step", source) as box:      # the notebook's checks: a new process per check
        outcome = box.call(theta, grad, eta, seconds=left, print_room=room)
    outcome.value, outcome.error, outcome.timed_out, outcome.exit_code, outcome.children, outcome.threads

    guard = Guard(seconds=10.0)                         # inside a rank: the same guard, around each call there
    outcome = guard.call(fn, chunks, rank, world_size, step)

**Where the reader's code runs.** Never in a process or a frame that holds the answer or a helper it could
replace. A check in the notebook sends :class:`FreshProcess` the function's *source* and, one call at a
time, that call's arguments: nothing else. The checker computes the expected values and judges in the
notebook's process, which the reader's code never reaches, so walking up the frames (``sys._getframe``,
``inspect.stack``), searching ``gc.get_objects()`` or rebinding a helper of :mod:`dpviz.engine.verdict`
finds nothing there to take or to change. The next call's arguments (which may be this call's answer, as on
a descent path) are sent only after this call's answer came back. On ranks the function must run in the
rank itself, where the collectives are; :mod:`dpviz.exercises.ranked` computes the real answers in other
ranks, in a launch of their own (see there).

**The fresh process.** ``python -m dpviz.engine.sandbox`` is a small supervisor: it imports numpy, becomes a
child subreaper (so that every process its children leave behind comes back to it, whatever session they
moved to), and for each call forks a worker. The worker compiles the source with ``np`` and ``math`` in
scope (:data:`SCOPE`), calls the function under a :class:`Guard`, writes what it returned as one JSON line,
and exits. The supervisor kills the worker at the call's time limit, then kills and reaps every process still
below it, and says ``done``. So nothing the function starts, a thread that fires after it returned
included, outlives the call's verdict. Everything travels as JSON (arrays as their raw bytes): no pickle
that the reader's process could turn into code in the notebook's.

What this does not stop: a function that kills its supervisor first (its orphans then go to init, though a
kill of the supervisor's process group at the end still reaches those that kept the group), or that reads
another process's memory where the system lets a process trace its parent (Linux's Yama ``ptrace_scope`` 0).

**The guard** (:class:`Guard`, one per process, used by the worker and by the ranks):

* **time**: in the main thread a ``SIGALRM`` timer raises :class:`Stop` inside the function after ``seconds``,
  again every :data:`REPEAT` seconds until it leaves, in case it catches the first (the ranks use it: a rank
  must live on to meet its peers). The fresh process needs none: its supervisor kills the worker, which no
  ``except`` can catch and which stops a long call into C too.
* **exits**: ``os._exit`` is replaced while the function runs by one that stops it and says so; ``SystemExit``
  and the rest are caught as any exception is. Extra replacements (``dist.destroy_process_group`` on ranks)
  are passed as ``patches``.
* **children**: a process forked while the function runs ends at once, in the child (an at-fork hook); any other
  child process it started (``subprocess``) is killed and reaped when it returns, and on Linux the process is a
  child subreaper, so orphans come back to be killed too.
* **threads**: a thread the function started that still runs when it returns is counted (an answer must not
  leave work behind it) and asked to stop (an exception raised in it); the process it runs in ends soon after.
* **prints**: the first :data:`PRINT_LIMIT` characters it writes to ``sys.stdout`` and ``sys.stderr`` pass
  through (from the fresh process, back to the notebook's cell); the rest are counted, not shown.

:func:`short_repr` and :func:`error_words` word a returned value or an exception in a few dozen characters,
even when its ``__repr__`` or ``__str__`` raises. numpy and the standard library only: no torch, which only a
rank imports.
"""

from __future__ import annotations

import base64
import json
import math
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from dpviz.engine import confine, private

TIME_LIMIT = 5.0  # seconds, for all of one check's calls of the reader's function together
REPEAT = 0.05  # seconds between further stops once a call's time is up, in case it catches the first
PRINT_LIMIT = 10_000  # characters of the reader's prints shown per check; the rest are counted
REPR_LIMIT = 60  # characters of a returned value's repr quoted in a verdict
ERROR_LIMIT = 160  # characters of an exception's message quoted in a verdict
RETURN_LIMIT = 100_000  # numbers of a returned array sent back; a bigger one comes back as its shape alone
SCOPE = "np and math"  # what a function checked in a fresh process finds without importing it
START_LIMIT = 60.0  # seconds the fresh process may take to start and answer, beyond the calls' own time
LINE_LIMIT = 4_000_000  # bytes of one message from the fresh process; a longer line is not read
READ_LIMIT = 2 * LINE_LIMIT  # bytes one call may send back in all; past them the process is ended, unread
REFUSED = ("dpviz cannot be imported where your function is checked: compute the answer from the arguments, "
           "with np and math")


class Stop(BaseException):
    """Raised inside the reader's function to stop it; ``what`` names the outcome (``timed_out``, ``exited``...)."""

    def __init__(self, what: str, value=True):
        super().__init__(what, value)
        self.what, self.value = what, value


@dataclass
class Outcome:
    """What one call did: returned ``value``, or raised (``error``, ``kind``), ran out of time, or exited."""

    value: object = None
    error: str | None = None  # what it raised, in words ("TypeError: ..."), NotImplementedError included
    kind: str | None = None  # the class name of what it raised ("SystemExit", "NameError")
    timed_out: bool = False
    exit_code: object = None  # the argument of os._exit, when it called it
    ended: str | None = None  # how its process ended without an answer ("killed by SIGKILL")
    forks: int = 0  # processes it forked (each ended at once)
    children: int = 0  # child processes still there when it returned (killed then)
    threads: int = 0  # threads it started that still ran when it returned (stopped then)
    stopped: str | None = None  # another Stop the caller's patches raised ("destroyed" on ranks)
    printed: int = 0  # characters it printed, shown or not
    seconds: float = 0.0  # how long the call took (in a fresh process: from the worker's start to its end)


# --- the guard around one call, in the process that runs the reader's function ------------------------


class Guard:
    """Runs the reader's function in this process so that whatever it does comes back as an :class:`Outcome`.

    ``seconds``: the time one call may take (None: no timer; the caller kills the process instead).
    ``print_limit``: characters passed on to the streams, over all calls; ``printed`` counts them all.
    ``patches``: ``(object, attribute, replacement)`` set while the function runs and put back after.
    """

    def __init__(self, seconds: float | None = None, print_limit: int = PRINT_LIMIT, patches=()):
        self.seconds = None if seconds is None else float(seconds)
        self.print_limit = int(print_limit)
        self.printed = 0
        self.patches = list(patches)
        _Children.arm_once()

    def call(self, fn, *args) -> Outcome:
        outcome = Outcome()
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Bounded(streams[0], self), _Bounded(streams[1], self)
        children_before, threads_before = _Children.pids(), set(threading.enumerate())
        saved = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in self.patches]
        real_exit = os._exit
        os._exit = _exit_raiser(real_exit)
        for owner, attr, replacement in self.patches:
            setattr(owner, attr, replacement)
        timer = _Timer(self.seconds)
        _Children.forks, _Children.armed_in = 0, os.getpid()
        printed = self.printed
        try:
            try:
                timer.start()
                outcome.value = fn(*args)
            finally:
                timer.stop()
        except Stop as stop:
            _stopped(outcome, stop)
        except BaseException as e:  # noqa: BLE001 - whatever the reader's function raised is the answer
            outcome.error, outcome.kind = error_words(e), type(e).__name__
        finally:
            timer.stop()  # (again, if a late Stop cut the first one short)
            _Children.armed_in = None
            for owner, attr, value in saved:
                setattr(owner, attr, value)
            os._exit = real_exit
            sys.stdout, sys.stderr = streams
            outcome.forks = _Children.forks
            outcome.threads = _end_threads(threads_before)
            outcome.children = _Children.end_new(children_before)
            outcome.printed = self.printed - printed
        if timer.fired:
            outcome.value, outcome.error, outcome.kind, outcome.timed_out = None, None, None, True
        return outcome


def _stopped(outcome: Outcome, stop: Stop) -> None:
    if stop.what == "timed_out":
        outcome.timed_out = True
    elif stop.what == "exited":
        outcome.exit_code = stop.value
    else:
        outcome.stopped = stop.what


def _exit_raiser(real_exit):
    pid, thread = os.getpid(), threading.get_ident()

    def _exit(code):
        if os.getpid() == pid and threading.get_ident() == thread:
            raise Stop("exited", code if isinstance(code, int) else short_repr(code))
        real_exit(code)  # another thread (a rank's watchdog), or a forked child: the real thing

    return _exit


class _Timer:
    """Raise Stop("timed_out") in the calling (main) thread after ``seconds``, then every REPEAT seconds."""

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.fired = False
        self.active = False
        self.usable = (seconds is not None and hasattr(signal, "setitimer")
                       and threading.current_thread() is threading.main_thread())

    def start(self) -> None:
        if not self.usable:
            return
        self.active = True
        self.old_handler = signal.signal(signal.SIGALRM, self._on_alarm)
        self.armed_at = time.monotonic()
        self.old_timer = signal.setitimer(signal.ITIMER_REAL, max(self.seconds, 1e-3), REPEAT)

    def stop(self) -> None:
        """End the timer and give back any timer it displaced (pytest-timeout's); a second call does nothing."""
        if not self.active:
            return
        self.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self.old_handler)
        delay, interval = self.old_timer
        if delay > 0:
            left = delay - (time.monotonic() - self.armed_at)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-3), interval)

    def _on_alarm(self, signum, frame):
        if self.active and not (frame is not None and frame.f_code.co_filename == __file__):
            self.fired = True  # never interrupt the guard's own bookkeeping
            raise Stop("timed_out")


def _end_threads(before: set) -> int:
    """Count the threads started since ``before`` that still run, and raise SystemExit in each so that it stops."""
    alive = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    for thread in alive:
        if thread.ident is not None:
            private.raise_in_thread(thread.ident, SystemExit)
    return len(alive)


class _Children:
    """This process's child processes: forks made while the reader's function runs end at once; others are killed."""

    armed_in = None  # the pid of the process whose reader's function is running
    forks = 0
    registered = False
    real_exit = os._exit

    @classmethod
    def arm_once(cls) -> None:
        if not cls.registered and hasattr(os, "register_at_fork"):
            os.register_at_fork(before=cls._before, after_in_child=cls._in_child)
            cls.registered = True
            private.become_child_subreaper()  # orphans come back to this process (Linux; no public call: see there)

    @classmethod
    def _before(cls) -> None:
        if cls.armed_in == os.getpid():
            cls.forks += 1

    @classmethod
    def _in_child(cls) -> None:
        if cls.armed_in is not None and cls.armed_in == os.getppid():
            cls.real_exit(0)

    @staticmethod
    def pids() -> set[int]:
        """This process's children (Linux's /proc), or an empty set where they cannot be listed."""
        found = set()
        try:
            for tid in os.listdir(f"/proc/{os.getpid()}/task"):
                with open(f"/proc/{os.getpid()}/task/{tid}/children") as f:
                    found.update(int(p) for p in f.read().split())
        except OSError:
            pass
        return found

    @classmethod
    def end_new(cls, before: set[int]) -> int:
        """Kill and reap the children that appeared since ``before`` (and orphans that come back meanwhile)."""
        ended = set()
        for _ in range(20):
            new = cls.pids() - before - ended
            if not new:
                break
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
            ended |= new
        return len(ended)


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


# --- values as JSON: what crosses between the notebook and the fresh process -------------------------


def encode(value):
    """``value`` as plain JSON data: numbers, text, None, lists, tuples, str-keyed dicts and numeric numpy arrays."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            raise TypeError(f"an array of dtype {value.dtype} cannot be sent")
        data = np.ascontiguousarray(value)
        return {"__array__": data.dtype.str, "shape": list(data.shape),
                "data": base64.b64encode(data.tobytes()).decode("ascii")}
    if isinstance(value, np.generic):
        return encode(value.item())
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"__dict__": {k: encode(v) for k, v in value.items()}}
    raise TypeError(f"a value of type {type(value).__name__} cannot be sent")


def decode(data):
    """The value :func:`encode` wrote; anything else (what a reader's process might write) raises ValueError."""
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v) for v in data]
    if isinstance(data, dict) and set(data) == {"__tuple__"}:
        return tuple(decode(v) for v in data["__tuple__"])
    if isinstance(data, dict) and set(data) == {"__dict__"} and isinstance(data["__dict__"], dict):
        return {str(k): decode(v) for k, v in data["__dict__"].items()}
    if isinstance(data, dict) and set(data) == {"__array__", "shape", "data"}:
        dtype = np.dtype(str(data["__array__"]))
        shape = tuple(int(n) for n in data["shape"])
        raw = base64.b64decode(str(data["data"]), validate=True)
        if dtype.kind not in "biuf" or any(n < 0 for n in shape) or len(raw) != math.prod(shape) * dtype.itemsize:
            raise ValueError("a malformed array")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    raise ValueError("a value the sandbox does not send")


def returned(value) -> dict:
    """What a call returned, as the checker needs it: numbers as a float64 array, else its type and short repr."""
    try:
        if hasattr(value, "detach"):  # a torch tensor
            value = value.detach().cpu().numpy()
        array = None if value is None or isinstance(value, (str, bytes)) else np.asarray(value, dtype=float)
    except BaseException:  # noqa: BLE001 - not numbers, whatever its __array__ or __float__ raised
        array = None
    if array is not None and array.dtype == float:
        if array.size > RETURN_LIMIT:
            return {"shape": list(array.shape)}
        return {"array": encode(array)}
    return {"type": type(value).__name__, "repr": short_repr(value)}


# --- the fresh process, from the notebook's side -----------------------------------------------------


class FreshProcess:
    """A supervisor process that runs the function defined as ``name`` by ``source``, one call at a time.

    ``call(*args, seconds=..., print_room=...)`` returns an :class:`Outcome` whose ``value`` is what
    :func:`returned` made of the return value (``{"array": ...}``, ``{"shape": ...}`` or ``{"type", "repr"}``),
    with ``array`` decoded. The function's prints are written to this process's ``sys.stdout`` and
    ``sys.stderr`` as they come. Use it as a context manager: leaving it ends the supervisor and everything
    under it.
    """

    def __init__(self, name: str, source: str):
        argv = confine.fresh_process_command()
        confined = argv[0] != sys.executable
        confine.note_once(confined)
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True, env=_quiet_env(), close_fds=True)
        self.buffer = b""
        self.received = 0  # bytes read during the current call
        self._send({"name": name, "source": source, "confined": confined})

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        """End the supervisor (it kills what is left under it first) and reap it."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                self._kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def _kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()

    def _send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, *args, seconds: float, print_room: int) -> Outcome:
        outcome = Outcome()
        try:
            self._send({"args": encode(args), "seconds": seconds, "print_room": print_room})
        except OSError:
            outcome.ended = "it could not be started"
            return outcome
        deadline = time.monotonic() + seconds + START_LIMIT
        answered = False
        self.received, shown = 0, 0
        while True:
            message = self._read(deadline)
            if message is None:  # the supervisor is gone or silent, or sent too much: end it
                self._kill()
                if self.received > READ_LIMIT:
                    outcome.ended = (f"it sent more than {READ_LIMIT:,} bytes back to the checker, which ended its "
                                     f"process there")
                outcome.ended = outcome.ended or "its process stopped answering"
                return outcome
            if "print" in message:  # at most the call's print room reaches the notebook, however it was written
                text = str(message["print"])[:max(print_room - shown, 0)]
                shown += len(text)
                stream = sys.stderr if message.get("stream") == "stderr" else sys.stdout
                stream.write(text)
            elif "result" in message and not answered:
                answered = True
                _fill(outcome, message["result"])
            elif "done" in message:
                done = message["done"]
                if done.get("timed_out"):
                    outcome = Outcome(timed_out=True, printed=outcome.printed)
                elif not answered:
                    outcome.ended = str(done.get("ended") or "it ended without an answer")
                outcome.children += int(done.get("late", 0))
                outcome.seconds = float(done.get("seconds", 0.0))
                return outcome

    def _read(self, deadline: float) -> dict | None:
        """The next message, skipping lines that are not one (what the reader's process may write); None at the end."""
        fd = self.proc.stdout.fileno()
        while True:
            if b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict):
                    return message
                continue
            if len(self.buffer) > LINE_LIMIT or self.received > READ_LIMIT:
                return None
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.received += len(chunk)
            self.buffer += chunk


def _fill(outcome: Outcome, result) -> None:
    """Copy a worker's result message into ``outcome``, decoding only what :func:`returned` writes."""
    if not isinstance(result, dict):
        outcome.ended = "what it sent back could not be read"
        return
    for key in ("error", "kind", "stopped"):
        if isinstance(result.get(key), str):
            setattr(outcome, key, result[key][:2 * ERROR_LIMIT])
    for key in ("forks", "children", "threads", "printed"):
        if isinstance(result.get(key), int):
            setattr(outcome, key, result[key])
    outcome.timed_out = bool(result.get("timed_out"))
    if isinstance(result.get("exit_code"), (int, str)):
        outcome.exit_code = result["exit_code"]
    value = result.get("value")
    if isinstance(value, dict):
        try:
            if "array" in value:
                array = decode(value["array"])
                value = {"array": np.asarray(array, dtype=float)}
            elif "shape" in value:
                value = {"shape": tuple(int(n) for n in value["shape"])}
            else:
                value = {"type": str(value.get("type", ""))[:100], "repr": str(value.get("repr", ""))[:4 * REPR_LIMIT]}
        except (ValueError, TypeError):
            outcome.ended = "what it sent back could not be read"
            return
    outcome.value = value


def _quiet_env() -> dict:
    """The environment of the fresh process: one thread for numpy's libraries (a call is a few numbers)."""
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


# --- the fresh process, from the inside --------------------------------------------------------------


def _serve() -> None:
    """The supervisor: for each request on stdin, a worker forked to make one call; then nothing left below it."""
    private.become_child_subreaper()
    private.die_with_parent(signal.SIGKILL)
    out = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)  # whatever else writes to the standard streams goes nowhere, not into the messages
    requests = sys.stdin.buffer
    hello = json.loads(requests.readline() or b"{}")
    name, source = str(hello.get("name", "")), str(hello.get("source", ""))
    confined = hello.get("confined") is True
    for line in requests:
        request = json.loads(line)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _work(out, null, name, source, request, confined)  # never returns
        done = _wait(pid, float(request.get("seconds", TIME_LIMIT)))
        done["seconds"] = time.monotonic() - start
        done["late"] = _sweep()
        os.write(out, b"\n" + json.dumps({"done": done}).encode() + b"\n")
    _sweep()


def _wait(pid: int, seconds: float) -> dict:
    """Wait for the worker ``pid`` at most ``seconds``, then kill it; how it ended."""
    deadline = time.monotonic() + max(seconds, 0.0)
    pause = 0.0005
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            break
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"timed_out": True}
        time.sleep(pause)
        pause = min(pause * 2, 0.01)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            words = signal.Signals(number).name
        except ValueError:
            words = f"signal {number}"
        return {"ended": f"killed by {words}"}
    return {"ended": f"exit code {os.WEXITSTATUS(status)}"}


def _sweep() -> int:
    """Kill and reap every process still below the supervisor; how many there were."""
    return _Children.end_new(set())


def _work(out: int, null: int, name: str, source: str, request: dict, confined: bool = False) -> None:
    """The worker: compile the reader's function, make the one call under the guard, write the result, exit."""
    code = 0
    try:
        os.dup2(null, 0)
        os.dup2(null, 2)
        os.set_inheritable(out, False)
        writer = _Messages(out)
        sys.stdout, sys.stderr = writer.stream("stdout"), writer.stream("stderr")
        guard = Guard(None, print_limit=int(request.get("print_room", PRINT_LIMIT)))
        confine.limit_resources(float(request.get("seconds", TIME_LIMIT)), processes=confined)
        _refuse_dpviz()
        outcome = guard.call(_compiled(name, source, request.get("args")))
        result = {key: getattr(outcome, key) for key in ("error", "kind", "exit_code", "forks", "children",
                                                          "threads", "stopped", "printed", "timed_out")}
        if outcome.error is None and outcome.exit_code is None and outcome.stopped is None:
            result["value"] = returned(outcome.value)
        os.write(out, b"\n" + json.dumps({"result": result}).encode() + b"\n")
    except BaseException:  # noqa: BLE001 - nothing more to say: the supervisor reports the exit
        code = 1
    os._exit(code)


class _NoDpviz:
    """An import hook that refuses every dpviz module: the reader's function must compute, not look up."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "dpviz" or name.startswith("dpviz."):
            raise ImportError(REFUSED, name=name)
        return None


def _refuse_dpviz() -> None:
    """In the worker, before the reader's code: dpviz is neither imported nor importable (the confined process has
    only the sandbox's own files of it anyway; this says why in the verdict, and holds where nothing is confined)."""
    sys.meta_path.insert(0, _NoDpviz)
    for module in [m for m in sys.modules if m == "dpviz" or m.startswith("dpviz.")]:
        del sys.modules[module]


def _compiled(name: str, source: str, args):
    """A call of the reader's function with ``args``: compiling it runs its definition, so it happens in the call."""

    def call():
        namespace = {"__name__": "exercise", "np": np, "math": math}
        exec(compile(source, f"<your {name}>", "exec"), namespace)
        fn = namespace.get(name)
        if not callable(fn):
            raise NameError(f"the source given defines no function named {name!r}")
        return fn(*decode(args))

    return call


class _Messages:
    """The worker's prints, sent to the notebook as they come, one JSON line each."""

    def __init__(self, fd: int):
        self.fd = fd

    def stream(self, which: str):
        writer = self

        class Stream:
            encoding = "utf-8"

            def write(self, text) -> int:
                text = str(text)
                if text:
                    os.write(writer.fd, json.dumps({"print": text, "stream": which}).encode() + b"\n")
                return len(text)

            def flush(self) -> None:
                pass

            def isatty(self) -> bool:
                return False

        return Stream()


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


if __name__ == "__main__":
    _serve()
