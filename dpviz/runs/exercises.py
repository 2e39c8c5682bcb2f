"""The collective exercises on real ranks: their reference solutions, and the worker that runs a reader's function.

A function the reader types in a notebook cell cannot be unpickled in a rank (another process), so it
travels as its source text: each rank compiles that text with ``torch``, ``dist``, ``math`` and
``np`` in scope and calls it on real data, beside the real thing (``dist.all_reduce``,
``dist.all_gather``, :func:`dpviz.runs.collectives.ring_reduce_scatter`). The worker returns
numpy arrays only; :mod:`dpviz.exercises.ranked` (numpy) judges them and words the answer::

    from dpviz.runs.launch import launch
    from dpviz.runs import exercises
    tasks = [("average_gradients", "average_gradients", source_text)]
    results = launch(exercises.exercise_worker, 3, args=(tasks,), backend="gloo", threads=1)

Inside the ranks ``dist`` is :class:`Recorder`, which passes every call on to
``torch.distributed`` unchanged and notes each point-to-point send and receive (peer, which
chunk), so that a checker can say which neighbour or which chunk a wrong ring step used.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist

from dpviz.data import teacher_data
from dpviz.runs.collectives import ring_reduce_scatter
from dpviz.runs.launch import report_progress
from dpviz.runs.models import build_model

EXERCISES = ("average_gradients", "reduce_scatter_step", "gather_columns")
SEED = 0
GRAD_SHARD = 4        # examples per rank in average_gradients
GRAD_D_IN = 4         # the MLP's input features there
GRAD_WIDTH = 8        # its hidden units: four gradient tensors, (8, 4), (8,), (1, 8), (1,)
RING_CHUNK = 4        # elements per chunk in reduce_scatter_step: k chunks of equal length
TP_BATCH, TP_D_IN, TP_BLOCK = 4, 6, 3  # gather_columns: X is (4, 6), each rank holds a (4, 3) block of Y


# --- the reference solutions (each is what its checker accepts) ---------------------------------


def average_gradients(model_grads, world_size):
    """Chapter 04: inside a rank, turn each local gradient tensor into the mean over the ranks, in place."""
    for grad in model_grads:
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        grad /= world_size


def reduce_scatter_step(chunks, rank, world_size, step):
    """Chapter 05: step ``step`` of the ring's reduce-scatter: send one chunk right, add the one from the left."""
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i = (rank - step) % world_size
    recv_i = (rank - step - 1) % world_size
    inbox = torch.empty_like(chunks[recv_i])
    sending = dist.isend(chunks[send_i], dst=right)
    dist.recv(inbox, src=left)
    sending.wait()
    chunks[recv_i] += inbox


def gather_columns(y_block, world_size):
    """Chapter 12: rank r holds column block r of Y = X W; return the whole Y, the blocks side by side."""
    blocks = [torch.empty_like(y_block) for _ in range(world_size)]
    dist.all_gather(blocks, y_block)
    return torch.cat(blocks, dim=1)


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


def _call(name, source, recorder, *args):
    """Run the reader's function; return (result, None), or (None, outcome) when it raised."""
    try:
        fn = compile_function(name, source, recorder)
        return fn(*args), None
    except NotImplementedError:
        return None, {"not_attempted": True}
    except Exception as e:  # the reader's mistake, reported by the checker in one sentence
        return None, {"error": f"{type(e).__name__}: {e}"}


def _numpy_list(values):
    return [np.asarray(v.detach().numpy() if torch.is_tensor(v) else v, dtype=np.float64) for v in values]


def run_average_gradients(rank: int, world_size: int, name: str, source: str) -> dict:
    """The reader's average_gradients on this rank's real MLP gradients, beside dist.all_reduce / k and the big batch's."""
    x, y = teacher_data(n=world_size * GRAD_SHARD, d_in=GRAD_D_IN, seed=SEED)

    def grads_of(rows):
        model = build_model("mlp", d_in=GRAD_D_IN, width=GRAD_WIDTH, depth=1, seed=SEED)
        loss = torch.mean((model(torch.from_numpy(x[rows])) - torch.from_numpy(y[rows])) ** 2)
        loss.backward()
        return [p.grad for p in model.parameters()]

    grads = grads_of(slice(rank * GRAD_SHARD, (rank + 1) * GRAD_SHARD))
    local = [g.clone() for g in grads]
    expected = [g.clone() for g in grads]
    for e in expected:  # the real thing: the sum over ranks, divided by k
        dist.all_reduce(e)
        e /= world_size
    big = [g.clone() for g in grads_of(slice(None))]
    out = {"local": _numpy_list(local), "expected": _numpy_list(expected), "big": _numpy_list(big),
           "examples": world_size * GRAD_SHARD}
    returned, outcome = _call(name, source, Recorder(), grads, world_size)
    if outcome:
        return {**out, **outcome}
    if isinstance(returned, (list, tuple)) and len(returned) == len(grads):
        try:
            return {**out, "got": _numpy_list(returned), "returned": True}
        except (TypeError, ValueError):
            pass
    return {**out, "got": _numpy_list(grads), "returned": False}


def run_reduce_scatter_step(rank: int, world_size: int, name: str, source: str) -> dict:
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
        return {**out, "error": f"{type(e).__name__}: {e}", "step": 0}
    for step in range(world_size - 1):
        recorder.log = []
        try:
            fn(chunks, rank, world_size, step)
        except NotImplementedError:
            return {**out, "not_attempted": True}
        except Exception as e:
            return {**out, "error": f"{type(e).__name__}: {e}", "step": step}
        recorder.chunks = chunks
        out["log"].append(list(recorder.log))
        try:
            out["states"].append(torch.cat([torch.as_tensor(c).reshape(-1) for c in chunks]).numpy().copy())
        except (TypeError, RuntimeError) as e:
            return {**out, "error": f"{type(e).__name__}: {e}", "step": step}
        report_progress(step)
    return out


def run_gather_columns(rank: int, world_size: int, name: str, source: str) -> dict:
    """The reader's all-gather of a column-split layer's output, beside dist.all_gather and the unsplit X W."""
    gen = torch.Generator().manual_seed(SEED)
    x = torch.randn(TP_BATCH, TP_D_IN, generator=gen)
    w = torch.randn(TP_D_IN, world_size * TP_BLOCK, generator=gen)
    block = x @ w[:, rank * TP_BLOCK:(rank + 1) * TP_BLOCK]
    blocks = [torch.empty_like(block) for _ in range(world_size)]
    dist.all_gather(blocks, block)  # the real thing
    out = {"full": (x @ w).numpy(), "gathered": torch.cat(blocks, dim=1).numpy(), "block": block.numpy()}
    returned, outcome = _call(name, source, Recorder(), block.clone(), world_size)
    if outcome:
        return {**out, **outcome}
    if torch.is_tensor(returned) or isinstance(returned, np.ndarray):
        return {**out, "got": np.asarray(torch.as_tensor(returned).detach().numpy(), dtype=np.float64)}
    return {**out, "got": None, "returned_type": type(returned).__name__}


RUNNERS = {
    "average_gradients": run_average_gradients,
    "reduce_scatter_step": run_reduce_scatter_step,
    "gather_columns": run_gather_columns,
}


def exercise_worker(rank: int, world_size: int, tasks) -> list[dict]:
    """Worker: run each ``(exercise, name, source)`` of ``tasks`` in turn on this rank; one result dict per task."""
    results = []
    for exercise, name, source in tasks:
        results.append(RUNNERS[exercise](rank, world_size, name, source))
        dist.barrier()  # the next task starts together on every rank
        report_progress(len(results))
    return results
