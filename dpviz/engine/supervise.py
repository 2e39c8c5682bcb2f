"""Watching k running ranks from the launching process: failures and stalls named by rank, every child reaped.

* :func:`_wait` polls the ranks' shared state and the run folder until every rank exits
  cleanly, and raises :class:`RankError` for the first rank that failed, or
  :class:`RankTimeout` for a rank that stopped making progress (or at the run's deadline);
* :func:`_reap` terminates, then kills, whatever is left, and :class:`_ReapOnSigterm`
  makes a SIGTERM to the launcher reap the ranks before the launcher ends;
* :func:`_make_run_dir` makes a run's folder, with a lock its launcher holds for the whole run, and
  :func:`_sweep_stale_dirs` removes the folders whose lock nobody holds: those of launchers that were killed.

The errors are importable from :mod:`dpviz.engine.launch`, where users meet them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
import time

from dpviz.engine.forkserver import server_end
from dpviz.engine.rank import _FIELDS, _JOINED, _err_path, _join_failed_path

try:
    import fcntl
except ImportError:  # Windows: no flock, so no folder is ever known to be stale
    fcntl = None


class RankError(RuntimeError):
    """A rank failed; ``rank`` and ``rank_traceback`` say where and why.

    ``consequences`` maps the other ranks that failed after it (a broken connection, most often) to the last
    line of their error, so that the rank named is the one that failed first, not a peer that lost it.
    ``rejoinable`` is true when the rank failed while joining the group because a peer's connection closed
    (:func:`lost_peer_while_joining`): nothing of the worker ran there, and the launch may start again.
    """

    def __init__(self, rank: int, rank_traceback: str, consequences: dict | None = None, *, rejoinable: bool = False,
                 summary: str | None = None):
        self.rank = rank
        self.rejoinable = rejoinable
        self.rank_traceback = rank_traceback
        self.consequences = dict(consequences or {})
        last = rank_traceback.strip().splitlines()[-1] if rank_traceback.strip() else "unknown error"
        then = ""
        if self.consequences:
            then = ("\n\nthen, as a consequence: " +
                    "; ".join(f"rank {r}: {line}" for r, line in sorted(self.consequences.items())))
        head = summary or f"rank {rank} failed: {last}"
        super().__init__(f"{head}{then}\n\n--- traceback from rank {rank} ---\n{rank_traceback}")


class RankTimeout(TimeoutError):
    """A rank stalled (or the run passed its deadline); ``ranks`` lists the ones named, ``steps`` every rank's last step.

    A step of -1 means the rank had reported no step yet. ``observed`` maps each rank named to what the launcher saw
    of its process when it gave up (:data:`OBSERVED`): "stopped" (SIGSTOP, a debugger), "memory" (in the kernel's
    uninterruptible sleep, most often waiting for memory to be swapped back in), "busy" (using the CPU while its
    peers slept), "waiting" (asleep), "starting" (never joined the group), or "unknown" (no /proc to read, or the
    process had just ended).
    """

    def __init__(self, ranks: list[int], message: str, steps: list[int] | None = None, observed: dict | None = None):
        self.ranks = list(ranks)
        self.steps = None if steps is None else list(steps)
        self.observed = dict(observed or {})
        super().__init__(message)


def _wait(procs, outdir, state, stall_timeout, start_allowance, deadline, bar, total_steps=None, server=None) -> None:
    """Poll until every rank exits cleanly; raise on the first failure, on a stalled run, or at the deadline.

    A run stalls when none of its running ranks has made progress for its allowance (``start_allowance`` until a
    rank has joined the group, ``stall_timeout`` after): a rank waiting in a collective for a peer that still
    reports progress (a check after the loop that one rank computes longer than the others) is not stuck, and a
    rank that stops makes its peers wait within a step. ``total_steps``, when known, words a stall after a rank's
    last step as such; ``server`` is the fork server the ranks came from, blamed if it died under them.
    """
    k = len(procs)
    begin = last_poll = time.monotonic()
    seen = [0] * k  # progress count last seen, per rank
    since = [begin] * k  # when each rank last made progress, as seen here
    while True:
        failed = [r for r in range(k) if os.path.exists(_err_path(outdir, r))]
        codes = [p.exitcode for p in procs]
        died = [r for r in range(k) if codes[r] not in (None, 0) and r not in failed]
        if failed or died:
            _raise_first_failure(procs, outdir, k, server)
        if all(code == 0 for code in codes):
            return

        now = time.monotonic()
        if now - last_poll > 1.0:
            # This process itself did not run for a while (suspended, stopped, starved of CPU):
            # the ranks may not have either, so that time does not count against them.
            since = [t + (now - last_poll) for t in since]
        last_poll = now
        steps = [state[_FIELDS * r] for r in range(k)]
        phases = [state[_FIELDS * r + 2] for r in range(k)]
        for r in range(k):
            count = state[_FIELDS * r + 1]
            if count != seen[r]:
                seen[r], since[r] = count, now
        if bar is not None and min(steps) + 1 > bar.n:
            bar.update(min(steps) + 1 - bar.n)

        running = [r for r in range(k) if codes[r] is None]
        allowance = [start_allowance if phases[r] < _JOINED else stall_timeout for r in range(k)]
        if running and all(now - since[r] > allowance[r] for r in running):
            # Every rank still running went quiet: the ones furthest behind are to blame (their peers wait for them).
            behind = min(steps[r] for r in running)
            named, observed = _stuck_first([r for r in running if steps[r] == behind], procs, phases)
            message = _stall_message(named, steps, phases, allowance[named[0]], observed, total_steps)
            raise RankTimeout(named, message, steps, observed)
        if deadline is not None and now - begin > deadline:
            behind = min(steps[r] for r in running)
            named = [r for r in running if steps[r] == behind]
            raise RankTimeout(named, _deadline_message(named, steps, deadline), steps)
        time.sleep(0.02)


# --- which rank failed first ---

GRACE = 0.3  # seconds: how long a peer's error may precede the exit code of the rank that really died


def _raise_first_failure(procs, outdir, k, server=None) -> None:
    """Raise RankError for the rank that failed first, with the others' errors as its consequences.

    A rank killed by a signal (the out-of-memory killer's SIGKILL, say) writes no error file, while its
    peers write theirs within milliseconds ("Connection reset by peer"). So a rank that died without one
    is the cause; among ranks that all wrote one, the earliest file is.
    """
    time.sleep(GRACE)  # let a dying rank's exit code, or a failing rank's traceback, arrive
    codes = [p.exitcode for p in procs]
    written = {r: os.path.getmtime(_err_path(outdir, r)) for r in range(k) if os.path.exists(_err_path(outdir, r))}
    silent = [r for r in range(k) if codes[r] not in (None, 0) and r not in written]
    errors = {r: _read(_err_path(outdir, r)) for r in written}
    gone = None if server is None else server_end(server)
    if silent and gone is not None:
        # A rank forked from the fork server learns its exit code from the server: with the server gone it reads
        # 255 whatever happened, and the kernel has killed it (its parent-death signal) anyway.
        first = min(silent)
        raise RankError(first, f"the fork server the ranks were started from {gone}; rank {first} and its peers "
                               "were ended with it, without a traceback", {r: _last_line(t) for r, t in errors.items()},
                        summary=f"the fork server the ranks were started from {gone}, and every rank ended with it "
                                "(no rank failed on its own; the next run starts a new server)")
    if silent:
        first = min(silent, key=lambda r: (codes[r] >= 0, r))  # a signal before a plain exit code
        why = _exit_words(codes[first])
        script = _unguarded_main()
        if codes[first] == 1 and script:
            why = (f"process exited with code 1 while starting: {script} launches ranks without the "
                   "`if __name__ == \"__main__\":` guard, so every rank ran the script again; put the call under "
                   "that guard")
        raise RankError(first, why, {r: _last_line(text) for r, text in errors.items()})
    first = min(written, key=lambda r: written[r])
    raise RankError(first, errors[first], {r: _last_line(t) for r, t in errors.items() if r != first},
                    rejoinable=lost_peer_while_joining(outdir, first, errors[first]))


# gloo's words when a peer's socket closes under it (or never opens) during the full-mesh rendezvous
LOST_PEER = re.compile(r"connectFullMesh failed|Connection (closed|reset) by peer")


def lost_peer_while_joining(outdir: str, rank: int, error: str) -> bool:
    """Whether ``rank`` failed inside ``init_process_group`` because a peer's connection closed.

    gloo's rendezvous on one machine very rarely loses a connection this way when several launchers start ranks
    at once (seen in about 1 in 40 first runs of a fresh fork server while two other processes did the same; never
    in 900 runs on warm servers); the worker never started on that rank, so the run can start again.
    """
    return os.path.exists(_join_failed_path(outdir, rank)) and LOST_PEER.search(error) is not None


def _unguarded_main() -> str | None:
    """The running script's path when it has no ``if __name__ == "__main__":`` guard (ranks re-import it), else None."""
    import sys

    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path or not os.path.isfile(path) or not path.endswith(".py"):
        return None  # a notebook, an interactive session, python -c or -m: nothing is re-imported
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError):
        return None
    # Any comparison of __name__ with "__main__" counts as a guard, however written (`"__main__" == __name__`):
    # the launcher refuses to start ranks from a script this says is unguarded, so it errs on the side of guarded.
    guarded = re.search(r"__name__", source) and re.search(r"""['"]__main__['"]""", source)
    return None if guarded else path


def _exit_words(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (what the out-of-memory killer sends)" if -code == signal.SIGKILL else ""
        return f"process was killed by {name}{hint}, exit code {code}, without a Python traceback"
    return f"process exited with code {code} without a Python traceback (crashed in native code, or os._exit)"


def _read(path) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "unknown error"


# --- which rank stalled first, and what its process was doing ---

PROC = "/proc"  # where process states are read (Linux); a test points it at an empty folder to play a system without


def _read_proc(pid: int, name: str) -> str | None:
    """The text of ``PROC/pid/name``, or None where it cannot be read (no /proc, as on macOS, or the process ended)."""
    try:
        with open(os.path.join(PROC, str(pid), name)) as f:
            return f.read()
    except OSError:
        return None


def _proc_stat(pid) -> tuple[str, int] | None:
    """A process's scheduler state letter and CPU ticks used, or None when they cannot be read."""
    text = _read_proc(pid, "stat")
    try:
        fields = text.rsplit(")", 1)[1].split()
        return fields[0], int(fields[11]) + int(fields[12])
    except (AttributeError, IndexError, ValueError):
        return None


OBSERVED = ("stopped", "memory", "busy", "waiting", "starting", "unknown")  # RankTimeout.observed's words
SAMPLES, SAMPLE_GAP = 21, 0.05  # looks at each candidate's process, seconds apart: 1 s in all


def _stuck_first(candidates, procs, phases) -> tuple[list[int], dict]:
    """Of ranks that stopped reporting at the same step, the ones whose progress stopped first, and what was seen.

    Ranks waiting in a collective for a stuck peer stop reporting too, but they sleep there. So a rank
    that is stopped (SIGSTOP, a debugger) is named alone; failing that, one held in the kernel's
    uninterruptible sleep (state D: thrashing for memory, a hung disk) while the others sleep; failing that,
    one still burning CPU while the others sleep (a loop that never ends); otherwise every candidate is.
    Each rank's state is sampled over 1 s, since a thrashing rank is in D only now and then, and a busy rank on a
    loaded machine gets only a slice of a core (4 % at a load of 50 on 2 cores: 4 ticks in that second).
    """
    seen = {r: [] for r in candidates}
    for i in range(SAMPLES):
        for r in candidates:
            seen[r].append(_proc_stat(procs[r].pid))
        if i + 1 < SAMPLES:
            time.sleep(SAMPLE_GAP)
    states = {r: _observed(seen[r], phases[r]) for r in candidates}
    for word in ("stopped", "memory", "busy"):
        some = [r for r in candidates if states[r] == word]
        if some and (word == "stopped" or len(some) < len(candidates) or len(candidates) == 1):
            return some, {r: states[r] for r in some}
    return list(candidates), {r: states[r] for r in candidates}


def _ticks(samples) -> int:
    """CPU ticks (1/100 s) a process used between the first and the last of its samples that could be read."""
    read = [s for s in samples if s is not None]
    return read[-1][1] - read[0][1] if len(read) > 1 else 0


def _observed(samples, phase) -> str:
    """What a rank's process samples (state letter, CPU ticks; None where unread) show it was doing."""
    read = [s for s in samples if s is not None]
    if not read or len(read) < len(samples) / 2:
        return "starting" if phase < _JOINED and read else "unknown"
    if all(s[0] in ("T", "t") for s in read):
        return "stopped"
    if any(s[0] == "D" for s in read):
        return "memory"
    if _ticks(samples) >= 3:  # >= 0.03 s of CPU in the second looked at; a rank asleep in a collective uses none
        return "busy"
    return "starting" if phase < _JOINED else "waiting"


# --- what a timeout says ---

def _ranks_words(ranks) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _when(step, total, many) -> str:
    """Where in the run a rank is, from its last step: "before its first step", "after step 7", or after the loop."""
    if step < 0:
        return "before their first step" if many else "before its first step"
    if total and step >= total - 1:
        return f"after finishing all {total} steps (in the work after the loop)"
    return f"after step {step}"


WHAT_WAS_SEEN = {
    "memory": ", waiting on memory (its process was in the kernel's uninterruptible sleep, which is most often "
              "pages of memory being swapped back in; a machine short of memory)",
    "busy": ", busy on the CPU without reporting progress (a loop that does not end, or work longer than the "
            "timeout between two reports)",
    "unknown": " (whether it was stopped, busy or waiting could not be seen: no /proc to read on this system, or "
               "its process had just ended)",
}


def _stall_message(named, steps, phases, seconds, observed, total=None) -> str:
    step = steps[named[0]]
    when = _when(step, total, len(named) > 1)
    states = {observed.get(r, "unknown") for r in named}
    state = states.pop() if len(states) == 1 else "mixed"
    if state == "stopped":
        what = f"stopped by a signal (SIGSTOP or a debugger) {when}"
    elif phases[named[0]] < _JOINED:
        what = "stuck starting up (never joined the process group)" + WHAT_WAS_SEEN.get(state, "")
    else:
        what = f"stuck {when}" + WHAT_WAS_SEEN.get(state, "")
    return f"{_ranks_words(named)} stalled: no progress for {seconds:g} s, {what}{_others(named, steps)}."


def _deadline_message(named, steps, deadline) -> str:
    step = steps[named[0]]
    state = "having reported no step" if step < 0 else f"last at step {step}"
    return f"{_ranks_words(named)} still running at the deadline of {deadline:g} s, {state}{_others(named, steps)}."


def _others(named, steps) -> str:
    """Where the ranks that are not named got to, e.g. " (ranks 0, 1, 3 reached step 57)"."""
    groups = {}
    for r, step in enumerate(steps):
        if r not in named:
            groups.setdefault(step, []).append(r)
    if not groups:
        return ""
    parts = [
        f"{_ranks_words(ranks)} reported no step" if step < 0 else f"{_ranks_words(ranks)} reached step {step}"
        for step, ranks in sorted(groups.items(), reverse=True)
    ]
    return f" ({'; '.join(parts)})"


def _progress_bar(total):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="steps (slowest rank)", leave=False)


# --- no rank outlives the launch ---

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


class _Terminated(BaseException):
    """Raised in the launching thread by SIGTERM, so that the ranks are reaped before the process ends."""


class _ReapOnSigterm:
    """While ranks run: turn a default-handled SIGTERM into an exception, reap, then end by SIGTERM as before.

    Only in the main thread, and only where nobody has set a SIGTERM handler of their own.
    """

    def __enter__(self):
        self.installed = False
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGTERM"):
            try:
                if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
                    signal.signal(signal.SIGTERM, self._handler)
                    self.installed = True
            except (ValueError, OSError):
                pass
        return self

    def _handler(self, signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not interrupt the reaping
        raise _Terminated()

    def __exit__(self, kind, value, tb):
        if self.installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            if kind is _Terminated:
                os.kill(os.getpid(), signal.SIGTERM)  # end the way the sender meant
        return False


# --- the run's folder: live while its launcher holds the folder's lock ---

RUN_DIR_PREFIX = "dpviz-launch-"  # then the launcher's PID, for people reading /tmp; staleness never looks at it
LOCK_NAME = "lock"  # in the run folder, flock-ed by the launching process for the whole run
LOCKLESS_AGE = 3600.0  # seconds: a run folder without a lock file (made by a dpviz before locks) is stale after this


def _make_run_dir() -> tuple[str, int | None]:
    """A new run folder, and the descriptor of its lock, held until :func:`_remove_run_dir` (or the launcher's death).

    A flock is seen by every process that opens the same file, whatever its PID namespace (two containers of one
    JupyterHub sharing /tmp), and the kernel releases it when the holder dies, however it dies. The lock file gets
    its name only once locked, so a sweep never finds it unlocked while its launcher lives.
    """
    outdir = tempfile.mkdtemp(prefix=f"{RUN_DIR_PREFIX}{os.getpid()}-")
    if fcntl is None:
        return outdir, None
    try:
        new = os.path.join(outdir, LOCK_NAME + ".new")
        lock = os.open(new, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        os.rename(new, os.path.join(outdir, LOCK_NAME))
    except BaseException:
        shutil.rmtree(outdir, ignore_errors=True)
        raise
    return outdir, lock


def _remove_run_dir(outdir: str, lock: int | None) -> None:
    shutil.rmtree(outdir, ignore_errors=True)
    if lock is not None:
        os.close(lock)  # only once the folder is gone: until then it is this run's, and no sweep's


def _sweep_stale_dirs() -> None:
    """Remove run folders left by launching processes that were killed (a kill leaves no time to clean up).

    A folder is stale when nobody holds its lock. Its PID proves nothing: a launcher in another PID namespace
    is alive though no process here has that PID, and a dead launcher's PID may have been given to another.
    """
    if fcntl is None:
        return
    base = tempfile.gettempdir()
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        try:
            if (re.fullmatch(rf"{RUN_DIR_PREFIX}\d+-\w+", entry.name) and entry.is_dir(follow_symlinks=False)
                    and entry.stat(follow_symlinks=False).st_uid == os.getuid()):
                _remove_if_stale(entry.path)
        except OSError:
            pass


def _remove_if_stale(path: str) -> None:
    try:
        lock = os.open(os.path.join(path, LOCK_NAME), os.O_RDONLY)
    except FileNotFoundError:  # a dpviz from before locks made it, or its launcher is taking the lock this instant
        if time.time() - os.stat(path, follow_symlinks=False).st_mtime > LOCKLESS_AGE:
            shutil.rmtree(path, ignore_errors=True)
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails at once while its launcher lives
    except OSError:
        return
    else:
        shutil.rmtree(path, ignore_errors=True)
    finally:
        os.close(lock)
