"""All-reduce sweep on this machine: times, fitted cost models, and the hand-written collectives.

    .venv/bin/python benchmarks/bench_allreduce.py                  # about a minute on 2 cores
    .venv/bin/python benchmarks/bench_allreduce.py --out runs/bench # also save the record
    .venv/bin/python benchmarks/bench_allreduce.py --wakeup         # why the fit uses the fastest call (20 s)

Times dist.all_reduce, the hand-written ring and the parameter server for
k = 2, 3, 4 and message sizes from 1 KiB to 16 MiB, then prints:

* the table of fastest and median time, algbw and busbw for each implementation;
* alpha and beta fitted to dist.all_reduce (the fastest call at each point, as
  dpviz fits it) for each cost-model formula, with
  the median relative error (target for the ring formula: <= 20 %);
* the hand-written ring and parameter server against dist.all_reduce for
  k = 2 and 4 at M >= 4 MiB (target for the ring: <= 1.5x the time).

With more ranks than cores, ranks take turns on the CPU and small-message times
measure the scheduler as much as the network; the printout says when that happened.

``--wakeup`` runs a diagnostic instead: k = 2, 100 all-reduces at each of three sizes, with the
ranks' threads placed three ways (as the OS schedules them, pinned to a core each, all on one core),
and prints how many calls were late (more than LATE over the fastest call at that size). On a small
virtual machine a rank that waits on another core can be woken a scheduler tick late; when every
rank shares one core, no wake-up crosses cores and the late calls all but vanish.
"""

from __future__ import annotations

import argparse
import time
import warnings

from dpviz.runs.bench import BenchConfig, log_sizes, run_sweep

LATE = 1e-3  # seconds over the fastest call at a size: a late wake-up (a scheduler tick here is 4 ms)
RING_FIT_TARGET = 0.20  # median relative error of the ring formula
RING_RATIO_TARGET = 1.5  # hand-written ring time / dist.all_reduce time
LARGE = 4 << 20  # bytes: "large message" for the ratio target


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="save the record as OUT.npz and OUT.json")
    parser.add_argument("--repeats", type=int, default=10, help="timed calls per point (default 10)")
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 3, 4], help="process-group sizes (default 2 3 4)")
    parser.add_argument("--wakeup", action="store_true", help="measure late wake-ups by where the ranks run, instead")
    args = parser.parse_args(argv)
    if args.wakeup:
        return wakeup()

    config = BenchConfig(ks=tuple(args.ks), sizes=log_sizes(1 << 10, 16 << 20, 8), repeats=args.repeats, warmup=2)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the oversubscription warning is reported once, below
        record = run_sweep(config)
    elapsed = time.perf_counter() - start

    meta = record.meta
    print(f"\nall-reduce sweep: {record!r}")
    print(f"host {meta['host']}, {meta['cores']} cores, torch {meta['torch_version']}, threads per rank {meta['threads_per_rank']}")
    crowded = [k for k in config.ks if k > meta["cores"]]
    if crowded:
        print(f"note: k = {', '.join(map(str, crowded))} exceed the {meta['cores']} cores, so those ranks take turns on the CPUs.")
    print(f"sweep took {elapsed:.1f} s\n")
    print(record.table())

    # Where ranks outnumber cores, waiting for the scheduler adds latency the model does not have,
    # so the fits dpviz draws use the k with a core per rank; the fit over every k is printed too.
    for ks, words in (("own cores", f"k = {', '.join(map(str, record.own_core_ks()))}, a core per rank"), ("all", "all k")):
        print(f"\nfits to dist.all_reduce, fastest call at each point ({words}, all M):")
        print(f"  {'formula':<17} {'alpha':>10} {'beta':>12} {'median rel err':>15}")
        for name, fit in record.fits(ks=ks).items():
            print(f"  {name:<17} {fit.alpha * 1e6:8.1f} µs {fit.beta / 1e9:8.3f} GB/s {fit.median_rel_err:14.1%}")
        ring_err = record.fit("ring", ks=ks).median_rel_err
        print(f"  ring target (median rel err <= {RING_FIT_TARGET:.0%}): {_verdict(ring_err <= RING_FIT_TARGET)} ({ring_err:.1%})")
    for k in crowded:
        print(f"  ring formula fitted to k = {k} alone: median rel err {record.fit('ring', ks=(k,)).median_rel_err:.1%}")

    print(f"\nmedian time ratios at M >= {LARGE >> 20} MiB:")
    print(f"  {'k':>2} {'M':>8} {'ring/all_reduce':>16} {'server/all_reduce':>18} {'server/ring':>12}")
    ks, ms, ring = record.ratio("ring")
    _, _, server = record.ratio("parameter_server")
    _, _, server_ring = record.ratio("parameter_server", against="ring")
    chosen = [i for i in range(len(ks)) if ks[i] in (2, 4) and ms[i] >= LARGE]
    for i in chosen:
        print(f"  {ks[i]:>2} {ms[i] >> 20:>4} MiB {ring[i]:15.2f}x {server[i]:17.2f}x {server_ring[i]:11.2f}x")
    if chosen:
        worst = max(ring[i] for i in chosen)
        print(f"  ring target (<= {RING_RATIO_TARGET}x dist.all_reduce): {_verdict(worst <= RING_RATIO_TARGET)} (worst {worst:.2f}x)")

    if args.out:
        print(f"\nsaved {record.save(args.out)}.npz and .json")


def wakeup(sizes=(1 << 10, 1 << 16, 1 << 20), calls: int = 100) -> None:
    """k = 2 all-reduces with the ranks placed three ways; the share of late calls for each."""
    import numpy as np

    from dpviz.runs.bench import PLACEMENTS, wakeup_worker
    from dpviz.runs.launch import cpu_count, launch

    print(f"k = 2, {calls} dist.all_reduce calls per size, each after a barrier; {cpu_count()} cores; "
          f"late = more than {LATE * 1e3:g} ms over the fastest call at that size")
    print(f"{'ranks placed':>14} {'M':>8} {'fastest ms':>10} {'median ms':>9} {'p90 ms':>7} {'late':>5}")
    for placement in PLACEMENTS:
        per_rank = launch(wakeup_worker, 2, args=(sizes, calls, placement), progress=False)
        slowest = np.max(np.stack(per_rank), axis=0)  # (sizes, calls): the last rank to finish
        for M, t in zip(sizes, slowest):
            late = np.mean(t > t.min() + LATE)
            print(f"{placement:>14} {M >> 10:>4} KiB {t.min() * 1e3:10.3f} {np.median(t) * 1e3:9.3f} "
                  f"{np.percentile(t, 90) * 1e3:7.2f} {late:5.0%}")


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


if __name__ == "__main__":
    main()
