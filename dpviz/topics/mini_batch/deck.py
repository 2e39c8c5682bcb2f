"""Self-check cards for a mini-batch: why its gradient is a mean, drawn at random, and a vector."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number

CARDS = (
    Card(
        "Why is the mini-batch gradient the mean over its b examples and not their sum?",
        "A mean keeps the gradient's size independent of b, so a learning rate tuned at one batch "
        "size still makes sense at another. With a sum, doubling b would double every step and η "
        "would need retuning.",
        "why", HERE, f"{TOPIC}-mean-not-sum",
    ),
    Card(
        "Why must a mini-batch be drawn at random?",
        "Only an unbiased sample has the full-data gradient as its expected value. A grab that "
        "favours one kind of example (only cats, say) tilts the red mean arrow toward what those "
        "examples want, no matter how exactly it is averaged.",
        "why", HERE, f"{TOPIC}-random",
    ),
    Card(
        "In the Step 2 picture, what are the grey arrows and what is the red arrow?",
        "Each grey arrow is the gradient of one example. The red arrow is their mean, the "
        "mini-batch gradient g that the update uses.",
        "self-check", HERE, f"{TOPIC}-arrows",
    ),
    Card(
        "What does a batch of b = 1 give, and why not always train that way?",
        "The mean of one arrow is that arrow: one example's gradient. It is unbiased but very "
        "noisy, so the steps jitter; a larger b averages the noise down. The opposite extreme, the "
        "whole data set per step, is accurate but slow.",
        "edge case", HERE, f"{TOPIC}-b-equals-one",
    ),
    Card(
        "True or false: the mini-batch gradient is a single number.",
        "False. It is a vector with one slope per parameter, as many entries as θ has; that is why "
        "the notes print g in bold.",
        "true/false", HERE, f"{TOPIC}-tf-vector",
    ),
)
