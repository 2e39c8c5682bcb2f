"""Self-check cards for the ground floor: the symbols note's self-check, retold: what each symbol is and does."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number

CARDS = (
    Card(
        "What does θ stand for, and what does data parallelism do with it?",
        "θ is the whole set of adjustable numbers in the model: every weight and every bias. "
        "Under data parallelism each device keeps its own complete copy of θ; what gets divided "
        "between the devices is the data.",
        "self-check", HERE, f"{TOPIC}-theta",
    ),
    Card(
        "In which direction does ∇θL point?",
        "Toward the steepest increase of the loss. It holds one slope per parameter, and together "
        "those slopes aim uphill; training moves against them.",
        "self-check", HERE, f"{TOPIC}-gradient-direction",
    ),
    Card(
        "The update reads θ ← θ − η∇θL. What is the minus sign doing there?",
        "The gradient aims uphill, and we want a lower loss, so we subtract it: the step goes "
        "downhill.",
        "self-check", HERE, f"{TOPIC}-minus-sign",
    ),
    Card(
        "What is η, and what goes wrong when it is too big?",
        "η is the learning rate: how far each update moves along the negative gradient. A value "
        "that is too large jumps over the bottom of the valley, and the loss can bounce around or "
        "grow without limit.",
        "self-check", HERE, f"{TOPIC}-eta",
    ),
    Card(
        "Why may a batch gradient be worked out in pieces on several machines and combined later?",
        "Because the batch gradient is a mean, and taking a mean is linear: the mean of equally "
        "sized partial means is the mean of the whole batch. Combining the machines' results gives "
        "back the big-batch gradient (up to floating-point rounding).",
        "self-check", HERE, f"{TOPIC}-split-safely",
    ),
    Card(
        "Say in plain words what an all-reduce does.",
        "Each device puts in its own gradient; the gradients are added together (and divided by k "
        "when we want their mean); every device then gets an identical copy of that result.",
        "self-check", HERE, f"{TOPIC}-all-reduce",
    ),
    Card(
        "In S = T_compute / (T_compute/k + T_comm), which term keeps S from reaching k?",
        "T_comm, the time spent syncing. It is not divided by k, so once it is comparable with "
        "T_compute/k it holds S well below k.",
        "self-check", HERE, f"{TOPIC}-what-caps-s",
    ),
    Card(
        "How is x different from y?",
        "x is the input, a vector of numbers that describes one example (its pixels, its word "
        "codes); y is the target, the right answer the model should give for that x.",
        "self-check", HERE, f"{TOPIC}-x-and-y",
    ),
    Card(
        "Of the pieces x, y, D, θ, which does data parallelism copy to every device and which does "
        "it share out?",
        "It copies θ (and the optimizer's state) to every device, and it shares out the data: each "
        "device works on different rows of D, that is different pairs (x, y).",
        "self-check", HERE, f"{TOPIC}-copy-or-split",
    ),
)
