"""All-reduce written by hand from point-to-point sends and receives (Step 5).

Call these inside a rank, once the process group is up (for example from a
worker started by :func:`dpviz.runs.launch.launch`)::

    sent = ring_all_reduce(grad)               # grad now holds the sum over ranks
    sent = parameter_server_all_reduce(grad)   # the same sum, through rank 0

Both sum in place, as ``dist.all_reduce(tensor)`` does, and return the number of
bytes this rank sent. Pass a list as ``schedule`` to have one dict appended per
transfer this rank makes::

    {"phase": "reduce-scatter", "step": 0, "src": 1, "dst": 2, "chunk": 1, "bytes": 400}

The ring cuts the flattened tensor into k chunks (``torch.tensor_split``, so the
first ``numel % k`` chunks are one element longer, and some are empty when the
tensor has fewer than k elements). Rank ``r`` talks only to its neighbours
``left = (r - 1) % k`` and ``right = (r + 1) % k``:

* reduce-scatter, steps s = 0 .. k-2: send chunk ``(r - s) % k`` to the right,
  receive chunk ``(r - s - 1) % k`` from the left and add it in. Afterwards rank
  ``r`` owns the complete sum of chunk ``(r + 1) % k`` (:func:`owned_chunk`).
* all-gather, steps s = 0 .. k-2: send chunk ``(r + 1 - s) % k`` to the right,
  receive chunk ``(r - s) % k`` from the left and keep it.

Each rank sends k-1 chunks per phase, so about 2(k-1)/k·M bytes in all, whatever k.
The parameter server instead makes rank 0 receive and send (k-1)·M bytes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

RING_PHASES = ("reduce-scatter", "all-gather")
PIECE = 1 << 17      # float32 elements per message (512 KiB): a chunk goes as several, so adds overlap transfers
MAX_PIECES = 64      # pieces per chunk at most; tags are step * MAX_PIECES + piece
SERVER_PHASES = ("push", "pull")


def owned_chunk(rank: int, world_size: int) -> int:
    """The chunk whose full sum ``rank`` holds after the ring's reduce-scatter."""
    return (rank + 1) % world_size


def ring_reduce_scatter(tensor: torch.Tensor, *, schedule: list | None = None) -> int:
    """First half of the ring: afterwards this rank's :func:`owned_chunk` holds the sum over ranks.

    The other chunks hold partial sums. ``tensor`` must be contiguous; returns bytes sent.
    """
    return _ring_phase(tensor, "reduce-scatter", schedule)


def ring_all_gather(tensor: torch.Tensor, *, schedule: list | None = None) -> int:
    """Second half of the ring: pass each rank's owned chunk around until every rank has them all."""
    return _ring_phase(tensor, "all-gather", schedule)


def ring_all_reduce(tensor: torch.Tensor, *, schedule: list | None = None) -> int:
    """Sum ``tensor`` over ranks in place with a ring (reduce-scatter, then all-gather); return bytes sent."""
    if dist.get_world_size() == 1:
        return 0
    work = tensor if tensor.is_contiguous() else tensor.contiguous()
    sent = ring_reduce_scatter(work, schedule=schedule)
    sent += ring_all_gather(work, schedule=schedule)
    if work is not tensor:
        tensor.copy_(work)
    return sent


def parameter_server_all_reduce(tensor: torch.Tensor, *, schedule: list | None = None) -> int:
    """Sum ``tensor`` over ranks in place through rank 0; return bytes sent by this rank.

    Every other rank pushes its whole tensor to rank 0; rank 0 adds them in rank
    order, and each rank pulls the sum back from it. Like ``dist.all_reduce`` this
    gives the sum; divide by k for the average gradient. Rank 0's link carries
    (k-1)·M bytes each way, which is why this does not scale with k.
    """
    rank, k = dist.get_rank(), dist.get_world_size()
    if k == 1:
        return 0
    nbytes = tensor.numel() * tensor.element_size()
    work = tensor if tensor.is_contiguous() else tensor.contiguous()
    if rank == 0:
        inbox = [torch.empty_like(work) for _ in range(1, k)]
        for req in [dist.irecv(buf, src=src) for src, buf in enumerate(inbox, start=1)]:
            req.wait()
        for buf in inbox:  # always the same order, so every run sums the same way
            work.add_(buf)
        for req in [dist.isend(work, dst=dst) for dst in range(1, k)]:
            req.wait()
        _note(schedule, [("pull", 0, 0, dst, 0, nbytes) for dst in range(1, k)])
        sent = (k - 1) * nbytes
    else:
        dist.send(work, dst=0)
        dist.recv(work, src=0)
        _note(schedule, [("push", 0, rank, 0, 0, nbytes)])
        sent = nbytes
    if work is not tensor:
        tensor.copy_(work)
    return sent


def _ring_phase(tensor: torch.Tensor, phase: str, schedule: list | None) -> int:
    """One pass of k-1 steps around the ring; in reduce-scatter received chunks are added, in all-gather kept."""
    rank, k = dist.get_rank(), dist.get_world_size()
    if k == 1:
        return 0
    if not tensor.is_contiguous():
        raise ValueError("tensor must be contiguous, so that its chunks are views that the ring can write into.")
    left, right = (rank - 1) % k, (rank + 1) % k
    chunks = torch.tensor_split(tensor.view(-1), k)
    inbox = torch.empty_like(chunks[0]) if phase == "reduce-scatter" else None  # chunk 0 is the longest
    offset = 0 if phase == "reduce-scatter" else 1
    sent = 0
    for step in range(k - 1):
        send_i = (rank + offset - step) % k
        recv_i = (rank + offset - step - 1) % k
        out, into = chunks[send_i], chunks[recv_i]
        # Reduce-scatter must add what arrives, so it lands in a buffer first;
        # all-gather overwrites, so it can land in the chunk itself.
        buf = inbox[: into.numel()] if phase == "reduce-scatter" else into
        # Post every piece's send and receive at once (if every rank sent first and waited, a blocking
        # transport would leave the whole ring waiting), then add each piece as it arrives, while the
        # later pieces are still on their way: the additions hide behind the transfer.
        sends = [dist.isend(piece, dst=right, tag=step * MAX_PIECES + j) for j, piece in enumerate(_pieces(out))]
        arriving = list(zip(_pieces(buf), _pieces(into)))
        recvs = [dist.irecv(piece, src=left, tag=step * MAX_PIECES + j) for j, (piece, _) in enumerate(arriving)]
        for req, (piece, target) in zip(recvs, arriving):
            req.wait()
            if phase == "reduce-scatter":
                target.add_(piece)
        for req in sends:
            req.wait()
        nbytes = out.numel() * out.element_size()
        _note(schedule, [(phase, step, rank, right, send_i, nbytes)])
        sent += nbytes
    return sent


def _pieces(chunk: torch.Tensor) -> tuple:
    """A chunk cut into messages of at most PIECE elements (none for an empty chunk), at most MAX_PIECES of them."""
    if not chunk.numel():
        return ()
    return torch.tensor_split(chunk, min(MAX_PIECES, -(-chunk.numel() // PIECE)))


def _note(schedule: list | None, transfers) -> None:
    if schedule is None:
        return
    for phase, step, src, dst, chunk, nbytes in transfers:
        schedule.append({"phase": phase, "step": step, "src": src, "dst": dst, "chunk": chunk, "bytes": nbytes})


def compare_with_all_reduce(rank: int, world_size: int, sizes, seed: int = 0) -> dict:
    """Worker: run the built-in and both hand-written all-reduces on the same inputs; return numpy results.

    For each element count ``n`` in ``sizes`` and two kinds of float32 input,
    ``"int"`` (integer values, so every summation order gives the same bits) and
    ``"rand"`` (normal floats, equal only within rounding), the returned dict maps
    ``(kind, n)`` to a dict with the input, each implementation's output, bytes
    sent, the ring's and the server's schedules, and the ring's tensor right after
    its reduce-scatter.
    """
    gen = torch.Generator().manual_seed(seed * 1000 + rank)
    out = {}
    for n in sizes:
        for kind in ("int", "rand"):
            if kind == "int":
                x = torch.randint(-50, 50, (n,), generator=gen).float()
            else:
                x = torch.randn(n, generator=gen)
            ref, ring, half, server = x.clone(), x.clone(), x.clone(), x.clone()
            dist.all_reduce(ref)
            ring_schedule, server_schedule = [], []
            ring_bytes = ring_all_reduce(ring, schedule=ring_schedule)
            ring_reduce_scatter(half)
            server_bytes = parameter_server_all_reduce(server, schedule=server_schedule)
            out[(kind, n)] = {
                "input": x.numpy(),
                "all_reduce": ref.numpy(),
                "ring": ring.numpy(),
                "after_reduce_scatter": half.numpy(),
                "parameter_server": server.numpy(),
                "ring_bytes": ring_bytes,
                "server_bytes": server_bytes,
                "ring_schedule": ring_schedule,
                "server_schedule": server_schedule,
            }
    return out
