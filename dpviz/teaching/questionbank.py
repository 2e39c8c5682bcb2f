"""Every self-check question of the notes, retold, with the cards for each chapter.

Chapter 00 takes the symbols note's self-check, chapter 08 the walkthrough's quick self-check,
chapter 15 the whole question bank (true/false, spot the error, why, edge cases), and chapters 01
to 07 cards written for their step. Each chapter's deck is a module of :mod:`dpviz.teaching.decks`,
named by its topic. Numeric cards compute their numbers with ``dpviz.theory`` and the link presets
of ``dpviz.theory.links``; nothing shown as a result is typed in.

Where the notes slip (see shared/seeds/README.md) the cards say what is right: the notes'
all-reduce formula prices a reduce-scatter, half an all-reduce; the learning-rate contrast is
linear (×k) against square root (×√k); replicas match one another bit for bit but match a
single big-batch device only to rounding; the BERT-Large speedups have no traceable source and
are not used.
"""

from __future__ import annotations

from dpviz.checks import check_choice
from dpviz.teaching.cards import CHAPTERS, Card
from dpviz.teaching.decks import (
    accumulation,
    all_reduce,
    average_of_averages,
    bigger_batch,
    cheaper_sync,
    ground_floor,
    measuring,
    mini_batch,
    one_group_per_device,
    one_step,
    review,
    sharding,
    splitting,
    sync_costs,
    waiting,
    whole_picture,
)

# In chapter order, the order of CHAPTERS.
ALL_CARDS: tuple[Card, ...] = (
    ground_floor.CARDS
    + one_step.CARDS
    + mini_batch.CARDS
    + average_of_averages.CARDS
    + one_group_per_device.CARDS
    + all_reduce.CARDS
    + sync_costs.CARDS
    + measuring.CARDS
    + whole_picture.CARDS
    + bigger_batch.CARDS
    + accumulation.CARDS
    + waiting.CARDS
    + splitting.CARDS
    + sharding.CARDS
    + cheaper_sync.CARDS
    + review.CARDS
)


def cards_for(chapter: str) -> list[Card]:
    """The cards of one chapter, "00" to "15", in teaching order."""
    check_choice("chapter", chapter, tuple(CHAPTERS))
    return [card for card in ALL_CARDS if card.chapter == chapter]
