"""Self-check cards for shard everything: ZeRO-2, ZeRO-3 and FSDP, what each rank holds and what it sends."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.splitting import theory_memory as memory
from dpviz.topics.sharding import theory

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def paper_memory(n_params, k):
    """GB per device at each ZeRO stage under mixed-precision Adam (2 + 2 + 12 bytes per parameter)."""
    gb = memory.zero_paper_gb(n_params, k)
    return {"plain": gb[0], "zero1": gb[1], "zero2": gb[2], "zero3": gb[3]}


def stage_bytes(n_params, k, element_bytes):
    """GB one rank sends per step: plain data parallelism (= ZeRO-1 = ZeRO-2) and ZeRO-3, and their ratio."""
    plain = sum(theory.bytes_sent((n_params,), k, zero_stage=0, element_bytes=element_bytes).values())
    full = sum(theory.bytes_sent((n_params,), k, zero_stage=3, element_bytes=element_bytes).values())
    return {"plain_gb": plain / 1e9, "zero3_gb": full / 1e9, "ratio": full / plain}


CARDS = (
    Card(
        "True or false: a ring all-reduce and a reduce-scatter followed by an all-gather send the same bytes.",
        "True: they are the same thing. The ring's first k − 1 steps are a reduce-scatter, which leaves each rank "
        "the complete sum of one chunk; its last k − 1 steps are an all-gather of those chunks. ZeRO pulls the two "
        "halves apart and does an optimizer step in between, on each rank's chunk only.",
        "true/false", HERE, f"{TOPIC}-tf-halves",
    ),
    Card(
        "Spot the error: “ZeRO-3 shards the parameters, so each rank never holds more than 1/k of them.”",
        "At rest it holds 1/k. But a layer cannot compute with 1/k of its weights: before each layer's forward "
        "the ranks all-gather it, and before its backward they gather it again; for that moment the rank holds the "
        "whole layer (in the backward with its full gradient too), then frees it. The peak is 1/k of everything "
        "plus one whole layer, which is why FSDP wraps a model layer by layer. This chapter's runs measure it.",
        "spot the error", HERE, f"{TOPIC}-spot-zero3-peak",
    ),
    Card(
        "Why does ZeRO-2 send no more bytes than plain data parallelism, while ZeRO-3 sends 1.5 times as many?",
        "ZeRO-2 reduce-scatters the gradient and all-gathers the updated parameters: the two halves of one "
        "all-reduce, 2(k−1)/k · M. ZeRO-3 keeps no whole parameters between passes, so it gathers every layer "
        "twice, before the forward and again before the backward: three ring passes, 3(k−1)/k · M.",
        "why", HERE, f"{TOPIC}-why-one-and-a-half",
    ),
    Card(
        "Why can each rank update its own shard with its own shard of Adam's state and still end with the "
        "parameters plain data parallelism would have?",
        "Adam updates every coordinate on its own: the new θ_j depends on g_j and on coordinate j's two running "
        "means, nothing else. After the reduce-scatter a rank holds the summed gradient of exactly its coordinates, "
        "so it can take exactly plain data parallelism's step on them; the ring may add the ranks' gradients in "
        "another order, so the match is to float rounding.",
        "why", HERE, f"{TOPIC}-why-shard-update",
    ),
    Card(
        "ZeRO-3 on k = 1 rank: what does it hold, and what does it send?",
        "Everything, and nothing: its one shard is the whole model, 16 bytes per parameter in float32 Adam, "
        "like plain data parallelism; and with k − 1 = 0 every ring pass sends 0 bytes. Sharding pays off only "
        "as k grows: 16P/k.",
        "edge case", HERE, f"{TOPIC}-edge-k1",
    ),
    Card(
        "What does a ZeRO-3 (FSDP) rank keep between steps, and what does it fetch for each layer?",
        "It keeps its 1/k chunk of every layer's parameters, of their gradients and of Adam's state: 16P/k bytes "
        "in float32. For each layer it all-gathers the whole weights before the forward, frees them, gathers them "
        "again before the backward, and reduce-scatters that layer's gradient, so that it keeps only its chunk.",
        "self-check", HERE, f"{TOPIC}-self-what-kept",
    ),
    Card(
        "The ZeRO paper's Figure 1: {n_params:,.0f} parameters, k = {k} devices, mixed-precision Adam "
        "(2 + 2 + 12 bytes per parameter). How many GB does one device hold at each stage?",
        "Plain: {plain:.0f} GB (16 bytes per parameter on every device). ZeRO-1, optimizer state sharded: "
        "{zero1:.1f} GB. ZeRO-2, gradients too: {zero2:.1f} GB. ZeRO-3, parameters too: {zero3:.2f} GB, which the "
        "paper prints as 1.9. Activations are not counted.",
        "numeric", HERE, f"{TOPIC}-num-paper",
        compute=paper_memory, params={"n_params": 7_500_000_000, "k": 64},
    ),
    Card(
        "A model of {n_params:,} parameters, gradients sent in {element_bytes}-byte values, k = {k} ranks in a "
        "ring. How many GB does each rank send per step under plain data parallelism and under ZeRO-3?",
        "Plain (and ZeRO-1, ZeRO-2): {plain_gb:.2f} GB, 2(k−1)/k · M. ZeRO-3: {zero3_gb:.2f} GB, 3(k−1)/k · M, "
        "{ratio:g} times as much, the price of holding 1/k of the parameters.",
        "numeric", HERE, f"{TOPIC}-num-step-bytes",
        compute=stage_bytes, params={"n_params": 1_000_000_000, "k": 8, "element_bytes": 2},
    ),
)
