"""Checkers for the formula exercises, against the chapters' theory modules (numpy only).

    print(check_t_comm_ring(t_comm_ring))   # the speedup model, against costmodel.t_comm_ring
    print(check_speedup(speedup))           # the speedup model, against costmodel.speedup
    print(check_bus_bandwidth(bus_bandwidth))  # measuring an all-reduce, against costmodel.bus_bandwidth
    print(check_lr_for_k(lr_for_k))         # a bigger batch, against lr_rules.scaled_lr
    print(check_warmup_lr(warmup_lr))       # a bigger batch, against lr_rules.warmup_schedule
    print(check_wait_times(wait_times))     # waiting, against waiting.straggler_step
    print(check_staleness(staleness))       # waiting, against waiting.async_staleness
    print(check_bubble(bubble))             # splitting the model, against pipeline.bubble_fraction
    print(check_powersgd_bytes(powersgd_bytes))    # a cheaper sync, against cheaper_sync.powersgd_elements
    print(check_slow_link_bytes(slow_link_bytes))  # a cheaper sync, against cheaper_sync.link_bytes_two_level

The reader's function is called with plain Python numbers (lists for the per-rank ones), one case at
a time, and each answer is compared with the library's to float rounding. All the calls of one check
together get :data:`dpviz.engine.sandbox.TIME_LIMIT` seconds (5); whatever the function does in them
(loops, exits, raises, prints) is answered with a verdict (see :func:`dpviz.engine.verdict.run_cases`).
"""

from __future__ import annotations

import math

import numpy as np

import dpviz.engine.verdict as v
from dpviz.topics.cheaper_sync import theory as cheaper_sync
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.bigger_batch import theory as lr_rules
from dpviz.topics.splitting import theory_pipeline as pipeline
from dpviz.topics.waiting import theory as waiting

COMM_CASES = (  # (k, M bytes, alpha seconds, beta bytes/second)
    (4, 4e8, 5e-6, 1e11),
    (8, 1e8, 2e-5, 1.25e9),
    (2, 1e6, 1e-5, 1.25e9),
    (3, 3e7, 1e-4, 1e9),
    (1, 1e8, 1e-5, 1e9),
)
BUSBW_CASES = ((4e8, 0.01, 8), (1e6, 2e-3, 2), (3e7, 0.05, 3), (1e8, 0.1, 1))  # (M bytes, seconds, k)
SPEEDUP_CASES = ((1.0, 4, 0.1), (0.5, 8, 0.05), (2.0, 2, 0.5), (0.3, 1, 0.0))  # (t_compute, k, t_comm), seconds
LR_CASES = ((0.1, 4, "linear"), (0.1, 4, "sqrt"), (0.05, 8, "linear"), (0.05, 9, "sqrt"), (0.2, 1, "linear"))
WARMUP = (0.4, 5, 8)  # (lr, warm-up steps, steps checked)
WAIT_CASES = ([0.10, 0.10, 0.15, 0.10], [0.2, 0.05, 0.1], [0.12, 0.12], [0.3])  # compute seconds per rank
STALENESS_CASES = ([0.01, 0.01, 0.01, 0.01], [0.01, 0.01, 0.05], [0.02, 0.04], [0.5])  # seconds per gradient
POWERSGD_CASES = ((4096, 4096, 4), (1024, 256, 8), (32, 16, 4), (32, 1, 4), (8, 8, 16), (300, 200, 1))  # (rows, cols, r)
SLOW_LINK_CASES = ((8, 4, 1.28e5), (8, 2, 6.4e4), (16, 8, 5.12e5), (4, 2, 3.2e4), (6, 3, 7.2e4), (4, 4, 6.4e4))  # (k, g, M)
BUBBLE_CASES = ((4, 8), (2, 1), (8, 32), (3, 4), (1, 4))  # (p stages, m micro-batches)


def _comm_label(k, M, alpha, beta) -> str:
    return f"at k = {k}, M = {M:g} bytes, α = {alpha:g} s, β = {beta:g} bytes/s"


def check_t_comm_ring(t_comm_ring) -> v.Verdict:
    """The speedup model: ``t_comm_ring(k, M, alpha, beta)``, seconds for a ring all-reduce; against the cost model."""
    name = v.require_function("check_t_comm_ring", t_comm_ring)
    cases = [v.Case(c, costmodel.t_comm_ring(*c), _comm_label(*c)) for c in COMM_CASES]
    mistakes = [
        (costmodel.t_comm_notes, "That is the notes' formula, which prices a reduce-scatter alone, half of an "
                                 "all-reduce: the ring then all-gathers, 2(k−1) steps in all."),
        (costmodel.t_comm_halving_doubling, "That is the halving-doubling all-reduce (2 log2 k latencies); a ring "
                                            "takes 2(k−1) steps, each paying α."),
        (lambda k, M, a, b: 2 * k * a + 2 * (k - 1) / k * M / b,
         "Your latency term counts 2k rounds; a ring has 2(k−1): k − 1 steps of reduce-scatter, then k − 1 of "
         "all-gather, each paying α once."),
        (lambda k, M, a, b: (k - 1) * a + (k - 1) / k * M / b,
         "That is one trip around the ring: an all-reduce makes two, a reduce-scatter and an all-gather."),
        (lambda k, M, a, b: 2 * (k - 1) * a + 2 * (k - 1) * M / b,
         "Each of the 2(k−1) steps sends one chunk of M/k bytes, not all M: the bandwidth term is 2(k−1)/k · M/β."),
        (lambda k, M, a, b: 2 * (k - 1) * a + 2 * M / b,
         "The bandwidth term is 2(k−1)/k · M/β: it vanishes at k = 1 and only approaches 2M/β for large k."),
    ]
    return v.run_cases(name, t_comm_ring, cases, mistakes=mistakes, returns="a number of seconds",
                       success=f"it equals the cost model's ring all-reduce, 2(k−1)·α + 2(k−1)/k·M/β, in all "
                               f"{len(cases)} cases, k = 1 included")


def check_speedup(speedup) -> v.Verdict:
    """The speedup model: ``speedup(t_compute, k, t_comm)`` = T_compute / (T_compute/k + T_comm);
    against the cost model."""
    name = v.require_function("check_speedup", speedup)
    cases = [v.Case(c, costmodel.speedup(*c), f"at T_compute = {c[0]:g} s, k = {c[1]}, T_comm = {c[2]:g} s")
             for c in SPEEDUP_CASES]
    mistakes = [
        (lambda t, k, c: t / (t + c), "The compute is shared: each of the k ranks does T_compute / k of it."),
        (lambda t, k, c: (t / k + c) / t, "That is upside down: S is one rank's step time over k ranks' step time."),
        (lambda t, k, c: float(k), "That leaves out T_comm: the sync is paid at every step, so S stays below k."),
        (lambda t, k, c: t / (t / k), "That leaves out T_comm: the sync is paid at every step, so S stays below k."),
        (lambda t, k, c: t / (t / k + c / k),
         "You divided T_comm by k too: the ranks share the compute, but every rank waits the whole sync, so only "
         "T_compute is divided by k."),
        (lambda t, k, c: t / (t + k * c),
         "That is the efficiency E = S/k, the share of the ideal speedup k that is left: S is k times that."),
        (lambda t, k, c: 1 / (1 / k + c),
         "The top of the fraction is one rank's step time, T_compute, not 1: S = T_compute / (T_compute/k + T_comm), "
         "which your formula matches only when T_compute = 1 s."),
    ]
    return v.run_cases(name, speedup, cases, mistakes=mistakes, returns="a number, the speedup S",
                       success=f"it equals the cost model's S = T_compute / (T_compute/k + T_comm) in all {len(cases)} cases")


def check_bus_bandwidth(bus_bandwidth) -> v.Verdict:
    """Measuring an all-reduce: ``bus_bandwidth(M, seconds, k)`` = M / seconds · 2(k−1)/k; against the cost model."""
    name = v.require_function("check_bus_bandwidth", bus_bandwidth)
    cases = [v.Case(c, costmodel.bus_bandwidth(*c), f"for M = {c[0]:g} bytes in {c[1]:g} s on k = {c[2]}")
             for c in BUSBW_CASES]
    mistakes = [
        (lambda M, t, k: M / t, "That is algbw, M / T: the bus bandwidth multiplies it by the ring's 2(k−1)/k."),
        (lambda M, t, k: M / t * (k - 1) / k, "That counts one phase of the ring: the reduce-scatter and the "
                                              "all-gather each send (k−1)/k · M, so the factor is 2(k−1)/k."),
        (lambda M, t, k: 2 * M / t, "The factor is 2(k−1)/k, not 2: at k = 1 nothing is sent, at k = 2 it is 1."),
    ]
    return v.run_cases(name, bus_bandwidth, cases, mistakes=mistakes, returns="a number of bytes per second",
                       success=f"it equals busbw = M / T · 2(k−1)/k in all {len(cases)} cases, k = 1 included")


def check_lr_for_k(lr_for_k) -> v.Verdict:
    """A bigger batch: ``lr_for_k(lr_base, k, rule)``, rule "linear" (×k) or "sqrt" (×√k);
    against lr_rules.scaled_lr."""
    name = v.require_function("check_lr_for_k", lr_for_k)
    cases = [v.Case(c, lr_rules.scaled_lr(c[0], c[2], c[1]), f"for lr_base = {c[0]:g}, k = {c[1]}, rule = {c[2]!r}")
             for c in LR_CASES]
    mistakes = [
        (lambda lr, k, rule: lr * k, "The square-root rule multiplies by √k, not k."),
        (lambda lr, k, rule: lr * (math.sqrt(k) if rule == "linear" else k),
         "That is the other rule's rate: the linear rule multiplies by k, the square-root rule by √k."),
        (lambda lr, k, rule: lr / (k if rule == "linear" else math.sqrt(k)),
         "A bigger batch takes a bigger step: multiply the base rate, don't divide it."),
        (lambda lr, k, rule: lr, "The rate must grow with k: ×k by the linear rule, ×√k by the square-root rule."),
        (lambda lr, k, rule: lr * (k if rule == "linear" else k / 2),
         "That multiplies by k/2, not √k (the two agree only at k = 4): `k**1/2` is `(k**1)/2`, since ** binds "
         "tighter than /; write `k**0.5` or `math.sqrt(k)`."),
    ]
    return v.run_cases(name, lr_for_k, cases, mistakes=mistakes, returns="a learning rate",
                       success=f"both rules, ×k and ×√k, give the library's rates in all {len(cases)} cases")


def check_warmup_lr(warmup_lr) -> v.Verdict:
    """A bigger batch: ``warmup_lr(lr, step, warmup)``, the rate at step ``step`` (from 0);
    against lr_rules.warmup_schedule."""
    name = v.require_function("check_warmup_lr", warmup_lr)
    lr, warmup, steps = WARMUP
    schedule = lr_rules.warmup_schedule(lr, steps, warmup)
    cases = [v.Case((lr, t, warmup), schedule[t], f"at step {t} with lr = {lr:g} and warmup = {warmup}")
             for t in range(steps)]
    cases += [v.Case((lr, t, 0), lr, f"at step {t} with lr = {lr:g} and warmup = 0 (no warm-up)") for t in (0, 3)]
    mistakes = [
        (lambda lr, t, w: lr * t / w if t < w else lr,
         "Step 0 must already move: step t takes lr·(t + 1)/warmup, so the first step uses lr/warmup, not 0."),
        (lambda lr, t, w: lr * (t + 1) / w, "After the warm-up the rate stays at lr: it must stop growing."),
        (lambda lr, t, w: lr * min(t, w) / w if w else lr,
         "Step 0 must already move: step t takes lr·(t + 1)/warmup, so the first step uses lr/warmup, not 0."),
    ]
    raises = {"ZeroDivisionError": "A warm-up of 0 steps is no warm-up: the rate is lr from step 0, so test warmup "
                                   "before dividing by it."}
    return v.run_cases(name, warmup_lr, cases, mistakes=mistakes, returns="a learning rate", raises=raises,
                       success=f"it ramps to lr over {warmup} steps and then holds it, as the chapter's "
                               "schedule does, and with warmup = 0 it gives lr from the first step")


def check_wait_times(wait_times) -> v.Verdict:
    """Waiting: ``wait_times(compute)``, each rank's wait at the all-reduce; against waiting.straggler_step."""
    name = v.require_function("check_wait_times", wait_times)
    cases = [v.Case((list(c),), waiting.straggler_step(0.0, c, 0.0).wait,
                    f"for ranks computing {', '.join(f'{t:g}' for t in c)} s,") for c in WAIT_CASES]
    mistakes = [
        (lambda c: np.asarray(c) - np.min(c), "That is how far each rank is behind the fastest; the wait is how long "
                                              "it sits idle until the slowest arrives: the largest time minus its own."),
        (lambda c: np.full(len(c), np.max(c) - np.min(c)), "Each rank waits a different time: the largest compute time "
                                                           "minus its own, so the slowest waits 0."),
        (lambda c: np.max(c) - np.mean(c) + 0 * np.asarray(c), "Each rank waits the largest time minus its own."),
    ]
    raises = {"TypeError": "The compute times come as a list, which numbers cannot be subtracted from: "
                           "np.asarray(compute) makes it an array."}
    return v.run_cases(name, wait_times, cases, mistakes=mistakes, returns="one wait per rank, in seconds",
                       raises=raises,
                       success=f"in all {len(cases)} cases every rank waits what the chapter's "
                               "straggler model says: the slowest rank's time minus its own")


def check_staleness(staleness) -> v.Verdict:
    """Waiting: ``staleness(t_grad)``, each worker's typical staleness in async SGD; against waiting.async_staleness."""
    name = v.require_function("check_staleness", staleness)
    cases = [v.Case((list(c),), waiting.async_staleness(c),
                    f"for workers taking {', '.join(f'{t:g}' for t in c)} s per gradient,") for c in STALENESS_CASES]
    mistakes = [
        (lambda t: np.asarray(t) * np.sum(1 / np.asarray(t)),
         "That counts the worker's own update too: sum t_i / t_j over the other workers only, j ≠ i."),
        (lambda t: np.full(len(t), len(t) - 1.0), "k − 1 holds only when all workers are equally fast: a slow worker "
                                                  "sees more updates land meanwhile, Σ_{j≠i} t_i / t_j."),
        (lambda t: np.full(len(t), float(len(t))), "k − 1 other workers can update meanwhile, and only for equal speeds: "
                                                   "in general Σ_{j≠i} t_i / t_j."),
    ]
    return v.run_cases(name, staleness, cases, mistakes=mistakes, returns="one staleness per worker, in updates",
                       success=f"in all {len(cases)} cases it gives the chapter's staleness: k − 1 for equal "
                               "workers, more for the slow ones")


INTEGER_DIVISION = ("A whole number where a fraction belongs is what `//` gives: it is integer division, and both "
                    "(p − 1) // (m + p − 1) and m // (m + p − 1) round down to 0 whenever p > 1; divide with `/`.")


def check_bubble(bubble) -> v.Verdict:
    """Splitting the model: ``bubble(p, m)`` = (p − 1)/(m + p − 1); against pipeline.bubble_fraction."""
    name = v.require_function("check_bubble", bubble)
    cases = [v.Case(c, pipeline.bubble_fraction(*c), f"for p = {c[0]} stages and m = {c[1]} micro-batches")
             for c in BUBBLE_CASES]
    mistakes = [
        (lambda p, m: (p - 1) / m, "That is idle time over busy time; the fraction is of the whole run, "
                                   "m + p − 1 slots: (p − 1)/(m + p − 1)."),
        (lambda p, m: m / (m + p - 1), "That is the busy share; the bubble is the rest, (p − 1)/(m + p − 1)."),
        (lambda p, m: p / (m + p - 1), "A stage idles p − 1 slots (filling and draining the pipe), not p."),
        (lambda p, m: (p - 1) / (m + p), "The run lasts m + p − 1 slots, not m + p."),
        (lambda p, m: (p - 1) // (m + p - 1), INTEGER_DIVISION),
        (lambda p, m: 1 - m // (m + p - 1), INTEGER_DIVISION),
        (lambda p, m: (p - 1) // m, INTEGER_DIVISION),
    ]
    return v.run_cases(name, bubble, cases, mistakes=mistakes, returns="a fraction between 0 and 1",
                       success=f"it equals the pipeline's bubble, (p − 1)/(m + p − 1), in all {len(cases)} cases, "
                               "0 for one stage included")


def _powersgd_bytes(rows, cols, r) -> int:
    return cheaper_sync.ELEMENT_BYTES * cheaper_sync.powersgd_elements([(rows, cols)], r)["total"]


def _slow_link_bytes(k, g, M) -> float:
    """The most bytes one rank sends between groups, counted chunk by chunk as the hand-written rings cut them."""
    n = int(M) // cheaper_sync.ELEMENT_BYTES
    across = ~cheaper_sync.same_group(k, g)
    return float((cheaper_sync.link_bytes_two_level(k, g, n) * across).sum(axis=1).max())


def check_powersgd_bytes(powersgd_bytes) -> v.Verdict:
    """A cheaper sync: ``powersgd_bytes(rows, cols, r)``, bytes PowerSGD sends for a rows×cols float32 matrix;
    against torch's rule."""
    name = v.require_function("check_powersgd_bytes", powersgd_bytes)
    cases = [v.Case(c, _powersgd_bytes(*c), f"for a {c[0]}×{c[1]} matrix at r = {c[2]}") for c in POWERSGD_CASES]
    mistakes = [  # compressing the bias comes first: at r = 4 it sends as many bytes as counting values does
        (lambda n1, n2, r: 4 * (n1 + n2) * min(n1, n2, r),
         "That compresses the bias (cols = 1) into P and Q, n₁ + 1 values in place of its n₁: PowerSGD sends a bias "
         "whole, n₁·4 bytes, as it does any matrix whose factors would not save at least half."),
        (lambda n1, n2, r: (n1 + n2) * r, "That counts values, not bytes: each float32 value is 4 bytes."),
        (lambda n1, n2, r: 4 * (n1 + n2) * r, "PowerSGD compresses only where it pays, (n₁ + n₂)·r'·2 < n₁·n₂, with "
                                              "r' = min(n₁, n₂, r); a bias or a small matrix goes whole, n₁·n₂·4 bytes."),
        (lambda n1, n2, r: 4 * n1 * n2 / r, "The factors are P (n₁×r) and Q (n₂×r): (n₁ + n₂)·r values, not n₁·n₂/r."),
        (lambda n1, n2, r: 4 * n1 * n2 * r / (n1 + n2), "The factors are P (n₁×r) and Q (n₂×r): (n₁ + n₂)·r values."),
    ]
    return v.run_cases(name, powersgd_bytes, cases, mistakes=mistakes, returns="a number of bytes",
                       success=f"it sends what torch's powerSGD_hook sends in all {len(cases)} cases, the matrices "
                               "it leaves whole included")


def check_slow_link_bytes(slow_link_bytes) -> v.Verdict:
    """A cheaper sync: ``slow_link_bytes(k, g, M)`` = 2(G − 1)/G · M/g; against the two-level rings' chunks."""
    name = v.require_function("check_slow_link_bytes", slow_link_bytes)
    cases = [v.Case(c, _slow_link_bytes(*c), f"for k = {c[0]} in groups of g = {c[1]}, M = {c[2]:g} bytes")
             for c in SLOW_LINK_CASES]
    mistakes = [
        (lambda k, g, M: 2 * (k - 1) / k * M, "That is what a flat ring sends per rank: in two levels only the "
                                              "rank's 1/g share crosses, 2(G−1)/G · M/g with G = k/g."),
        (lambda k, g, M: 2 * (k // g - 1) / (k // g) * M, "Only the rank's share of the sum crosses, M/g bytes of "
                                                          "it: 2(G−1)/G · M/g."),
        (lambda k, g, M: M / g, "A ring all-reduce of M/g bytes over G groups sends 2(G−1)/G of it per rank, not all "
                                "of it: nothing at all when G = 1."),
        (lambda k, g, M: (k // g - 1) / (k // g) * M / g, "That is one trip around the groups' ring; an all-reduce "
                                                          "makes two: 2(G−1)/G · M/g."),
    ]
    return v.run_cases(name, slow_link_bytes, cases, mistakes=mistakes, returns="a number of bytes",
                       success=f"it gives 2(G−1)/G · M/g, what the two-level all-reduce's rings send across groups, "
                               f"in all {len(cases)} cases, one group (nothing crosses) included")
