"""Measure all-reduce time over k and message size M, and fit the cost model to it.

    from dpviz.bench import BenchConfig, run_sweep
    record = run_sweep(BenchConfig(ks=(2, 4), sizes=(4096, 4 << 20), repeats=10))
    print(record.table())
    record.fit("ring")                      # alpha [s] and beta [B/s] for this machine
    record.save("runs/bench")               # runs/bench.npz + runs/bench.json

Each k gets its own process group (one :func:`dpviz.launch.launch`). Inside it,
every rank times the built-in ``dist.all_reduce`` and the hand-written ring and
parameter server of :mod:`dpviz.collectives` on float32 tensors of M bytes: a
few untimed warm-up calls, then ``repeats`` timed calls, each after a
``dist.barrier()`` so that all ranks start together.

A collective is over only when its last rank is done, so the time kept for each
repeat is the largest of the ranks' times. The spread reported is the
interquartile range over repeats.

Saved arrays (n = number of (k, M, impl) points; derived ones are for readers with numpy alone):

===========  ==============  =====================================================
``k``        (n,)            ranks in the process group
``m``        (n,)            message size, bytes
``impl``     (n,)            "all_reduce", "ring" or "parameter_server"
``times``    (n, repeats)    seconds per call, the max over ranks of each repeat
``median``   (n,)            derived: median of ``times``, seconds
``q25/q75``  (n,)            derived: quartiles of ``times``, seconds
``algbw``    (n,)            derived: M / median, bytes per second
``busbw``    (n,)            derived: algbw · 2(k-1)/k, bytes per second
===========  ==============  =====================================================
"""

from __future__ import annotations

import datetime
import platform
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from dpviz import costmodel
from dpviz.checks import check_choice, check_int, check_real
from dpviz.collectives import parameter_server_all_reduce, ring_all_reduce
from dpviz.launch import BACKENDS, cpu_count, launch, report_progress, resolve_backend, threads_per_rank
from dpviz.recordio import load_record, save_record

SCHEMA_VERSION = 1
KIND = "bench"
IMPLS = ("all_reduce", "ring", "parameter_server")


@dataclass
class BenchConfig:
    """What to sweep; checked on creation and again by :func:`run_sweep`."""

    ks: tuple = (2, 4)  # process-group sizes, one group each
    sizes: tuple = (1 << 10, 1 << 14, 1 << 18, 1 << 22)  # message sizes M, bytes (multiples of 4: float32)
    impls: tuple = IMPLS  # which all-reduce implementations to time
    repeats: int = 10  # timed calls per (k, M, impl)
    warmup: int = 2  # untimed calls per (k, M, impl), before the timed ones
    backend: str = "gloo"  # "gloo", "nccl" or "auto", as in launch()
    timeout: float = 120.0  # seconds, per process group, start-up included

    def __post_init__(self):
        self.ks = tuple(check_int("ks", k, low=1, high=1024) for k in _as_tuple("ks", self.ks))
        self.sizes = tuple(_check_size(m) for m in _as_tuple("sizes", self.sizes))
        self.impls = tuple(check_choice("impls", i, IMPLS) for i in _as_tuple("impls", self.impls))
        self.repeats = check_int("repeats", self.repeats, low=1)
        self.warmup = check_int("warmup", self.warmup, low=0)
        self.backend = check_choice("backend", self.backend, BACKENDS)
        self.timeout = check_real("timeout", self.timeout, low=0, low_open=True)


def log_sizes(low: int, high: int, n: int) -> tuple:
    """``n`` message sizes from ``low`` to ``high`` bytes, evenly spaced on a log scale, rounded to whole float32s."""
    low, high = check_int("low", low, low=4), check_int("high", high, low=low)
    n = check_int("n", n, low=1)
    sizes = np.unique(np.round(np.geomspace(low, high, n) / 4).astype(np.int64) * 4)
    return tuple(int(m) for m in sizes)


def bench_worker(rank: int, world_size: int, sizes, impls, repeats: int, warmup: int) -> np.ndarray:
    """Inside a rank: time each implementation at each size; returns seconds, shape (sizes, impls, repeats)."""
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
    gen = torch.Generator().manual_seed(rank)
    times = np.zeros((len(sizes), len(impls), repeats))
    for i, nbytes in enumerate(sizes):
        source = torch.randn(nbytes // 4, generator=gen).to(device)
        tensor = torch.empty_like(source)
        for impl in impls:
            for _ in range(warmup):
                tensor.copy_(source)
                _IMPL_FUNCS[impl](tensor)
        # Implementations take turns within each repeat, so a slow spell on a
        # shared machine hits all of them rather than just one.
        for r in range(repeats):
            for j, impl in enumerate(impls):
                tensor.copy_(source)  # fresh input, so repeated sums never overflow
                _sync(device)
                dist.barrier()
                start = time.perf_counter()
                _IMPL_FUNCS[impl](tensor)
                _sync(device)
                times[i, j, r] = time.perf_counter() - start
        report_progress(i)
    return times


@dataclass(eq=False)
class BenchRecord:
    """Measured all-reduce times, one row per (k, M, impl); see the module docstring for the arrays."""

    k: np.ndarray  # (n,) ranks
    m: np.ndarray  # (n,) bytes
    impl: np.ndarray  # (n,) implementation name
    times: np.ndarray  # (n, repeats) seconds, max over ranks
    meta: dict = field(default_factory=dict)  # how and where it was measured

    @property
    def median(self) -> np.ndarray:
        """Median seconds per call."""
        return np.median(self.times, axis=1)

    @property
    def spread(self) -> np.ndarray:
        """(n, 2): the 25th and 75th percentile of seconds per call."""
        return np.percentile(self.times, [25, 75], axis=1).T

    @property
    def algbw(self) -> np.ndarray:
        """Algorithm bandwidth M / median, bytes per second."""
        return self.m / self.median

    @property
    def busbw(self) -> np.ndarray:
        """Bus bandwidth algbw · 2(k-1)/k: the rate each rank's link carried data in a ring, comparable across k."""
        return self.algbw * 2 * (self.k - 1) / self.k

    def fit(self, formula: str = "ring", *, impl: str = "all_reduce", ks="own cores") -> costmodel.Fit:
        """Fit alpha, beta of one cost-model formula to the median times of ``impl``.

        ``ks`` picks the process-group sizes fitted: by default ``"own cores"``, the k that had a
        core per rank when measured (the model assumes ranks run at once; with more ranks than
        cores they take turns and latency grows with the scheduler, not the link); ``"all"``, or
        a list of k.
        """
        rows = self._rows(impl, ks)
        return costmodel.fit_alpha_beta(self.k[rows], self.m[rows], self.median[rows], formula=formula)

    def fits(self, *, impl: str = "all_reduce", ks="own cores") -> dict:
        """One fit per formula in ``costmodel.FORMULAS``, keyed by formula (``ks`` as in :meth:`fit`)."""
        rows = self._rows(impl, ks)
        return costmodel.fit_all(self.k[rows], self.m[rows], self.median[rows])

    def own_core_ks(self) -> list:
        """The measured k > 1 that had a core per rank; all measured k if none did."""
        ks = sorted(set(self.k.tolist()))
        cores = self.meta.get("cores")
        own = [k for k in ks if k > 1 and cores is not None and k <= cores]
        return own or ks

    def ratio(self, impl: str, against: str = "all_reduce") -> tuple:
        """``(k, m, ratio)`` of the median time of ``impl`` to that of ``against`` at every (k, M) both have."""
        mine = self._medians(check_choice("impl", impl, IMPLS))
        theirs = self._medians(check_choice("against", against, IMPLS))
        keys = [key for key in mine if key in theirs]
        ks, ms = (np.array([key[i] for key in keys], dtype=np.int64) for i in (0, 1))
        return ks, ms, np.array([mine[key] / theirs[key] for key in keys])

    def table(self) -> str:
        """A plain-text table: one line per (k, M), median / algbw / busbw for each implementation."""
        impls = [i for i in IMPLS if i in set(self.impl)]
        head = f"{'k':>2} {'M':>9}" + "".join(f" | {name:^31}" for name in impls)
        sub = f"{'':>2} {'':>9}" + f" | {'median ms':>9} {'algbw MB/s':>10} {'busbw MB/s':>10}" * len(impls)
        lines = [head, sub]
        median, algbw, busbw = self.median, self.algbw, self.busbw
        for k, m in dict.fromkeys(zip(self.k.tolist(), self.m.tolist())):
            line = f"{k:>2} {_bytes(m):>9}"
            for name in impls:
                (row,) = np.flatnonzero((self.k == k) & (self.m == m) & (self.impl == name))
                line += f" | {median[row] * 1e3:9.3f} {algbw[row] / 1e6:10.1f} {busbw[row] / 1e6:10.1f}"
            lines.append(line)
        return "\n".join(lines)

    def save(self, path):
        """Write ``<path>.npz`` and ``<path>.json``; returns the common stem."""
        q25, q75 = self.spread.T
        arrays = dict(
            k=self.k, m=self.m, impl=self.impl, times=self.times,
            median=self.median, q25=q25, q75=q75, algbw=self.algbw, busbw=self.busbw,
        )
        return save_record(path, KIND, SCHEMA_VERSION, self.meta, arrays)

    @classmethod
    def load(cls, path) -> "BenchRecord":
        """Read a record written by :meth:`save`; a missing, damaged or other-schema file raises naming the path."""
        meta, arrays = load_record(path, KIND, SCHEMA_VERSION)
        try:
            record = cls(arrays["k"], arrays["m"], arrays["impl"], arrays["times"], meta)
        except KeyError as e:
            raise ValueError(f"path {str(path)!r} lacks the array {e.args[0]!r} that a bench record needs.") from None
        n = len(record.k)
        if not (len(record.m) == len(record.impl) == n and record.times.ndim == 2 and len(record.times) == n):
            raise ValueError(f"path {str(path)!r} holds arrays k, m, impl and times whose lengths disagree.")
        return record

    def _rows(self, impl: str, ks) -> np.ndarray:
        rows = self.impl == check_choice("impl", impl, IMPLS)
        if isinstance(ks, str):
            ks = self.own_core_ks() if check_choice("ks", ks, ("own cores", "all")) == "own cores" else None
        return rows if ks is None else rows & np.isin(self.k, list(ks))

    def _medians(self, impl: str) -> dict:
        rows = np.flatnonzero(self.impl == impl)
        return {(int(self.k[r]), int(self.m[r])): self.median[r] for r in rows}

    def __repr__(self):
        ks = sorted(set(self.k.tolist()))
        sizes = sorted(set(self.m.tolist()))
        return (
            f"BenchRecord(ks={ks}, m={_bytes(sizes[0])}..{_bytes(sizes[-1])} ({len(sizes)} sizes), "
            f"impls={sorted(set(self.impl.tolist()))}, repeats={self.times.shape[1]}, "
            f"backend={self.meta.get('backend')!r}, host={self.meta.get('host')!r})"
        )


def run_sweep(config: BenchConfig | None = None, *, progress: bool = True) -> BenchRecord:
    """Time every (k, M, impl) of ``config`` on real process groups; one group per k."""
    from tqdm.auto import tqdm

    config = BenchConfig() if config is None else BenchConfig(**asdict(config))  # re-checks edited fields
    rows = {"k": [], "m": [], "impl": [], "times": []}
    backends, threads = [], []
    for k in tqdm(config.ks, desc="all-reduce sweep (process groups)", disable=not progress):
        backends.append(resolve_backend(config.backend, k))
        threads.append(threads_per_rank(k))
        per_rank = launch(
            bench_worker, k,
            args=(config.sizes, config.impls, config.repeats, config.warmup),
            backend=config.backend, timeout=config.timeout,
            total_steps=len(config.sizes), progress=progress,
        )
        slowest = np.max(np.stack(per_rank), axis=0)  # (sizes, impls, repeats): the last rank to finish
        for i, m in enumerate(config.sizes):
            for j, impl in enumerate(config.impls):
                rows["k"].append(k)
                rows["m"].append(m)
                rows["impl"].append(impl)
                rows["times"].append(slowest[i, j])
    meta = {
        "backend": backends[0] if len(set(backends)) == 1 else backends,
        "host": platform.node(),
        "cores": cpu_count(),
        "torch_version": torch.__version__,
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "threads_per_rank": dict(zip(map(str, config.ks), threads)),
        "dtype": "float32",
        "times": "seconds per call, the max over ranks of each repeat, each repeat after a barrier",
        "config": asdict(config),
        "schema_version": SCHEMA_VERSION,
    }
    return BenchRecord(
        np.array(rows["k"], dtype=np.int64),
        np.array(rows["m"], dtype=np.int64),
        np.array(rows["impl"], dtype=str),
        np.array(rows["times"], dtype=np.float64),
        meta,
    )


_IMPL_FUNCS = {"all_reduce": dist.all_reduce, "ring": ring_all_reduce, "parameter_server": parameter_server_all_reduce}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # GPU calls return before the work is done


def _as_tuple(name: str, values) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a list or tuple of values; got {values!r}.")
    values = tuple(values)
    if not values or len(set(values)) < len(values):
        raise ValueError(f"{name} must hold at least one value and no value twice; got {values!r}.")
    return values


def _check_size(m) -> int:
    m = check_int("sizes", m, low=4)
    if m % 4:
        raise ValueError(f"sizes must be whole float32 tensors, multiples of 4 bytes >= 4; got {m}.")
    return m


def _bytes(m: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if m >= scale:
            return f"{m / scale:.3g} {unit}"
    return f"{m} B"
