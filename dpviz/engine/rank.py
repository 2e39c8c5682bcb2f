"""The rank side of a launch: what runs inside each of the k processes :func:`dpviz.engine.launch.launch` starts.

A rank first ties its life to the launching process (the OS kills it when its parent
dies, and a thread watches the launcher), names itself ``dpviz-rank-N``, takes the
launcher's environment, then unpickles the worker, joins the process group through
the run's file store and runs ``worker(rank, world_size, *args)``. It leaves its
result, or its traceback, in the run's folder; :func:`report_progress` and the phase
marks tell the launcher through shared memory that it is not stuck.

This module imports torch only inside a rank's work, so a spawned rank is guarded
against its parent's death before it spends seconds importing torch.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
import traceback

from dpviz.engine import private

WATCH_INTERVAL = 0.2  # seconds between a rank's checks that its parent is alive
RESULT_LIMIT = 64 << 20  # bytes of a result read as data (a launch that ran a reader's code); more is refused
# Tests only: the path of a file. The first rank that removes it fails to join, with the error gloo raises when
# a peer's connection closes during the rendezvous (tests/test_launch_rejoin.py; see launch's REJOIN_ATTEMPTS).
JOIN_FAULT_VARIABLE = "DPVIZ_TEST_JOIN_FAULT"

# A rank's phases, as the launcher sees them through the shared state.
_SPAWNED, _STARTED, _JOINED, _DONE = 0, 1, 2, 3
_FIELDS = 3  # per rank in the shared state: last step reported, progress count, phase

# Set inside a rank by _rank_entry; read by report_progress().
_state = None
_rank = None


def report_progress(step: int | None = None) -> None:
    """Called by a worker inside a rank after each step; shows progress and tells the launcher the rank is not stuck.

    Without a step it reports work that is not a step, and leaves the last step as it was: a worker calls it as it
    goes through long work after its loop (digests, a check computed again, per-example gradients), which counts
    as progress like a step does. Returning the result counts too: writing it reports progress as it goes.
    """
    if _state is not None:
        i = _FIELDS * _rank
        if step is not None:
            _state[i] = step
        _state[i + 1] += 1


def _mark(phase: int) -> None:
    i = _FIELDS * _rank
    _state[i + 2] = phase
    _state[i + 1] += 1


def _pid_alive(pid: int) -> bool:
    if sys.platform == "win32":
        return True  # os.kill(pid, 0) is not a probe on Windows: count it as alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


# --- the run's folder: one result or one traceback per rank ---

def _err_path(outdir: str, rank: int) -> str:
    return os.path.join(outdir, f"rank{rank}.err")


def _out_path(outdir: str, rank: int, as_data: bool = False) -> str:
    return os.path.join(outdir, f"rank{rank}.json" if as_data else f"rank{rank}.pkl")


def _join_failed_path(outdir: str, rank: int) -> str:
    """Present when the rank's error was raised while it joined the process group (before any of the worker ran)."""
    return os.path.join(outdir, f"rank{rank}.join-failed")


class UnreadableResult(ValueError):
    """A rank's result that is not what a result may be (a rank that ran a reader's code wrote something else)."""


def _read_result(outdir: str, rank: int, as_data: bool = False):
    """A rank's result: a pickle of plain data and dpviz's classes, or (``as_data``, a launch that ran a reader's
    code) JSON read by :func:`dpviz.engine.sandbox.decode`, which builds numbers, text, lists, dicts and arrays only."""
    if as_data:
        from dpviz.engine import sandbox

        with open(_out_path(outdir, rank, True), "rb") as f:
            data = f.read(RESULT_LIMIT + 1)
        if len(data) > RESULT_LIMIT:
            raise UnreadableResult(f"rank {rank}'s result is over {RESULT_LIMIT:,} bytes: refused unread")
        try:
            return sandbox.decode(json.loads(data))
        except (ValueError, TypeError, KeyError, RecursionError) as e:
            raise UnreadableResult(f"rank {rank}'s result is not data: {type(e).__name__}") from None
    with open(_out_path(outdir, rank), "rb") as f:
        try:
            return _ResultUnpickler(f).load()
        except pickle.UnpicklingError as e:
            raise UnreadableResult(str(e)) from None


# What a rank's result may be made of: Python's plain data, numpy arrays and scalars, and dpviz's own classes
# (records, configs). A result is read in the caller's process, and a rank may run a student's code (the exercise
# checkers): a pickle that names anything else (os.system, builtins.eval, a dpviz function) is refused, not run.
_PLAIN = {("builtins", name) for name in ("dict", "list", "tuple", "set", "frozenset", "int", "float", "complex",
                                          "str", "bytes", "bytearray", "bool", "slice", "range")}
_PLAIN |= {("collections", "OrderedDict"), ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "Path")}
_NUMPY = {"_reconstruct", "scalar", "dtype", "ndarray", "_frombuffer"}


class _ResultUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        root = module.split(".")[0]
        if "." in name:  # pickle's dotted names walk attributes: ('dpviz.x', 'subprocess.Popen') is Popen
            raise pickle.UnpicklingError(f"a rank's result names {module}.{name}, which is not data: refused")
        if (module, name) in _PLAIN or (root == "numpy" and (name in _NUMPY or name.endswith("DType"))):
            return super().find_class(module, name)
        if root == "dpviz":
            found = super().find_class(module, name)
            if (isinstance(found, type) and not issubclass(found, BaseException) and found.__module__ == module
                    and found.__qualname__ == name):  # a class defined there, not one it imported
                return found
        raise pickle.UnpicklingError(f"a rank's result names {module}.{name}, which is not data: refused")


def _write_result(outdir: str, rank: int, result, as_data: bool = False) -> None:
    path = _out_path(outdir, rank, as_data)
    with open(path + ".tmp", "wb") as f:
        if as_data:
            from dpviz.engine import sandbox

            f.write(json.dumps(sandbox.encode(result)).encode())
        else:
            pickle.dump(result, _ReportingFile(f), protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(path + ".tmp", path)


class _ReportingFile:
    """A file whose writes report progress every CHUNK bytes: a rank's result of a few GB (a long run's every
    gradient) takes a while to write on a loaded machine, and that is the rank's work, not a stall."""

    CHUNK = 16 << 20  # bytes

    def __init__(self, file):
        self.file = file

    def write(self, data) -> int:
        view = memoryview(data)
        if view.nbytes <= self.CHUNK or not view.c_contiguous:
            report_progress()
            return self.file.write(data)
        view = view.cast("B")
        for start in range(0, view.nbytes, self.CHUNK):
            report_progress()
            self.file.write(view[start:start + self.CHUNK])
        return view.nbytes


def _write_error(outdir: str, rank: int, text: str) -> None:
    tmp = _err_path(outdir, rank) + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, _err_path(outdir, rank))


# --- a rank's life tied to its parent's ---

def die_with_parent(parent_pid: int, run_dir: str | None = None) -> None:
    """Make sure this rank ends within a fraction of a second of the launching process, however that one ends,
    and of its run (``run_dir``, the run's folder, which its launcher removes once it has reaped the ranks).

    The rank's parent is the launcher (spawn) or the launcher's fork server, which exits the moment the
    launcher does. Two guards: the OS kills the rank when that parent dies (Linux's PR_SET_PDEATHSIG, which
    Python has no public call for: :func:`dpviz.engine.private.die_with_parent`; it acts even on a rank that is
    stopped or busy in C), and a thread watches the launcher (everywhere, public: the parent's sentinel).

    The same thread watches the run's folder. A rank the launcher asked for and never heard back about (an
    interrupt that lands while the fork server is still importing torch: the request waits in the server's queue
    while the launcher gives up, reaps what it started and removes the folder) is forked later, for a run that
    is over: it finds no folder and leaves at once, instead of waiting minutes for peers that will never come.
    """
    private.die_with_parent(signal.SIGKILL)
    ppid = os.getppid()
    if (ppid == 1 and parent_pid != 1) or not _pid_alive(parent_pid):  # it died before the line above took effect
        os._exit(1)
    if run_dir is not None and not os.path.isdir(run_dir):
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid, ppid, run_dir), name="dpviz-parent-watchdog",
                     daemon=True).start()


def _watch_parent(parent_pid: int, ppid: int, run_dir: str | None = None) -> None:
    """Daemon thread: end the rank at once when the parent is gone (its pipe closes, or we are re-parented), or
    when its run's folder is (the launcher has finished with the run)."""
    parent = multiprocessing.parent_process()
    sentinel = getattr(parent, "sentinel", None)
    while True:
        if sentinel is not None:
            try:
                if multiprocessing.connection.wait([sentinel], timeout=WATCH_INTERVAL):
                    os._exit(1)
            except OSError:
                sentinel = None
        else:
            time.sleep(WATCH_INTERVAL)
        if os.getppid() != ppid or not _pid_alive(parent_pid) or (run_dir is not None and not os.path.isdir(run_dir)):
            os._exit(1)


def _name_process(name: str) -> None:
    """Show the rank as ``dpviz-rank-N`` in ps, top and psutil's name() (Linux), instead of one more ``python``.

    Written to ``/proc/self/comm``, Linux's file for a process's name (what ``prctl(PR_SET_NAME)`` sets, at most
    15 bytes); called from the rank's main thread, whose name is the process's.
    """
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/comm", "wb") as f:
                f.write(name.encode()[:15])
        except OSError:
            pass


# --- a rank's work ---

def _rank_entry(parent_pid, rank, k, backend, store, threads, group_timeout, outdir, state, payload, where) -> None:
    """Entry point of one rank: first tie its life to the launcher's, then take its environment, import and run."""
    die_with_parent(parent_pid, outdir)
    _name_process(f"dpviz-rank-{rank}")
    if where != os.environ:  # (multiprocessing itself moves the rank to the launcher's folder)
        os.environ.clear()
        os.environ.update(where)
    global _state, _rank
    _state, _rank = state, rank
    _mark(_STARTED)
    try:
        worker, args, untrusted = pickle.loads(payload)  # imports torch and the worker's module
    except BaseException:
        _write_error(
            outdir, rank,
            traceback.format_exc() + "\n(the worker must be a top-level function of a module every rank can import, "
            "not one defined in a notebook cell)\n",
        )
        os._exit(1)
    _rank_main(worker, rank, k, backend, store, threads, group_timeout, outdir, args, untrusted)


def _injected_join_fault() -> None:
    """Raise gloo's lost-peer error instead of joining, once per run, when a test asks for it (JOIN_FAULT_VARIABLE)."""
    path = os.environ.get(JOIN_FAULT_VARIABLE)
    if not path:
        return
    try:
        os.unlink(path)  # succeeds in one rank only
    except FileNotFoundError:
        return
    raise RuntimeError("Gloo connectFullMesh failed with [pair.cc] Connection closed by peer [127.0.0.1]:1 "
                       f"(injected by the test through {JOIN_FAULT_VARIABLE})")


def _rank_main(worker, rank, k, backend, store, threads, group_timeout, outdir, args, untrusted=False) -> None:
    """Join the group, run the worker, write its result or its traceback.

    ``untrusted``: the worker runs a reader's code. Once the group is joined the rank becomes the sandbox user
    for good where it can (root: :func:`dpviz.engine.confine.drop_privileges`), with its limits, and its result
    goes back as JSON data, never a pickle."""
    import torch
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(k), OMP_NUM_THREADS=str(threads))
    torch.set_num_threads(threads)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        try:
            _injected_join_fault()
            dist.init_process_group(
                backend,
                init_method=f"file://{store}",
                rank=rank,
                world_size=k,
                timeout=datetime.timedelta(seconds=group_timeout),
            )
        except BaseException:
            open(_join_failed_path(outdir, rank), "w").close()  # before the error file, which the launcher waits for
            raise
        _mark(_JOINED)
        # No rank starts its work before every rank has joined: a rank whose work is short could otherwise finish
        # and close its connections while a slower peer is still inside gloo's rendezvous, which then fails with
        # "Connection closed by peer" (seen twice in a row in a clean clone's CI, under the browser test's load).
        dist.barrier(device_ids=[rank]) if backend == "nccl" else dist.barrier()
        if untrusted:
            from dpviz.engine import confine

            confined = confine.drop_privileges(give=[store])
            if confined:
                private.die_with_parent(signal.SIGKILL)  # (a change of user clears it)
            confine.limit_resources(memory=False, processes=confined)  # torch reserves more memory than it uses
        result = worker(rank, k, *args)
        _mark(_DONE)
        _write_result(outdir, rank, result, untrusted)
    except BaseException:
        _write_error(outdir, rank, traceback.format_exc())
        os._exit(1)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
