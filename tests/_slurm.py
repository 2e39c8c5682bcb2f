"""A Slurm cluster started for the Slurm test: Debian's munged, slurmctld and one slurmd per "machine".

The machines are :mod:`_netns`'s network namespaces on a veth pair. Each runs ``slurmd -N node<i>``
with its own address, so the controller reaches it, and its jobs reach the other node, only over the veth,
as on a real cluster. Debian's Slurm is built with ``--enable-multiple-slurmd`` (``scontrol show config``
says ``MULTIPLE_SLURMD = Yes``), which would let several slurmd share one address, told apart by port; it is
not used here: with an address of its own each node is a machine to torchrun and gloo too, as in test_cluster.
The controller runs on the first machine, under this host's name (slurmctld refuses to start on a host
its ``SlurmctldHost`` does not name), at that machine's address. munged runs in the host's namespace:
its socket is a file, reached from every namespace. Everything lives in one temporary folder: the
configuration, munge's key, the spool and state folders and the logs; every daemon is ended by PID on exit.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import _netns

PROGRAMS = ("munged", "slurmctld", "slurmd", "slurmstepd", "sbatch", "srun", "scontrol", "sinfo")
START_TIMEOUT = 60  # seconds for the daemons to start and both nodes to come up idle


def refusal() -> str | None:
    """Why no Slurm cluster can be started here (one sentence), or None when one can."""
    missing = [p for p in PROGRAMS if not shutil.which(p, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")]
    if missing:
        return (f"Slurm and munge are not installed (no {', '.join(missing)}; "
                "`apt-get install -y slurm-wlm munge`, as .ci/run does).")
    refused = _netns.refusal()
    if refused:
        return f"its nodes would be network namespaces, and {refused}"
    return None


@dataclass
class Cluster:
    root: Path                      # the temporary folder holding everything
    machines: list                  # the _netns.Machine of each compute node; the first also runs the controller
    nodes: list[str]                # Slurm's node names, one per machine
    env: dict = field(default_factory=dict)  # what a Slurm client needs: SLURM_CONF
    daemons: dict = field(default_factory=dict)  # name -> Popen

    def client(self, *args, env=None, timeout=60) -> subprocess.CompletedProcess:
        """Run a Slurm command (sbatch, scontrol, ...) on the first machine, as a user on its login node would."""
        return subprocess.run(["ip", "netns", "exec", self.machines[0].name, *args], capture_output=True, text=True,
                              env={**os.environ, **self.env, **(env or {})}, timeout=timeout)

    def logs(self, tail=2000) -> str:
        """The last ``tail`` characters of every daemon's log, for a failure's message."""
        return "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-tail:]}"
                         for p in sorted((self.root / "log").glob("*.log")))


def slurm_conf(root: Path, machines, nodes, cpus: int) -> str:
    """A minimal slurm.conf: no accounting, no cgroups (proctrack/linuxproc, task/none), munge on our socket.

    ``MinJobAge=0`` keeps finished jobs' records (the cluster lives a minute) and makes ``sbatch --wait`` poll
    every 2 s instead of backing off to 32 s, which would add up to half a minute to the test.
    ``SlurmdParameters=config_overrides``: a node counts the CPUs written here, whatever hwloc finds in a
    container, instead of being drained for a count that differs."""
    head = machines[0]
    lines = [
        "ClusterName=dpviz",
        f"SlurmctldHost={socket.gethostname().split('.')[0]}({head.address})",
        "SlurmUser=root", "SlurmdUser=root",
        f"AuthInfo=socket={root / 'munge.socket'}",
        "AuthType=auth/munge", "CredType=cred/munge",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool' / '%n'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd-%n.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd-%n.log'}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
        "SchedulerType=sched/builtin", "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
        "MpiDefault=none", "MinJobAge=0", "SlurmdParameters=config_overrides", "ReturnToService=2",
        "SlurmdTimeout=30", "InactiveLimit=0", "KillWait=5",
        "SlurmctldDebug=info", "SlurmdDebug=info",
    ]
    lines += [f"NodeName={n} NodeAddr={m.address} CPUs={cpus} State=UNKNOWN" for n, m in zip(nodes, machines)]
    lines.append(f"PartitionName=dpviz Nodes={','.join(nodes)} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def _start(args, log: Path, machine=None, env=None) -> subprocess.Popen:
    prefix = ["ip", "netns", "exec", machine.name] if machine else []
    with open(log, "ab") as out:
        return subprocess.Popen(prefix + args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})}, start_new_session=True)


def _wait(until, what: str, cluster: Cluster, timeout=START_TIMEOUT) -> float:
    start = time.monotonic()
    while not until():
        dead = {name: p.returncode for name, p in cluster.daemons.items() if p.poll() is not None}
        if dead or time.monotonic() - start > timeout:
            raise RuntimeError(f"{what}: not after {time.monotonic() - start:.0f} s"
                               f"{f'; exited: {dead}' if dead else ''}\n{cluster.logs()}")
        time.sleep(0.2)
    return time.monotonic() - start


def nodes_idle(cluster: Cluster) -> bool:
    shown = cluster.client("sinfo", "--noheader", "--Node", "--format=%N %T", timeout=20)
    states = dict(line.split() for line in shown.stdout.splitlines() if line.strip())
    return shown.returncode == 0 and all(states.get(n) == "idle" for n in cluster.nodes)


@contextlib.contextmanager
def cluster(machines, root: Path):
    """Start munged, slurmctld and a slurmd per machine, configured in ``root``; yield the :class:`Cluster`
    once every node is idle. On exit every daemon (and anything a job left) is ended by PID, and checked gone."""
    for sub in ("state", "spool", "run", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    nodes = [f"node{i}" for i in range(len(machines))]
    conf = root / "slurm.conf"
    conf.write_text(slurm_conf(root, machines, nodes, cpus=os.cpu_count() or 1))
    # slurmd loads a cgroup plugin even when no plugin uses cgroups; the default (autodetect) fails where
    # /sys/fs/cgroup is not mounted, as in many containers. cgroup/v1 loads without touching it.
    (root / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")
    for node in nodes:
        (root / "spool" / node).mkdir()
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))  # munge's key: any 32 to 1024 random bytes
    key.chmod(0o400)
    c = Cluster(root, list(machines), nodes, env={"SLURM_CONF": str(conf)})
    try:
        # In the foreground munged logs to its output. --force: a precaution, so that a CI machine's odd /tmp
        # permissions cannot stop it (it checks the folders around its socket and key).
        c.daemons["munged"] = _start(["munged", "--foreground", "--force", f"--socket={root / 'munge.socket'}",
                                      f"--key-file={key}", f"--pid-file={root / 'run' / 'munged.pid'}",
                                      f"--seed-file={root / 'run' / 'munged.seed'}"], root / "log" / "munged.log")
        _wait(lambda: (root / "munge.socket").exists(), "munged's socket", c)
        c.daemons["slurmctld"] = _start(["slurmctld", "-D", "-i", "-f", str(conf)],
                                        root / "log" / "slurmctld.out.log", machines[0], c.env)
        for node, machine in zip(nodes, machines):
            c.daemons[f"slurmd {node}"] = _start(["slurmd", "-D", "-N", node, "-f", str(conf)],
                                                 root / "log" / f"slurmd-{node}.out.log", machine, c.env)
        _wait(lambda: nodes_idle(c), f"nodes {', '.join(nodes)} idle", c)
        yield c
    finally:
        stop(c)


def stop(c: Cluster) -> None:
    """End every daemon this cluster started, by PID, and whatever its jobs left in the machines; raise if any
    survive."""
    for machine in c.machines:
        _netns.end_everything_in(machine)
    munged = c.daemons.get("munged")
    if munged and munged.poll() is None:
        munged.send_signal(signal.SIGTERM)
        try:
            munged.wait(10)
        except subprocess.TimeoutExpired:
            munged.kill()
            munged.wait(5)
    for p in c.daemons.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(5)
    left = {name: p.pid for name, p in c.daemons.items() if p.poll() is None}
    left.update({f"in {m.name}": pids for m in c.machines if (pids := _netns.pids_in(m))})
    if left:
        raise RuntimeError(f"Slurm's daemons outlived the test: {left}")
