"""A real JupyterHub for tests/test_hub.py and benchmarks/bench_hub.py: Unix users made for the run, the hub
started as root from share/jupyterhub_config.py with configurable-http-proxy, and each student driving their own
Jupyter server through the hub, over HTTP and the kernel's websocket, as JupyterLab does.

    with Course(students=12) as course:           # users, the course's folders, the hub
        s = course.students[0]
        s.log_in(); s.start_server()                   # the login form, a token, the hub's REST API
        s.open("04_one_group_per_device.ipynb")        # a kernel, through the server's sessions API
        s.run_all(cells)                               # each code cell over the kernel's websocket, as Run All

Needs Linux, root (useradd and userdel; the hub's LocalProcessSpawner starts each server as its user),
jupyterhub (the test extra) and configurable-http-proxy in ``node_modules`` (``npm install --prefix .
configurable-http-proxy``, which .ci/run does); :func:`why_not` names what is missing. Everything it starts, and
every user it adds, it ends and removes by PID and by name; :meth:`Course.close` checks that nothing is left.

**The students' Python.** A server runs this environment's Python (share/jupyterhub_config.py) as the student.
Where that interpreter sits in a folder other users cannot enter (pyenv's under root's 0700 home), the hub and
all it starts run in a mount namespace that shows the students only the way to it (:class:`Reach`), and
:attr:`Course.python_note` says so; nothing changes outside that namespace.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
SHARE_CONFIG = ROOT / "share" / "jupyterhub_config.py"
NBGRADER_CONFIG_DIR = ROOT / "share" / "nbgrader"
PROXY = ROOT / "node_modules" / ".bin" / "configurable-http-proxy"  # npm's; else Debian's, on PATH
if not PROXY.exists() and shutil.which("configurable-http-proxy"):
    PROXY = Path(shutil.which("configurable-http-proxy"))
ENV_BIN = Path(sys.executable).parent  # this environment's scripts: jupyterhub, nbgrader, alembic
PASSWORD = secrets.token_urlsafe(12)  # the dummy authenticator's one password, for this run
SINGLEUSER = "jupyterhub.singleuser"


def why_not() -> str | None:
    """Why a hub cannot be started here (one sentence), or None."""
    if not sys.platform.startswith("linux"):
        return "the hub test needs Linux (Unix users, LocalProcessSpawner)"
    if os.geteuid() != 0:
        return "the hub test needs root: it adds Unix users and the hub starts each server as its user"
    for tool in ("useradd", "userdel", "runuser"):
        if shutil.which(tool) is None:
            return f"the hub test needs {tool} (Debian's passwd and util-linux)"
    try:
        import jupyterhub  # noqa: F401
        import websocket  # noqa: F401
    except ImportError as e:
        return f"the hub test needs jupyterhub and websocket-client (the test extra): {e}"
    if not PROXY.exists():
        return (f"no configurable-http-proxy in {PROXY.parent} or on PATH: npm install --prefix . "
                f"configurable-http-proxy@4, or apt-get install node-configurable-http-proxy (.ci/run does)")
    if shutil.which("node") is None:
        return "configurable-http-proxy needs node on PATH"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def processes_of(uids: set[int]) -> list[psutil.Process]:
    """Live processes running as any of ``uids``."""
    found = []
    for p in psutil.process_iter(["uids"]):
        try:
            if p.info["uids"] and p.info["uids"].real in uids and alive(p):
                found.append(p)
        except psutil.Error:
            continue
    return found


def temporary_entries(uids: set[int]) -> list[Path]:
    """What ``uids`` own at the top of the system's temporary folder."""
    found = []
    for entry in Path(tempfile.gettempdir()).iterdir():
        try:
            if entry.lstat().st_uid in uids:
                found.append(entry)
        except OSError:
            continue
    return found


# --- Unix users -------------------------------------------------------------------------------------------------

class Users:
    """Unix users made for one run, named ``<prefix><role>``; :meth:`remove` ends their processes and deletes them."""

    def __init__(self):
        self.prefix = "dpvh" + uuid.uuid4().hex[:5]  # unique on this machine, short: a user name holds 32 bytes
        self.names: list[str] = []

    def add(self, role: str) -> str:
        name = f"{self.prefix}{role}"
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--user-group", name], check=True,
                       capture_output=True, text=True)
        self.names.append(name)
        return name

    def uid(self, name: str) -> int:
        return pwd.getpwnam(name).pw_uid

    def uids(self) -> set[int]:
        found = set()
        for name in self.names:
            try:
                found.add(self.uid(name))
            except KeyError:
                pass
        return found

    def home(self, name: str) -> Path:
        return Path(pwd.getpwnam(name).pw_dir)

    def run_as(self, name: str, argv: list[str], *, env: dict | None = None, cwd: Path | None = None,
               timeout: float = 600, wrap=lambda argv, cwd: argv) -> subprocess.CompletedProcess:
        """``argv`` as the user, with their HOME and USER only, in ``cwd`` (default their home)."""
        home = self.home(name)
        full = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "USER": name, "LOGNAME": name,
                "LANG": os.environ.get("LANG", "C.UTF-8"), **(env or {})}
        return subprocess.run(wrap(["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in full.items()),
                                    *argv], cwd or home), cwd=cwd or home, capture_output=True, text=True,
                              timeout=timeout)

    def remove(self) -> list[str]:
        """End every process of these users (by PID), then delete them with their homes; what was still running."""
        left = []
        uids = self.uids()
        for p in processes_of(uids):
            try:
                left.append(f"{p.pid} {p.username()} {' '.join(p.cmdline())[:120]}")
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs([p for p in processes_of(uids)], timeout=10)
        for entry in temporary_entries(uids):  # userdel --remove takes the home, not what they left in /tmp
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        for name in list(self.names):
            for _ in range(20):  # userdel refuses while a process of the user is still exiting
                done = subprocess.run(["userdel", "--remove", name], capture_output=True, text=True)
                if done.returncode in (0, 6):  # 6: no such user
                    break
                time.sleep(0.5)
            self.names.remove(name)
        return left


# --- the students' Python ------------------------------------------------------------------------------------

def needed_paths() -> list[Path]:
    """What a student's server must reach: the interpreter, its standard library, the environment, the checkout."""
    return [Path(sys.executable).resolve(), Path(sys.base_prefix).resolve() / "lib",
            Path(sysconfig.get_paths()["purelib"]).resolve(), ROOT]


def closed_folders(paths: list[Path]) -> dict[Path, set[str]]:
    """The folders on the way to ``paths`` that other users cannot enter (no execute bit for others), each with the
    names of its entries on that way; raise RuntimeError where one such folder lies inside another."""
    closed: dict[Path, set[str]] = {}
    for path in paths:
        on_the_way = [*reversed(path.parents), path]
        for parent, child in zip(on_the_way, on_the_way[1:]):
            if parent.stat().st_mode & 0o001:
                continue
            if any(parent != c and c in parent.parents for c in closed):
                raise RuntimeError(f"{parent} and a folder above it are closed to other users")
            closed.setdefault(parent, set()).add(child.name)
    return closed


class Reach:
    """A mount namespace in which the students reach the environment: each folder on its way that others cannot
    enter (pyenv's interpreter under root's 0700 home) is covered there by an empty 0755 tmpfs holding only the
    entries on that way, bind-mounted from the real ones. Nothing changes outside it; the hub, its servers and the
    instructor's commands run in it (:meth:`wrap`). Without such a folder there is no namespace."""

    def __init__(self, folder: Path):
        self.holder = None
        self.closed = closed_folders(needed_paths())
        if not self.closed:
            self.note = f"the students' servers run this environment's {sys.executable} as it is"
            return
        if shutil.which("unshare") is None or shutil.which("nsenter") is None:
            raise RuntimeError(f"{', '.join(map(str, self.closed))} cannot be entered by other users, and there "
                               f"is no unshare and nsenter to give the students a way in")
        stage = folder / "stage"
        stage.mkdir()
        pairs = [(parent, name) for parent, names in sorted(self.closed.items()) for name in sorted(names)]
        script = ["set -e"]
        script += [f"mkdir {stage}/{i} && mount --bind '{parent / name}' {stage}/{i}"
                   for i, (parent, name) in enumerate(pairs)]
        script += [f"mount -t tmpfs -o mode=0755,size=1m dpviz-hub '{parent}'" for parent in sorted(self.closed)]
        script += [f"mkdir '{parent / name}' && mount --move {stage}/{i} '{parent / name}'"
                   for i, (parent, name) in enumerate(pairs)]
        script += ["echo ready", "exec sleep infinity"]
        self.holder = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "--", "bash", "-c",
                                        "\n".join(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, start_new_session=True)
        if self.holder.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError(f"a mount namespace for the students could not be made: {self.holder.stderr.read()}")
        self.note = (f"{', '.join(map(str, self.closed))} cannot be entered by other users: the hub and everything it "
                     f"starts run in a mount namespace where only "
                     f"{', '.join(str(p / n) for p, n in pairs)} shows there")

    def wrap(self, argv: list[str], cwd: Path | None = None) -> list[str]:
        """``argv`` run in the namespace, in ``cwd`` (nsenter execs it: the process keeps the PID it is started
        with; entering the namespace would otherwise leave it in /)."""
        if self.holder is None:
            return argv
        return ["nsenter", "--target", str(self.holder.pid), "--mount", *([f"--wd={cwd}"] if cwd else []), "--",
                *argv]

    def check(self) -> None:
        """Raise RuntimeError unless a user other than root can import dpviz, jupyterhub and nbgrader here."""
        done = subprocess.run(self.wrap(["runuser", "-u", "nobody", "--", sys.executable, "-c",
                                         "import dpviz, jupyterhub, nbgrader"]),
                              capture_output=True, text=True, cwd="/", timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"another user cannot run dpviz's environment ({sys.executable}) here: "
                               f"{done.stderr.strip()[-300:]}")

    def close(self) -> None:
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait(10)


# --- the course: users, folders, hub -----------------------------------------------------------------------------

class Course:
    """An instructor and ``students`` Unix users, the course's records and nbgrader exchange folders, and a
    JupyterHub from share/jupyterhub_config.py serving them on 127.0.0.1."""

    def __init__(self, students: int, *, records: list[Path] = ()):
        # in the system's temporary folder, which every user can enter (pytest's own is root's alone)
        self.folder = Path(tempfile.mkdtemp(prefix="dpviz-hub-"))
        self.folder.chmod(0o755)
        self.users = Users()
        self.processes: list[subprocess.Popen] = []
        self.log_path = self.folder / "hub.log"
        self.token = secrets.token_hex(16)  # a service's token: admin rights, for the harness's checks
        self.timings: dict[str, float] = {}
        start = time.perf_counter()
        try:
            self.instructor = self.users.add("i")
            self.student_names = [self.users.add(f"s{i:02d}") for i in range(1, students + 1)]
            self.timings["users added"] = time.perf_counter() - start
            self.reach = Reach(self.folder)
            self.reach.check()
            self.python_note = self.reach.note
            self.records = self.folder / "records"  # the course's records: the instructor's, read by everyone
            self.records.mkdir()
            for path in records:
                shutil.copy2(path, self.records / path.name)
            self._own(self.records, self.instructor, 0o755, 0o644)
            self.exchange = self.folder / "exchange"  # nbgrader's exchange, as its docs set it up
            self.exchange.mkdir()
            self.exchange.chmod(0o1777)
            self.url = self.start_hub()
            self.timings["hub started"] = time.perf_counter() - start - self.timings["users added"]
            self.students = [Student(self, name) for name in self.student_names]
        except BaseException:
            self.close()
            raise

    def _own(self, path: Path, user: str, dir_mode: int, file_mode: int) -> None:
        entry = pwd.getpwnam(user)
        for p in [path, *path.rglob("*")]:
            os.chown(p, entry.pw_uid, entry.pw_gid)
            p.chmod(dir_mode if p.is_dir() else file_mode)

    def nbgrader_env(self) -> dict:
        """What the instructor's nbgrader needs: the exchange, the environment's scripts first on PATH."""
        return {"PATH": f"{ENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                "DPVIZ_NBGRADER_EXCHANGE": str(self.exchange), "JUPYTER_CONFIG_PATH": str(NBGRADER_CONFIG_DIR)}

    def run_as(self, name: str, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        """``argv`` as the user, where the hub runs (:class:`Reach`)."""
        return self.users.run_as(name, argv, wrap=self.reach.wrap, **kwargs)

    def start_hub(self) -> str:
        port, hub_port, api_port = free_port(), free_port(), free_port()
        config = self.folder / "jupyterhub_config.py"
        config.write_text(f"""# written by tests/_hub.py: share/jupyterhub_config.py, on this machine's loopback
c = get_config()  # noqa: F821
load_subconfig({str(SHARE_CONFIG)!r})  # noqa: F821
c.JupyterHub.bind_url = "http://127.0.0.1:{port}"
c.JupyterHub.hub_bind_url = "http://127.0.0.1:{hub_port}"
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.command = [{str(PROXY)!r}]
c.ConfigurableHTTPProxy.pid_file = {str(self.folder / 'proxy.pid')!r}
c.JupyterHub.pid_file = {str(self.folder / 'hub.pid')!r}
c.JupyterHub.db_url = "sqlite:///{self.folder / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = {str(self.folder / 'cookie_secret')!r}
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {PASSWORD!r}
c.Authenticator.allowed_users = {set(self.student_names) | {self.instructor}!r}
c.Authenticator.admin_users = {{{self.instructor!r}}}
c.JupyterHub.services = [{{"name": "dpviz-test", "api_token": {self.token!r}}}]
c.JupyterHub.load_roles = [{{"name": "dpviz-test", "services": ["dpviz-test"],
                            "scopes": ["admin:users", "admin:servers", "list:users", "read:users"]}}]
""")
        env = {**os.environ, "DPVIZ_HUB_RECORDS": str(self.records), "DPVIZ_HUB_EXCHANGE": str(self.exchange)}
        env.pop("DPVIZ_RECORDS", None)
        log = open(self.log_path, "w")
        hub = subprocess.Popen(self.reach.wrap([str(ENV_BIN / "jupyterhub"), "-f", str(config)], self.folder),
                               cwd=self.folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.processes.append(hub)
        url = f"http://127.0.0.1:{port}"
        import requests

        end = time.monotonic() + 120
        while time.monotonic() < end:
            if hub.poll() is not None:
                raise RuntimeError(f"the hub exited ({hub.returncode}):\n{self.log_tail()}")
            try:
                if requests.get(f"{url}/hub/api/", timeout=5).status_code == 200:
                    return url
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"the hub did not answer within 120 s:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def api(self, method: str, path: str, **kwargs):
        import requests

        return requests.request(method, f"{self.url}/hub/api{path}", timeout=60,
                                headers={"Authorization": f"token {self.token}"}, **kwargs)

    def servers_running(self) -> list[str]:
        users = self.api("GET", "/users").json()
        return [u["name"] for u in users if u.get("servers")]

    def server_processes(self) -> dict[int, psutil.Process]:
        """Each student's single-user server process, by uid."""
        found = {}
        for p in processes_of(self.users.uids()):
            try:
                if SINGLEUSER in " ".join(p.cmdline()) or "jupyterhub-singleuser" in " ".join(p.cmdline()):
                    found[p.uids().real] = p
            except psutil.Error:
                continue
        return found

    def stop_hub(self) -> None:
        for hub in self.processes:
            if hub.poll() is None:
                hub.send_signal(signal.SIGTERM)
                try:
                    hub.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(hub.pid, signal.SIGKILL)
                    hub.wait(10)
        pid_file = self.folder / "proxy.pid"  # the hub stops the proxy it started; if it could not, we do
        if pid_file.exists():
            try:
                proxy = psutil.Process(int(pid_file.read_text().strip()))
                if alive(proxy) and "configurable-http-proxy" in " ".join(proxy.cmdline()):
                    proxy.kill()
            except (ValueError, psutil.Error):
                pass

    def close(self) -> list[str]:
        """Stop the hub (and the proxy), end what the users still run, delete the users and the course's folder;
        what was left running."""
        self.stop_hub()
        left = self.users.remove()
        if getattr(self, "reach", None) is not None:
            self.reach.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        return left

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --- one student, as their browser ------------------------------------------------------------------------------

class Student:
    """One student's session with the hub: logged in through the form, then a token for the REST APIs."""

    def __init__(self, course: Course, name: str):
        import requests

        self.course, self.name = course, name
        self.http = requests.Session()
        self.token = None
        self.ws = None
        self.kernel_id = self.session_id = None
        self.session = uuid.uuid4().hex

    @property
    def uid(self) -> int:
        return pwd.getpwnam(self.name).pw_uid

    @property
    def server(self) -> str:
        return f"{self.course.url}/user/{self.name}"

    def _auth(self) -> dict:
        return {"Authorization": f"token {self.token}"}

    def log_in(self) -> None:
        """The hub's login form (its xsrf cookie first), then a token for this student from the hub's API."""
        hub = self.course.url
        self.http.get(f"{hub}/hub/login", timeout=60).raise_for_status()
        r = self.http.post(f"{hub}/hub/login", allow_redirects=False, timeout=60,
                           data={"username": self.name, "password": PASSWORD, "_xsrf": self.http.cookies.get("_xsrf")})
        if r.status_code != 302:
            raise RuntimeError(f"{self.name}: login answered {r.status_code}: {r.text[:300]}")
        self.http.get(f"{hub}/hub/home", timeout=60).raise_for_status()  # a new xsrf token for the new session
        r = self.http.post(f"{hub}/hub/api/users/{self.name}/tokens", timeout=60,
                           json={"note": "dpviz hub test", "expires_in": 7200},
                           headers={"X-XSRFToken": self.http.cookies.get("_xsrf", path="/hub/")})
        if r.status_code != 201:
            raise RuntimeError(f"{self.name}: a token was refused ({r.status_code}): {r.text[:300]}")
        self.token = r.json()["token"]

    def start_server(self, timeout: float = 300) -> float:
        """Ask the hub for this student's server and wait until it is ready; the seconds it took."""
        start = time.perf_counter()
        r = self.http.post(f"{self.course.url}/hub/api/users/{self.name}/server", headers=self._auth(), timeout=60)
        if r.status_code not in (201, 202):
            raise RuntimeError(f"{self.name}: the hub refused to start the server ({r.status_code}): {r.text[:300]}")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            user = self.http.get(f"{self.course.url}/hub/api/users/{self.name}", headers=self._auth(),
                                 timeout=60).json()
            server = user.get("servers", {}).get("")
            if server and server.get("ready"):
                return time.perf_counter() - start
            if not server:
                raise RuntimeError(f"{self.name}: the server stopped while starting:\n{self.course.log_tail()}")
            time.sleep(0.5)
        raise RuntimeError(f"{self.name}: the server was not ready within {timeout:g} s")

    def stop_server(self, timeout: float = 120) -> None:
        self.close_kernel()
        r = self.http.delete(f"{self.course.url}/hub/api/users/{self.name}/server", headers=self._auth(), timeout=60)
        if r.status_code not in (202, 204, 400):  # 400: not running
            raise RuntimeError(f"{self.name}: stopping the server answered {r.status_code}: {r.text[:300]}")
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            user = self.http.get(f"{self.course.url}/hub/api/users/{self.name}", headers=self._auth(),
                                 timeout=60).json()
            if not user.get("servers"):
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.name}: the server did not stop within {timeout:g} s")

    # the server's REST API, as JupyterLab uses it

    def get(self, path: str, **kwargs):
        return self.http.get(f"{self.server}/{path}", headers=self._auth(), timeout=120, **kwargs)

    def post(self, path: str, **kwargs):
        return self.http.post(f"{self.server}/{path}", headers=self._auth(), timeout=300, **kwargs)

    def read_notebook(self, path: str) -> dict:
        r = self.get(f"api/contents/{path}", params={"content": 1})
        r.raise_for_status()
        return r.json()["content"]

    def save_notebook(self, path: str, nb: dict) -> None:
        r = self.http.put(f"{self.server}/api/contents/{path}", headers=self._auth(), timeout=120,
                          json={"type": "notebook", "format": "json", "content": nb})
        r.raise_for_status()

    def upload(self, path: str, nb: dict) -> None:
        self.save_notebook(path, nb)

    def open(self, path: str) -> str:
        """Open the notebook at ``path`` as JupyterLab does: a session with a new python3 kernel; its websocket."""
        import websocket

        r = self.post("api/sessions", json={"path": path, "name": Path(path).name, "type": "notebook",
                                            "kernel": {"name": "python3"}})
        r.raise_for_status()
        self.session_id = r.json()["id"]
        self.kernel_id = r.json()["kernel"]["id"]
        url = self.server.replace("http://", "ws://") + f"/api/kernels/{self.kernel_id}/channels"
        self.ws = websocket.create_connection(f"{url}?session_id={self.session}", timeout=300,
                                              header=[f"Authorization: token {self.token}"])
        return self.kernel_id

    def memory(self) -> int:
        """Bytes this student's processes hold now (proportional set size: shared pages split among sharers)."""
        total = 0
        for p in processes_of({self.uid}):
            try:
                total += p.memory_full_info().pss
            except psutil.Error:
                continue
        return total

    def kernel_pid(self) -> int | None:
        """The kernel's process: the server's child running ipykernel."""
        server = self.course.server_processes().get(self.uid)
        if server is None:
            return None
        for p in server.children():
            try:
                if "ipykernel" in " ".join(p.cmdline()):
                    return p.pid
            except psutil.Error:
                continue
        return None

    def execute(self, code: str, timeout: float = 600) -> dict:
        """Run one cell on the kernel's websocket: its printed text, its error (ename: evalue) or None, seconds."""
        msg_id = uuid.uuid4().hex
        self.ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": self.name, "session": self.session, "msg_type": "execute_request",
                       "version": "5.3", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        start = time.perf_counter()
        end = time.monotonic() + timeout
        text, error, idle, reply = [], None, False, None
        while not (idle and reply):
            self.ws.settimeout(max(1.0, end - time.monotonic()))
            try:
                msg = _decode(self.ws.recv())
            except Exception as e:  # a timeout or a closed socket: the kernel hung or died
                raise RuntimeError(f"{self.name}: no answer to a cell within {timeout:g} s ({type(e).__name__}: {e})")
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                text.append(content["text"])
            elif kind == "error":
                error = f"{content['ename']}: {content['evalue']}"
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
            elif kind == "execute_reply":
                reply = content["status"]
                if reply == "error" and error is None:
                    error = f"{content.get('ename')}: {content.get('evalue')}"
        return {"text": "".join(text), "error": error, "seconds": time.perf_counter() - start}

    def run_all(self, cells: list[str], timeout: float = 600) -> dict:
        """Every code cell in order, stopping at the first error as Run All does: the error, the seconds, the text."""
        start = time.perf_counter()
        texts = []
        for n, code in enumerate(cells, 1):
            r = self.execute(code, timeout)
            texts.append(r["text"])
            if r["error"]:
                return {"error": f"code cell {n}: {r['error']}", "seconds": time.perf_counter() - start,
                        "texts": texts}
        return {"error": None, "seconds": time.perf_counter() - start, "texts": texts}

    def close_kernel(self, shut_down: bool = False) -> None:
        """Close the websocket; with ``shut_down``, also end the session and its kernel, as closing the tab and
        shutting the kernel down does."""
        if self.ws is not None:
            try:
                self.ws.close()
            except Exception:
                pass
            self.ws = None
        if shut_down and self.session_id is not None:
            self.http.delete(f"{self.server}/api/sessions/{self.session_id}", headers=self._auth(), timeout=120)
            self.session_id = self.kernel_id = None

    # nbgrader's assignment list, as its JupyterLab tab calls it

    def assignments(self, action: str, assignment: str, course_id: str = "dpviz") -> dict | list:
        r = self.post(f"assignments/{action}", data={"course_id": course_id, "assignment_id": assignment})
        r.raise_for_status()
        return r.json()


def _decode(frame) -> dict:
    """A kernel message from the websocket: JSON text, or (a message with buffers, a widget's) Jupyter's binary
    frame: the number of parts, their offsets (4-byte big-endian each), then the message's JSON first."""
    if isinstance(frame, str):
        return json.loads(frame)
    parts = int.from_bytes(frame[:4], "big")
    offsets = [int.from_bytes(frame[4 + 4 * i:8 + 4 * i], "big") for i in range(parts)]
    return json.loads(frame[offsets[0]:offsets[1] if parts > 1 else None])


def code_cells(nb: dict) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
