"""The command line: ``python -m dpviz record``, ``bench`` and ``figures``.

    python -m dpviz record --k 4 --b 8 --steps 5 --out runs/k4     # a real run, checked and saved
    python -m dpviz bench --ks 2 4 --repeats 10 --out runs/bench   # all-reduce time over k and M, fitted
    python -m dpviz figures                                        # fresh runs -> every figure in my_figures/

Each prints what it verified and what it measured. A bad argument ends with one
sentence naming it and its range, and exit status 2, before any rank starts. A run that
fails its own check, a failed rank and a save the disk cannot take end with one sentence
and exit status 1 (a run that failed its check is not saved). A command imports the torch
layer only when it records, so ``--help``, ``--version`` and ``figures --from-records``
start without torch.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import tempfile
import time

from dpviz.engine.checks import MAX_LR, MAX_SEED, MAX_TIMEOUT  # plain numbers: no torch, no numpy


class Failed(Exception):
    """A command that ran but did not end well (its run failed its own check, or its record could not be saved);
    its one sentence is printed and the command exits with status 1."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpviz", description="Record real data-parallel runs and draw them.")
    parser.add_argument("--version", action=_Version, help="print dpviz's version and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    _add_record(commands.add_parser("record", help="record a real data-parallel run and check the notes' claims on it"))
    _add_bench(commands.add_parser("bench", help="measure all-reduce time over k and message size, and fit the cost models"))
    _add_figures(commands.add_parser("figures", help="record fresh runs on this machine and regenerate every figure"))
    args = parser.parse_args(_negative_numbers_attached(sys.argv[1:] if argv is None else argv))
    try:
        args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as e:
        print(f"python -m dpviz {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Failed as e:
        print(f"python -m dpviz {args.command}: {e}", file=sys.stderr)
        return 1
    except (RuntimeError, TimeoutError) as e:
        if not _is_rank_failure(e):
            raise
        print(f"python -m dpviz {args.command}: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # after RankTimeout, a TimeoutError and so an OSError
        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        where = f" writing {e.filename!r}" if e.filename else ""
        text = str(e) if not str(e).startswith("[Errno") else f"no space left on the disk{where}; free some and run it again"
        print(f"python -m dpviz {args.command}: {text.rstrip('.')}.", file=sys.stderr)  # a record's save words its own
        return 1
    return 0


# The options that take one number each (record's and bench's).
NUMBER_OPTIONS = {"--k", "--b", "--global-batch", "--steps", "--width", "--depth", "--lr", "--seed", "--timeout",
                  "--threads", "--min-bytes", "--max-bytes", "--points", "--repeats"}


def _negative_numbers_attached(argv) -> list:
    """``--lr -inf`` as ``--lr=-inf``: argparse takes a word that starts with "-" for an option unless it looks like
    ``-1`` or ``-0.5``, so ``-inf`` or ``-1e308`` after an option would be refused without the option's range."""
    argv, out = list(argv), []
    while argv:
        word = argv.pop(0)
        if word in NUMBER_OPTIONS and argv and argv[0].startswith("-") and _real(argv[0]) != argv[0]:
            word = f"{word}={argv.pop(0)}"
        out.append(word)
    return out


class _Version(argparse.Action):
    """``--version``: the installed package's version, read from its metadata only when asked."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        import importlib.metadata

        try:
            version = importlib.metadata.version("dpviz")
        except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
            from dpviz import __version__ as version
        print(f"dpviz {version}")
        parser.exit()


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


def _int(text: str):
    """An option's whole number, or the text as typed, which the option's check then refuses in one sentence
    that states its range (argparse's own refusal would name neither)."""
    try:
        return int(text)
    except ValueError:
        return text


def _real(text: str):
    """An option's number (inf and nan included: the option's check refuses them), or the text as typed."""
    try:
        return float(text)
    except ValueError:
        return text


def _add_record(p) -> None:
    defaults = RECORD_DEFAULTS
    p.add_argument("--k", type=_int, default=defaults["k"], help="ranks (default %(default)s)")
    p.add_argument("--b", type=_int, default=defaults["b"], help="examples per rank per step (default %(default)s)")
    p.add_argument("--global-batch", type=_int, help="examples per step in all; must split evenly over k")
    p.add_argument("--steps", type=_int, default=defaults["steps"], help="optimizer steps (default %(default)s)")
    p.add_argument("--model", default=defaults["model"], help="line (two parameters) or mlp (default %(default)s)")
    p.add_argument("--width", type=_int, default=defaults["width"], help="MLP hidden width (default %(default)s)")
    p.add_argument("--depth", type=_int, default=defaults["depth"], help="MLP hidden layers (default %(default)s)")
    p.add_argument("--optimizer", default=defaults["optimizer"], help="sgd, momentum or adam (default %(default)s)")
    p.add_argument("--lr", type=_real, default=defaults["lr"], help=f"learning rate, > 0 and at most {MAX_LR:g} (default %(default)s)")
    p.add_argument("--seed", type=_int, default=defaults["seed"], help=f"seeds the data, the model and every batch draw, 0 to {MAX_SEED} (default %(default)s)")
    p.add_argument("--no-all-reduce", action="store_true", help="each rank steps on its own gradient (replicas drift)")
    p.add_argument("--shard-sizes", type=_int_list, help="unequal shards, e.g. 3,9,20 (one per rank)")
    p.add_argument("--mean", default=defaults["mean"], help="plain or weighted, for unequal shards (default %(default)s)")
    p.add_argument("--sampling", default=defaults["sampling"], help="random, biased or by_kind (default %(default)s)")
    p.add_argument("--backend", default=defaults["backend"], help="auto, gloo or nccl (default %(default)s)")
    p.add_argument("--timeout", type=_real, default=defaults["stall_timeout"], help=f"seconds a rank may go without finishing a step, > 0 and at most {MAX_TIMEOUT:g} (default %(default)s)")
    p.add_argument("--threads", type=_int, help="intra-op threads per rank (default: the cores shared evenly)")
    p.add_argument("--out", help="save the record as OUT.npz and OUT.json")
    p.set_defaults(func=_record)


def _int_list(text: str) -> tuple:
    """Whole numbers separated by commas; an entry that is not one stays text, for the entries' check to refuse."""
    return tuple(_int(v.strip()) for v in text.split(","))


def _record(args) -> None:
    from dpviz.engine.launch import resolve_backend
    from dpviz.topics.ground_floor.run_training import TrainConfig, record_run

    check_out(args.out)
    with options_named(RECORD_OPTIONS):
        config = TrainConfig(
            k=args.k, b=args.b, global_batch=args.global_batch, steps=args.steps, model=args.model, width=args.width,
            depth=args.depth, optimizer=args.optimizer, lr=args.lr, seed=args.seed, all_reduce=not args.no_all_reduce,
            shard_sizes=args.shard_sizes, mean=args.mean, sampling=args.sampling, backend=args.backend,
            stall_timeout=args.timeout, threads=args.threads,
        )
        resolve_backend(config.backend, config.k)  # nccl needs a GPU per rank: refused here, named as --backend
    start = time.perf_counter()
    run = record_run(config, progress=True)
    seconds = time.perf_counter() - start
    try:
        verdict = run.check()
    except AssertionError as e:
        verdict = e
    print(report(run, seconds, verdict), flush=True)
    if isinstance(verdict, AssertionError):
        raise Failed(f"the run failed its own check (CHECK FAILED above{_diverged(run)})"
                     + (f", so nothing was saved to {args.out!r}." if args.out else "."))
    if args.out:
        save(run, args.out)


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


def _diverged(run) -> str:
    """Words for a run whose loss overflowed (a learning rate too large for the model), or nothing."""
    import numpy as np

    finite = np.isfinite(run.loss).all(axis=tuple(range(1, run.loss.ndim)))
    if finite.all():
        return ""
    return f"; its loss was no longer finite from step {int(np.argmin(finite))} on, so try a smaller --lr"


def check_out(out: str | None) -> None:
    """Refuse an --out that cannot take a record, before any rank starts (its parents are created): a folder
    in which no file can be made, or OUT.npz or OUT.json already there as something other than a file."""
    if out is None:
        return
    from dpviz.engine.schema import files  # numpy only: no torch before the ranks

    try:
        named = files(out)
    except ValueError:
        raise ValueError(f"--out must name a record, such as runs/k4 for runs/k4.npz and runs/k4.json; got {out!r}.") from None
    folder = os.path.dirname(os.path.abspath(out))
    for path in named:
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


def save(record, out: str) -> None:
    """Save ``record`` at ``out`` and say where; a save the disk (or anything else) refuses raises :class:`Failed`
    with one sentence, and the older record at ``out``, if any, is left as it was."""
    try:
        path = record.save(out)
    except OSError as e:
        raise Failed(_save_failure(e, record, out)) from None
    print(f"saved {path}.npz and {path}.json")


def _save_failure(e: OSError, record, out: str) -> str:
    """One sentence for a failed save: the record schema's own (it names the path and the space needed), or, for an
    OSError it did not word, one made here from the path, the system's reason and, for a full disk, the sizes."""
    import shutil

    text = str(e)
    if text.startswith("[Errno") and e.strerror and e.filename is None and e.strerror != os.strerror(e.errno):
        text = e.strerror  # OSError(errno, sentence): the sentence alone
    elif text.startswith("[Errno") or not text:
        reason = (e.strerror or type(e).__name__).lower()
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            need = sum(array.nbytes for array in record.arrays.values())
            free = shutil.disk_usage(os.path.dirname(os.path.abspath(out))).free
            reason = f"no space left on the disk (the record needs up to {need:,} bytes, {free:,} are free)"
        text = f"could not save the record at {out!r}: {reason}; any older record there is untouched"
    return text.rstrip(".") + "."


def report(run, seconds: float, verdict=None) -> str:
    """What a run verified and measured, as a few lines for a terminal; ``verdict`` is what ``run.check()``
    returned or the AssertionError it raised (checked here if not given)."""
    import numpy as np  # here, not at the top: `python -m dpviz --help` needs neither numpy nor torch

    if verdict is None:
        try:
            verdict = run.check()
        except AssertionError as e:
            verdict = e
    lines = [f"recorded {run.describe()}", f"  wall time, process start included: {seconds:.2f} s"]
    if isinstance(verdict, AssertionError):
        lines.append(f"  CHECK FAILED: {verdict}")
    else:
        lines.append(f"  verified: {verdict}")
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
    p.add_argument("--ks", type=_int, nargs="+", default=[2, 4], help="process-group sizes, one of them 2 or more (default 2 4)")
    p.add_argument("--min-bytes", type=_int, default=1 << 10, help="smallest message, bytes, 4 to 2**30 - 4 (default %(default)s)")
    p.add_argument("--max-bytes", type=_int, default=16 << 20, help="largest message, bytes, at least min-bytes + 4 and at most 2**30 (default %(default)s)")
    p.add_argument("--points", type=_int, default=8, help="message sizes, log spaced, 2 to 64 (default %(default)s)")
    p.add_argument("--impls", nargs="+", default=["all_reduce", "ring", "parameter_server"],
                   help="all_reduce (always: the cost model is fitted to it), ring, parameter_server (default: all three)")
    p.add_argument("--repeats", type=_int, default=10, help="timed calls per point, 1 to 10000 (default %(default)s)")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--out", help="save the record as OUT.npz and OUT.json")
    p.set_defaults(func=_bench)


def _bench(args) -> None:
    from dpviz.topics.measuring.run_bench import BenchConfig, log_sizes, run_sweep

    from dpviz.engine.checks import check_int

    check_out(args.out)
    # The fit needs two message sizes on a group of k > 1, timed with dist.all_reduce: all checked before the sweep.
    low = check_int("--min-bytes", args.min_bytes, low=4, high=(1 << 30) - 4)
    smallest = log_sizes(low, low, 1)[0]  # low as whole float32s
    high = check_int("--max-bytes", args.max_bytes, low=smallest + 4, high=1 << 30)
    points = check_int("--points", args.points, low=2, high=64)
    with options_named({"ks": "--ks", "impls": "--impls", "repeats": "--repeats", "backend": "--backend"}):
        config = BenchConfig(ks=tuple(args.ks), sizes=log_sizes(low, high, points), impls=tuple(args.impls),
                             repeats=check_int("repeats", args.repeats, low=1, high=10_000), backend=args.backend)
    if max(config.ks) < 2:
        raise ValueError(f"--ks must hold a k from 2 to 1024, since the cost model is fitted to groups of more than "
                         f"one rank; got {' '.join(map(str, config.ks))}.")
    if "all_reduce" not in config.impls:
        raise ValueError(f"--impls must include all_reduce, the one the cost model is fitted to; "
                         f"got {' '.join(config.impls)}.")
    bench = run_sweep(config, progress=True)
    print(bench.table())
    print("fitted to dist.all_reduce (median relative error):")
    for name, fit in bench.fits().items():
        print(f"  {fit}")
    if args.out:
        save(bench, args.out)


# --- figures ---

def _add_figures(p) -> None:
    p.add_argument("--out", default="my_figures", help="folder for PNG, SVG, the manifest and records/ (default %(default)s; "
                   "a checkout's chapters then read its my_figures/records instead of the shipped records, and any "
                   "install's chapters read the records folder that DPVIZ_RECORDS names)")
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
