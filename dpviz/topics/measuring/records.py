"""All-reduce times that others measured on real multi-GPU systems and published, with the source of every point.

Nothing in this record was measured by dpviz. Each point is one row of an ``all_reduce_perf`` table
(NVIDIA's nccl-tests) that someone ran on GPUs and put on the web: message size, average time, and the
two bandwidths nccl-tests prints. The rows are typed out in ``published_allreduce.csv`` in
``dpviz/records/`` (the package's data folder), as printed; :data:`SYSTEMS` says which machine each table came from and where to read it.
``python -m dpviz.topics.measuring.records`` turns the table into the shipped record, checking every row
against the arithmetic nccl-tests uses (algbw = M / time, busbw = algbw · 2(k−1)/k), so a typing
slip cannot pass::

    from dpviz.topics.measuring.records import published_allreduce
    pub = published_allreduce()                 # PublishedAllReduce
    pub.rows("v100x8_nvlink")                   # (k, M, seconds) of one system
    pub.source("v100x8_nvlink")                 # the URL of its table

The chapter fits the same α-β ring model to these points as to this machine's own all-reduce times,
and draws them beside each other, each labelled with who measured it.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

from dpviz.engine.checks import check_choice
from dpviz.engine.paths import RECORDS_DIR, SHIPPED_DIR
from dpviz.engine.schema import Array, Kind, Meta, Record, register

CSV_PATH = RECORDS_DIR / "published_allreduce.csv"  # package data, beside the shipped runs
RECORD_PATH = SHIPPED_DIR / "published_allreduce"
DATE_READ = "2026-11-30"  # when the tables below were read and typed out

# One entry per table: what ran, over which links, and where the table is. "rows" says how much of the
# table was read; every listed table was read whole (out-of-place columns; the in-place half is left out).
SYSTEMS = {
    "v100x8_nvlink": dict(
        label="8× V100, NVLink, 1 node",
        gpu="Tesla V100-SXM2-16GB", gpus=8, nodes=1,
        link="NVLink inside one server (its nvidia-smi topo lists NV1/NV2 links between GPU pairs)",
        command="./build/all_reduce_perf -b 8 -e 128M -f 2 -g 8",
        who="konnase (blog post on NCCL)",
        source="https://github.com/konnase/konnase.github.io/blob/17cd9dfb8fa17e3f9523d06c829b397a63ae94e5/"
               "source/_posts/deep_learning/NCCL.md",
        rows="the whole table, 25 sizes from 8 B to 128 MiB",
    ),
    "a100x16_roce": dict(
        label="16× A100, 2 nodes, RoCE",
        gpu="NVIDIA A100-SXM4-40GB", gpus=16, nodes=2,
        link="NVLink inside each node; between the two nodes Oracle Cloud's cluster network, RDMA over RoCE v2 "
             "with 16 ports of 100 Gb/s per node (as the tutorial describes it)",
        command="mpirun -n 16 -npernode 8 ... all_reduce_perf -b 64 -e 1G -f 2 -t 1 -g 1",
        who="Oracle Japan (OCI tutorial on building a GPU cluster)",
        source="https://github.com/oracle-japan/ocitutorials/blob/61925d8bff4889924f78880353519e520931ec68/"
               "tutorials/_intermediates/spinup-gpu-cluster.md",
        rows="the whole table, 25 sizes from 64 B to 1 GiB",
    ),
    "h100x16_2nodes": dict(
        label="16× H100, 2 nodes",
        gpu="NVIDIA H100 80GB HBM3", gpus=16, nodes=2,
        link="NVLink inside each node; the file does not name the network between the nodes (the repository "
             "is named for creating Google Cloud A3 Mega machines)",
        command="mpirun -np 16 -npernode 8 ... all_reduce_perf -b 8 -e 8G -f 2 -g 1",
        who="lessizzmore (create-a3mega-ztan-fork)",
        source="https://github.com/lessizzmore/create-a3mega-ztan-fork/blob/02dd8f455c43ced1cf442ef29334bda97149264b/"
               "ztan-NCCL-test-result",
        rows="the whole table, 31 sizes from 8 B to 8 GiB",
    ),
}
SYSTEM_FIELDS = ("label", "gpu", "gpus", "nodes", "link", "command", "who", "source", "rows")

KIND = Kind(
    name="published_allreduce",
    version=1,
    doc="All-reduce times measured by others on real multi-GPU systems (nccl-tests all_reduce_perf tables, "
        "out-of-place), one row per message size, each with the system it came from; nothing measured by dpviz.",
    arrays=(
        Array("system", ("n",), "str", "the system's id, a key of the metadata field systems"),
        Array("k", ("n",), "int64", "GPUs (ranks) in the all-reduce"),
        Array("m", ("n",), "int64", "message size M, bytes"),
        Array("time", ("n",), "float64", "average seconds per all-reduce, as published"),
        Array("algbw", ("n",), "float64", "algorithm bandwidth M / time as published, bytes per second (2 decimals in GB/s)"),
        Array("busbw", ("n",), "float64", "bus bandwidth algbw · 2(k−1)/k as published, bytes per second"),
    ),
    meta=(
        Meta("systems", "dict", "id -> label, gpu, gpus, nodes, link, command, who, source (the table's URL), rows read"),
        Meta("date_read", "str", "when the tables were read (ISO 8601 date)"),
        Meta("table", "str", "the plain table the record was built from, relative to the package"),
        Meta("measured_here", "bool", "always false: every point was measured elsewhere, by the source named"),
    ),
)


@register
class PublishedAllReduce(Record):
    """Published all-reduce times, one row per (system, M); see the module docstring."""

    KIND = KIND

    def describe(self) -> str:
        names = "; ".join(s["label"] for s in self.meta["systems"].values())
        return (f"published nccl-tests all-reduce tables, measured elsewhere, not by dpviz: {names} "
                f"(sources in the record; read {self.meta['date_read']})")

    @property
    def M(self) -> np.ndarray:
        """(n,) message size M, bytes: the stored array ``m`` under the notes' name."""
        return self.m

    @property
    def system_ids(self) -> list[str]:
        """The systems in the order their rows come."""
        return list(dict.fromkeys(self.system.tolist()))

    def rows(self, system: str) -> tuple:
        """``(k, M, seconds)`` arrays of one system's points."""
        check_choice("system", system, self.system_ids)
        sel = self.system == system
        return self.k[sel], self.M[sel], self.time[sel]

    def info(self, system: str) -> dict:
        check_choice("system", system, self.system_ids)
        return self.meta["systems"][system]

    def source(self, system: str) -> str:
        """The URL of the table the system's points were read from."""
        return self.info(system)["source"]

    def label(self, system: str) -> str:
        """How a figure names the system's points: what it is, and who measured it (not dpviz)."""
        info = self.info(system)
        return f"{info['label']}: measured by {info['who']}, not here"

    def check(self) -> str:
        """Assert that every row obeys nccl-tests' own arithmetic, to the rounding of the printed columns."""
        return check_rows(self.k, self.M, self.time, self.algbw, self.busbw, source="the published record")


def check_rows(k, M, time, algbw, busbw, *, source: str) -> str:
    """Raise on the first row whose printed bandwidths do not follow from its size and time; one line if all do.

    nccl-tests prints algbw = M / time and busbw = algbw · 2(k−1)/k in GB/s (1e9 bytes) to two decimals,
    and the time to four significant digits, so each may be off by half a unit in its last place.
    """
    k, M, time = np.asarray(k, float), np.asarray(M, float), np.asarray(time, float)
    algbw, busbw = np.asarray(algbw, float) / 1e9, np.asarray(busbw, float) / 1e9
    expect_alg = M / time / 1e9
    tol_alg = 0.005 + expect_alg * 1e-3  # the printed 2 decimals, plus the time's own rounding
    factor = 2 * (k - 1) / k
    tol_bus = 0.005 + factor * tol_alg
    bad_alg = np.flatnonzero(np.abs(algbw - expect_alg) > tol_alg)
    bad_bus = np.flatnonzero(np.abs(busbw - algbw * factor) > tol_bus + 0.005 * factor)
    for bad, name, got, want in ((bad_alg, "algbw", algbw, expect_alg), (bad_bus, "busbw", busbw, algbw * factor)):
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{source}: row {i} (M = {int(M[i])} B) prints {name} {got[i]:.2f} GB/s, but its size and "
                             f"time give {want[i]:.3f} GB/s; check the row against its source.")
    return f"{len(M)} published rows: algbw = M / time and busbw = algbw·2(k−1)/k hold to the printed rounding"


def read_table(path=CSV_PATH) -> PublishedAllReduce:
    """Build the record from the plain table (comment lines start with #) and :data:`SYSTEMS`."""
    path = Path(path)
    with path.open(newline="") as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    if not rows:
        raise ValueError(f"path {str(path)!r} holds no rows.")
    unknown = sorted({r["system"] for r in rows} - set(SYSTEMS))
    if unknown:
        raise ValueError(f"path {str(path)!r} names the system {unknown[0]!r}, which SYSTEMS does not describe.")
    system = np.array([r["system"] for r in rows], dtype=str)
    arrays = dict(
        system=system,
        k=np.array([SYSTEMS[s]["gpus"] for s in system], dtype=np.int64),
        m=np.array([int(r["size_bytes"]) for r in rows], dtype=np.int64),
        time=np.array([float(r["time_us"]) * 1e-6 for r in rows]),
        algbw=np.array([float(r["algbw_GBps"]) * 1e9 for r in rows]),
        busbw=np.array([float(r["busbw_GBps"]) * 1e9 for r in rows]),
    )
    meta = dict(systems={s: {f: SYSTEMS[s][f] for f in SYSTEM_FIELDS} for s in dict.fromkeys(system.tolist())},
                date_read=DATE_READ, table=f"records/{path.name}", measured_here=False)
    record = PublishedAllReduce(meta, arrays)
    record.check()
    return record


def published_allreduce(path=RECORD_PATH) -> PublishedAllReduce:
    """The shipped record (numpy only); ``python -m dpviz.topics.measuring.records`` builds it from the table."""
    stem = Path(path)
    if not stem.with_suffix(".json").is_file():
        raise FileNotFoundError(f"path {str(stem)!r}.json does not exist; build it with `python -m dpviz.topics.measuring.records`.")
    return PublishedAllReduce.load(stem)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dpviz.topics.measuring.records",
                                     description="Build the shipped record of published all-reduce times from its table.")
    parser.add_argument("--table", default=str(CSV_PATH), help="the plain table (default: dpviz/records/published_allreduce.csv)")
    parser.add_argument("--out", default=str(RECORD_PATH), help="record path stem to write")
    args = parser.parse_args(argv)
    record = read_table(args.table)
    path = record.save(args.out)
    print(record.check())
    for s in record.system_ids:
        print(f"{s}: {len(record.rows(s)[1])} points, {record.info(s)['label']}, {record.source(s)}")
    print(f"wrote {path}.npz and {path}.json")


if __name__ == "__main__":
    main()
