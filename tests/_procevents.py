"""Every process this machine starts, as Linux reports it: the kernel's process-events connector (netlink).

A watcher that samples ``/proc`` can miss a process that lives less than one sampling interval; on a busy
machine a rank that finds its answer wrong and exits in a fraction of a second is such a process. The kernel,
asked over netlink (root only), sends one message for every fork, change of user and change of name, so
:class:`ProcessEvents` keeps its own family tree and user of each process from the moment it starts listening,
and lists every process that took a watched name, with its user and ancestors *as they were when it took it*.

    with ProcessEvents(prefix="dpviz-rank-") as events:
        ...                                    # processes start, rename themselves, exit
    events.named                               # {pid: (uid, (parent, grandparent, ...))}

:func:`why_not` says why it cannot listen here (not Linux, not root, no connector in the kernel). If the
kernel's queue overflowed, :attr:`ProcessEvents.lost` is true and the tree may lack processes: a test then
says so instead of passing or failing on an incomplete picture.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
import threading

NETLINK_CONNECTOR = 11
CN_IDX_PROC = CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN, PROC_CN_MCAST_IGNORE = 1, 2
NLMSG_DONE = 3
FORK, UID, COMM = 0x1, 0x4, 0x200
HEADER = 16 + 20  # nlmsghdr, then cn_msg (id, seq, ack, len, flags)
EVENT = struct.Struct("=IIQ")  # what, cpu, timestamp; the event's own fields follow


def why_not() -> str | None:
    if not hasattr(socket, "AF_NETLINK"):
        return "the kernel's process events are Linux's"
    if os.geteuid() != 0:
        return "listening to the kernel's process events needs root"
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR) as s:
            s.bind((0, CN_IDX_PROC))
    except OSError as e:
        return f"this kernel has no process-events connector ({e})"
    return None


def _snapshot() -> tuple[dict[int, int], dict[int, int]]:
    """Each live process's parent and real uid, from /proc (the tree before the first event)."""
    parents, uids = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            parents[int(entry)] = int(fields["PPid"])
            uids[int(entry)] = int(fields["Uid"].split()[0])
        except (OSError, KeyError, ValueError):
            continue
    return parents, uids


class ProcessEvents(threading.Thread):
    """Listens to fork, uid and name events until stopped; see the module's docstring."""

    def __init__(self, prefix: str):
        super().__init__(daemon=True)
        self.prefix = prefix.encode()
        self.named: dict[int, tuple[int, tuple[int, ...]]] = {}
        self.lost = False
        self._ending = threading.Event()
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE: room for a class's forks
        except OSError:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self._sock.bind((os.getpid(), CN_IDX_PROC))
        self._sock.settimeout(0.2)
        self._send(PROC_CN_MCAST_LISTEN)
        self.parents, self.uids = _snapshot()  # after listening: a fork in between is in both, which is harmless

    def _send(self, op: int) -> None:
        body = struct.pack("=I", op)
        cn = struct.pack("=IIIIHH", CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(body), 0) + body
        self._sock.send(struct.pack("=IHHII", 16 + len(cn), NLMSG_DONE, 0, 0, os.getpid()) + cn)

    def ancestors(self, pid: int) -> tuple[int, ...]:
        chain, seen = [], {pid}
        while (pid := self.parents.get(pid, 0)) > 0 and pid not in seen:
            chain.append(pid)
            seen.add(pid)
        return tuple(chain)

    def _handle(self, data: bytes) -> None:
        what = EVENT.unpack_from(data, HEADER)[0]
        at = HEADER + EVENT.size
        if what == FORK:
            _, parent_tgid, child_pid, child_tgid = struct.unpack_from("=IIII", data, at)
            if child_pid == child_tgid:  # a new process, not a thread
                self.parents[child_tgid] = parent_tgid
                self.uids[child_tgid] = self.uids.get(parent_tgid, -1)
        elif what == UID:
            _, tgid, ruid, _ = struct.unpack_from("=IIII", data, at)
            self.uids[tgid] = ruid
        elif what == COMM:
            _, tgid = struct.unpack_from("=II", data, at)
            name = data[at + 8:at + 24].split(b"\0", 1)[0]
            if name.startswith(self.prefix) and tgid not in self.named:
                self.named[tgid] = (self.uids.get(tgid, -1), self.ancestors(tgid))

    def run(self) -> None:
        while not self._ending.is_set():
            try:
                data = self._sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError as e:
                if e.errno == errno.ENOBUFS:  # the kernel dropped events: say so, keep listening
                    self.lost = True
                    continue
                raise
            if len(data) >= HEADER + EVENT.size:
                self._handle(data)

    def __enter__(self) -> ProcessEvents:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self._ending.set()
        if self.is_alive():
            self.join(5)
        try:
            self._send(PROC_CN_MCAST_IGNORE)
        except OSError:
            pass
        self._sock.close()
