"""Self-check cards for one training step: forward, loss, backward, update, and what η does."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number

CARDS = (
    Card(
        "Name the stages of one training step on a single device, in order.",
        "Forward pass: the model f turns x into a prediction using θ. Loss: L scores that "
        "prediction against y. Backward pass: backpropagation returns ∇θL. Update: θ moves by −η "
        "times that gradient.",
        "self-check", HERE, f"{TOPIC}-stages",
    ),
    Card(
        "Why use the gradient instead of nudging each parameter up and down to see which way helps?",
        "With billions of parameters, trying them one by one would cost billions of forward "
        "passes. One backward pass gives the slope for every parameter at once.",
        "why", HERE, f"{TOPIC}-why-gradient",
    ),
    Card(
        "True or false: going distributed changes the update rule θ ← θ − η∇θL.",
        "False. The rule is the same; what changes is where the gradient is computed. Data "
        "parallelism assembles ∇θL from pieces worked out on several devices and then applies this "
        "very update on each of them.",
        "true/false", HERE, f"{TOPIC}-tf-same-rule",
    ),
    Card(
        "What does a step with η = 0 do? And one with a very large η?",
        "With η = 0, θ does not move and nothing is learned. A very large η overshoots the "
        "minimum, possibly landing higher on the far side, so the loss can oscillate or blow up; "
        "the η slider of this chapter shows both.",
        "edge case", HERE, f"{TOPIC}-eta-extremes",
    ),
    Card(
        "Why must the loss be a graded number rather than a right-or-wrong verdict?",
        "A graded score changes smoothly as θ changes, so it has a slope to follow. A verdict "
        "that only flips between right and wrong is flat almost everywhere and gives no direction.",
        "why", HERE, f"{TOPIC}-why-graded-loss",
    ),
)
