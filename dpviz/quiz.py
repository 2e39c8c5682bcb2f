"""Self-check cards: a question, a hidden answer, and a button that reveals it.

Every chapter ends with a deck of cards. A card's answer stays hidden until the reader clicks
"Show answer" (a second click hides it again), so a student can commit to an answer first.

Numeric cards never carry a typed-in number. Their ``answer`` is a ``str.format`` template, and
``compute(**params)`` works out the values with ``dpviz.costmodel`` and ``dpviz.links`` each time
the answer is shown::

    card = cards_for("08")[0]
    card.text()            # question and answer as plain text
    display(deck(cards_for("08")))   # or simply: show_cards("08")

On a page that cannot run widgets (GitHub, a static HTML export) a deck falls back to a markdown
list of its questions only; the answers appear on click in JupyterLab or Voilà.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Callable

import ipywidgets as widgets

from dpviz.checks import check_choice

KINDS = ("true/false", "spot the error", "why", "edge case", "self-check", "numeric")

CHAPTERS = {
    "00": "the ground floor: every symbol",
    "01": "one training step",
    "02": "a mini-batch",
    "03": "the average of averages",
    "04": "one group per device",
    "05": "all-reduce",
    "06": "sync costs time",
    "07": "the whole picture",
    "08": "the question bank",
}

SHOW, HIDE = "Show answer", "Hide answer"


@dataclass(frozen=True, eq=False)
class Card:
    """One question with its answer, tagged by chapter and kind.

    For a numeric card, ``answer`` (and optionally ``question``) is a ``str.format`` template:
    ``question`` is filled from ``params``, ``answer`` from ``params`` plus the dict that
    ``compute(**params)`` returns. Any other card is plain text shown as written.
    """

    question: str
    answer: str  # plain text; for a numeric card, a str.format template
    kind: str  # one of KINDS
    chapter: str  # one of CHAPTERS, "00" to "08"
    key: str  # short unique name, e.g. "08-tf-more-gpus"
    compute: Callable[..., dict] | None = None  # numeric cards only: params -> named values
    params: dict = field(default_factory=dict)  # numeric cards only: the inputs of compute

    def __post_init__(self):
        check_choice("kind", self.kind, KINDS)
        check_choice("chapter", self.chapter, tuple(CHAPTERS))
        for name in ("question", "answer", "key"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"{name} must be a non-empty string; got {getattr(self, name)!r}.")
        if (self.kind == "numeric") != (self.compute is not None):
            raise ValueError(
                f"compute must be given exactly when kind is 'numeric'; got kind={self.kind!r} "
                f"and compute={self.compute!r}."
            )

    @property
    def numeric(self) -> bool:
        return self.compute is not None

    def values(self) -> dict:
        """The numbers a numeric card shows, computed now from ``params``; ``{}`` for other cards."""
        return dict(self.compute(**self.params)) if self.numeric else {}

    def question_text(self) -> str:
        return self.question.format(**self.params) if self.numeric else self.question

    def answer_text(self) -> str:
        """The answer as shown on reveal, with a numeric card's computed values filled in."""
        return self.answer.format(**self.params, **self.values()) if self.numeric else self.answer

    def text(self) -> str:
        """Plain text: a header line, the question, and the answer."""
        return f"[{self.chapter} · {self.kind}] {self.question_text()}\nAnswer: {self.answer_text()}"

    def __repr__(self):
        return f"Card({self.key!r}, chapter={self.chapter!r}, kind={self.kind!r})"


def _html(text: str) -> str:
    return html.escape(text).replace("\n", "<br>")


class CardWidget(widgets.VBox):
    """A card as a widget: ``.button`` toggles ``.answer`` (an ``HTML`` widget, empty while hidden)."""

    def __init__(self, card: Card, *, number: int | None = None):
        self.card = card
        label = f"{number}. " if number is not None else ""
        self.question = widgets.HTML(
            f"<b>{label}</b><i>{html.escape(card.kind)}</i> &nbsp; {_html(card.question_text())}"
        )
        self.button = widgets.Button(description=SHOW, tooltip="Reveal or hide the answer")
        self.answer = widgets.HTML("", layout=widgets.Layout(display="none"))
        self.button.on_click(self._toggle)
        super().__init__(
            [self.question, self.button, self.answer],
            layout=widgets.Layout(border="1px solid #ccc", padding="4px 8px", margin="4px 0"),
        )

    @property
    def revealed(self) -> bool:
        return self.answer.layout.display != "none"

    def _toggle(self, _button=None) -> None:
        if self.revealed:
            self.answer.value = ""
            self.answer.layout.display = "none"
            self.button.description = SHOW
        else:
            self.answer.value = _html(self.card.answer_text())
            self.answer.layout.display = None
            self.button.description = HIDE

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"Card {self.card.key}: {self.card.question_text()}"
        bundle["text/markdown"] = _questions_markdown([self.card], title="")
        return bundle


class Deck(widgets.VBox):
    """A titled vertical stack of ``CardWidget``s, one card per row."""

    def __init__(self, cards: list[Card], *, title: str = ""):
        self.cards = list(cards)
        self.title = title
        self.card_widgets = [CardWidget(card, number=i) for i, card in enumerate(self.cards, start=1)]
        header = [widgets.HTML(f"<h3>{html.escape(title)}</h3>")] if title else []
        super().__init__(header + self.card_widgets)

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        # Fixed text: nbval compares text/plain and text/markdown, so no ids, times or addresses.
        bundle["text/plain"] = f"Deck of {len(self.cards)} self-check cards" + (f": {self.title}" if self.title else "")
        bundle["text/markdown"] = _questions_markdown(self.cards, title=self.title)
        return bundle


def _questions_markdown(cards: list[Card], *, title: str) -> str:
    """The questions as a numbered markdown list, with no answers: the static fallback."""
    lines = [f"### {title}", ""] if title else []
    for i, card in enumerate(cards, start=1):
        lines.append(f"{i}. *{card.kind}* — {card.question_text()}")
    lines += ["", "*Answers: run this notebook in JupyterLab or Voilà and click “Show answer”.*"]
    return "\n".join(lines)


def card_widget(card: Card) -> CardWidget:
    """One card as a widget with a "Show answer" button."""
    if not isinstance(card, Card):
        raise TypeError(f"card must be a dpviz.quiz.Card; got {type(card).__name__}.")
    return CardWidget(card)


def deck(cards, *, title: str = "") -> Deck:
    """A vertical stack of card widgets, one per row, in the order given."""
    cards = list(cards)
    if not cards:
        raise ValueError("cards must hold at least one Card; got none.")
    for card in cards:
        if not isinstance(card, Card):
            raise TypeError(f"cards must hold only dpviz.quiz.Card objects; got {type(card).__name__}.")
    return Deck(cards, title=title)


def show_cards(chapter: str) -> Deck:
    """The deck for one chapter, "00" to "08", titled with the chapter's name."""
    from dpviz.questionbank import cards_for  # the bank imports Card from here

    cards = cards_for(chapter)
    return deck(cards, title=f"Chapter {chapter}, {CHAPTERS[chapter]}: check yourself")
