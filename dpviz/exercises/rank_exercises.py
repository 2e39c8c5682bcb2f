"""The collective exercises on real ranks: a worker that runs a reader's function, and one that runs the real thing.

The reference solutions are not here (a student imports dpviz): they are in the checkout's
``instructor/solutions.py``.

A function the reader types in a notebook cell cannot be unpickled in a rank (another process), so it
travels as its source text: each rank compiles that text with ``torch``, ``dist``, ``math`` and
``np`` in scope and calls it on real data. The real answers come from *other* ranks, in a launch of
their own that runs no reader's code (:func:`reference_worker`: ``dist.all_reduce``,
``dist.all_gather``, :func:`dpviz.topics.all_reduce.rank_collectives.ring_reduce_scatter`, the big
batch's gradient): a rank that runs the reader's function (:func:`exercise_worker`) holds only its
inputs, so walking up its frames or searching its objects finds no answer, and whatever it rebinds
there (``dist.all_reduce`` included) cannot change the answers it is judged against. Both workers
build the same inputs from the same seeds, and return numpy arrays only;
:mod:`dpviz.exercises.ranked` (numpy) judges them and words the answer::

    from dpviz.engine.launch import launch
    from dpviz.exercises import rank_exercises as exercises
    tasks = [("average_gradients", "average_gradients", source_text)]
    reference = launch(exercises.reference_worker, 3, backend="gloo", threads=1)
    results = launch(exercises.exercise_worker, 3, args=(tasks,), backend="gloo", threads=1)

Inside the ranks ``dist`` is :class:`Recorder`, which passes every call on to
``torch.distributed`` unchanged and notes each point-to-point send and receive (peer, which
chunk), so that a checker can say which neighbour or which chunk a wrong ring step used.

Each call of the reader's function runs under :class:`RankGuard`, the one sandbox of
:mod:`dpviz.engine.sandbox` with what a rank adds: a call gets ``call_limit`` seconds (a
``SIGALRM`` timer stops it; a rank waiting inside a collective is left to the launcher's stall
timeout, which names a deadlock); ``dist.destroy_process_group`` is replaced, while it runs, by one
that stops it and says so; ``os._exit``, any ``BaseException``, forks, child processes and threads
it leaves running come back as outcomes, and the rank lives on to meet its peers at the barrier.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist

from dpviz.engine import sandbox
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
PRINT_LIMIT = sandbox.PRINT_LIMIT  # characters of the reader's prints a rank passes on; the rest are counted
RETURN_LIMIT = sandbox.RETURN_LIMIT  # numbers of a returned tensor sent back; a bigger one comes back as its shape


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


class RankGuard:
    """:class:`dpviz.engine.sandbox.Guard` in a rank: ``call(fn, *args)`` returns ``(value, None)``, or ``(None,
    outcome)`` with one of ``not_attempted``, ``error`` (its words) and ``kind``, ``timed_out`` (seconds),
    ``exited`` (os._exit's argument), ``destroyed``, ``forks``, ``children`` or ``threads`` (how many it left,
    ended here). ``printed`` counts the characters it wrote, over every call.
    """

    def __init__(self, call_limit: float = CALL_LIMIT):
        self.call_limit = float(call_limit)
        self.guard = sandbox.Guard(self.call_limit, PRINT_LIMIT,
                                   patches=[(dist, "destroy_process_group", self._destroy_raiser)])

    @property
    def printed(self) -> int:
        return self.guard.printed

    @printed.setter
    def printed(self, value: int) -> None:
        self.guard.printed = value

    def call(self, fn, *args):
        outcome = self.guard.call(fn, *args)
        if outcome.kind == "NotImplementedError":
            return None, {"not_attempted": True}
        if outcome.timed_out:
            return None, {"timed_out": self.call_limit}
        if outcome.exit_code is not None:
            return None, {"exited": outcome.exit_code}
        if outcome.stopped == "destroyed" or not dist.is_initialized():  # (or it reached the real one another way)
            return None, {"destroyed": True}
        if outcome.error is not None:
            return None, {"error": outcome.error, "kind": outcome.kind}
        for what in ("forks", "children", "threads"):
            if getattr(outcome, what):
                return None, {what: getattr(outcome, what)}
        return outcome.value, None

    @staticmethod
    def _destroy_raiser(*args, **kwargs):
        raise sandbox.Stop("destroyed")


def _call(guard, name, source, recorder, *args):
    """Compile and run the reader's function; return (result, None), or (None, outcome) when it did not return."""
    try:
        fn = compile_function(name, source, recorder)
    except Exception as e:  # a syntax error, or no such function
        return None, {"error": sandbox.error_words(e), "kind": type(e).__name__}
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


def _model_grads(rank: int, world_size: int, rows=None) -> list:
    """The MLP's gradient tensors on this rank's examples (``rows`` None), or on ``rows`` of the whole batch."""
    x, y = teacher_data(n=world_size * GRAD_SHARD, d_in=GRAD_D_IN, seed=SEED)
    rows = slice(rank * GRAD_SHARD, (rank + 1) * GRAD_SHARD) if rows is None else rows
    model = build_model("mlp", d_in=GRAD_D_IN, width=GRAD_WIDTH, depth=1, seed=SEED)
    loss = torch.mean((model(torch.from_numpy(x[rows])) - torch.from_numpy(y[rows])) ** 2)
    loss.backward()
    return [p.grad for p in model.parameters()]


def _ring_input(rank: int, world_size: int):
    gen = torch.Generator().manual_seed(SEED * 1000 + rank)
    return torch.randint(-9, 10, (world_size * RING_CHUNK,), generator=gen).float()  # integers: every sum is exact


def _column_block(rank: int, world_size: int):
    """X, W and this rank's column block X W[:, block] of a column-split layer."""
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(TP_BATCH, TP_D_IN, generator=gen)
    w = torch.randn(TP_D_IN, world_size * TP_BLOCK, generator=gen)
    return x, w, x @ w[:, rank * TP_BLOCK:(rank + 1) * TP_BLOCK]


def reference_worker(rank: int, world_size: int) -> dict:
    """Worker: the real answers of every exercise on this rank, from the same inputs the reader's function gets.

    No reader's code runs in these ranks. ``average_gradients``: the rank's own gradients (``local``),
    ``dist.all_reduce`` / k (``expected``) and the whole batch's gradient (``big``); ``reduce_scatter_step``:
    the input, ``dist.all_reduce`` of it (``truth``) and the library's ring reduce-scatter (``ring``);
    ``gather_columns``: the rank's block, ``dist.all_gather`` of the blocks and the unsplit X W (``full``).
    """
    grads = _model_grads(rank, world_size)
    expected = [g.clone() for g in grads]
    for e in expected:  # the real thing: the sum over ranks, divided by k
        dist.all_reduce(e)
        e /= world_size
    average = {"local": _numpy_list(grads), "expected": _numpy_list(expected),
               "big": _numpy_list(_model_grads(rank, world_size, slice(None))), "examples": world_size * GRAD_SHARD}
    x = _ring_input(rank, world_size)
    truth = x.clone()
    dist.all_reduce(truth)
    ring = x.clone()
    ring_reduce_scatter(ring)
    ring_step = {"input": x.numpy(), "truth": truth.numpy(), "ring": ring.numpy()}
    xs, w, block = _column_block(rank, world_size)
    blocks = [torch.empty_like(block) for _ in range(world_size)]
    dist.all_gather(blocks, block)
    gather = {"full": (xs @ w).numpy(), "gathered": torch.cat(blocks, dim=1).numpy(), "block": block.numpy()}
    report_progress(0)
    return {"average_gradients": average, "reduce_scatter_step": ring_step, "gather_columns": gather}


def run_average_gradients(rank: int, world_size: int, name: str, source: str, guard: RankGuard) -> dict:
    """The reader's average_gradients on this rank's real MLP gradients.

    ``got`` is what the gradient tensors themselves hold afterwards (the task changes them in place);
    ``returned`` what the function returned, when that is a list of as many tensors; ``replaced``
    the list positions it pointed at new tensors instead of changing the ones it was given.
    """
    grads = _model_grads(rank, world_size)
    tensors = list(grads)  # the tensors themselves (a model's .grad): "in place" means these change
    out = {}
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
    x = _ring_input(rank, world_size)
    out = {"states": [], "log": []}
    chunks = list(torch.tensor_split(x.clone(), world_size))
    recorder = Recorder(chunks)
    try:
        fn = compile_function(name, source, recorder)
    except Exception as e:
        return {**out, "error": sandbox.error_words(e), "step": 0}
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
            return {**out, "error": sandbox.error_words(e), "step": step}
        out["states"].append(state if state.size <= RETURN_LIMIT else np.zeros(0))
        report_progress(step)
    return out


def run_gather_columns(rank: int, world_size: int, name: str, source: str, guard: RankGuard) -> dict:
    """The reader's all-gather of a column-split layer's output block."""
    _, _, block = _column_block(rank, world_size)
    returned, outcome = _call(guard, name, source, Recorder(), block.clone(), world_size)
    if outcome:
        return outcome
    if torch.is_tensor(returned) or isinstance(returned, np.ndarray):
        got = _array_back(returned)
        if got is not None:
            return {"got": got}
        return {"got": None, "returned_type": f"a tensor of shape {tuple(returned.shape)}"}
    return {"got": None, **_what_returned(returned)}


RUNNERS = {
    "average_gradients": run_average_gradients,
    "reduce_scatter_step": run_reduce_scatter_step,
    "gather_columns": run_gather_columns,
}


def exercise_worker(rank: int, world_size: int, tasks, call_limit: float = CALL_LIMIT) -> list[dict]:
    """Worker: run each ``(exercise, name, source)`` of ``tasks`` in turn on this rank; one result dict per task.

    Each call of a reader's function may take ``call_limit`` seconds. A task whose function ended the
    process group (``destroyed``) ends the rank's work there: the tasks after it are not run. The
    results hold what the reader's function did, never a real answer (:func:`reference_worker` has those).
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
