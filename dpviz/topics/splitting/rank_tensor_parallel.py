"""The rank side of :mod:`dpviz.topics.splitting.run_tensor_parallel`: one linear layer split over k ranks, in torch.

Rank 0 also computes the whole, unsplit layer with autograd (:func:`unsplit`), the reference every
rank's split result is compared with.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from dpviz.engine import launch as launcher
from dpviz.topics.all_reduce.rank_collectives import owned_chunk, ring_all_gather, ring_all_reduce


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
    """One rank: the column split, then the row split, forward and backward. Returns numpy arrays
    (rank 0 adds the unsplit layer's, the reference)."""
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
    if rank == 0:
        out["unsplit"] = unsplit(config)
    return out



def unsplit(config: TensorConfig) -> dict:
    """The whole layer in one process, gradients by autograd: Y = X W, dX, dW for the upstream gradient dY."""
    x, w, dy = layer_inputs(config)
    x.requires_grad_(True)
    w.requires_grad_(True)
    y = x @ w
    (y * dy).sum().backward()  # y.backward(dy), the same bits, without the import of sympy it costs a fresh process
    return {"x": x.detach().numpy(), "w": w.detach().numpy(), "dy": dy.numpy(), "y": y.detach().numpy(),
            "dx": x.grad.numpy(), "dw": w.grad.numpy()}
