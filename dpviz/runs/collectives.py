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

A chunk travels as pieces of at most ``PIECE`` elements, and the chunk a rank receives
at one step is the one it sends at the next, so each piece is passed on as soon as it
has arrived (and been added in): the k-1 steps overlap, as in gloo's own ring. Pieces
change when bytes move, never which bytes move or the order in which they are summed.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

RING_PHASES = ("reduce-scatter", "all-gather")
PIECE = 1 << 19      # elements per message (2 MiB of float32): a chunk goes as several, so adds overlap transfers;
                     # smaller pieces cost more CPU per byte (measured with benchmarks/bench_allreduce.py --pieces)
MAX_PIECES = 64      # pieces per chunk at most; tags are step * MAX_PIECES + piece
SERVER_PHASES = ("push", "pull")


def owned_chunk(rank: int, world_size: int) -> int:
    """The chunk whose full sum ``rank`` holds after the ring's reduce-scatter."""
    return (rank + 1) % world_size


def ring_reduce_scatter(tensor: torch.Tensor, *, schedule: list | None = None, piece: int = PIECE) -> int:
    """First half of the ring: afterwards this rank's :func:`owned_chunk` holds the sum over ranks.

    The other chunks hold partial sums. ``tensor`` must be contiguous; returns bytes sent. ``piece``:
    elements per message, the same on every rank (it changes the timing, never the result).
    """
    return _ring_phase(tensor, "reduce-scatter", schedule, piece)


def ring_all_gather(tensor: torch.Tensor, *, schedule: list | None = None, piece: int = PIECE) -> int:
    """Second half of the ring: pass each rank's owned chunk around until every rank has them all."""
    return _ring_phase(tensor, "all-gather", schedule, piece)


def ring_all_reduce(tensor: torch.Tensor, *, schedule: list | None = None, piece: int = PIECE) -> int:
    """Sum ``tensor`` over ranks in place with a ring (reduce-scatter, then all-gather); return bytes sent."""
    if dist.get_world_size() == 1:
        return 0
    work = tensor if tensor.is_contiguous() else tensor.contiguous()
    sent = ring_reduce_scatter(work, schedule=schedule, piece=piece)
    sent += ring_all_gather(work, schedule=schedule, piece=piece)
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


def _ring_phase(tensor: torch.Tensor, phase: str, schedule: list | None, piece: int) -> int:
    """One pass of k-1 steps around the ring; in reduce-scatter received chunks are added, in all-gather kept.

    The chunk a rank receives at one step is the one it sends at the next, so the ring runs piece by
    piece: a piece goes on to the right as soon as it has arrived (and, in reduce-scatter, been added
    in), while the rest of its chunk is still on the way. No rank waits for a whole step to finish.
    """
    if piece < 1:
        raise ValueError(f"piece must be at least 1 element; got {piece}.")
    rank, k = dist.get_rank(), dist.get_world_size()
    if k == 1:
        return 0
    if not tensor.is_contiguous():
        raise ValueError("tensor must be contiguous, so that its chunks are views that the ring can write into.")
    left, right = (rank - 1) % k, (rank + 1) % k
    chunks = torch.tensor_split(tensor.view(-1), k)
    first = rank if phase == "reduce-scatter" else owned_chunk(rank, k)
    order = [chunks[(first - step) % k] for step in range(k)]  # order[s]: sent at step s, received at step s - 1
    # Post every send of step 0 at once: if every rank sent first and waited, a blocking transport
    # would leave the whole ring waiting.
    sends = [dist.isend(p, dst=right, tag=_tag(0, j)) for j, p in enumerate(_pieces(order[0], piece))]
    arriving = [(step, j, p) for step in range(k - 1) for j, p in enumerate(_pieces(order[step + 1], piece))]
    for step, j, p in _receive(arriving, left, add=phase == "reduce-scatter"):
        if step < k - 2:  # complete here, so pass it on: it is part of what the next step sends
            sends.append(dist.isend(p, dst=right, tag=_tag(step + 1, j)))
    for req in sends:
        req.wait()
    sent = 0
    for step in range(k - 1):
        nbytes = order[step].numel() * order[step].element_size()
        _note(schedule, [(phase, step, rank, right, (first - step) % k, nbytes)])
        sent += nbytes
    return sent


def _receive(arriving: list, left: int, *, add: bool):
    """Receive each ``(step, j, piece)`` of ``arriving`` from the left, in order; yield it once it is complete.

    Without ``add`` (all-gather) a piece is overwritten, so every receive lands in the piece itself and
    all are posted at once. With ``add`` (reduce-scatter) what arrives must be added to the piece, so it
    lands in one of two spare buffers first: the next piece arrives in one while the current one is added
    from the other, as gloo's own ring does, and the spares are reused for every piece.
    """
    if not add:
        recvs = [dist.irecv(piece, src=left, tag=_tag(step, j)) for step, j, piece in arriving]
        for req, item in zip(recvs, arriving):
            req.wait()
            yield item
        return
    if not arriving:
        return
    longest = max(piece.numel() for _, _, piece in arriving)
    spares = [arriving[0][2].new_empty(longest) for _ in range(min(2, len(arriving)))]

    def post(i):
        step, j, piece = arriving[i]
        buf = spares[i % 2][: piece.numel()]
        return dist.irecv(buf, src=left, tag=_tag(step, j)), buf

    pending = [post(i) for i in range(min(2, len(arriving)))]
    for i, item in enumerate(arriving):
        req, buf = pending.pop(0)
        req.wait()
        item[2].add_(buf)  # in place, into the tensor itself
        if i + 2 < len(arriving):
            pending.append(post(i + 2))  # its spare is free again
        yield item


def _tag(step: int, piece: int) -> int:
    return step * MAX_PIECES + piece


def _pieces(chunk: torch.Tensor, piece: int) -> tuple:
    """A chunk cut into messages of at most ``piece`` elements (none for an empty chunk), at most MAX_PIECES of them."""
    if not chunk.numel():
        return ()
    return torch.tensor_split(chunk, min(MAX_PIECES, -(-chunk.numel() // piece)))


def _note(schedule: list | None, transfers) -> None:
    if schedule is None:
        return
    for phase, step, src, dst, chunk, nbytes in transfers:
        schedule.append({"phase": phase, "step": step, "src": src, "dst": dst, "chunk": chunk, "bytes": nbytes})


def compare_with_all_reduce(rank: int, world_size: int, sizes, seed: int = 0, piece: int = PIECE) -> dict:
    """Worker: run the built-in and both hand-written all-reduces on the same inputs; return numpy results.

    For each element count ``n`` in ``sizes`` and two kinds of float32 input,
    ``"int"`` (integer values, so every summation order gives the same bits) and
    ``"rand"`` (normal floats, equal only within rounding), the returned dict maps
    ``(kind, n)`` to a dict with the input, each implementation's output, bytes
    sent, the ring's and the server's schedules, and the ring's tensor right after
    its reduce-scatter. ``piece`` is the ring's message size in elements.
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
            ring_bytes = ring_all_reduce(ring, schedule=ring_schedule, piece=piece)
            ring_reduce_scatter(half, piece=piece)
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
