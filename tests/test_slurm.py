"""The README's Slurm path, for real: ``sbatch share/dpviz.sbatch`` on a two-node Slurm cluster started here.

Debian's munged, slurmctld and two slurmd (``tests/_slurm.py``), each slurmd on its own "machine" (a network
namespace of ``tests/_netns.py``), configured in a temporary folder. The job runs one torchrun per node, two
ranks each, joined over the veth by c10d rendezvous on the first node's address, and rank 0 writes a record.
Claims checked: the job ends COMPLETED on both nodes; the record passes ``check()`` and loads as the chapters
load records (``dpviz.engine.schema.load``); no daemon, job or rank outlives the test.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

import _netns
import _slurm
from dpviz.engine import schema
from dpviz.topics.ground_floor.records import Run

SCRIPT = _netns.REPO / "share" / "dpviz.sbatch"
JOB_TIMEOUT = 180  # seconds for the job, queued to completed


@pytest.fixture
def cluster(tmp_path):
    refused = _slurm.refusal()
    if refused:
        pytest.skip(f"needs a Slurm cluster of two nodes, and {refused}.")
    started = time.monotonic()
    with _netns.two_machines() as machines, _slurm.cluster(machines, tmp_path / "slurm") as c:
        c.started_in = time.monotonic() - started
        yield c


def job_output(log) -> str:
    return log.read_text(errors="replace") if log.exists() else "(no job output)"


def test_sbatch_records_a_run_on_two_nodes_that_passes_check(cluster, tmp_path):
    out = tmp_path / "runs" / "slurm"
    log = tmp_path / "job.out"
    env = {"PATH": f"{_netns.PYTHON.parent}:/usr/bin:/bin:/usr/sbin:/sbin", "DPVIZ_PYTHON": str(_netns.PYTHON),
           "DPVIZ_PROCS_PER_NODE": "2"}
    start = time.monotonic()
    try:
        done = cluster.client("sbatch", "--wait", "--parsable", "--nodes=2", f"--output={log}",
                              f"--chdir={_netns.REPO}", str(SCRIPT), "--b", "8", "--steps", "5", "--out", str(out),
                              env=env, timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the job did not end within {JOB_TIMEOUT} s:\n{cluster.client('squeue', '--all').stdout}"
                    f"\n{job_output(log)[-4000:]}\n{cluster.logs()}")
    took = time.monotonic() - start
    said = job_output(log)
    assert done.returncode == 0, f"sbatch: {done.stdout}{done.stderr}\n{said[-4000:]}\n{cluster.logs()}"
    job = done.stdout.strip().split(";")[0]
    shown = cluster.client("scontrol", "show", "job", job).stdout
    assert "JobState=COMPLETED" in shown and re.search(r"\bNodeList=node\[0-1\]", shown), shown
    # One torchrun per node, each with its own address, the first hosting the rendezvous.
    started = re.findall(r"dpviz: node (node\d) \(([\d.]+)\): torchrun with 2 ranks", said)
    assert sorted(started) == sorted((n, m.address) for n, m in zip(cluster.nodes, cluster.machines)), said[-4000:]

    run = Run.load(out)
    assert run.meta["k"] == 4 and run.meta["backend"] == "gloo"
    report = run.check()
    assert "all 4 replicas held bit-identical parameters" in report
    loaded = schema.load(out)  # as a chapter loads a record it is given
    assert isinstance(loaded, Run) and loaded.meta == run.meta
    elapsed = re.search(r"RunTime=(\S+)", shown).group(1)
    print(f"Slurm cluster of 2 nodes up in {cluster.started_in:.1f} s; job {job} (k = 4, 2 nodes x 2 ranks, "
          f"5 steps) ran {elapsed} by Slurm's clock, {took:.1f} s from sbatch to its end; {report}")
