"""Tensor parallelism for real: one linear layer ``Y = X W`` split over k ranks, by columns and by rows.

    from dpviz.topics.splitting.run_tensor_parallel import record_tensor_split
    split = record_tensor_split(k=2)          # 2 real processes
    print(split.check())                      # every rank's Y, dX, dW equal the unsplit layer's
    split.bytes_sent                          # (split, pass, rank): bytes each exchange made each rank send

Column split: rank r holds the column block ``c`` of W (d_in × d_out/k) that the ring's
all-gather expects it to own, ``c = (r + 1) mod k`` (:func:`dpviz.topics.all_reduce.rank_collectives.owned_chunk`),
computes ``Y_c = X W_c`` and fills in its block of a (k, B, d_out/k) buffer; the ring's all-gather
passes the blocks round until every rank has them all. Backward: ``dW_c = Xᵀ dY_c`` stays local,
and each rank's ``dY_c W_cᵀ`` is one of k terms of dX, summed with the ring all-reduce.

Row split: rank r holds row block c of W (d_in/k × d_out) and the matching columns X_c of X,
computes the partial sum ``X_c W_c`` (B × d_out), and the ring all-reduce adds the k partial
sums. Backward: ``dW_c = X_cᵀ dY`` and ``dX_c = dY W_cᵀ`` are local; an all-gather joins the dX blocks.

The exchanges use the hand-written ring of :mod:`dpviz.topics.all_reduce.rank_collectives`, which counts the bytes
it sends; each is also done with ``dist.all_gather`` / ``dist.all_reduce`` and compared.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from dpviz.engine.fronts import rank_side_names
from dpviz.engine.checks import check_int, check_seed, check_timeout
from dpviz.topics.splitting.records_tensor_parallel import SPLITS, TensorSplit
from dpviz.engine import launch as launcher
from dpviz.engine.where import where_it_ran
from dpviz.topics.splitting import theory_tensor_parallel as theory


def tensor_worker(rank: int, world_size: int, config: TensorConfig) -> dict:
    """Runs in each rank: :func:`dpviz.topics.splitting.rank_tensor_parallel.tensor_worker`, imported there (with torch), not here."""
    from dpviz.topics.splitting.rank_tensor_parallel import tensor_worker

    return tensor_worker(rank, world_size, config)


# the rank side's names this front offers (importing torch only when one is used)
__getattr__ = rank_side_names(__name__, "dpviz.topics.splitting.rank_tensor_parallel", (
    "layer_inputs", "unsplit",
))


@dataclass
class TensorConfig:
    k: int = 2          # ranks
    batch: int = 4      # B, rows of X
    d_in: int = 6       # input features; a multiple of k for the row split
    d_out: int = 8      # output features; a multiple of k for the column split
    seed: int = 0       # seeds X, W and dY
    stall_timeout: float = 60.0  # seconds a rank may go without progress

    def __post_init__(self):
        self.k = check_int("k", self.k, low=1, high=64)
        self.batch = check_int("batch", self.batch, low=1, high=1 << 16)
        check_int("d_in", self.d_in, low=1, high=1 << 14)
        check_int("d_out", self.d_out, low=1, high=1 << 14)
        for split in SPLITS:
            theory.check_split(self.d_in, self.d_out, self.k, split)
        check_timeout("stall_timeout", self.stall_timeout)
        check_seed("seed", self.seed)


def assemble(config: TensorConfig, results: list[dict], backend: str) -> TensorSplit:
    k = config.k
    arrays = dict(results[0]["unsplit"])  # the whole layer, computed by rank 0 with autograd
    dw_split = np.zeros((2, config.d_in, config.d_out), np.float32)
    for r in results:
        c = r["block"][0]
        dw_split[0][:, c * config.d_out // k:(c + 1) * config.d_out // k] = r["dw"][0]
        c = r["block"][1]
        dw_split[1][c * config.d_in // k:(c + 1) * config.d_in // k] = r["dw"][1]
    arrays.update(
        y_split=np.stack([np.stack([r["y"][s] for r in results]) for s in range(2)]),
        dx_split=np.stack([np.stack([r["dx"][s] for r in results]) for s in range(2)]),
        dw_split=dw_split,
        block=np.array([[r["block"][s] for r in results] for s in range(2)], dtype=np.int64),
        local_y=np.array([[r["local_y"][s] for r in results] for s in range(2)], dtype=np.int64),
        bytes_sent=np.array([[[r["bytes"][s][pss] for r in results] for pss in range(2)] for s in range(2)], dtype=np.int64),
        same_as_dist=np.array([[all(r["same"][s][pss] for r in results) for pss in range(2)] for s in range(2)]),
    )
    meta = dict(
        k=k, batch=config.batch, d_in=config.d_in, d_out=config.d_out, n_params=config.d_in * config.d_out,
        exchanges={split: dict(zip(("forward", "backward"), theory.EXCHANGES[split])) for split in SPLITS},
        seed=config.seed, **where_it_ran(TensorSplit, backend=backend),
    )
    return TensorSplit(meta, arrays)


def record_tensor_split(config: TensorConfig | None = None, **overrides) -> TensorSplit:
    """Launch k ranks, run the layer split by columns and by rows, and return the :class:`TensorSplit` record.

    ``record_tensor_split(k=2, batch=4, d_in=6, d_out=8)``: keyword overrides build the config.
    """
    config = TensorConfig(**{**(asdict(config) if config else {}), **overrides})
    results = launcher.launch(tensor_worker, config.k, args=(config,), backend="gloo", threads=1,
                              stall_timeout=config.stall_timeout)
    return assemble(config, results, "gloo")
