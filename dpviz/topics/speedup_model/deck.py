"""Self-check cards for the speedup model: the limits of S, faster links, and the best k."""

from __future__ import annotations

import numpy as np

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.all_reduce.deck import link_preset
from dpviz.topics.ground_floor import costmodel

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def best_device_count(t_compute, M, link, k_max):
    """The k in 1..k_max with the largest modeled S (ring all-reduce), and S there and at k_max."""
    lk = link_preset(link)
    ks = np.arange(1, k_max + 1)
    s = costmodel.speedup(t_compute, ks, costmodel.t_comm_ring(ks, M, lk.alpha, lk.beta))
    best = int(np.argmax(s))
    return {"best_k": int(ks[best]), "s_best": float(s[best]), "s_last": float(s[-1])}


def sync_limits(t_compute, k, t_comms):
    """S at one k for several T_comm, from free sync to sync longer than the whole compute."""
    return {
        "s": [costmodel.speedup(t_compute, k, t) for t in t_comms],
        "ceiling_last": t_compute / t_comms[-1],
    }


CARDS = (
    Card(
        "Why does a faster link, NVLink or InfiniBand, raise the speedup?",
        "A larger β shrinks the M/β part of T_comm and a smaller α its 2(k−1)·α part: the coral bar of the "
        "timelines gets shorter, so more of the k-fold saving in compute shows up in the step time. A link "
        "is only faster if it wins on both, since a small gradient's sync is mostly latency.",
        "why", HERE, f"{TOPIC}-faster-link",
    ),
    Card(
        "What are the two limits of S = T_compute / (T_compute/k + T_comm)?",
        "Free sync (T_comm → 0): S → k, perfect scaling. Sync far longer than the compute share "
        "(T_comm ≫ T_compute/k): S → T_compute/T_comm, a constant that extra devices do not change.",
        "edge case", HERE, f"{TOPIC}-limits",
    ),
    Card(
        "In the s01 timelines, which bar shrinks as k doubles, and which does not?",
        "The lavender compute bar, T_compute/k, halves with each doubling. The coral sync bar keeps "
        "its length (or grows), so no row can get shorter than it.",
        "self-check", HERE, f"{TOPIC}-s01",
    ),
    Card(
        "In figure s02, what tells the mint, butter and coral curves apart?",
        "Only the T_comm put into the speedup formula: a fast, a medium and a slow link. The larger "
        "T_comm, the sooner and more sharply a curve bends away from the dashed ideal S = k. These "
        "curves are modeled, not measured.",
        "self-check", HERE, f"{TOPIC}-s02",
    ),
    Card(
        "T_compute = {t_compute:g} s per step, a gradient of {M:,.0f} bytes, ring all-reduce over "
        "{link}. Which k from 1 to {k_max} gives the largest speedup?",
        "k = {best_k} gives the largest S, {s_best:.3g}. At k = {k_max} the model gives only "
        "{s_last:.3g}: past the best k, each extra device adds more sync latency (2(k−1)·α) than it "
        "saves in compute, and steps get slower.",
        "numeric", HERE, f"{TOPIC}-num-best-k",
        compute=best_device_count,
        params={"t_compute": 0.01, "M": 1_000_000, "link": "10 Gb Ethernet", "k_max": 128},
    ),
    Card(
        "T_compute = {t_compute:g} s and k = {k}. What is S for T_comm = {t_comms[0]:g}, "
        "{t_comms[1]:g}, {t_comms[2]:g} and {t_comms[3]:g} s?",
        "S = {s[0]:.3g}, {s[1]:.3g}, {s[2]:.3g} and {s[3]:.3g}. Free sync gives S = k. Once T_comm "
        "outgrows T_compute/k, S stays under T_compute/T_comm; in the last case that bound is "
        "{ceiling_last:.3g}, and S below 1 means a step slower than on one device.",
        "numeric", HERE, f"{TOPIC}-num-limits",
        compute=sync_limits, params={"t_compute": 1.0, "k": 16, "t_comms": (0.0, 0.001, 0.1, 1.0)},
    ),
    Card(
        "A preset once gave NVLink α = 3 µs and β = 300 GB/s, and InfiniBand α = 1.5 µs and β = 12.5 GB/s. "
        "For a 21 kB gradient, why did the NVLink speedup curve peak below the InfiniBand one?",
        "A 21 kB gradient is latency-bound: the ring's 2(k−1)·α is far larger than its 2(k−1)/k·M/β on "
        "either link, so the link with the larger α syncs more slowly whatever its β. A faster link must be "
        f"faster in α as well as β; {course.ref('speedup_model')} takes both from cited sources and checks its title "
        "on the curves.",
        "why", HERE, f"{TOPIC}-latency-bound",
    ),
)
