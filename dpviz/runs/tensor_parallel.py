"""Tensor parallelism for real: one linear layer ``Y = X W`` split over k ranks, by columns and by rows.

    from dpviz.runs.tensor_parallel import record_tensor_split
    split = record_tensor_split(k=2)          # 2 real processes
    print(split.check())                      # every rank's Y, dX, dW equal the unsplit layer's
    split.bytes_sent                          # (split, pass, rank): bytes each exchange made each rank send

Column split: rank r holds the column block ``c`` of W (d_in × d_out/k) that the ring's
all-gather expects it to own, ``c = (r + 1) mod k`` (:func:`dpviz.runs.collectives.owned_chunk`),
computes ``Y_c = X W_c`` and fills in its block of a (k, B, d_out/k) buffer; the ring's all-gather
passes the blocks round until every rank has them all. Backward: ``dW_c = Xᵀ dY_c`` stays local,
and each rank's ``dY_c W_cᵀ`` is one of k terms of dX, summed with the ring all-reduce.

Row split: rank r holds row block c of W (d_in/k × d_out) and the matching columns X_c of X,
computes the partial sum ``X_c W_c`` (B × d_out), and the ring all-reduce adds the k partial
sums. Backward: ``dW_c = X_cᵀ dY`` and ``dX_c = dY W_cᵀ`` are local; an all-gather joins the dX blocks.

The exchanges use the hand-written ring of :mod:`dpviz.runs.collectives`, which counts the bytes
it sends; each is also done with ``dist.all_gather`` / ``dist.all_reduce`` and compared.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.distributed as dist

from dpviz.checks import check_int, check_real
from dpviz.records.tensor_parallel import SPLITS, TensorSplit
from dpviz.runs import launch as launcher
from dpviz.runs.collectives import owned_chunk, ring_all_gather, ring_all_reduce
from dpviz.runs.where import where_it_ran
from dpviz.theory import tensor_parallel as theory


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
        for split in SPLITS:
            theory.check_split(self.d_in, self.d_out, self.k, split)
        check_real("stall_timeout", self.stall_timeout, low=0, low_open=True)


def layer_inputs(config: TensorConfig) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """X (B, d_in), W (d_in, d_out) and dY (B, d_out), the same in every process for one seed."""
    gen = torch.Generator().manual_seed(config.seed)
    x = torch.randn(config.batch, config.d_in, generator=gen)
    w = torch.randn(config.d_in, config.d_out, generator=gen) / config.d_in ** 0.5
    dy = torch.randn(config.batch, config.d_out, generator=gen)
    return x, w, dy


def _gather_blocks(local: torch.Tensor, k: int, block: int) -> tuple[torch.Tensor, int, torch.Tensor]:
    """All-gather column blocks: ``local`` is block ``block`` of a (B, k·n) matrix. Returns it whole, bytes sent,
    and the same matrix from ``dist.all_gather`` for comparison."""
    batch, n = local.shape
    buf = torch.zeros(k, batch, n)  # block c of the result is chunk c of the flat buffer
    buf[block] = local
    sent = ring_all_gather(buf.view(-1))
    whole = buf.permute(1, 0, 2).reshape(batch, k * n)
    parts = [torch.empty_like(local) for _ in range(k)]
    dist.all_gather(parts, local.contiguous())  # parts[r] is rank r's block, which is block owned_chunk(r)
    ordered = [None] * k
    for r, part in enumerate(parts):
        ordered[owned_chunk(r, k)] = part
    return whole, sent, torch.cat(ordered, dim=1)


def _sum_partials(partial: torch.Tensor) -> tuple[torch.Tensor, int, torch.Tensor]:
    """All-reduce (sum) a partial result with the ring; also with ``dist.all_reduce`` for comparison."""
    mine, reference = partial.clone().contiguous(), partial.clone().contiguous()
    sent = ring_all_reduce(mine)
    dist.all_reduce(reference)
    return mine, sent, reference


def tensor_worker(rank: int, world_size: int, config: TensorConfig) -> dict:
    """One rank: the column split, then the row split, forward and backward. Returns numpy arrays."""
    k = world_size
    x, w, dy = layer_inputs(config)
    block = owned_chunk(rank, k) if k > 1 else 0
    out = {"y": [], "dx": [], "dw": [], "block": [], "local_y": [], "bytes": [], "same": []}

    # Column split: W = [W_0 ... W_{k-1}], this rank holds W_block.
    cols = slice(block * config.d_out // k, (block + 1) * config.d_out // k)
    y_local = x @ w[:, cols]                                      # (B, d_out/k)
    y, sent_f, y_dist = _gather_blocks(y_local, k, block)         # forward: all-gather Y
    dw_local = x.T @ dy[:, cols]                                  # (d_in, d_out/k), stays here
    dx, sent_b, dx_dist = _sum_partials(dy[:, cols] @ w[:, cols].T)  # backward: all-reduce dX
    out["y"].append(y); out["dx"].append(dx); out["dw"].append(dw_local); out["block"].append(block)
    out["local_y"].append(y_local.numel()); out["bytes"].append((sent_f, sent_b))
    out["same"].append((bool(torch.equal(y, y_dist)), bool(torch.equal(dx, dx_dist))))
    launcher.report_progress(0)

    # Row split: W stacked from row blocks, X cut into the matching column blocks.
    rows = slice(block * config.d_in // k, (block + 1) * config.d_in // k)
    partial = x[:, rows] @ w[rows]                                # (B, d_out): one of k terms of Y
    y, sent_f, y_dist = _sum_partials(partial)                    # forward: all-reduce Y
    dw_local = x[:, rows].T @ dy                                  # (d_in/k, d_out), stays here
    dx, sent_b, dx_dist = _gather_blocks(dy @ w[rows].T, k, block)  # backward: all-gather dX
    out["y"].append(y); out["dx"].append(dx); out["dw"].append(dw_local); out["block"].append(block)
    out["local_y"].append(partial.numel()); out["bytes"].append((sent_f, sent_b))
    out["same"].append((bool(torch.equal(y, y_dist)), bool(torch.equal(dx, dx_dist))))
    launcher.report_progress(1)

    for name in ("y", "dx", "dw"):
        out[name] = [t.numpy() for t in out[name]]
    return out


def unsplit(config: TensorConfig) -> dict:
    """The whole layer in this process, gradients by autograd: Y = X W, dX, dW for the upstream gradient dY."""
    x, w, dy = layer_inputs(config)
    x.requires_grad_(True)
    w.requires_grad_(True)
    y = x @ w
    y.backward(dy)
    return {"x": x.detach().numpy(), "w": w.detach().numpy(), "dy": dy.numpy(), "y": y.detach().numpy(),
            "dx": x.grad.numpy(), "dw": w.grad.numpy()}


def assemble(config: TensorConfig, results: list[dict], backend: str) -> TensorSplit:
    k = config.k
    arrays = unsplit(config)
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
