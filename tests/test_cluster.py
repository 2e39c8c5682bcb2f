"""The README's cluster path, for real: two torchrun agents on two "machines" (network namespaces on a veth pair).

Each machine runs two ranks (``--nnodes 2 --nproc-per-node 2``) of ``python -m dpviz.topics.ground_floor.run_training``,
joined by c10d rendezvous, with gloo talking over the veth. Claims checked:

- with what the README tells a lab to pass, the run records, and the record passes ``check()``;
- without ``--local-addr`` (rank 0's machine then names itself by a host name that resolves to
  loopback) the ranks on the other machine stop at once, saying what to set, instead of hanging;
- when one machine's agent is killed mid-run, its ranks go with it, and the surviving side stops
  within seconds, naming the lost machine's address, with no process left behind.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import _netns
from dpviz.topics.ground_floor.records import Run

TIMEOUT = 60  # seconds, for any one run of the two agents


@pytest.fixture
def machines():
    refused = _netns.refusal()
    if refused:
        pytest.skip(f"needs two network namespaces, and {refused}")
    with _netns.two_machines() as pair:
        yield pair


def agent_args(a, machine, rdzv_id, *, local_addr=True, steps):
    """torchrun's arguments on ``machine``; ``a`` runs the rendezvous (its host name resolves only to loopback)."""
    args = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{a.address}:29500", "--rdzv-id", rdzv_id]
    if machine is a:
        args += ["--rdzv-conf", "is_host=1"]
    if local_addr:
        args += ["--local-addr", machine.address]
    return args + ["-m", "dpviz.topics.ground_floor.run_training", "--steps", str(steps)]


def start_both(machines, tmp_path, rdzv_id, *, env=None, local_addr=True, steps):
    a, _ = machines
    out = tmp_path / "rec"
    return [
        _netns.start_agent(m, agent_args(a, m, rdzv_id, local_addr=local_addr, steps=steps) + ["--out", str(out)],
                           env=env or {}, log=tmp_path / f"agent{i}.log")
        for i, m in enumerate(machines)
    ], out


def wait(agents, until, timeout=TIMEOUT):
    """Poll until ``until()`` is true; returns the seconds it took. Fails, naming the logs, after ``timeout``."""
    start = time.monotonic()
    while not until():
        if time.monotonic() - start > timeout:
            pytest.fail(f"no outcome after {timeout} s; agents' exit codes: {[p.poll() for p in agents]}")
        time.sleep(0.1)
    return time.monotonic() - start


def log(tmp_path, i) -> str:
    return Path(tmp_path / f"agent{i}.log").read_text(errors="replace")


def test_two_machines_record_a_run_that_passes_check(machines, tmp_path):
    # No GLOO_SOCKET_IFNAME: dpviz points gloo at the interface that reaches rank 0's machine.
    agents, out = start_both(machines, tmp_path, "record", steps=5)
    took = wait(agents, lambda: all(p.poll() is not None for p in agents))
    assert [p.returncode for p in agents] == [0, 0], log(tmp_path, 0)[-3000:] + log(tmp_path, 1)[-3000:]
    run = Run.load(out)
    assert run.meta["k"] == 4
    report = run.check()
    assert "all 4 replicas held bit-identical parameters" in report
    print(f"two machines, 4 ranks, 5 steps: recorded in {took:.1f} s; {report}")


def test_missing_local_addr_fails_fast_saying_what_to_set(machines, tmp_path):
    agents, _ = start_both(machines, tmp_path, "nolocal", local_addr=False, steps=5)
    took = wait(agents, lambda: agents[1].poll() is not None)
    said = log(tmp_path, 1)
    assert agents[1].returncode != 0
    assert "cannot reach rank 0's machine at MASTER_ADDR=" in said and "--local-addr" in said, said[-3000:]
    print(f"machine 1 stopped after {took:.1f} s saying: "
          + next(line for line in said.splitlines() if "cannot reach" in line))
    # Rank 0's side would wait for the missing ranks up to the process group's 2-minute timeout: ended here.


def test_killed_agent_is_named_by_the_survivor_and_leaves_nothing(machines, tmp_path):
    a, b = machines
    agents, _ = start_both(machines, tmp_path, "kill", env={"GLOO_SOCKET_IFNAME": _netns.IFNAME}, steps=2000)
    joined = wait(agents, lambda: "ranks joined the process group" in log(tmp_path, 0))
    time.sleep(1.0)  # well inside the 2000 steps (about a minute of training here)
    agents[1].kill()
    killed = time.monotonic()
    wait(agents, lambda: agents[0].poll() is not None, timeout=30)
    reported = time.monotonic() - killed
    survivor = log(tmp_path, 0)
    assert agents[0].returncode != 0
    assert "ChildFailedError" in survivor and "dpviz.topics.ground_floor.run_training FAILED" in survivor, survivor[-3000:]
    # gloo's error on the surviving ranks names the killed machine's address.
    named = [line for line in survivor.splitlines() if b.address in line and "peer" in line]
    assert named, survivor[-3000:]
    # The killed agent's ranks died with it (not left training), and the survivor's ranks are gone too.
    gone = wait(agents, lambda: not _netns.pids_in(a) and not _netns.pids_in(b), timeout=10)
    print(f"joined after {joined:.1f} s; agent 0 reported the kill after {reported:.1f} s "
          f"(all processes gone {gone:.1f} s later): {named[0].strip()[:200]}")
