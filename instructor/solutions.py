"""Reference solutions of every "your turn" exercise, for instructors: not part of the installed ``dpviz``.

A student imports ``dpviz``; these answers are kept out of it (this folder is not packaged), so that
``from dpviz.exercises.solutions import sgd_step`` fails in a student's environment. They are used by

- ``python -m dpviz.grading source COURSE_DIR``, which writes each function's body into the nbgrader
  source version of its chapter, between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` (see
  :mod:`dpviz.grading`; the module-level imports a body uses are copied in with it);
- ``tests/test_exercises.py`` and ``tests/test_grading.py``: every checker accepts its reference.

Each is written the way a reader could write it after the chapter. The last three run inside real
ranks, where the checker provides ``torch``, ``dist`` (``torch.distributed``), ``math`` and ``np``;
their module-level imports here are for reading and for tests only.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist


def sgd_step(theta, grad, eta):
    """Chapter 01: one step downhill, θ ← θ − η ∇θL."""
    return np.asarray(theta) - eta * np.asarray(grad)


def mean_gradient(example_grads):
    """Chapter 02: the batch's gradient is the mean of its b per-example gradients (rows)."""
    return np.mean(example_grads, axis=0)


def weighted_mean(group_grads, group_sizes):
    """Chapter 03: groups of b_i examples, each with its mean gradient g_i: Σ b_i g_i / Σ b_i."""
    sizes = np.asarray(group_sizes, dtype=float)
    return sizes @ np.asarray(group_grads) / sizes.sum()


def average_gradients(model_grads, world_size):
    """Chapter 04: inside a rank, turn each local gradient tensor into the mean over the ranks, in place."""
    for grad in model_grads:
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        grad /= world_size


def reduce_scatter_step(chunks, rank, world_size, step):
    """Chapter 05: step ``step`` of the ring's reduce-scatter: send one chunk right, add the one from the left."""
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i = (rank - step) % world_size
    recv_i = (rank - step - 1) % world_size
    inbox = torch.empty_like(chunks[recv_i])
    sending = dist.isend(chunks[send_i], dst=right)
    dist.recv(inbox, src=left)
    sending.wait()
    chunks[recv_i] += inbox


def t_comm_ring(k, M, alpha, beta):
    """Chapter 06: a ring all-reduce of M bytes over k ranks, 2(k−1)·α + 2(k−1)/k · M/β seconds."""
    return 2 * (k - 1) * alpha + 2 * (k - 1) / k * M / beta


def speedup(t_compute, k, t_comm):
    """Chapter 06: S = T_compute / (T_compute / k + T_comm)."""
    return t_compute / (t_compute / k + t_comm)


def bus_bandwidth(M, seconds, k):
    """Chapter 07: the bus bandwidth of a ring all-reduce, algbw = M / T times 2(k−1)/k."""
    return M / seconds * 2 * (k - 1) / k


def data_parallel_step(theta, rank_grads, eta):
    """Chapter 08: every rank steps with the mean of the k ranks' gradients (the all-reduce divided by k)."""
    return np.asarray(theta) - eta * np.mean(rank_grads, axis=0)


def lr_for_k(lr_base, k, rule):
    """Chapter 09: the rate for a batch k times larger: ×k by the linear rule, ×√k by the square-root rule."""
    return lr_base * (k if rule == "linear" else math.sqrt(k))


def warmup_lr(lr, step, warmup):
    """Chapter 09: a linear warm-up over ``warmup`` steps (step counted from 0), then the full rate."""
    return lr * (step + 1) / warmup if step < warmup else lr


def accumulated_gradient(micro_grads):
    """Chapter 10: m micro-batch gradients (rows) added up, then divided by m."""
    return np.sum(micro_grads, axis=0) / len(micro_grads)


def wait_times(compute):
    """Chapter 11: how long each rank waits at the all-reduce for the slowest one."""
    compute = np.asarray(compute, dtype=float)
    return compute.max() - compute


def staleness(t_grad):
    """Chapter 11: worker i's typical staleness, Σ_{j≠i} t_i / t_j updates, in asynchronous SGD."""
    t = np.asarray(t_grad, dtype=float)
    return t * np.sum(1.0 / t) - 1.0


def bubble(p, m):
    """Chapter 12: the idle share of a pipeline of p stages fed m micro-batches, (p − 1)/(m + p − 1)."""
    return (p - 1) / (m + p - 1)


def gather_columns(y_block, world_size):
    """Chapter 12: rank r holds column block r of Y = X W; return the whole Y, the blocks side by side."""
    blocks = [torch.empty_like(y_block) for _ in range(world_size)]
    dist.all_gather(blocks, y_block)
    return torch.cat(blocks, dim=1)


def owned_shard(layer, rank, k):
    """Chapter 13: the layer padded with zeros to a multiple of k, cut into k chunks; rank r keeps chunk (r + 1) mod k."""
    layer = np.asarray(layer)
    padded = np.concatenate([layer, np.zeros(-len(layer) % k, dtype=layer.dtype)])
    size = len(padded) // k
    chunk = (rank + 1) % k
    return padded[chunk * size:(chunk + 1) * size]


def step_bytes(k, M, zero_stage):
    """Chapter 13: two ring passes of (k − 1)/k · M per step at stages 0 to 2, three at ZeRO-3."""
    passes = 3 if zero_stage == 3 else 2
    return passes * (k - 1) / k * M


def powersgd_bytes(rows, cols, r):
    """Chapter 14: the factors P (rows×r') and Q (cols×r'), r' = min(rows, cols, r), where they save half; else the matrix."""
    r = min(rows, cols, r)
    if (rows + cols) * r * 2 < rows * cols:
        return 4 * (rows + cols) * r
    return 4 * rows * cols


def slow_link_bytes(k, g, M):
    """Chapter 14: a ring all-reduce of the rank's M/g share over the G = k/g groups: 2(G − 1)/G · M/g."""
    G = k // g
    return 2 * (G - 1) / G * M / g


def young_daly_interval(delta, mtbf):
    """Chapter 15: Young's checkpoint interval, where the saves and the redone work cost the same, √(2 δ MTBF)."""
    return math.sqrt(2 * delta * mtbf)


def survivor_average(model_grads, group):
    """Chapter 15: inside a survivor, each gradient tensor becomes its mean over the survivors' group, in place."""
    for grad in model_grads:
        dist.all_reduce(grad, group=group)
        grad /= dist.get_world_size(group)
