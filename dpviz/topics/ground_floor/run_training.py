"""A real data-parallel training run, recorded step by step.

From Python (a notebook or a script)::

    from dpviz.topics.ground_floor.run_training import TrainConfig, record_run
    run = record_run(TrainConfig(k=4, b=8, steps=5))
    print(run.check())

Across machines with torchrun (rank 0 writes the record)::

    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-endpoint HOST:29500 \\
        -m dpviz.topics.ground_floor.run_training --b 8 --steps 5 --out runs/cluster

Each rank holds an identical copy of the model, takes its own random slice of
each global batch, computes its local mean gradient, all-reduces it, and steps
its own optimizer. The gradient of the whole global batch is computed again,
independently, in rank 0 on a fresh model, so the claim of Step 3 can be checked.

This module is the torch-free front: the config, checked in the caller's process, and the record
assembled with numpy. The ranks run :mod:`dpviz.topics.ground_floor.rank_training`, which imports torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.fronts import rank_side_names
from dpviz.engine import launch as launcher
from dpviz.engine.checks import MAX_DATASET, check_choice, check_int, check_lr, check_seed, check_timeout
from dpviz.engine.data import line_data, teacher_data
from dpviz.topics.ground_floor.model_sizes import FULL_PARAMS_LIMIT, MODELS, count_params
from dpviz.engine.where import where_it_ran
from dpviz.topics.ground_floor.records import KIND as RUN_KIND, Run
from dpviz.engine.schema import MAX_ARRAY_BYTES

OPTIMIZERS = ("sgd", "momentum", "adam")
MEANS = ("plain", "weighted")
SAMPLINGS = ("random", "biased", "by_kind")
MAX_WIDTH, MAX_DEPTH = 65_536, 64  # the largest MLP a config accepts: hidden units per layer, hidden layers


def train_worker(rank: int, world_size: int, config: TrainConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.ground_floor.rank_training.train_worker`, imported there (with torch), not here."""
    from dpviz.topics.ground_floor.rank_training import train_worker

    return train_worker(rank, world_size, config)


# the rank side's names this front offers (importing torch only when one is used)
__getattr__ = rank_side_names(__name__, "dpviz.topics.ground_floor.rank_training", (
    "load_data", "batch_indices", "make_model", "make_optimizer", "mse", "digest", "per_example_grads",
    "model_at", "big_batch",
))


@dataclass
class TrainConfig:
    k: int = 4                       # ranks (devices)
    b: int = 8                       # examples per rank per step (the local batch)
    steps: int = 5                   # optimizer steps
    model: str = "line"              # "line" (two parameters) or "mlp"
    width: int = 64                  # hidden units per layer (mlp only)
    depth: int = 2                   # hidden layers (mlp only)
    d_in: int = 16                   # input features (mlp only)
    optimizer: str = "sgd"           # "sgd", "momentum" (0.9) or "adam"
    lr: float = 0.1                  # learning rate η
    seed: int = 0                    # seeds the data, the model and every batch draw
    dataset_size: int = 512          # examples in the data set
    all_reduce: bool = True          # False: each rank steps on its own gradient (drift)
    shard_sizes: tuple | None = None  # examples per rank, for unequal shards; None means b each
    mean: str = "plain"              # "plain" (1/k Σ g_i) or "weighted" (Σ b_i g_i / Σ b_i)
    sampling: str = "random"         # "random"; "biased": every example of one kind only (x >= 0); "by_kind":
                                     # rank r takes examples of kind r % 2 only (line model for both)
    backend: str = "auto"            # "auto", "gloo" or "nccl"
    stall_timeout: float = 60.0      # seconds a rank may go without finishing a step (start-up: 120 s)
    global_batch: int | None = None  # examples per step in all; if set, b = global_batch / k (must split evenly)
    threads: int | None = None       # intra-op threads per rank; None: the cores shared evenly (1 for timing studies)

    def __post_init__(self):
        check_int("k", self.k, low=1, high=1024)
        check_int("dataset_size", self.dataset_size, low=1, high=MAX_DATASET)
        if self.k > self.dataset_size:
            raise ValueError(f"k must be an integer from 1 to {self.dataset_size} (dataset_size: every rank needs an "
                             f"example); got {self.k}.")
        check_int("width", self.width, low=1, high=MAX_WIDTH)
        check_int("depth", self.depth, low=1, high=MAX_DEPTH)
        check_int("d_in", self.d_in, low=1, high=MAX_WIDTH)
        check_seed("seed", self.seed)
        if self.global_batch is not None:
            check_int("global_batch", self.global_batch, low=1, high=self.dataset_size)
            self.b = split_batch(self.global_batch, self.k)
        check_int("steps", self.steps, low=1, high=100_000)
        check_choice("model", self.model, MODELS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("mean", self.mean, MEANS)
        check_choice("sampling", self.sampling, SAMPLINGS)
        if self.sampling != "random" and self.model != "line":
            raise ValueError(f"sampling={self.sampling!r} needs model='line', whose examples have kinds; got model={self.model!r}.")
        check_choice("backend", self.backend, launcher.BACKENDS)
        check_lr("lr", self.lr)
        check_timeout("stall_timeout", self.stall_timeout)
        if self.threads is not None:
            check_int("threads", self.threads, low=1, high=4096)
        if self.shard_sizes is None:
            check_int("b", self.b, low=1, high=self.dataset_size // self.k)
        else:
            self.shard_sizes = tuple(self.shard_sizes)
            if len(self.shard_sizes) != self.k:
                raise ValueError(f"shard_sizes must list one size per rank (k={self.k} entries); got {len(self.shard_sizes)}.")
            for size in self.shard_sizes:
                check_int("shard_sizes entries", size, low=1, high=self.dataset_size)
            if sum(self.shard_sizes) > self.dataset_size:
                raise ValueError(f"shard_sizes must add up to at most dataset_size={self.dataset_size}; got {sum(self.shard_sizes)}.")

        need = self.record_bytes()
        if need > MAX_ARRAY_BYTES:
            raise ValueError(self._too_big(need))

    def n_params(self) -> int:
        """P, the parameters of the model this config builds (dpviz.topics.ground_floor.rank_models), counted without building it."""
        return count_params(self.model, d_in=self.d_in, width=self.width, depth=self.depth)

    def record_bytes(self, *, steps: int | None = None, width: int | None = None) -> int:
        """About how many bytes the run's record holds (what every rank also keeps until the end), before it starts;
        ``steps`` and ``width`` ask the same for other values of those fields."""
        steps = self.steps if steps is None else steps
        width = self.width if width is None else width
        P = count_params(self.model, d_in=self.d_in, width=width, depth=self.depth)
        B, k = sum(self.sizes), self.k
        floats = 2 * steps * k * P + steps * P + (steps + 1) * k * P * (P <= FULL_PARAMS_LIMIT)
        floats += steps * B * P * (self.model == "line") + self.dataset_size * (self.d_in + 1)
        return 4 * floats + 8 * steps * (2 * k + B)

    def _too_big(self, need: int) -> str:
        """The sentence refusing a run whose record would pass MAX_ARRAY_BYTES. It names the field to lower: steps
        while one step fits, else the MLP's width, else the data set."""
        limit = f"the {MAX_ARRAY_BYTES / 2**30:g} GiB a record may hold"
        if self.record_bytes(steps=1) <= MAX_ARRAY_BYTES:
            per_step = self.record_bytes(steps=2) - self.record_bytes(steps=1)  # the bytes grow linearly with steps
            most = 1 + (MAX_ARRAY_BYTES - self.record_bytes(steps=1)) // per_step
            return (f"steps must be at most {most:,} for this model and k: the run would record about {need / 2**30:.1f} "
                    f"GiB (every rank's gradients at every step, {self.n_params():,} parameters), more than {limit}; "
                    f"got steps={self.steps:,}.")
        if self.model == "mlp" and self.record_bytes(width=1) <= MAX_ARRAY_BYTES:
            low, high = 1, self.width  # the widest MLP whose record fits lies in [low, high)
            while high - low > 1:
                middle = (low + high) // 2
                low, high = (middle, high) if self.record_bytes(width=middle) <= MAX_ARRAY_BYTES else (low, middle)
            return (f"width must be at most {low:,} with depth={self.depth}, d_in={self.d_in}, k={self.k} and "
                    f"steps={self.steps:,}: a wider MLP ({self.n_params():,} parameters) records more than {limit} "
                    f"even in one step; got width={self.width:,}.")
        data = 4 * self.dataset_size * (self.d_in + 1)
        most = max(0, MAX_ARRAY_BYTES - (self.record_bytes(steps=1, width=1) - data)) // (4 * (self.d_in + 1))
        return (f"dataset_size must be at most {most:,} with d_in={self.d_in}: with the data set the record would pass "
                f"{limit}; got dataset_size={self.dataset_size:,}.")

    @property
    def sizes(self) -> tuple:
        """Examples per rank per step."""
        return self.shard_sizes if self.shard_sizes is not None else (self.b,) * self.k


def split_batch(global_batch: int, k: int) -> int:
    """The local batch b when ``global_batch`` examples are shared by k ranks; raises if it does not split."""
    k = check_int("k", k, low=1)
    global_batch = check_int("global_batch", global_batch, low=1)
    if global_batch % k:
        raise ValueError(
            f"global_batch must be a multiple of k={k} to split into equal shards; got {global_batch} "
            "(pass shard_sizes for unequal shards)."
        )
    return global_batch // k


def assemble(config: TrainConfig, results: list[dict], backend: str) -> Run:
    """Stack the ranks' results into one :class:`Run`, with rank 0's independent big-batch gradient."""
    k = config.k
    arrays = {
        name: np.stack([r[name] for r in results], axis=1)
        for name in ("local_grad", "reduced_grad", "loss", "t_compute", "t_comm", "param_digest")
    }
    if all("params" in r for r in results):
        arrays["params"] = np.stack([r["params"] for r in results], axis=1)
    for name in ("big_grad", "big_loss", "batch_index"):
        arrays[name] = results[0][name]
    arrays["loop_seconds"] = np.array([r["loop_seconds"] for r in results])
    arrays["shard_sizes"] = np.array(config.sizes)
    arrays["example_rank"] = np.repeat(np.arange(k), config.sizes)
    if "example_grad" in results[0]:
        arrays["example_grad"] = np.concatenate([r["example_grad"] for r in results], axis=1)
    arrays["x"], arrays["y"] = data_arrays(config)

    meta = {f.name: getattr(config, f.name) for f in RUN_KIND.meta if hasattr(config, f.name)}
    meta.update(
        shard_sizes=list(config.sizes),
        n_params=int(arrays["local_grad"].shape[-1]),
        **where_it_ran(RUN_KIND, backend=backend, device=results[0]["device"], threads_per_rank=results[0]["threads"]),
    )
    return Run(meta, arrays)


def data_arrays(config: TrainConfig) -> tuple[np.ndarray, np.ndarray]:
    """The run's data set as float32 arrays x (N, d_in), y (N, 1): what every rank trains on."""
    if config.model == "line":
        return line_data(config.dataset_size, seed=config.seed)
    return teacher_data(config.dataset_size, config.d_in, seed=config.seed)


def record_run(config: TrainConfig | None = None, *, progress: bool = False, **overrides) -> Run:
    """Launch ``config.k`` ranks, train, and return the recorded :class:`Run`.

    Keyword overrides build the config for you: ``record_run(k=2, b=16, optimizer="adam")``.
    """
    config = TrainConfig(**{**(asdict(config) if config else {}), **overrides})
    backend = launcher.resolve_backend(config.backend, config.k)
    results = launcher.launch(
        train_worker,
        config.k,
        args=(config,),
        backend=backend,
        stall_timeout=config.stall_timeout,
        threads=config.threads,
        total_steps=config.steps,
        progress=progress,
    )
    return assemble(config, results, backend)


def _reach_rank0_machine(backend: str, rank: int) -> None:
    """Under torchrun, before joining: fail fast if rank 0's machine is out of reach; point gloo at the way there.

    torchrun tells every rank where rank 0's machine is in MASTER_ADDR: the ``--local-addr`` given to that
    machine's agent, or else its host name, which often resolves to a loopback address (127.0.1.1 on Debian
    and Ubuntu). From another machine that address is its own loopback, and the ranks there would retry in
    silence for the whole 30-minute timeout. Gloo, left to itself, offers the other ranks the address its
    own host name resolves to, with the same trap; so unless GLOO_SOCKET_IFNAME is set, it is set here to
    the interface this rank reaches rank 0's machine through.
    """
    import socket

    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return  # rank 0 opens the store inside init_process_group: nothing to reach yet
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    try:
        with socket.create_connection((host, port), timeout=10) as probe:
            here = probe.getsockname()[0]
    except OSError as e:
        try:
            resolved = f", which resolves here to {socket.gethostbyname(host)}"
        except OSError:
            resolved = ", which does not resolve here"
        sys.exit(f"python -m dpviz.topics.ground_floor.run_training: rank {rank} cannot reach rank 0's machine at MASTER_ADDR={host}"
                 f"{resolved} (port {port}: {e.strerror or e}). torchrun takes MASTER_ADDR from the --local-addr "
                 "of rank 0's agent, or else from that machine's host name: start torchrun on every machine with "
                 "--local-addr set to an address the other machines reach it by.")
    if backend == "gloo" and not os.environ.get("GLOO_SOCKET_IFNAME"):
        name = _interface_with(here)
        if name is not None:
            os.environ["GLOO_SOCKET_IFNAME"] = name


def _interface_with(address: str) -> str | None:
    """The name of the network interface holding IPv4 ``address`` (Linux), or None."""
    import fcntl
    import socket
    import struct

    if not sys.platform.startswith("linux"):
        return None
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                found = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue  # no IPv4 address on this interface
        if socket.inet_ntoa(found[20:24]) == address:
            return name
    return None


def main(argv=None) -> None:
    """Entry point under torchrun: every rank trains; rank 0 gathers and writes the record."""
    parser = argparse.ArgumentParser(prog="python -m dpviz.topics.ground_floor.run_training", description="Record a data-parallel run under torchrun.")
    for name, default in asdict(TrainConfig()).items():
        if name in ("k", "shard_sizes", "backend", "all_reduce", "global_batch", "threads", "stall_timeout"):
            continue
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    parser.add_argument("--no-all-reduce", action="store_true", help="each rank steps on its own gradient")
    parser.add_argument("--out", required=True, help="record path stem (writes OUT.npz and OUT.json)")
    args = vars(parser.parse_args(argv))
    out = args.pop("out")
    args["all_reduce"] = not args.pop("no_all_reduce")

    missing = [name for name in ("RANK", "WORLD_SIZE") if name not in os.environ]
    if missing:  # run directly, not under torchrun
        parser.exit(2, f"{parser.prog}: {' and '.join(missing)} (set by torchrun for each rank) "
                       f"{'is' if len(missing) == 1 else 'are'} missing: run it under torchrun, e.g. "
                       "`torchrun --nproc-per-node 2 -m dpviz.topics.ground_floor.run_training --steps 5 --out runs/mine`, "
                       "or call dpviz.topics.ground_floor.run_training.record_run from Python.\n")
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    try:  # every value checked before torch is imported and the group is joined
        TrainConfig(k=world_size, **args)
    except (ValueError, TypeError) as e:
        name, _, rest = str(e).partition(" ")
        option = f"--{name.replace('_', '-')}" if name in args else name
        parser.exit(2, f"{parser.prog}: error: {option} {rest}\n")
    import torch  # main() is a rank under torchrun: torch belongs here, not in the front's imports
    import torch.distributed as dist

    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    backend = "nccl" if torch.cuda.is_available() and torch.cuda.device_count() > local_rank else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    from dpviz.engine.rank import die_with_parent
    die_with_parent(os.getppid())  # the parent is torchrun's agent: if it is killed, its ranks must not train on
    _reach_rank0_machine(backend, rank)
    from datetime import timedelta
    # A rank that never arrives, or a machine that vanishes mid-run, is reported after 2 minutes, not torch's 30.
    dist.init_process_group(backend, timeout=timedelta(seconds=120))
    if rank == 0:
        print(f"{world_size} ranks joined the process group ({backend}); training", file=sys.stderr, flush=True)
    try:
        config = TrainConfig(k=world_size, backend=backend, **args)
        result = train_worker(rank, world_size, config)
        gathered = [None] * world_size if rank == 0 else None
        dist.gather_object(result, gathered, dst=0)
        is_main = rank == 0
        if is_main:
            run = assemble(config, gathered, backend)
            try:
                verified = run.check()
            except AssertionError as e:  # a run that fails its own check is not saved as if it were good
                sys.exit(f"{parser.prog}: the run failed its own check ({e}), so nothing was saved to {out!r}.")
            path = run.save(out)
            print(f"wrote {path}.npz and {path}.json; {verified}", file=sys.stderr)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
