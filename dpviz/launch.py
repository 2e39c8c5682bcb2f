"""Start k ranks of a torch.distributed process group and collect what each returns.

    from dpviz.launch import launch
    results = launch(my_module.worker, k=4, args=(config,))   # one entry per rank

``worker(rank, world_size, *args)`` must be a top-level function in an importable
module: ranks are started with the ``spawn`` method, and a spawned process cannot
unpickle a function defined in a notebook cell. Each rank's return value should
hold numpy arrays and plain Python values; it travels back through a pickle file,
never as a torch tensor through a queue (the shared-memory handoff breaks when the
rank exits first).

What the launcher guarantees:

* a free TCP port chosen at run time, on 127.0.0.1;
* ``backend="auto"`` picks nccl when every rank can have its own GPU, gloo otherwise;
* an exception in any rank is raised here as :class:`RankError`, naming the rank
  and carrying its traceback;
* a rank that hangs ends at ``timeout`` seconds with :class:`RankTimeout`, which
  names the ranks that lagged;
* every child is reaped on success, failure, timeout and KeyboardInterrupt;
* threads per rank are set so k ranks share the cores without oversubscribing
  them, with a warning when k exceeds the core count.
"""

from __future__ import annotations

import datetime
import os
import pickle
import shutil
import socket
import tempfile
import time
import traceback
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from dpviz.checks import check_choice, check_int, check_real

BACKENDS = ("auto", "gloo", "nccl")

# Set inside a rank by the launcher; read by report_progress().
_progress_slots = None
_progress_rank = None


class RankError(RuntimeError):
    """A rank raised an exception; ``rank`` and ``rank_traceback`` say where and why."""

    def __init__(self, rank: int, rank_traceback: str):
        self.rank = rank
        self.rank_traceback = rank_traceback
        last = rank_traceback.strip().splitlines()[-1] if rank_traceback.strip() else "unknown error"
        super().__init__(f"rank {rank} failed: {last}\n\n--- traceback from rank {rank} ---\n{rank_traceback}")


class RankTimeout(TimeoutError):
    """Ranks were still running at the timeout; ``ranks`` lists the ones that lagged."""

    def __init__(self, ranks: list[int], timeout: float, detail: str):
        self.ranks = ranks
        super().__init__(f"rank {', '.join(map(str, ranks))} hung: still running after the timeout of {timeout:g} s ({detail}).")


def cpu_count() -> int:
    """The cores this process may use (the affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def resolve_backend(backend: str, k: int) -> str:
    """Turn ``auto`` into a concrete backend and check that nccl has a GPU per rank."""
    check_choice("backend", backend, BACKENDS)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend == "auto":
        return "nccl" if gpus >= k else "gloo"
    if backend == "nccl" and gpus < k:
        raise ValueError(f"backend 'nccl' needs one GPU per rank, so k must be <= {gpus} GPUs on this machine; got k={k}.")
    return backend


def threads_per_rank(k: int) -> int:
    """How many intra-op threads each of k ranks gets so that together they fill the cores once."""
    return max(1, cpu_count() // k)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing is listening on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def report_progress(step: int) -> None:
    """Called by a worker inside a rank after each step; lets the launcher show progress and find a hung rank."""
    if _progress_slots is not None:
        _progress_slots[_progress_rank] = step


def launch(
    worker,
    k: int,
    *,
    args: tuple = (),
    backend: str = "auto",
    timeout: float = 60.0,
    threads: int | None = None,
    total_steps: int | None = None,
    progress: bool = False,
) -> list:
    """Run ``worker(rank, k, *args)`` in k processes of one process group; return their results in rank order.

    ``timeout`` (seconds) bounds the whole run, process start included. With
    ``progress=True`` and ``total_steps`` set, a bar follows the slowest rank.
    """
    k = check_int("k", k, low=1, high=1024)
    timeout = check_real("timeout", timeout, low=0, low_open=True)
    backend = resolve_backend(backend, k)
    cores = cpu_count()
    if threads is None:
        threads = threads_per_rank(k)
    threads = check_int("threads", threads, low=1, high=4096)
    if backend == "gloo" and k > cores:
        warnings.warn(
            f"k={k} ranks share {cores} cores: ranks take turns on the CPU, so measured times include that oversubscription.",
            stacklevel=2,
        )

    ctx = mp.get_context("spawn")  # a local context: the global start method is left alone
    slots = ctx.Array("i", [-1] * k, lock=False)
    outdir = tempfile.mkdtemp(prefix="dpviz-launch-")
    port = free_port()
    procs = []
    bar = _progress_bar(total_steps) if progress and total_steps else None
    try:
        for rank in range(k):
            p = ctx.Process(
                target=_rank_main,
                args=(worker, rank, k, backend, port, threads, timeout, outdir, slots, args),
                name=f"dpviz-rank-{rank}",
                daemon=True,
            )
            p.start()
            procs.append(p)
        _wait(procs, outdir, slots, timeout, bar)
        return [_read_result(outdir, rank) for rank in range(k)]
    finally:
        if bar is not None:
            bar.close()
        _reap(procs)
        shutil.rmtree(outdir, ignore_errors=True)


def _progress_bar(total):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="steps (slowest rank)", leave=False)


def _wait(procs, outdir, slots, timeout, bar) -> None:
    """Poll until every rank exits cleanly; raise on the first failure or at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        failed = [r for r in range(len(procs)) if os.path.exists(_err_path(outdir, r))]
        if failed:
            # The first rank to fail usually makes its peers fail too (a broken
            # connection); report the one whose error file was written first.
            first = min(failed, key=lambda r: os.path.getmtime(_err_path(outdir, r)))
            with open(_err_path(outdir, first)) as f:
                raise RankError(first, f.read())
        codes = [p.exitcode for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0) and not os.path.exists(_err_path(outdir, rank)):
                time.sleep(0.2)  # give a failing rank a moment to finish writing its traceback
                if os.path.exists(_err_path(outdir, rank)):
                    break
                raise RankError(rank, f"process exited with code {code} without a Python traceback (killed, or crashed in native code)")
        if all(code == 0 for code in codes):
            return
        if bar is not None and min(slots) + 1 > bar.n:
            bar.update(min(slots) + 1 - bar.n)
        if time.monotonic() > deadline:
            running = [r for r, p in enumerate(procs) if p.exitcode is None]
            steps = list(slots)
            lagging = [r for r in running if steps[r] == min(steps[q] for q in running)]
            if len(lagging) == len(running) or len(set(steps)) == 1:
                detail = "no rank got further than the others"
            else:
                detail = f"last step reported by each rank: {steps}"
            raise RankTimeout(lagging, timeout, detail)
        time.sleep(0.01)


def _reap(procs) -> None:
    """Make sure no rank outlives the call: terminate, then kill what is left."""
    for p in procs:
        if p.is_alive():
            p.terminate()
    end = time.monotonic() + 3.0
    for p in procs:
        p.join(max(0.0, end - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()


def _err_path(outdir: str, rank: int) -> str:
    return os.path.join(outdir, f"rank{rank}.err")


def _out_path(outdir: str, rank: int) -> str:
    return os.path.join(outdir, f"rank{rank}.pkl")


def _read_result(outdir: str, rank: int):
    with open(_out_path(outdir, rank), "rb") as f:
        return pickle.load(f)


def _rank_main(worker, rank, k, backend, port, threads, timeout, outdir, slots, args) -> None:
    """Entry point of one spawned rank: join the group, run the worker, write its result or its traceback."""
    global _progress_slots, _progress_rank
    _progress_slots, _progress_rank = slots, rank
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(k),
        OMP_NUM_THREADS=str(threads),
    )
    torch.set_num_threads(threads)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(
            backend,
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=k,
            timeout=datetime.timedelta(seconds=timeout),
        )
        result = worker(rank, k, *args)
        tmp = _out_path(outdir, rank) + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, _out_path(outdir, rank))
    except BaseException:
        tmp = _err_path(outdir, rank) + ".tmp"
        with open(tmp, "w") as f:
            f.write(traceback.format_exc())
        os.replace(tmp, _err_path(outdir, rank))
        os._exit(1)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
