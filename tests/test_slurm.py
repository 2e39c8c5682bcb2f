"""The README's Slurm path, for real: ``sbatch share/dpviz.sbatch`` on a two-node Slurm cluster started here.

Debian's munged, slurmctld and two slurmd (``tests/_slurm.py``), each slurmd on its own "machine" (a network
namespace of ``tests/_netns.py``), configured in a temporary folder. The job runs one torchrun per node, two
ranks each, joined over the veth by c10d rendezvous on the first node's address, and rank 0 writes a record.
Claims checked: the job ends COMPLETED on both nodes; the record passes ``check()`` and loads as the chapters
load records (``dpviz.engine.schema.load``); no daemon, job or rank outlives the test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

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
        pytest.skip(f"no two-node Slurm cluster here: {refused}")
    # A short folder: slurmd's step sockets (SPOOL/node0/node0_1.4294967291 for a batch script) must fit in a
    # socket path's 108 bytes, which a pytest-xdist worker's tmp_path overruns (113). Its logs are kept in tmp_path.
    root = Path(tempfile.mkdtemp(prefix="dpvslurm"))
    try:
        started = time.monotonic()
        with _netns.two_machines() as machines, _slurm.cluster(machines, root) as c:
            c.started_in = time.monotonic() - started
            yield c
    finally:
        if (root / "log").is_dir():
            shutil.copytree(root / "log", tmp_path / "slurm-logs", dirs_exist_ok=True)
        shutil.rmtree(root, ignore_errors=True)


def job_output(log) -> str:
    return log.read_text(errors="replace") if log.exists() else "(no job output)"


def submit(cluster, log, *args):
    """``sbatch --wait share/dpviz.sbatch ARGS`` on two nodes, two ranks each; returns sbatch's outcome, the
    seconds it took and the job's output. Fails, with the queue and the daemons' logs, after JOB_TIMEOUT."""
    env = {"PATH": f"{_netns.PYTHON.parent}:/usr/bin:/bin:/usr/sbin:/sbin", "DPVIZ_PYTHON": str(_netns.PYTHON),
           "DPVIZ_PROCS_PER_NODE": "2"}
    start = time.monotonic()
    try:
        done = cluster.client("sbatch", "--wait", "--parsable", "--nodes=2", f"--output={log}",
                              f"--chdir={_netns.REPO}", str(SCRIPT), *args, env=env, timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the job did not end within {JOB_TIMEOUT} s:\n{cluster.client('squeue', '--all').stdout}"
                    f"\n{job_output(log)[-4000:]}\n{cluster.logs()}")
    return done, time.monotonic() - start, job_output(log)


def test_sbatch_records_a_run_on_two_nodes_that_passes_check(cluster, tmp_path):
    out = tmp_path / "runs" / "slurm"
    log = tmp_path / "job.out"
    done, took, said = submit(cluster, log, "--b", "8", "--steps", "5", "--out", str(out))
    assert done.returncode == 0, f"sbatch: {done.stdout}{done.stderr}\n{said[-4000:]}\n{cluster.logs()}"
    job = done.stdout.strip().split(";")[0]
    shown = cluster.client("scontrol", "show", "job", job).stdout
    assert "JobState=COMPLETED" in shown and re.search(r"\bNodeList=node\[0-1\]", shown), shown
    # One torchrun per node, each with its own address, meeting at the first node's.
    started = re.findall(r"dpviz: node (node\d) \(([\d.]+)\): torchrun with 2 ranks", said)
    assert sorted(started) == sorted((n, m.address) for n, m in zip(cluster.nodes, cluster.machines)), said[-4000:]
    assert f"rendezvous at {cluster.machines[0].address}:" in said, said[-4000:]

    run = Run.load(out)
    assert run.meta["k"] == 4 and run.meta["backend"] == "gloo"
    report = run.check()
    assert "all 4 replicas held bit-identical parameters" in report
    loaded = schema.load(out)  # as a chapter loads a record it is given
    assert isinstance(loaded, Run) and loaded.meta == run.meta
    elapsed = re.search(r"RunTime=(\S+)", shown).group(1)
    print(f"Slurm cluster of 2 nodes up in {cluster.started_in:.1f} s; job {job} (k = 4, 2 nodes x 2 ranks, "
          f"5 steps) ran {elapsed} by Slurm's clock, {took:.1f} s from sbatch to its end; {report}")


def test_a_failing_run_fails_its_job_saying_why(cluster, tmp_path):
    # A value the ranks refuse: every rank on both nodes exits at once, torchrun and srun with them, and the job
    # fails with sbatch's exit status and the ranks' sentence in its output, instead of hanging or passing.
    out = tmp_path / "runs" / "refused"
    done, took, said = submit(cluster, tmp_path / "job.out", "--steps", "nope", "--out", str(out))
    job = done.stdout.strip().split(";")[0]
    shown = cluster.client("scontrol", "show", "job", job).stdout
    assert done.returncode != 0 and "JobState=FAILED" in shown, shown + said[-4000:]
    assert "argument --steps: invalid int value: 'nope'" in said, said[-4000:]
    assert not out.with_suffix(".json").exists()
    print(f"a refused value failed job {job} after {took:.1f} s: "
          + next(line for line in said.splitlines() if "invalid int value" in line).strip())
