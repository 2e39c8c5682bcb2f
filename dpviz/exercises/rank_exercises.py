"""The collective exercises on real ranks: the worker that runs a reader's function beside the real thing.

The reference solutions are not here (a student imports dpviz): they are in the checkout's
``instructor/solutions.py``.

A function the reader types in a notebook cell cannot be unpickled in a rank (another process), so it
travels as its source text: each rank compiles that text with ``torch``, ``dist``, ``math`` and
``np`` in scope and calls it on real data, beside the real thing (``dist.all_reduce``,
``dist.all_gather``, :func:`dpviz.topics.all_reduce.rank_collectives.ring_reduce_scatter`). The worker returns
numpy arrays only; :mod:`dpviz.exercises.ranked` (numpy) judges them and words the answer::

    from dpviz.engine.launch import launch
    from dpviz.exercises import rank_exercises as exercises
    tasks = [("average_gradients", "average_gradients", source_text)]
    results = launch(exercises.exercise_worker, 3, args=(tasks,), backend="gloo", threads=1)

Inside the ranks ``dist`` is :class:`Recorder`, which passes every call on to
``torch.distributed`` unchanged and notes each point-to-point send and receive (peer, which
chunk), so that a checker can say which neighbour or which chunk a wrong ring step used.

Each call of the reader's function runs under :class:`RankGuard`, so that whatever it does comes
back as an outcome the checker words, and the rank lives on to meet its peers at the barrier:
a call gets ``call_limit`` seconds (a ``SIGALRM`` timer raises inside it, again every
``REPEAT`` seconds until it leaves; a rank waiting inside a collective is left to the launcher's
stall timeout, which names a deadlock); ``os._exit`` and ``dist.destroy_process_group`` are
replaced, while it runs, by ones that stop it and say so; any ``BaseException`` is caught; a
process it forks ends at once (an at-fork hook) and any other child it started is killed when it
returns (the rank is a child subreaper on Linux, so its children's orphans come back to it too);
it may print :data:`PRINT_LIMIT` characters, the rest are counted. The same guard for the
notebook's own process is :mod:`dpviz.engine.sandbox` (that layer cannot import this one, nor this
one that layer, so each keeps its own short copy).
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine import private
from dpviz.engine.data import teacher_data
from dpviz.topics.all_reduce.rank_collectives import ring_reduce_scatter
from dpviz.engine.rank import report_progress
from dpviz.topics.ground_floor.rank_models import build_model

EXERCISES = ("average_gradients", "reduce_scatter_step", "gather_columns")
SEED = 0
GRAD_SHARD = 4        # examples per rank in average_gradients
GRAD_D_IN = 4         # the MLP's input features there
GRAD_WIDTH = 8        # its hidden units: four gradient tensors, (8, 4), (8,), (1, 8), (1,)
RING_CHUNK = 4        # elements per chunk in reduce_scatter_step: k chunks of equal length
TP_BATCH, TP_D_IN, TP_BLOCK = 4, 6, 3  # gather_columns: X is (4, 6), each rank holds a (4, 3) block of Y
CALL_LIMIT = 10.0     # seconds one call of the reader's function may run inside a rank
REPEAT = 0.05         # seconds between further stops once a call's time is up, in case it catches the first
PRINT_LIMIT = 10_000  # characters of the reader's prints a rank passes on; the rest are counted
ERROR_LIMIT = 160     # characters of an exception's message sent back
RETURN_LIMIT = 100_000  # numbers of a returned tensor sent back; a bigger one comes back as its shape alone


# --- inside a rank ---------------------------------------------------------------------------------


class Recorder:
    """Stands in for ``torch.distributed`` in the reader's code: every call goes through unchanged;
    sends and receives are noted as ``(op, peer, chunk)``, ``chunk`` being the index in ``chunks`` of the
    tensor sent (-1 when it is none of them)."""

    def __init__(self, chunks=None):
        self.chunks = chunks or []
        self.log = []

    def __getattr__(self, name):
        return getattr(dist, name)

    def _note(self, op, tensor, peer):
        chunk = next((i for i, c in enumerate(self.chunks) if c.numel() and c.data_ptr() == tensor.data_ptr()
                      and c.numel() == tensor.numel()), -1)
        if chunk < 0 and op == "send":  # a copy of a chunk (e.g. chunks[i].clone()) is known by its values
            chunk = next((i for i, c in enumerate(self.chunks) if c.shape == tensor.shape and torch.equal(c, tensor)), -1)
        self.log.append((op, -1 if peer is None else int(peer), chunk))

    def send(self, tensor, dst=None, *args, **kwargs):
        self._note("send", tensor, dst if dst is not None else kwargs.get("group_dst"))
        return dist.send(tensor, dst, *args, **kwargs)

    def isend(self, tensor, dst=None, *args, **kwargs):
        self._note("send", tensor, dst if dst is not None else kwargs.get("group_dst"))
        return dist.isend(tensor, dst, *args, **kwargs)

    def recv(self, tensor, src=None, *args, **kwargs):
        self._note("recv", tensor, src if src is not None else kwargs.get("group_src"))
        return dist.recv(tensor, src, *args, **kwargs)

    def irecv(self, tensor, src=None, *args, **kwargs):
        self._note("recv", tensor, src if src is not None else kwargs.get("group_src"))
        return dist.irecv(tensor, src, *args, **kwargs)

    def P2POp(self, op, tensor, peer=None, *args, **kwargs):  # noqa: N802 (torch's name)
        real = {self.isend: dist.isend, self.irecv: dist.irecv}.get(op, op)
        self._note("send" if real is dist.isend else "recv", tensor, peer)
        return dist.P2POp(real, tensor, peer, *args, **kwargs)


def compile_function(name: str, source: str, recorder: Recorder):
    """The reader's function, compiled from its source with torch, dist (the recorder), math and np in scope."""
    namespace = {"__name__": "exercise", "torch": torch, "dist": recorder, "math": math, "np": np}
    exec(compile(source, f"<your {name}>", "exec"), namespace)
    fn = namespace.get(name)
    if not callable(fn):
        raise NameError(f"the source given defines no function named {name!r}")
    return fn


# --- the guard around the reader's calls --------------------------------------------------------------


class _Stop(BaseException):
    """Raised inside the reader's function to stop it: ``what`` is the outcome the checker words."""

    def __init__(self, what: dict):
        super().__init__(what)
        self.what = what


class RankGuard:
    """Runs the reader's function in this rank so that whatever it does comes back as an outcome dict.

    ``call(fn, *args)`` returns ``(value, None)``, or ``(None, outcome)`` with one of ``not_attempted``,
    ``error`` (its words), ``timed_out`` (seconds), ``exited`` (os._exit's argument), ``destroyed``,
    ``forks`` or ``children`` (how many processes it started, ended here). ``printed`` counts the
    characters it wrote, over every call.
    """

    def __init__(self, call_limit: float = CALL_LIMIT):
        self.call_limit = float(call_limit)
        self.printed = 0
        _Children.become_subreaper()

    def call(self, fn, *args):
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Bounded(streams[0], self), _Bounded(streams[1], self)
        before = _Children.pids()
        real = os._exit, dist.destroy_process_group
        os._exit, dist.destroy_process_group = self._exit_raiser(real[0]), self._destroy_raiser
        old_handler = signal.signal(signal.SIGALRM, self._on_alarm)
        self.active, _Children.forks, _Children.armed_in = True, 0, os.getpid()
        value, outcome = None, None
        try:
            try:
                signal.setitimer(signal.ITIMER_REAL, self.call_limit, REPEAT)
                value = fn(*args)
            finally:
                self.active = False
                signal.setitimer(signal.ITIMER_REAL, 0)
        except NotImplementedError:
            outcome = {"not_attempted": True}
        except _Stop as stop:
            outcome = stop.what
        except BaseException as e:  # noqa: BLE001 - the reader's mistake, worded by the checker
            outcome = {"error": _error_words(e), "kind": type(e).__name__}
        finally:
            self.active = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old_handler)
            os._exit, dist.destroy_process_group = real
            _Children.armed_in = None
            sys.stdout, sys.stderr = streams
            children = _Children.end_new(before)
        if outcome is None and not dist.is_initialized():  # it reached the real one some other way
            outcome = {"destroyed": True}
        if outcome is None and (_Children.forks or children):
            outcome = {"forks": _Children.forks} if _Children.forks else {"children": children}
        return (None, outcome) if outcome else (value, None)

    def _on_alarm(self, signum, frame):
        if self.active and not (frame is not None and frame.f_code.co_filename == __file__):
            raise _Stop({"timed_out": self.call_limit})

    @staticmethod
    def _exit_raiser(real_exit):
        pid, thread = os.getpid(), threading.get_ident()

        def _exit(code):
            if os.getpid() == pid and threading.get_ident() == thread:
                raise _Stop({"exited": code if isinstance(code, int) else _short_repr(code)})
            real_exit(code)  # the parent watchdog's thread, or a forked child: the real thing

        return _exit

    @staticmethod
    def _destroy_raiser(*args, **kwargs):
        raise _Stop({"destroyed": True})


class _Children:
    """This rank's child processes: forks made while the reader's function runs end at once; others are killed after."""

    armed_in = None  # the rank's pid while the reader's function runs
    forks = 0
    registered = False
    real_exit = os._exit

    @classmethod
    def become_subreaper(cls) -> None:
        if not cls.registered:
            os.register_at_fork(before=cls._before, after_in_child=cls._in_child)
            cls.registered = True
            private.become_child_subreaper()  # orphans come back to us (Linux; no public call: see there)

    @classmethod
    def _before(cls) -> None:
        if cls.armed_in == os.getpid():
            cls.forks += 1

    @classmethod
    def _in_child(cls) -> None:
        if cls.armed_in is not None and cls.armed_in == os.getppid():
            cls.real_exit(0)

    @staticmethod
    def pids() -> set:
        found = set()
        try:
            for tid in os.listdir(f"/proc/{os.getpid()}/task"):
                with open(f"/proc/{os.getpid()}/task/{tid}/children") as f:
                    found.update(int(p) for p in f.read().split())
        except OSError:
            pass
        return found

    @classmethod
    def end_new(cls, before: set) -> int:
        """Kill and reap the children that appeared since ``before`` (and orphans that come back meanwhile)."""
        ended = set()
        for _ in range(5):
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
                except OSError:
                    pass
            ended |= new
        return len(ended)


class _Bounded:
    """A stream that passes on the first PRINT_LIMIT characters of the reader's prints and counts the rest."""

    def __init__(self, stream, guard: RankGuard):
        self.stream, self.guard = stream, guard

    def write(self, text) -> int:
        text = str(text)
        room = PRINT_LIMIT - self.guard.printed
        if room > 0 and self.stream is not None:
            self.stream.write(text[:room])
        self.guard.printed += len(text)
        return len(text)

    def flush(self) -> None:
        if self.stream is not None:
            self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def _short_repr(value, limit: int = 40) -> str:
    try:
        text = repr(value)
    except BaseException:  # noqa: BLE001
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "…"


def _error_words(error: BaseException) -> str:
    try:
        message = str(error)
    except BaseException:  # noqa: BLE001
        message = "(its message could not be shown)"
    if len(message) > ERROR_LIMIT:
        message = f"{message[:ERROR_LIMIT]}… ({len(message):,} characters)"
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _call(guard, name, source, recorder, *args):
    """Compile and run the reader's function; return (result, None), or (None, outcome) when it did not return."""
    try:
        fn = compile_function(name, source, recorder)
    except Exception as e:  # a syntax error, or no such function
        return None, {"error": _error_words(e), "kind": type(e).__name__}
    return guard.call(fn, *args)


def _array_back(value):
    """``value`` as a float64 array to send back, or None (not numbers, or too big to send: see RETURN_LIMIT)."""
    try:
        array = np.asarray(value.detach().numpy() if torch.is_tensor(value) else value, dtype=np.float64)
    except Exception:  # noqa: BLE001 - whatever the returned object's conversion raised
        return None
    return array if array.size <= RETURN_LIMIT else None


def _numpy_list(values):
    return [np.asarray(v.detach().numpy() if torch.is_tensor(v) else v, dtype=np.float64) for v in values]


def _what_returned(returned) -> dict:
    """How a returned value that is not the expected kind reads in a verdict: its type, and its size if it is text."""
    words = {"returned_type": type(returned).__name__}
    if isinstance(returned, (str, bytes)):
        words["returned_len"] = len(returned)
    return words


def run_average_gradients(rank: int, world_size: int, name: str, source: str, guard: RankGuard) -> dict:
    """The reader's average_gradients on this rank's real MLP gradients, beside dist.all_reduce / k and the big batch's.

    ``got`` is what the gradient tensors themselves hold afterwards (the task changes them in place);
    ``returned`` what the function returned, when that is a list of as many tensors; ``replaced``
    the list positions it pointed at new tensors instead of changing the ones it was given.
    """
    x, y = teacher_data(n=world_size * GRAD_SHARD, d_in=GRAD_D_IN, seed=SEED)

    def grads_of(rows):
        model = build_model("mlp", d_in=GRAD_D_IN, width=GRAD_WIDTH, depth=1, seed=SEED)
        loss = torch.mean((model(torch.from_numpy(x[rows])) - torch.from_numpy(y[rows])) ** 2)
        loss.backward()
        return [p.grad for p in model.parameters()]

    grads = grads_of(slice(rank * GRAD_SHARD, (rank + 1) * GRAD_SHARD))
    tensors = list(grads)  # the tensors themselves (a model's .grad): "in place" means these change
    local = [g.clone() for g in grads]
    expected = [g.clone() for g in grads]
    for e in expected:  # the real thing: the sum over ranks, divided by k
        dist.all_reduce(e)
        e /= world_size
    big = [g.clone() for g in grads_of(slice(None))]
    out = {"local": _numpy_list(local), "expected": _numpy_list(expected), "big": _numpy_list(big),
           "examples": world_size * GRAD_SHARD}
    returned, outcome = _call(guard, name, source, Recorder(), grads, world_size)
    if outcome:
        return {**out, **outcome}
    out["got"] = _numpy_list(tensors)
    out["replaced"] = [i for i, (now, was) in enumerate(zip(grads, tensors)) if now is not was]
    if out["replaced"]:
        out["replaced_with"] = [_array_back(grads[i]) for i in out["replaced"]]
    if isinstance(returned, (list, tuple)) and len(returned) == len(tensors):
        arrays = [_array_back(r) for r in returned]
        if all(a is not None for a in arrays):
            out["returned"] = arrays
    elif returned is not None and returned is not grads:
        out.update(_what_returned(returned))
    return out


def run_reduce_scatter_step(rank: int, world_size: int, name: str, source: str, guard: RankGuard) -> dict:
    """The reader's ring step, called for steps 0 .. k-2 on real ranks; the state after each step, and what was sent."""
    gen = torch.Generator().manual_seed(SEED * 1000 + rank)
    x = torch.randint(-9, 10, (world_size * RING_CHUNK,), generator=gen).float()  # integers: every sum is exact
    truth = x.clone()
    dist.all_reduce(truth)
    ring = x.clone()
    ring_reduce_scatter(ring)
    out = {"input": x.numpy(), "truth": truth.numpy(), "ring": ring.numpy(), "states": [], "log": []}
    chunks = list(torch.tensor_split(x.clone(), world_size))
    recorder = Recorder(chunks)
    try:
        fn = compile_function(name, source, recorder)
    except Exception as e:
        return {**out, "error": _error_words(e), "step": 0}
    for step in range(world_size - 1):
        recorder.log = []
        _, outcome = guard.call(fn, chunks, rank, world_size, step)
        if outcome:
            return {**out, **outcome, "step": step}
        recorder.chunks = chunks
        out["log"].append(list(recorder.log))
        try:
            state = torch.cat([torch.as_tensor(c).reshape(-1) for c in chunks]).numpy().astype(np.float64)
        except Exception as e:  # noqa: BLE001 - chunks that are no longer tensors
            return {**out, "error": _error_words(e), "step": step}
        out["states"].append(state if state.size <= RETURN_LIMIT else np.zeros(0))
        report_progress(step)
    return out


def run_gather_columns(rank: int, world_size: int, name: str, source: str, guard: RankGuard) -> dict:
    """The reader's all-gather of a column-split layer's output, beside dist.all_gather and the unsplit X W."""
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(TP_BATCH, TP_D_IN, generator=gen)
    w = torch.randn(TP_D_IN, world_size * TP_BLOCK, generator=gen)
    block = x @ w[:, rank * TP_BLOCK:(rank + 1) * TP_BLOCK]
    blocks = [torch.empty_like(block) for _ in range(world_size)]
    dist.all_gather(blocks, block)  # the real thing
    out = {"full": (x @ w).numpy(), "gathered": torch.cat(blocks, dim=1).numpy(), "block": block.numpy()}
    returned, outcome = _call(guard, name, source, Recorder(), block.clone(), world_size)
    if outcome:
        return {**out, **outcome}
    if torch.is_tensor(returned) or isinstance(returned, np.ndarray):
        got = _array_back(returned)
        if got is not None:
            return {**out, "got": got}
        return {**out, "got": None, "returned_type": f"a tensor of shape {tuple(returned.shape)}"}
    return {**out, "got": None, **_what_returned(returned)}


RUNNERS = {
    "average_gradients": run_average_gradients,
    "reduce_scatter_step": run_reduce_scatter_step,
    "gather_columns": run_gather_columns,
}


def exercise_worker(rank: int, world_size: int, tasks, call_limit: float = CALL_LIMIT) -> list[dict]:
    """Worker: run each ``(exercise, name, source)`` of ``tasks`` in turn on this rank; one result dict per task.

    Each call of a reader's function may take ``call_limit`` seconds. A task whose function ended the
    process group (``destroyed``) ends the rank's work there: the tasks after it are not run.
    """
    guard = RankGuard(call_limit)
    results = []
    for exercise, name, source in tasks:
        guard.printed = 0
        result = RUNNERS[exercise](rank, world_size, name, source, guard)
        result["printed"] = guard.printed
        results.append(result)
        if not dist.is_initialized():
            break
        dist.barrier()  # the next task starts together on every rank
        report_progress(len(results))
    return results
