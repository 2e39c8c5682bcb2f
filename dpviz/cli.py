"""The command line: ``python -m dpviz record``, ``bench`` and ``figures``.

    python -m dpviz record --k 4 --b 8 --steps 5 --out runs/k4     # a real run, checked and saved
    python -m dpviz bench --ks 2 4 --repeats 10 --out runs/bench   # all-reduce time over k and M, fitted
    python -m dpviz figures                                        # fresh runs -> every figure in my_figures/

Each prints what it verified and what it measured. A bad argument ends with one
sentence naming it and exit status 2. A command imports the torch layer only when it
records, so ``--help`` and ``figures --from-records`` start without torch.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpviz", description="Record real data-parallel runs and draw them.")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_record(commands.add_parser("record", help="record a real data-parallel run and check the notes' claims on it"))
    _add_bench(commands.add_parser("bench", help="measure all-reduce time over k and message size, and fit the cost models"))
    _add_figures(commands.add_parser("figures", help="record fresh runs on this machine and regenerate every figure"))
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"python -m dpviz {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, TimeoutError) as e:
        if not _is_rank_failure(e):
            raise
        print(f"python -m dpviz {args.command}: {e}", file=sys.stderr)
        return 1
    return 0


def _is_rank_failure(e: BaseException) -> bool:
    """Whether ``e`` is a :class:`~dpviz.engine.launch.RankError` or ``RankTimeout``.

    The launcher is imported here, once something has failed, so that ``--help`` and drawing from
    records never load the torch layer.
    """
    from dpviz.engine.supervise import RankError, RankTimeout

    return isinstance(e, (RankError, RankTimeout))


# --- record ---

# The defaults of dpviz.topics.ground_floor.run_training.TrainConfig, written out so that `record --help` needs no torch
# (training.py imports it); tests/test_cli.py checks that they agree.
RECORD_DEFAULTS = {
    "k": 4, "b": 8, "steps": 5, "model": "line", "width": 64, "depth": 2, "optimizer": "sgd", "lr": 0.1,
    "seed": 0, "mean": "plain", "sampling": "random", "backend": "auto", "stall_timeout": 60.0,
}


def _add_record(p) -> None:
    defaults = RECORD_DEFAULTS
    p.add_argument("--k", type=int, default=defaults["k"], help="ranks (default %(default)s)")
    p.add_argument("--b", type=int, default=defaults["b"], help="examples per rank per step (default %(default)s)")
    p.add_argument("--global-batch", type=int, help="examples per step in all; must split evenly over k")
    p.add_argument("--steps", type=int, default=defaults["steps"], help="optimizer steps (default %(default)s)")
    p.add_argument("--model", default=defaults["model"], help="line (two parameters) or mlp (default %(default)s)")
    p.add_argument("--width", type=int, default=defaults["width"], help="MLP hidden width (default %(default)s)")
    p.add_argument("--depth", type=int, default=defaults["depth"], help="MLP hidden layers (default %(default)s)")
    p.add_argument("--optimizer", default=defaults["optimizer"], help="sgd, momentum or adam (default %(default)s)")
    p.add_argument("--lr", type=float, default=defaults["lr"], help="learning rate (default %(default)s)")
    p.add_argument("--seed", type=int, default=defaults["seed"])
    p.add_argument("--no-all-reduce", action="store_true", help="each rank steps on its own gradient (replicas drift)")
    p.add_argument("--shard-sizes", type=_int_list, help="unequal shards, e.g. 3,9,20 (one per rank)")
    p.add_argument("--mean", default=defaults["mean"], help="plain or weighted, for unequal shards (default %(default)s)")
    p.add_argument("--sampling", default=defaults["sampling"], help="random, biased or by_kind (default %(default)s)")
    p.add_argument("--backend", default=defaults["backend"], help="auto, gloo or nccl (default %(default)s)")
    p.add_argument("--timeout", type=float, default=defaults["stall_timeout"], help="seconds a rank may go without finishing a step (default %(default)s)")
    p.add_argument("--threads", type=int, help="intra-op threads per rank (default: the cores shared evenly)")
    p.add_argument("--out", help="save the record as OUT.npz and OUT.json")
    p.set_defaults(func=_record)


def _int_list(text: str) -> tuple:
    try:
        return tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shard sizes must be whole numbers separated by commas; got {text!r}") from None


def _record(args) -> None:
    from dpviz.topics.ground_floor.run_training import TrainConfig, record_run

    check_out(args.out)
    with options_named(RECORD_OPTIONS):
        config = TrainConfig(
            k=args.k, b=args.b, global_batch=args.global_batch, steps=args.steps, model=args.model, width=args.width,
            depth=args.depth, optimizer=args.optimizer, lr=args.lr, seed=args.seed, all_reduce=not args.no_all_reduce,
            shard_sizes=args.shard_sizes, mean=args.mean, sampling=args.sampling, backend=args.backend,
            stall_timeout=args.timeout, threads=args.threads,
        )
    start = time.perf_counter()
    run = record_run(config, progress=True)
    seconds = time.perf_counter() - start
    print(report(run, seconds))
    if args.out:
        path = run.save(args.out)
        print(f"saved {path}.npz and {path}.json")


# A TrainConfig field's name -> the option that sets it, so that an error names what the user typed.
RECORD_OPTIONS = {"global_batch": "--global-batch", "stall_timeout": "--timeout", "shard_sizes entries": "--shard-sizes entries",
                  "shard_sizes": "--shard-sizes", **{name: f"--{name}" for name in (
                      "k", "b", "steps", "model", "width", "depth", "optimizer", "lr", "seed", "mean", "sampling",
                      "backend", "threads")}}


class options_named:
    """Within it, a ValueError or TypeError that starts with a field's name starts with its option's instead."""

    def __init__(self, options: dict):
        self.options = sorted(options.items(), key=lambda item: -len(item[0]))  # longest first: shard_sizes entries

    def __enter__(self):
        return self

    def __exit__(self, kind, error, traceback):
        if isinstance(error, (ValueError, TypeError)):
            text = str(error)
            for field, option in self.options:
                if text.startswith(field + " ") or text.startswith(field + "="):
                    raise kind(option + text[len(field):]) from None
        return False


def check_out(out: str | None) -> None:
    """Refuse an --out that cannot take a record, before any rank starts (its parents are created): a folder
    in which no file can be made, or OUT.npz or OUT.json already there as something other than a file."""
    if not out:
        return
    from dpviz.engine.schema import files  # numpy only: no torch before the ranks

    folder = os.path.dirname(os.path.abspath(out))
    for path in files(out):
        if path.exists() and not path.is_file():
            raise ValueError(f"--out {out!r} cannot be written: {str(path)!r} is already there and is not a file.")
        if path.is_file() and not os.access(path, os.W_OK):
            raise ValueError(f"--out {out!r} cannot be written: {str(path)!r} is read-only.")
    check_folder("--out", folder, given=out)


def check_folder(option: str, folder: str, *, given: str | None = None) -> None:
    """Refuse a folder in which no file can be made (it is created if missing); ``given`` is what the user typed."""
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".dpviz-write-check-"):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise ValueError(f"{option} {(given or folder)!r} cannot be written: no file can be made in {folder!r} ({reason}).") from None


def report(run, seconds: float) -> str:
    """What a run verified and measured, as a few lines for a terminal."""
    import numpy as np  # here, not at the top: `python -m dpviz --help` needs neither numpy nor torch

    lines = [f"recorded {run.describe()}", f"  wall time, process start included: {seconds:.2f} s"]
    try:
        lines.append(f"  verified: {run.check()}")
    except AssertionError as e:
        lines.append(f"  CHECK FAILED: {e}")
    if not run.meta["all_reduce"]:
        differ = int((~run.replicas_identical()).sum())
        lines.append(f"  all-reduce off: replicas differ in {differ} of {run.steps + 1} recorded states (drift)")
    err = run.big_batch_rel_err()
    lines.append(f"  reduced vs big-batch gradient, max relative error per step: {np.array2string(err, precision=1)}")
    lines.append(
        f"  measured per rank and step (median): compute {np.median(run.t_compute) * 1e3:.3f} ms, "
        f"all-reduce {np.median(run.t_comm) * 1e3:.3f} ms"
    )
    return "\n".join(lines)


# --- bench ---

def _add_bench(p) -> None:
    p.add_argument("--ks", type=int, nargs="+", default=[2, 4], help="process-group sizes (default 2 4)")
    p.add_argument("--min-bytes", type=int, default=1 << 10, help="smallest message, bytes (default %(default)s)")
    p.add_argument("--max-bytes", type=int, default=16 << 20, help="largest message, bytes (default %(default)s)")
    p.add_argument("--points", type=int, default=8, help="message sizes, log spaced (default %(default)s)")
    p.add_argument("--impls", nargs="+", default=["all_reduce", "ring", "parameter_server"])
    p.add_argument("--repeats", type=int, default=10, help="timed calls per point (default %(default)s)")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--out", help="save the record as OUT.npz and OUT.json")
    p.set_defaults(func=_bench)


def _bench(args) -> None:
    from dpviz.topics.measuring.run_bench import BenchConfig, log_sizes, run_sweep

    from dpviz.engine.checks import check_int

    check_out(args.out)
    low = check_int("--min-bytes", args.min_bytes, low=4, high=1 << 30)
    high = check_int("--max-bytes", args.max_bytes, low=low, high=1 << 30)
    points = check_int("--points", args.points, low=1, high=64)
    with options_named({"ks": "--ks", "impls": "--impls", "repeats": "--repeats", "backend": "--backend"}):
        config = BenchConfig(ks=tuple(args.ks), sizes=log_sizes(low, high, points), impls=tuple(args.impls),
                             repeats=check_int("repeats", args.repeats, low=1, high=10_000), backend=args.backend)
    bench = run_sweep(config, progress=True)
    print(bench.table())
    print("fitted to dist.all_reduce (median relative error):")
    for name, fit in bench.fits().items():
        print(f"  {fit}")
    if args.out:
        path = bench.save(args.out)
        print(f"saved {path}.npz and {path}.json")


# --- figures ---

def _add_figures(p) -> None:
    p.add_argument("--out", default="my_figures", help="folder for PNG, SVG, the manifest and records/ (default %(default)s; "
                   "the chapters read my_figures/records instead of the shipped figures/records once it is there)")
    p.add_argument("--quick", action="store_true", help="fewer bench points and repeats (for tests)")
    p.add_argument("--from-records", metavar="FOLDER", help="draw again from records saved by an earlier run; record nothing")
    p.set_defaults(func=_figures)


def _figures(args) -> None:
    check_folder("--out", args.out)  # before anything is recorded
    if args.from_records is not None and not os.path.isdir(args.from_records):
        raise FileNotFoundError(f"--from-records {args.from_records!r} is not a folder of records.")
    if args.from_records is None:
        from dpviz.recipes import warm_up

        warm_up()  # the fork server imports torch while this process imports matplotlib and the figures
    import matplotlib

    matplotlib.use("Agg")  # files only: this command never opens a window
    from dpviz.regenerate import regenerate

    regenerate(args.out, quick=args.quick, records=args.from_records)


if __name__ == "__main__":
    sys.exit(main())
