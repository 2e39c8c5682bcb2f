"""The one module where dpviz does what Python offers no public way to do: each call here, with its reason.

dpviz stands on public APIs (STYLE.md item 11): a private name buys a little today and breaks silently on the next
release. Four things the launcher, the exercise sandboxes and the records need have no public Python (or torch) API
at all, so they are done here and nowhere else (``tests/test_public_apis.py`` and ``tests/test_private_calls.py``
check that no other module reaches for a private name, ``ctypes`` or ``sys._getframe``). Each call is a head start,
not the only guard: where the platform lacks it, it does nothing and says so (returns False), and the caller's
public mechanism still holds. :func:`missing` lists what this Python or C library no longer has, and
``tests/test_private_calls.py`` fails naming it.

* :func:`die_with_parent`: Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, through ``ctypes``. A rank must end
  within 2 s of the process that started it, however that one ends, and so must the fork server while it is still
  importing torch (:mod:`dpviz.engine.server_start`, where no thread of its own can act). The public guard is the rank's watchdog
  thread on ``multiprocessing.parent_process().sentinel`` (:mod:`dpviz.engine.rank`), but a thread cannot act
  while the rank is stopped (SIGSTOP, a debugger) or a C call holds the GIL; the kernel's signal can. Neither
  ``os`` nor ``signal`` exposes prctl; torch's ``start_processes`` has a binding of its own, private too
  (``torch.multiprocessing._prctl_pr_set_pdeathsig``), which sends SIGINT, a signal a rank may catch, and it
  would make the launching kernel import torch.
* :func:`become_child_subreaper`: Linux's ``prctl(PR_SET_CHILD_SUBREAPER)``, so that a process a reader's
  function starts in a rank, and that outlives its own parent, is re-parented to the rank (which kills it) instead
  of to init, where nothing would end it. Python has no call for it.
* :func:`release_freed_memory`: glibc's ``malloc_trim(0)``. glibc may keep freed blocks of a few MB instead of
  returning them; loading the figure records left a plain interpreter 16 MB larger without this call, an idle
  chapter's kernel 3 MB (benchmarks/bench_memory.py). ``MALLOC_TRIM_THRESHOLD_`` would do it only if set before
  the process starts, which a kernel's user does not control.
* :func:`raise_in_thread`: CPython's ``PyThreadState_SetAsyncExc`` (C API, through ``ctypes.pythonapi``). The
  exercise sandbox (:mod:`dpviz.engine.sandbox`, in the fresh process a reader's function runs in, or on a rank)
  stops the threads the function started and left running before it gives its verdict; Python has no public way to
  raise an exception in another thread. (The process it runs in is ended after each call too; this makes the
  threads end first, so that the verdict can count them.)

The fork server's pid and stop, the check that an import runs inside the fork server, and a rank's process name
used to be private calls too; they are now public (:mod:`dpviz.engine.forkserver`, :mod:`dpviz.engine.server_exit`,
:mod:`dpviz.engine.rank`). Plain Python: ``ctypes`` is imported at the first call, not at import.
"""

from __future__ import annotations

import functools
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>, Linux 3.4 and later
LINUX = sys.platform.startswith("linux")


@functools.lru_cache(maxsize=1)
def _libc():
    """The C library this process runs on (None where ctypes cannot open it)."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _prctl(option: int, value: int) -> bool:
    libc = _libc()
    prctl = getattr(libc, "prctl", None) if LINUX else None
    return prctl is not None and prctl(option, value, 0, 0, 0) == 0


def die_with_parent(signum: int) -> bool:
    """Have the kernel send ``signum`` to this process when its parent dies (Linux); whether that is now set.

    Set per process: a fork does not inherit it, so each rank asks for itself. The parent is the one at the
    time of the call: check that it is still the expected one afterwards (it may have died just before).
    """
    return _prctl(PR_SET_PDEATHSIG, int(signum))


def become_child_subreaper() -> bool:
    """Have this process's orphaned descendants re-parented to it instead of to init (Linux); whether that is set."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


@functools.lru_cache(maxsize=1)
def _malloc_trim():
    libc = _libc()
    return getattr(libc, "malloc_trim", None)  # glibc only


def release_freed_memory() -> bool:
    """Hand memory already freed back to the operating system, where the C library can (glibc); whether it could.

    About 2 ms; :func:`dpviz.engine.schema.release_freed_memory` calls it after a load drops large arrays.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def raise_in_thread(thread_id: int, exception: type[BaseException]) -> bool:
    """Raise ``exception`` (a class) in the thread ``thread_id`` (``threading.get_ident()``) at its next bytecode;
    whether a thread was reached. CPython only: elsewhere it does nothing and returns False."""
    import ctypes

    set_async = getattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc", None)
    if set_async is None:
        return False
    return set_async(ctypes.c_ulong(thread_id), ctypes.py_object(exception)) == 1



def missing() -> list[str]:
    """The names this module calls that this Python, or its C library, does not have (empty when all are there).

    Only what the platform is expected to have is listed: prctl on Linux, malloc_trim on glibc, the thread
    calls on CPython.
    """
    import ctypes
    import platform

    gone = []
    if sys.implementation.name == "cpython":
        if not hasattr(getattr(ctypes, "pythonapi", None), "PyThreadState_SetAsyncExc"):
            gone.append("ctypes.pythonapi.PyThreadState_SetAsyncExc")
    libc = _libc()
    if LINUX and (libc is None or not hasattr(libc, "prctl")):
        gone.append("libc prctl (ctypes.CDLL(None).prctl)")
    if LINUX and platform.libc_ver()[0] == "glibc" and (libc is None or not hasattr(libc, "malloc_trim")):
        gone.append("glibc malloc_trim (ctypes.CDLL(None).malloc_trim)")
    return gone
