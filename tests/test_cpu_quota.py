"""The cores dpviz plans threads for are the smaller of the affinity mask and the cgroup's CPU quota.

On fake cgroup files laid out under a temporary root (v2's ``cpu.max``, v1's ``cpu.cfs_quota_us`` and
``cpu.cfs_period_us``, a container's own cgroup as its mount's root, a parent's quota tighter than the child's), and,
where this machine lets root make a cgroup, in a real one: a process moved into a cgroup with a quota of one core
plans for one core.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dpviz.engine import launch
from dpviz.engine.cores import quota_cores

ROOT = Path(__file__).resolve().parents[1]
V2_MOUNT = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate"
V1_MOUNT = "32 31 0:29 {root} /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct"


def fake_machine(tmp_path: Path, cgroup: str, mounts: list[str], files: dict[str, str]) -> Path:
    """A root with proc/self/cgroup, proc/self/mountinfo and the cgroup files named in ``files`` (path: text)."""
    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "self" / "cgroup").write_text(cgroup)
    (tmp_path / "proc" / "self" / "mountinfo").write_text("\n".join(mounts) + "\n")
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path


@pytest.mark.parametrize("pod, container, cores", [("150000 100000", "max 100000", 1), ("max 100000", "250000 100000", 2),
                                                    ("max 100000", "max 100000", None), ("50000 100000", None, 1)])
def test_cgroup_v2_cpu_max_the_tightest_on_the_way_up(tmp_path, pod, container, cores):
    files = {"sys/fs/cgroup/kubepods/pod1/cpu.max": pod}
    if container is not None:
        files["sys/fs/cgroup/kubepods/pod1/c1/cpu.max"] = container
    root = fake_machine(tmp_path, "0::/kubepods/pod1/c1\n", [V2_MOUNT], files)
    assert quota_cores(root) == cores


@pytest.mark.parametrize("quota, period, cores", [("200000", "100000", 2), ("-1", "100000", None), ("350000", "100000", 3)])
def test_cgroup_v1_cfs_quota_in_a_container_whose_mount_root_is_its_own_cgroup(tmp_path, quota, period, cores):
    files = {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": quota, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": period}
    root = fake_machine(tmp_path, "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/\n",
                        [V1_MOUNT.format(root="/docker/abc")], files)
    assert quota_cores(root) == cores


def test_no_cgroup_files_means_no_quota(tmp_path):
    assert quota_cores(tmp_path) is None  # no proc/self/cgroup: not Linux, or /proc hidden
    root = fake_machine(tmp_path, "0::/\n", [V2_MOUNT], {})  # the root cgroup has no cpu.max
    assert quota_cores(root) is None


def test_cpu_count_threads_and_the_shared_cores_warning_use_the_quota(monkeypatch):
    from _workers import sum_ranks

    monkeypatch.setattr(launch, "quota_cores", lambda: 1)
    assert launch.cpu_count() == 1 and launch.threads_per_rank(2) == 1
    with pytest.warns(UserWarning, match="k=2 ranks share 1 cores"):
        results = launch.launch(sum_ranks, 2, backend="gloo")
    assert [r["threads"] for r in results] == [1, 1]  # the ranks were given the quota's share
    monkeypatch.setattr(launch, "quota_cores", lambda: 64)  # a quota above the affinity mask changes nothing
    assert launch.cpu_count() == len(os.sched_getaffinity(0))


def cpu_controller() -> tuple[Path, bool] | None:
    """A cgroup folder root may make a child in with a CPU quota here: (the folder, whether it is v2), or None."""
    if os.geteuid() != 0:
        return None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        point, (kind, _, options) = fields.split()[4], rest.split()[:3]
        if kind == "cgroup2" and (Path(point) / "cgroup.subtree_control").exists() and \
                "cpu" in (Path(point) / "cgroup.subtree_control").read_text().split():
            return Path(point), True
        if kind == "cgroup" and "cpu" in options.split(",") and (Path(point) / "cpu.cfs_quota_us").exists():
            return Path(point), False
    return None


REPORT = ("import os, sys; open(sys.argv[1], 'w').write(str(os.getpid()))\n"  # into the cgroup, then ask
          "from dpviz.engine.launch import cpu_count, threads_per_rank; from dpviz.engine.cores import quota_cores\n"
          "print(len(os.sched_getaffinity(0)), quota_cores(), cpu_count(), threads_per_rank(2))")


def test_a_process_in_a_real_cgroup_with_one_cores_quota_plans_for_one_core():
    found = cpu_controller()
    if found is None:
        pytest.skip("no cgroup here that this user may make with a CPU quota (needs root and a mounted cpu "
                    "controller); the fake cgroup files above test the reading")
    top, v2 = found
    cgroup = top / f"dpviz-test-{os.getpid()}"
    cgroup.mkdir()
    try:
        if v2:
            (cgroup / "cpu.max").write_text("100000 100000")
        else:
            (cgroup / "cpu.cfs_period_us").write_text("100000")
            (cgroup / "cpu.cfs_quota_us").write_text("100000")
        done = subprocess.run([sys.executable, "-c", REPORT, str(cgroup / "cgroup.procs")], capture_output=True,
                              text=True, timeout=120)
    finally:
        cgroup.rmdir()  # the process has ended, so the cgroup is empty
    assert done.returncode == 0, done.stderr
    affinity, quota, cores, threads = done.stdout.split()
    assert (quota, cores, threads) == ("1", "1", "1"), f"affinity {affinity} cores, quota {quota}: planned {cores}"
