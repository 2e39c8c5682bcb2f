"""Self-check cards for a cheaper sync: fewer bytes (fp16, PowerSGD), fewer syncs (local SGD), two levels of links."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.cheaper_sync import theory as cheaper_sync

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def powersgd_costs(rows, cols, r):
    """Bytes of one rows×cols float32 gradient matrix, sent whole and as PowerSGD's two rank-r factors."""
    sent = cheaper_sync.powersgd_elements([(rows, cols)], r)
    before, after = 4 * sent["before"], 4 * sent["total"]
    return {"before_mb": before / 1e6, "after_kb": after / 1e3, "ratio": before / after}


def two_level_costs(k, g, M):
    """The most bytes one rank sends across machines: in a flat ring over all k, and in two levels of g."""
    # Counted chunk by chunk on k·g elements, where every chunk is whole, and scaled to M: the counts grow in
    # proportion to the input (counting a gigabyte element by element would take a while).
    n = k * g
    scale = M / (n * cheaper_sync.ELEMENT_BYTES)
    across = ~cheaper_sync.same_group(k, g)
    flat = (cheaper_sync.link_bytes_ring(range(k), n) * across).sum(axis=1).max() * scale
    two = (cheaper_sync.link_bytes_two_level(k, g, n) * across).sum(axis=1).max() * scale
    return {"machines": k // g, "flat_gb": float(flat) / 1e9, "two_gb": float(two) / 1e9,
            "ratio": float(flat) / float(two)}


CARDS = (
    Card(
        "True or false: with fp16 compression every replica steps with a slightly different gradient, so the "
        "replicas drift apart.",
        "False. Every rank casts, all-reduces and casts back the same sum, so every rank receives the same "
        "rounded average: the replicas stay bit-identical. What changes is that the average is off the exact "
        f"one by fp16 rounding, the same on every rank. {course.Ref('cheaper_sync')} checks both on a real run.",
        "true/false", HERE, f"{TOPIC}-tf-fp16-drift",
    ),
    Card(
        "PowerSGD at rank r = {r} replaces a {rows}×{cols} float32 gradient matrix by its two factors. How many bytes "
        "does it send instead of how many?",
        "Whole, the matrix is {rows}·{cols}·4 bytes = {before_mb:.1f} MB. Its factors P ({rows}×{r}) and Q ({cols}×{r}) are "
        "({rows} + {cols})·{r}·4 bytes = {after_kb:.0f} kB: {ratio:.0f}× fewer. Biases and other vectors go as they "
        "are, and the factors take three all-reduces instead of one, so on small tensors latency can eat the gain.",
        "numeric", HERE, f"{TOPIC}-num-powersgd",
        compute=powersgd_costs, params={"rows": 4096, "cols": 4096, "r": 4},
    ),
    Card(
        "Why does PowerSGD keep an error-feedback memory on every rank?",
        "A rank-r approximation drops part of each gradient. Without memory, what is dropped is lost for good, "
        "and the same directions can be dropped step after step. With error feedback each rank adds what it "
        "lost last step to this step's gradient before compressing, so over several steps every part of the "
        "gradient gets through.",
        "why", HERE, f"{TOPIC}-why-error-feedback",
    ),
    Card(
        "Spot the error: “Local SGD with H = 8 syncs eight times less often, so it trains eight times faster for "
        "the same result.”",
        "It sends eight times fewer all-reduces per step, but between averages the replicas drift apart and each "
        "steps on its own shard's gradient, so a step of local SGD is worth less than a step of plain data "
        "parallelism. Whether it reaches the same loss in less time depends on how much the sync cost and how far "
        "the replicas drift; count loss against examples, not only against all-reduces.",
        "spot the error", HERE, f"{TOPIC}-spot-local-sgd",
    ),
    Card(
        "k = {k} GPUs sit in machines of {g}, with fast links inside a machine and a slow one between. "
        "Each step all-reduces M = {M:.0e} bytes. What is the most one GPU sends across machines, in a flat ring "
        "and in two levels?",
        "In the flat ring every rank sends 2(k−1)/k·M, and the ranks at a machine's edge send all of it across: "
        "{flat_gb:.2f} GB. In two levels each GPU first reduce-scatters inside its machine, then sends only its "
        "1/{g} share across, 2(G−1)/G·M/{g} with G = {machines}: {two_gb:.2f} GB, {ratio:.0f}× less over the slow "
        "link.",
        "numeric", HERE, f"{TOPIC}-num-two-levels",
        compute=two_level_costs, params={"k": 8, "g": 4, "M": 1e9},
    ),
    Card(
        "Edge case: what do two levels of g = k ranks per group, and of g = 1, turn into?",
        "With g = k there is one group: the two-level all-reduce is a flat ring on the fast links. With g = 1 "
        "every rank is its own group: it is a flat ring on the slow links. The gain lies in between, where most "
        "bytes stay inside a group.",
        "edge case", HERE, f"{TOPIC}-edge-group-size",
    ),
)
