"""Every self-check question of the notes, retold, with the cards for each chapter.

The ground floor takes the symbols note's self-check, the whole picture the walkthrough's quick
self-check, the question bank the whole bank (true/false, spot the error, why, edge cases), and
the chapters from one training step to measuring an all-reduce cards written for their step. Each
chapter's deck is the ``deck.py`` of its topic folder.
Numeric cards compute their numbers with the chapters' theory modules and the link presets
of ``dpviz.topics.ground_floor.links``; nothing shown as a result is typed in.

Where the notes slip (see shared/seeds/README.md) the cards say what is right: the notes'
all-reduce formula prices a reduce-scatter, half an all-reduce; the learning-rate contrast is
linear (×k) against square root (×√k); replicas match one another bit for bit but match a
single big-batch device only to rounding; the BERT-Large speedups have no traceable source and
are not used.
"""

from __future__ import annotations

from dpviz import course
from dpviz.engine.checks import check_choice
from dpviz.engine.cards import CHAPTERS, Card

# In course order: each chapter's deck.py, the order of dpviz.course.
ALL_CARDS: tuple[Card, ...] = tuple(card for c in course.COURSE for card in course.topic_module(c.topic, "deck").CARDS)


def cards_for(chapter: str) -> list[Card]:
    """The cards of one chapter, by its number or its topic, in teaching order."""
    if chapter not in course.TOPICS:
        check_choice("chapter", chapter, tuple(CHAPTERS))
    number = course.chapter(chapter).number
    return [card for card in ALL_CARDS if card.chapter == number]
