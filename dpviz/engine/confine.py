"""Where student code runs with no rights: an unprivileged user, a mount namespace that shows no course, and limits.

    confine.isolated()                      # True when this process can confine (root, with setpriv)
    argv = confine.fresh_process_command()  # the sandbox's supervisor, confined where it can be
    confine.drop_privileges()               # inside a rank, before a reader's function runs (root only)
    confine.limit_resources(seconds=5.0)    # rlimits for the process about to run a reader's function

**Who.** The user named by ``DPVIZ_SANDBOX_USER``, else ``dpviz-sandbox`` when it exists (``python -m
dpviz.grading source`` creates it when run as root), else ``nobody``: a user that owns nothing of the course.
Only root can become it. A process that is not root (a student's own kernel, a laptop) runs a reader's
function as itself, and :func:`note_once` says so once per process: the grade is safe all the same, because
grading runs as the instructor, who is root on a class's server (:mod:`dpviz.exercises.regrade`).

**What it sees.** The fresh process of a check (:class:`dpviz.engine.sandbox.FreshProcess`) starts under
Debian's ``bwrap`` (bubblewrap) when it is installed: a new mount, PID, IPC and network namespace whose only
files are the system's (``/usr``, ``/lib``, ``/etc``), Python's own library, the folder numpy is installed in
and, of dpviz, the five files of the sandbox itself; a fresh ``/tmp`` is its working folder and the one place
it can write. No course folder, home folder, solution, gradebook, other submission or reference function of
dpviz is there to read. ``setpriv`` then drops to the user above, with no capabilities and no way to gain
any, and the process is in a session of its own; when the check ends, or the notebook's process dies, the
namespace ends with every process in it. Without bwrap, the fresh process runs as that user where it can execute
this Python (not where it lives in root's home folder, as pyenv puts it), and otherwise as the caller, said once.

**The kernel nbgrader grades in** (:func:`kernel_command`, used by :mod:`dpviz.exercises.regrade`) runs a whole
chapter, so it sees this Python and its packages, dpviz included, but not the course folder, /root or /home, with
a /tmp of its own; as the sandbox user, in a PID namespace that ends with it.

**Ranks** that run a reader's code become the sandbox user once they have joined their group
(:func:`drop_privileges`, from :mod:`dpviz.engine.rank`) and send their results back as JSON data.

**Limits** (:func:`limit_resources`): memory, CPU time, file size and open files per process, and the processes of
the sandbox user (only of that user: a student's own count holds their browser's threads too).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

try:  # imported here, not when needed: a rank that became the sandbox user may no longer read Python's library
    import pwd
    import resource
except ImportError:  # Windows: no users to become, no rlimits
    pwd = resource = None

USER_VARIABLE = "DPVIZ_SANDBOX_USER"
DEFAULT_USER = "dpviz-sandbox"
FALLBACK_USER = "nobody"
MEMORY_LIMIT = 2 << 30  # bytes of address space for a fresh process's worker (numpy and a few arrays)
PROCESS_LIMIT = 512  # processes the sandbox user may have at once (every check of a class shares the user)
FILE_LIMIT = 16 << 20  # bytes: the largest file student code may write in its scratch folder
OPEN_FILES = 256  # descriptors per process
ROOT = "/opt/dpviz-sandbox"  # where the confined process finds Python, numpy and the sandbox's own files
SANDBOX_FILES = ("__init__.py", "engine/__init__.py", "engine/sandbox.py", "engine/private.py", "engine/confine.py")
_noted = False


def user_ids() -> tuple[int, int] | None:
    """The sandbox user's (uid, gid), or None when there is no such user."""
    if pwd is None:
        return None
    names = [os.environ[USER_VARIABLE]] if os.environ.get(USER_VARIABLE) else [DEFAULT_USER, FALLBACK_USER]
    for name in names:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    return None


def isolated() -> bool:
    """Whether student code started from this process runs as the sandbox user (root, setpriv, a user to become)."""
    return hasattr(os, "getuid") and os.getuid() == 0 and shutil.which("setpriv") is not None and user_ids() is not None


def note_once(confined: bool) -> None:
    """Say, once per process, that a check runs the reader's function as this user, not isolated (``confined``:
    whether this check's process is)."""
    global _noted
    if not _noted and not confined:
        _noted = True
        print("(This check runs your function as you, not as an isolated user: fine for self-study. Under grading "
              "on a class's server it runs isolated.)", file=sys.stderr)


def ensure_user() -> str:
    """Create the system user :data:`DEFAULT_USER` if it is missing (root only); its name."""
    try:
        pwd.getpwnam(DEFAULT_USER)
    except KeyError:
        import subprocess

        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", DEFAULT_USER], check=True)
    return DEFAULT_USER


def limit_resources(seconds: float | None = None, *, memory: bool = True, processes: bool = False) -> None:
    """Set this process's rlimits for running a reader's function (CPU time only when ``seconds`` is given).

    ``processes``: also cap the processes of this user, only for the sandbox user: Linux counts every process and
    thread a user has, and on a student's own laptop that is their browser's too."""
    if resource is None:
        return
    limits = [(resource.RLIMIT_FSIZE, FILE_LIMIT), (resource.RLIMIT_NOFILE, OPEN_FILES), (resource.RLIMIT_CORE, 0)]
    if processes:
        limits.append((resource.RLIMIT_NPROC, PROCESS_LIMIT))
    if memory:
        limits.append((resource.RLIMIT_AS, MEMORY_LIMIT))
    if seconds is not None:
        limits.append((resource.RLIMIT_CPU, int(seconds) + 2))
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass  # a limit this system refuses: the others still hold


def drop_privileges(give=()) -> bool:
    """Become the sandbox user for good (root only), with no supplementary groups; whether it happened.

    ``give``: paths handed to that user first (a rank's file store, which torch opens again when it ends)."""
    if not isolated():
        return False
    uid, gid = user_ids()
    for path in give:
        os.chown(path, uid, gid)
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    return True


@functools.lru_cache(maxsize=1)
def _bwrap() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=4)
def _runs(argv: tuple) -> bool:
    """Whether ``argv`` (a confined interpreter) starts and imports numpy: the sandbox user may not reach this
    Python (one in root's home folder), and bwrap may not be allowed to make namespaces (some containers)."""
    import subprocess

    try:
        return subprocess.run([*argv, "-c", "import numpy"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def fresh_process_command() -> list[str]:
    """The command that starts :mod:`dpviz.engine.sandbox`'s supervisor, confined where it can be.

    Not root: the interpreter itself, as today. Root without bwrap: the same under ``setpriv``. Root with bwrap:
    the namespace the module's docstring describes, in which only the sandbox's own files of dpviz exist.
    """
    python = [sys.executable, "-s", "-m", "dpviz.engine.sandbox"]
    if not isolated():
        return python
    argv = _namespace_command()
    if argv is not None and _runs(tuple(argv[:-3])):
        return argv
    drop = _drop()
    if _runs((*drop, sys.executable, "-s")):
        return drop + python
    return python  # the sandbox user cannot run this Python: unconfined, and said (note_once)


def fresh_isolated() -> bool:
    """Whether a check's fresh process runs as the sandbox user (:func:`fresh_process_command` found a way)."""
    return fresh_process_command()[0] != sys.executable


def _drop() -> list[str]:
    uid, gid = user_ids()
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--no-new-privs", "--inh-caps=-all",
            "--bounding-set=-all", "--"]


def _python(site_inside: str, root: str = ROOT) -> tuple[list[str], str]:
    """bwrap's arguments that make this Python reachable by the sandbox user at ``root`` (its own folder may
    be in root's home), with ``site_inside`` the folder its packages are bound at; and the interpreter's path there."""
    base = Path(sys.base_prefix).resolve()
    executable = Path(sys.executable).resolve()
    try:
        inside = str(Path(root, "python", executable.relative_to(base)))
    except ValueError:  # an interpreter outside its own prefix: used where it is
        inside = str(executable)
    site = Path(__import__("numpy").__file__).resolve().parents[1]
    argv = []
    for folder in (str(Path(root).parent), root):
        argv += ["--dir", folder]  # (bwrap makes a mount point's missing parents readable by root alone)
    argv += ["--ro-bind", str(base), f"{root}/python", "--ro-bind", str(site), site_inside]
    return argv, inside


def kernel_command(cmd: list[str], connection_file: str, hide=()) -> list[str]:
    """A Jupyter kernel's command ``cmd`` confined (root with bwrap; else ``cmd`` as it is): the sandbox user, in a
    namespace where the folders ``hide`` (the course), /root and /home are empty, /tmp is its own and writable, and
    every process it starts ends with it. It still sees this Python and its packages, dpviz included, since it runs
    a whole chapter. The connection file is handed to the sandbox user and shown at a path it can reach."""
    if not isolated() or _bwrap() is None:
        return cmd
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    root = "/run/dpviz"  # (the rest of the file system is read-only here: /run becomes a fresh tmpfs)
    python, inside = _python(f"{root}/python/lib/{version}/site-packages", root)
    keep = [Path(p).resolve() for p in (Path(__file__).parents[2], sys.prefix)]
    argv = [_bwrap(), "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--ro-bind", "/", "/"]
    for folder in {str(Path(f).resolve()) for f in (*hide, "/root", "/home")}:
        if Path(folder).is_dir() and not any(k == Path(folder) or Path(folder) in k.parents for k in keep):
            argv += ["--tmpfs", folder]
    os.chown(connection_file, *user_ids())
    argv += ["--perms", "0755", "--tmpfs", "/run"] + python
    argv += ["--dev", "/dev", "--perms", "1777", "--tmpfs", "/dev/shm", "--proc", "/proc",
             "--perms", "1777", "--tmpfs", "/tmp", "--ro-bind", connection_file, f"{root}/kernel.json",
             "--chdir", "/tmp", "--setenv", "HOME", "/tmp", "--setenv", "LD_LIBRARY_PATH", f"{root}/python/lib",
             "--unsetenv", "PYTHONPATH", "--unsetenv", "JPY_PARENT_PID"]  # (its parent is in another PID namespace)
    rest = [f"{root}/kernel.json" if arg == connection_file else arg for arg in cmd[1:]]
    return argv + _drop() + [inside, *rest]


def _namespace_command() -> list[str] | None:
    """The bwrap command of the module's docstring, or None without bwrap."""
    if _bwrap() is None:
        return None
    package = Path(__file__).resolve().parents[1]
    python, inside = _python(f"{ROOT}/site")
    argv = [_bwrap(), "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
            "--unshare-uts", "--ro-bind", "/usr", "/usr"]
    for system in ("/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc"):
        argv += ["--ro-bind-try", system, system]
    argv += python
    if (Path(python[-2]) / "dpviz").exists():  # an installed (not editable) dpviz beside numpy: hidden
        argv += ["--tmpfs", f"{ROOT}/site/dpviz"]
    for folder in (f"{ROOT}/pkg", f"{ROOT}/pkg/dpviz", f"{ROOT}/pkg/dpviz/engine"):
        argv += ["--dir", folder]
    for name in SANDBOX_FILES:
        argv += ["--ro-bind", str(package / name), f"{ROOT}/pkg/dpviz/{name}"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp", "--chdir", "/tmp", "--clearenv"]
    env = {"PYTHONPATH": f"{ROOT}/pkg:{ROOT}/site", "LD_LIBRARY_PATH": f"{ROOT}/python/lib",
           "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp", "PATH": "/usr/bin:/bin",
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return argv + _drop() + [inside, "-s", "-m", "dpviz.engine.sandbox"]
