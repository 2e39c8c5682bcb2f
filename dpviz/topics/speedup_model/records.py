"""The record of an all-reduce benchmark: measured seconds per call over k, message size M and implementation.

Written by :func:`dpviz.topics.measuring.run_bench.run_sweep`. One row per measured (k, M, impl) point; a
collective is over only when its last rank is done, so each repeat keeps the slowest rank's time.

The cost model is fitted to the **fastest** repeat at each point (:attr:`BenchRecord.fastest`), not the
median. A rank that waits for a message sleeps, and the kernel must wake it when the message lands; on a
small virtual machine that wake-up can cost a scheduler tick (about 4 ms here, where the whole exchange
takes 0.2 ms) whenever the ranks sit on different cores, and it hits a varying share of the calls.
``benchmarks/bench_allreduce.py --wakeup`` measures it. α and β describe the exchange; the fastest of
the repeats is the call no late wake-up reached. The median and quartiles stay in the record, and the
figures draw them beside the fastest.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.checks import check_choice
from dpviz.engine.schema import Array, Kind, Meta, Record, ran_on, register
from dpviz.topics.ground_floor import costmodel

IMPLS = ("all_reduce", "ring", "parameter_server")

KIND = Kind(
    name="bench",
    version=2,
    doc="Seconds per all-reduce call on real process groups, over k, message size M and implementation; "
        "algbw and busbw derived from them for readers with numpy alone.",
    arrays=(
        Array("k", ("n",), "int64", "ranks in the process group"),
        Array("m", ("n",), "int64", "message size M, bytes"),
        Array("impl", ("n",), "str", "\"all_reduce\" (dist.all_reduce), \"ring\" or \"parameter_server\" (by hand)"),
        Array("times", ("n", "repeats"), "float64", "seconds per call, the slowest rank of each repeat"),
        Array("median", ("n",), "float64", "derived: the median of times, seconds"),
        Array("q25", ("n",), "float64", "derived: the 25th percentile of times, seconds"),
        Array("q75", ("n",), "float64", "derived: the 75th percentile of times, seconds"),
        Array("algbw", ("n",), "float64", "derived: algorithm bandwidth M / median, bytes per second"),
        Array("busbw", ("n",), "float64", "derived: bus bandwidth algbw · 2(k−1)/k, bytes per second"),
    ),
    meta=(
        *ran_on("backend", "host", "cores", "torch_version", "date"),
        Meta("threads_per_rank", "dict", "intra-op threads per rank, by k"),
        Meta("dtype", "str", "the element type of the all-reduced tensors"),
        Meta("config", "dict", "the sweep's settings (ks, sizes, impls, repeats, warm-up calls)"),
    ),
)


@register
class BenchRecord(Record):
    """Measured all-reduce times, one row per (k, M, impl); the fits of the cost model on them."""

    KIND = KIND

    @classmethod
    def from_times(cls, k, M, impl, times, meta: dict) -> "BenchRecord":
        """Build the record from the measured times, deriving median, quartiles, algbw and busbw."""
        k, M = np.asarray(k, dtype=np.int64), np.asarray(M, dtype=np.int64)
        times = np.asarray(times, dtype=np.float64)
        median = np.median(times, axis=1)
        q25, q75 = np.percentile(times, [25, 75], axis=1)
        algbw = M / median
        arrays = dict(k=k, m=M, impl=np.asarray(impl, dtype=str), times=times, median=median, q25=q25, q75=q75,
                      algbw=algbw, busbw=costmodel.bus_bandwidth(M, median, k))
        return cls(meta, arrays)

    @property
    def M(self) -> np.ndarray:
        """(n,) message size M, bytes: the stored array ``m`` under the notes' name."""
        return self.m

    @property
    def spread(self) -> np.ndarray:
        """(n, 2): the 25th and 75th percentile of seconds per call."""
        return np.stack([self.q25, self.q75], axis=1)

    def describe(self) -> str:
        ks = sorted(set(self.k.tolist()))
        sizes = sorted(set(self.M.tolist()))
        m = self.meta
        return (
            f"all-reduce sweep, k={','.join(map(str, ks))}, M={_bytes(sizes[0])}..{_bytes(sizes[-1])} ({len(sizes)} sizes), "
            f"{self.times.shape[1]} repeats, {m['backend']}, {m['host']}, {m['cores']} cores, {m['date'][:10]}"
        )

    @property
    def fastest(self) -> np.ndarray:
        """(n,): the fastest repeat at each point, seconds: the times the cost model is fitted to."""
        return self.times.min(axis=1)

    def fit(self, formula: str = "ring", *, impl: str = "all_reduce", ks="own cores") -> costmodel.Fit:
        """Fit alpha, beta of one cost-model formula to the fastest repeat of ``impl`` at each point.

        ``ks`` picks the process-group sizes fitted: by default ``"own cores"``, the k that had a
        core per rank when measured (the model assumes ranks run at once; with more ranks than
        cores they take turns and latency grows with the scheduler, not the link); ``"all"``, or
        a list of k.
        """
        rows = self._rows(impl, ks)
        return costmodel.fit_alpha_beta(self.k[rows], self.M[rows], self.fastest[rows], formula=formula)

    def fits(self, *, impl: str = "all_reduce", ks="own cores") -> dict:
        """One fit per formula in ``costmodel.FORMULAS``, keyed by formula (``ks`` as in :meth:`fit`)."""
        rows = self._rows(impl, ks)
        return costmodel.fit_all(self.k[rows], self.M[rows], self.fastest[rows])

    def own_core_ks(self) -> list:
        """The measured k > 1 that had a core per rank; all measured k if none did."""
        ks = sorted(set(self.k.tolist()))
        own = [k for k in ks if 1 < k <= self.meta["cores"]]
        return own or ks

    def ratio(self, impl: str, against: str = "all_reduce") -> tuple:
        """``(k, M, ratio)`` of the median time of ``impl`` to that of ``against`` at every (k, M) both have."""
        mine = self._medians(check_choice("impl", impl, IMPLS))
        theirs = self._medians(check_choice("against", against, IMPLS))
        keys = [key for key in mine if key in theirs]
        ks, Ms = (np.array([key[i] for key in keys], dtype=np.int64) for i in (0, 1))
        return ks, Ms, np.array([mine[key] / theirs[key] for key in keys])

    def table(self) -> str:
        """A plain-text table: one line per (k, M), fastest / median / algbw / busbw for each implementation."""
        impls = [i for i in IMPLS if i in set(self.impl)]
        head = f"{'k':>2} {'M':>9}" + "".join(f" | {name:^42}" for name in impls)
        sub = f"{'':>2} {'':>9}" + f" | {'fastest ms':>10} {'median ms':>9} {'algbw MB/s':>10} {'busbw MB/s':>10}" * len(impls)
        lines = [head, sub]
        for k, M in dict.fromkeys(zip(self.k.tolist(), self.M.tolist())):
            line = f"{k:>2} {_bytes(M):>9}"
            for name in impls:
                (row,) = np.flatnonzero((self.k == k) & (self.M == M) & (self.impl == name))
                line += (f" | {self.fastest[row] * 1e3:10.3f} {self.median[row] * 1e3:9.3f} {self.algbw[row] / 1e6:10.1f}"
                         f" {self.busbw[row] / 1e6:10.1f}")
            lines.append(line)
        return "\n".join(lines)

    def _rows(self, impl: str, ks) -> np.ndarray:
        rows = self.impl == check_choice("impl", impl, IMPLS)
        if isinstance(ks, str):
            ks = self.own_core_ks() if check_choice("ks", ks, ("own cores", "all")) == "own cores" else None
        return rows if ks is None else rows & np.isin(self.k, list(ks))

    def _medians(self, impl: str) -> dict:
        rows = np.flatnonzero(self.impl == impl)
        return {(int(self.k[r]), int(self.M[r])): self.median[r] for r in rows}


def _bytes(M: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if M >= scale:
            return f"{M / scale:.3g} {unit}"
    return f"{M} B"
