"""The question bank's numeric cards, each computed here by ``dpviz.topics.ground_floor.costmodel``.

The speedup at T_comm = T_compute/k, a single device, the bandwidth factor, efficiency, the two learning-rate
rules, the notes' all-reduce formula against the ring's, the ceiling on S, and a doubled bandwidth.
"""

from __future__ import annotations

import numpy as np

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.all_reduce.deck import link_preset, notes_against_ring
from dpviz.topics.ground_floor import costmodel

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def equal_sync_and_compute(t_compute, k):
    """S and S/k when T_comm is set equal to the compute share T_compute/k."""
    t_comm = t_compute / k
    return {
        "t_comm": t_comm,
        "s": costmodel.speedup(t_compute, k, t_comm),
        "eff": costmodel.efficiency(t_compute, k, t_comm),
        "half_k": k / 2,
    }


def single_device(t_compute, M, link):
    """T_comm by both formulas, and S, for k = 1."""
    lk = link_preset(link)
    t_ring = costmodel.t_comm_ring(1, M, lk.alpha, lk.beta)
    return {
        "t_notes": costmodel.t_comm_notes(1, M, lk.alpha, lk.beta),
        "t_ring": t_ring,
        "s": costmodel.speedup(t_compute, 1, t_ring),
    }


def bandwidth_fractions(ks):
    """(k-1)/k for each k."""
    return {"f": [costmodel.bandwidth_fraction(k) for k in ks]}


def efficiency_of(s_measured, k, t_compute):
    """S/k for a measured speedup, and the T_comm = 0 case of the cost model, which reaches it."""
    return {
        "eff": s_measured / k,
        "s_model": costmodel.speedup(t_compute, k, 0.0),
        "eff_model": costmodel.efficiency(t_compute, k, 0.0),
    }


def lr_rules(lr_base, k):
    """The linear and square-root learning rates for a batch k times larger."""
    return {
        "lr_lin": costmodel.lr_linear(lr_base, k),
        "lr_sq": costmodel.lr_sqrt(lr_base, k),
        "root": float(np.sqrt(k)),
    }


def speedup_ceiling(t_compute, t_comm, ks):
    """The ceiling T_compute/T_comm and the speedup S at each k for a fixed T_comm."""
    return {
        "ceiling": t_compute / t_comm,
        "s": [costmodel.speedup(t_compute, k, t_comm) for k in ks],
    }


def doubled_bandwidth(t_compute, k, M, links):
    """S with each link's beta and with twice that beta (ring all-reduce), and the gain."""
    out = {}
    for tag, name in zip("ab", links):
        lk = link_preset(name)
        before = costmodel.speedup(t_compute, k, costmodel.t_comm_ring(k, M, lk.alpha, lk.beta))
        after = costmodel.speedup(t_compute, k, costmodel.t_comm_ring(k, M, lk.alpha, 2 * lk.beta))
        out[f"s_{tag}"] = [before, after]
        out[f"gain_{tag}"] = after / before
    return out


NUMERIC = (
    Card(
        "T_compute = {t_compute:g} s, k = {k} devices, and T_comm set equal to T_compute/k. What "
        "are S and the efficiency?",
        "T_comm = {t_comm:g} s, so S = {s:.3g} and S/k = {eff:.0%}. That is k/2 = {half_k:g}, as "
        "the algebra says.",
        "numeric", HERE, f"{TOPIC}-num-half",
        compute=equal_sync_and_compute, params={"t_compute": 0.8, "k": 8},
    ),
    Card(
        "One device, k = 1: T_compute = {t_compute:g} s and a gradient of {M:,.0f} bytes on {link}. "
        "What are T_comm and S?",
        "T_comm = {t_notes:g} s by the notes' formula and {t_ring:g} s by the ring formula: there "
        "is nothing to send. S = {s:g}.",
        "numeric", HERE, f"{TOPIC}-num-k1",
        compute=single_device, params={"t_compute": 0.5, "M": 100_000_000, "link": "10 Gb Ethernet"},
    ),
    Card(
        "What is the bandwidth factor (k−1)/k for k = {ks[0]}, {ks[1]}, {ks[2]}, {ks[3]}, {ks[4]} "
        "and {ks[5]}?",
        "{f[0]:.5g}, {f[1]:.5g}, {f[2]:.5g}, {f[3]:.5g}, {f[4]:.5g} and {f[5]:.5g}: rising toward 1 "
        "but never reaching it.",
        "numeric", HERE, f"{TOPIC}-num-fraction",
        compute=bandwidth_fractions, params={"ks": (1, 2, 4, 8, 64, 1024)},
    ),
    Card(
        "A job runs {s_measured:g}× faster on k = {k} GPUs. What is its efficiency, and when does "
        "the cost model reach it?",
        "S/k = {eff:.0%}: exactly the ideal, not above it. The model reaches it only with free "
        "sync: T_comm = 0 gives S = {s_model:g} and efficiency {eff_model:.0%}.",
        "numeric", HERE, f"{TOPIC}-num-efficiency",
        compute=efficiency_of, params={"s_measured": 4.0, "k": 4, "t_compute": 1.0},
    ),
    Card(
        "A base learning rate of {lr_base:g} was tuned at batch b; now the global batch is k = {k} "
        "times larger. What do the linear and the square-root rules give?",
        "Linear: {lr_lin:.3g} (×{k}). Square root: {lr_sq:.3g} (×√{k} = ×{root:g}). "
        + course.Ref("bigger_batch") + " trains "
        "with both on real runs.",
        "numeric", HERE, f"{TOPIC}-num-lr",
        compute=lr_rules, params={"lr_base": 0.1, "k": 4},
    ),
    Card(
        "A {M:,.0f}-byte gradient is all-reduced across k = {k} devices over {link}. How long does "
        "that take by the notes' formula and by the ring formula?",
        "With the preset α = {alpha_us:g} µs and β = {beta_gbs:g} GB/s: {t_notes_ms:.3g} ms by the "
        "notes' formula, which counts the reduce-scatter half only, and {t_ring_ms:.3g} ms for the "
        "whole ring all-reduce, {ratio:.2f} times as long.",
        "numeric", HERE, f"{TOPIC}-num-ring",
        compute=notes_against_ring, params={"k": 8, "M": 100_000_000, "link": "10 Gb Ethernet"},
    ),
    Card(
        "T_compute = {t_compute:g} s and T_comm = {t_comm:g} s, whatever k is. What is the ceiling "
        "on S, and how close do k = {ks[0]}, {ks[1]} and {ks[2]} come?",
        "The ceiling is T_compute/T_comm = {ceiling:g}. S = {s[0]:.3g}, {s[1]:.3g} and {s[2]:.3g}: "
        "creeping up to the ceiling and never passing it.",
        "numeric", HERE, f"{TOPIC}-num-ceiling",
        compute=speedup_ceiling, params={"t_compute": 1.0, "t_comm": 0.05, "ks": (8, 64, 1024)},
    ),
    Card(
        "T_compute = {t_compute:g} s, k = {k}, a {M:,.0f}-byte gradient, ring all-reduce. What does "
        "doubling β do to S on {links[0]}, and on {links[1]}?",
        "{links[0]}: S goes from {s_a[0]:.3g} to {s_a[1]:.3g}, ×{gain_a:.2f}. {links[1]}: from "
        "{s_b[0]:.3g} to {s_b[1]:.3g}, ×{gain_b:.2f}. Neither doubles, and where compute already "
        "dominates the gain is small.",
        "numeric", HERE, f"{TOPIC}-num-double-bandwidth",
        compute=doubled_bandwidth,
        params={"t_compute": 1.0, "k": 8, "M": 100_000_000, "links": ("10 Gb Ethernet", "100 Gb InfiniBand")},
    ),
)
