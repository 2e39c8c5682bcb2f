"""Self-check cards for all-reduce: its two phases, replicas in lockstep, and the notes' formula against the ring's.

The notes' all-reduce formula prices a reduce-scatter, half an all-reduce; the numeric card sets it beside the
ring formula on a preset link. ``link_preset`` is shared with the decks that price a sync on a named link.
"""

from __future__ import annotations

from dpviz import course
from dpviz.engine.checks import check_choice
from dpviz.engine.cards import Card
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.ground_floor.links import PRESETS, Link

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def link_preset(name: str) -> Link:
    """The preset link a card names, with a one-sentence error for an unknown name."""
    check_choice("link", name, tuple(PRESETS))
    return PRESETS[name]


def notes_against_ring(k, M, link):
    """All-reduce time of M bytes on a preset link by the notes' formula and by the ring formula."""
    lk = link_preset(link)
    t_notes = costmodel.t_comm_notes(k, M, lk.alpha, lk.beta)
    t_ring = costmodel.t_comm_ring(k, M, lk.alpha, lk.beta)
    return {
        "alpha_us": lk.alpha * 1e6,
        "beta_gbs": lk.beta / 1e9,
        "t_notes_ms": t_notes * 1e3,
        "t_ring_ms": t_ring * 1e3,
        "ratio": t_ring / t_notes,
    }


CARDS = (
    Card(
        "Why prefer an all-reduce to sending every gradient to one device that averages and sends "
        "the result back?",
        "With a single collector all the traffic goes through that one device's link, and the "
        "others sit idle while it works. In a ring all-reduce every device sends and receives at "
        "the same time, so the traffic is spread evenly and no one link is the bottleneck. The "
        "mean that comes out is the same.",
        "why", HERE, f"{TOPIC}-why-not-one-boss",
    ),
    Card(
        "What are the two phases of a ring all-reduce?",
        "First a reduce-scatter: k−1 steps after which each device holds the complete sum of one "
        "1/k slice of the gradient. Then an all-gather: k−1 further steps that pass the finished "
        "slices along until every device holds the whole sum.",
        "self-check", HERE, f"{TOPIC}-two-phases",
    ),
    Card(
        "Spot the error: “An all-reduce over k devices costs α·log2(k) + (k−1)/k·M/β.”",
        "That formula, the one in the notes, prices a reduce-scatter only: half of the job, after "
        "which each device still holds just its own slice of the sum. A ring all-reduce also does "
        "the all-gather and costs 2(k−1)·α + 2(k−1)/k·M/β, twice the notes' bandwidth term. "
        f"{course.Ref('measuring')} sets both beside times measured on this machine.",
        "spot the error", HERE, f"{TOPIC}-spot-formula",
    ),
    Card(
        "True or false: after each sync, the replicas' parameters are bit-for-bit equal to one "
        "another and to those of a single device trained on the big batch.",
        "Half true. The replicas match each other exactly: they start equal and apply the very same "
        "averaged gradient with the same η. A single device on the big batch adds the per-example "
        "gradients in another order, and since floating-point addition is not associative, its "
        "parameters can differ from the replicas' in the last bits: in this chapter's run some steps' "
        "gradients agree to the bit and others do not.",
        "true/false", HERE, f"{TOPIC}-tf-bit-identical",
    ),
    Card(
        "What goes wrong if one replica's momentum buffer starts from a different value?",
        "That replica adds the shared gradient to a different velocity, so its step differs and it "
        "drifts away from the others. Equal optimizer state at the start, plus the same averaged "
        "gradient at every step, keeps the replicas in lockstep.",
        "edge case", HERE, f"{TOPIC}-momentum-start",
    ),
    Card(
        "Which flaw of Step 4 does the sync of Step 5 remove?",
        "Without a sync, each device would step along its own g_i and the copies would drift apart. "
        "After the all-reduce, every device steps along the same mean gradient.",
        "why", HERE, f"{TOPIC}-what-is-cured",
    ),
    Card(
        "An all-reduce of {M:,.0f} bytes across k = {k} devices runs over {link}. How long does it "
        "take by the notes' formula, and by the ring formula?",
        "With the preset α = {alpha_us:g} µs and β = {beta_gbs:g} GB/s: the notes' formula gives "
        "{t_notes_ms:.3g} ms and the ring formula {t_ring_ms:.3g} ms, {ratio:.2f} times as long. "
        "The gap is the all-gather half, which the notes' formula (a reduce-scatter alone) leaves out.",
        "numeric", HERE, f"{TOPIC}-num-notes-vs-ring",
        compute=notes_against_ring, params={"k": 4, "M": 400_000_000, "link": "NVLink"},
    ),
)
