"""All-reduce written by hand from point-to-point sends and receives (Step 5).

Call these inside a rank, once the process group is up (for example from a
worker started by :func:`dpviz.engine.launch.launch`)::

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
has arrived (and been added in): the k-1 steps overlap, as in gloo's own ring. In
``ring_all_reduce`` the all-gather's first step sends the chunk the reduce-scatter's
last step completed, so the two phases overlap as well. Pieces change when bytes move,
never which bytes move or the order in which they are summed.
"""

from __future__ import annotations

import threading

import torch
import torch.distributed as dist

RING_PHASES = ("reduce-scatter", "all-gather")
PIECE = 1 << 19      # elements per message (2 MiB of float32): a chunk goes as several, so adds overlap transfers;
                     # smaller pieces cost more CPU per byte (measured with benchmarks/bench_allreduce.py --pieces)
MAX_PIECES = 64      # pieces per chunk at most; tags are step * MAX_PIECES + piece, steps numbered through both phases
SERVER_PHASES = ("push", "pull")
_SPARES = threading.local()  # this thread's spare receive buffers, by dtype and device (_spares)


def owned_chunk(rank: int, world_size: int) -> int:
    """The chunk whose full sum ``rank`` holds after the ring's reduce-scatter."""
    return (rank + 1) % world_size


def ring_reduce_scatter(tensor: torch.Tensor, *, schedule: list | None = None, piece: int = PIECE) -> int:
    """First half of the ring: afterwards this rank's :func:`owned_chunk` holds the sum over ranks.

    The other chunks hold partial sums. ``tensor`` must be contiguous; returns bytes sent. ``piece``:
    elements per message, the same on every rank (it changes the timing, never the result).
    """
    return _ring(tensor, ("reduce-scatter",), schedule, piece)


def ring_all_gather(tensor: torch.Tensor, *, schedule: list | None = None, piece: int = PIECE) -> int:
    """Second half of the ring: pass each rank's owned chunk around until every rank has them all."""
    return _ring(tensor, ("all-gather",), schedule, piece)


def ring_all_reduce(tensor: torch.Tensor, *, schedule: list | None = None, piece: int = PIECE) -> int:
    """Sum ``tensor`` over ranks in place with a ring (reduce-scatter, then all-gather); return bytes sent.

    The two phases are one pass around the ring: each piece of the owned chunk starts its all-gather as soon
    as the reduce-scatter has completed it, so the ring does not empty between them. The same bytes move, and
    are summed in the same order, as with :func:`ring_reduce_scatter` followed by :func:`ring_all_gather`.
    """
    if dist.get_world_size() == 1:
        return 0
    work = tensor if tensor.is_contiguous() else tensor.contiguous()
    sent = _ring(work, RING_PHASES, schedule, piece)
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


def _ring(tensor: torch.Tensor, phases: tuple, schedule: list | None, piece: int) -> int:
    """Each of ``phases`` in turn, k-1 steps around the ring each: in reduce-scatter received chunks are added,
    in all-gather kept. Returns bytes sent.

    The chunk a rank receives at one step is the one it sends at the next, and that holds across the two
    phases too: the reduce-scatter's last step completes the owned chunk, which is what the all-gather sends
    first. So the ring runs piece by piece, its steps numbered on through both phases: a piece goes on to the
    right as soon as it has arrived (and, in reduce-scatter, been added in), while the rest of its chunk is
    still on the way. No rank waits for a whole step, or a whole phase, to finish.
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
    sends_at, added, kept = [], [], []  # sends_at[n]: the pieces sent at step n; added, kept: (n, j, piece) received at step n
    sent = 0
    for phase in phases:
        first = rank if phase == "reduce-scatter" else owned_chunk(rank, k)
        order = [chunks[(first - step) % k] for step in range(k)]  # order[s]: sent at step s, received at step s - 1
        for step in range(k - 1):
            n = len(sends_at)
            sends_at.append(_pieces(order[step], piece))
            received = added if phase == "reduce-scatter" else kept
            received += [(n, j, p) for j, p in enumerate(_pieces(order[step + 1], piece))]
            nbytes = order[step].numel() * order[step].element_size()
            _note(schedule, [(phase, step, rank, right, (first - step) % k, nbytes)])
            sent += nbytes
    last = len(sends_at) - 1
    # Every send of step 0 is posted at once: if every rank sent first and waited, a blocking transport would
    # leave the whole ring waiting. sending holds each send not yet waited for, by (step, piece).
    sending = {(0, j): dist.isend(p, dst=right, tag=_tag(0, j)) for j, p in enumerate(sends_at[0])}

    def pass_on(n, j, p):
        if n < last:  # complete here, so it goes on: it is part of what the next step sends
            sending[(n + 1, j)] = dist.isend(p, dst=right, tag=_tag(n + 1, j))

    # A kept piece is received in place. In an all-reduce the all-gather's step s lands in the chunk the
    # reduce-scatter sent at its step s, k-1 steps earlier, so those receives are posted once that step is over
    # and its sends are done; the all-gather alone posts all its receives at once.
    fused = phases == RING_PHASES
    receiving = {} if fused else {(n, j): dist.irecv(p, src=left, tag=_tag(n, j)) for n, j, p in kept}
    over = 0  # reduce-scatter steps over: every piece received, added and passed on, and the receives into them posted

    def close_steps_before(n):  # every reduce-scatter step before n is over: wait for its sends, post into them
        nonlocal over
        for m, j, p in kept:
            if over <= m - (k - 1) < n:
                sending.pop((m - (k - 1), j)).wait()
                receiving[(m, j)] = dist.irecv(p, src=left, tag=_tag(m, j))
        over = max(over, n)

    for n, j, p in _add_arriving(added, left):
        if fused:
            close_steps_before(n)
        pass_on(n, j, p)
    if fused:
        close_steps_before(k - 1)
    for n, j, p in kept:
        receiving.pop((n, j)).wait()
        pass_on(n, j, p)
    for req in sending.values():
        req.wait()
    return sent


def _add_arriving(arriving: list, left: int):
    """Receive each ``(step, j, piece)`` of ``arriving`` from the left, in order, add it into the piece, and
    yield it.

    What arrives lands in one of two spare buffers first: the next piece arrives in one while the current
    one is added from the other, as gloo's own ring does. The spares are reused for every piece, and kept
    for the next call (:func:`_spares`).
    """
    if not arriving:
        return
    longest = max(piece.numel() for _, _, piece in arriving)
    spares = _spares(arriving[0][2], longest)

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


def _spares(like: torch.Tensor, numel: int) -> list:
    """Two spare buffers of at least ``numel`` elements of ``like``'s dtype and device, kept from one call to the next.

    Fresh buffers for every call cost more than the ring's adds: at k = 4 and 4 MiB each rank took about 360 page
    faults a call, some 1 ms of CPU, on first touching them (benchmarks/bench_allreduce.py). A pair grows when a
    call needs more, so a thread holds two of the largest pieces it has received (2 x PIECE elements at most with
    the default piece). Each thread keeps its own, so rings run from two threads never share a buffer.
    """
    if not hasattr(_SPARES, "pairs"):
        _SPARES.pairs = {}
    key = (like.dtype, like.device)
    spares = _SPARES.pairs.get(key)
    if spares is None or spares[0].numel() < numel:
        spares = _SPARES.pairs[key] = [like.new_empty(numel) for _ in range(2)]
    return spares


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
    its reduce-scatter and after its all-gather, run as two calls (``"phases"``).
    ``piece`` is the ring's message size in elements.
    """
    gen = torch.Generator().manual_seed(seed * 1000 + rank)
    out = {}
    for n in sizes:
        for kind in ("int", "rand"):
            if kind == "int":
                x = torch.randint(-50, 50, (n,), generator=gen).float()
            else:
                x = torch.randn(n, generator=gen)
            ref, ring, two_calls, server = x.clone(), x.clone(), x.clone(), x.clone()
            dist.all_reduce(ref)
            ring_schedule, server_schedule, phases_schedule = [], [], []
            ring_bytes = ring_all_reduce(ring, schedule=ring_schedule, piece=piece)
            phases_bytes = ring_reduce_scatter(two_calls, schedule=phases_schedule, piece=piece)
            after_reduce_scatter = two_calls.numpy().copy()
            phases_bytes += ring_all_gather(two_calls, schedule=phases_schedule, piece=piece)
            server_bytes = parameter_server_all_reduce(server, schedule=server_schedule)
            out[(kind, n)] = {
                "input": x.numpy(),
                "all_reduce": ref.numpy(),
                "ring": ring.numpy(),
                "after_reduce_scatter": after_reduce_scatter,
                "phases": two_calls.numpy(),  # ring_reduce_scatter, then ring_all_gather: what ring_all_reduce runs as one pass
                "phases_bytes": phases_bytes,
                "phases_schedule": phases_schedule,
                "parameter_server": server.numpy(),
                "ring_bytes": ring_bytes,
                "server_bytes": server_bytes,
                "ring_schedule": ring_schedule,
                "server_schedule": server_schedule,
            }
    return out
