"""How many cores a CPU quota lets this process use: the cgroup's ``cpu.max`` (v2) or ``cpu.cfs_quota_us`` over
``cpu.cfs_period_us`` (v1), the tightest on the way from its own cgroup up to the root of the hierarchy.

A JupyterHub pod with a 1-CPU limit on a 16-core node sees 16 cores in its affinity mask: the quota is what says it
may run one of them at a time. :func:`dpviz.engine.launch.cpu_count` takes the smaller of the two.

Every path is read under ``root`` ("/" on a real machine), so a test can lay out fake ``proc`` and ``sys`` files.
"""

from __future__ import annotations

import math
from pathlib import Path


def quota_cores(root: str | Path = "/", pid: str = "self") -> int | None:
    """The whole cores the CPU quota of process ``pid`` allows (at least 1), or None where no quota limits it."""
    root = Path(root)
    try:
        cgroups = (root / "proc" / pid / "cgroup").read_text().splitlines()
        mounts = (root / "proc" / pid / "mountinfo").read_text().splitlines()
    except OSError:
        return None  # not Linux, or /proc is hidden: no quota we can see
    limits = []
    for line in cgroups:  # "0::/user.slice/pod" (v2), "4:cpu,cpuacct:/kubepods/pod" (v1)
        number, controllers, path = line.split(":", 2)
        v2 = number == "0" and controllers == ""
        if not v2 and "cpu" not in controllers.split(","):
            continue
        for folder in _folders(root, mounts, path, v2):
            limits.append(_limit(folder, v2))
    limits = [limit for limit in limits if limit is not None]
    return max(1, math.floor(min(limits))) if limits else None


def _folders(root: Path, mounts: list[str], path: str, v2: bool):
    """The cgroup's folder in each matching mount, and its parents up to that mount's top."""
    for mount in mounts:
        # "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw" (fields, "-", type, source, options)
        fields, _, rest = mount.partition(" - ")
        fields, rest = fields.split(), rest.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        kind, options = rest[0], rest[2].split(",")
        if kind != ("cgroup2" if v2 else "cgroup") or (not v2 and "cpu" not in options):
            continue
        mount_root, mount_point = fields[3], fields[4]
        # in a container the mount's root is the container's own cgroup, and the path starts with it
        inside = path[len(mount_root):] if mount_root != "/" and path.startswith(mount_root) else path
        top = root / mount_point.lstrip("/")
        folder = top / inside.strip("/")
        while True:
            yield folder
            if folder == top or top not in folder.parents:
                break
            folder = folder.parent


def _limit(folder: Path, v2: bool) -> float | None:
    """The cores a cgroup folder's own quota allows, or None: no quota there, or no such file."""
    try:
        if v2:
            quota, period = (folder / "cpu.max").read_text().split()[:2]
            return None if quota == "max" else int(quota) / int(period)
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period
