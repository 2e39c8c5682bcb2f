"""Watching k running ranks from the launching process: failures and stalls named by rank, every child reaped.

* :func:`_wait` polls the ranks' shared state and the run folder until every rank exits
  cleanly, and raises :class:`RankError` for the first rank that failed, or
  :class:`RankTimeout` for a rank that stopped making progress (or at the run's deadline);
* :func:`_reap` terminates, then kills, whatever is left, and :class:`_ReapOnSigterm`
  makes a SIGTERM to the launcher reap the ranks before the launcher ends;
* :func:`_sweep_stale_dirs` removes the run folders of launchers that were killed.

The errors are importable from :mod:`dpviz.runs.launch`, where users meet them.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import threading
import time

from dpviz.runs.rank import _FIELDS, _JOINED, _err_path, _pid_alive


class RankError(RuntimeError):
    """A rank raised an exception; ``rank`` and ``rank_traceback`` say where and why."""

    def __init__(self, rank: int, rank_traceback: str):
        self.rank = rank
        self.rank_traceback = rank_traceback
        last = rank_traceback.strip().splitlines()[-1] if rank_traceback.strip() else "unknown error"
        super().__init__(f"rank {rank} failed: {last}\n\n--- traceback from rank {rank} ---\n{rank_traceback}")


class RankTimeout(TimeoutError):
    """A rank stalled (or the run passed its deadline); ``ranks`` lists the ones named, ``steps`` every rank's last step.

    A step of -1 means the rank had reported no step yet.
    """

    def __init__(self, ranks: list[int], message: str, steps: list[int] | None = None):
        self.ranks = list(ranks)
        self.steps = None if steps is None else list(steps)
        super().__init__(message)


def _wait(procs, outdir, state, stall_timeout, start_allowance, deadline, bar) -> None:
    """Poll until every rank exits cleanly; raise on the first failure, on a stalled rank, or at the deadline."""
    k = len(procs)
    begin = last_poll = time.monotonic()
    seen = [0] * k  # progress count last seen, per rank
    since = [begin] * k  # when each rank last made progress, as seen here
    while True:
        failed = [r for r in range(k) if os.path.exists(_err_path(outdir, r))]
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
        if any(now - since[r] > allowance[r] for r in running):
            # Ranks waiting in a collective for a stuck peer stop reporting too; of those
            # that have been quiet a long while, the ones furthest behind are to blame.
            quiet = [r for r in running if now - since[r] > allowance[r] / 2]
            behind = min(steps[r] for r in quiet)
            named = [r for r in quiet if steps[r] == behind]
            raise RankTimeout(named, _stall_message(named, steps, phases, allowance[named[0]]), steps)
        if deadline is not None and now - begin > deadline:
            behind = min(steps[r] for r in running)
            named = [r for r in running if steps[r] == behind]
            raise RankTimeout(named, _deadline_message(named, steps, deadline), steps)
        time.sleep(0.02)


# --- what a timeout says ---

def _ranks_words(ranks) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _stall_message(named, steps, phases, seconds) -> str:
    step = steps[named[0]]
    if phases[named[0]] < _JOINED:
        where = "stuck starting up (never joined the process group)"
    elif step < 0:
        where = "stuck before its first step" if len(named) == 1 else "stuck before their first step"
    else:
        where = f"stuck after step {step}"
    return f"{_ranks_words(named)} stalled: no progress for {seconds:g} s, {where}{_others(named, steps)}."


def _deadline_message(named, steps, deadline) -> str:
    step = steps[named[0]]
    where = "having reported no step" if step < 0 else f"last at step {step}"
    return f"{_ranks_words(named)} still running at the deadline of {deadline:g} s, {where}{_others(named, steps)}."


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


def _sweep_stale_dirs() -> None:
    """Remove run folders left by launching processes that were killed (a kill leaves no time to clean up)."""
    base = tempfile.gettempdir()
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    for entry in entries:
        m = re.fullmatch(r"dpviz-launch-(\d+)-\w+", entry.name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        try:
            if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid():
                shutil.rmtree(entry.path, ignore_errors=True)
        except (OSError, AttributeError):
            pass
