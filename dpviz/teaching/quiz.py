"""Self-check cards: a question, a hidden answer, and a button that reveals it.

Every chapter ends with a deck of cards. A card's answer stays hidden until the reader clicks
"Show answer" (a second click hides it again), so a student can commit to an answer first.

Numeric cards never carry a typed-in number. Their ``answer`` is a ``str.format`` template, and
``compute(**params)`` works out the values with ``dpviz.theory.costmodel`` and ``dpviz.theory.links`` each time
the answer is shown::

    card = cards_for("13")[0]
    card.text()            # question and answer as plain text
    display(deck(cards_for("13")))   # or simply: show_cards("13")

On a page that cannot run widgets (GitHub, a static HTML export) a deck falls back to a markdown
list of its questions only; the answers appear on click in JupyterLab or Voilà.
"""

from __future__ import annotations

import html
import ipywidgets as widgets

from dpviz.teaching.cards import CHAPTERS, Card
from dpviz.teaching.questionbank import cards_for

SHOW, HIDE = "Show answer", "Hide answer"


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
        raise TypeError(f"card must be a dpviz.teaching.quiz.Card; got {type(card).__name__}.")
    return CardWidget(card)


def deck(cards, *, title: str = "") -> Deck:
    """A vertical stack of card widgets, one per row, in the order given."""
    cards = list(cards)
    if not cards:
        raise ValueError("cards must hold at least one Card; got none.")
    for card in cards:
        if not isinstance(card, Card):
            raise TypeError(f"cards must hold only dpviz.teaching.quiz.Card objects; got {type(card).__name__}.")
    return Deck(cards, title=title)


def show_cards(chapter: str) -> Deck:
    """The deck for one chapter, "00" to "13", titled with the chapter's name."""
    cards = cards_for(chapter)
    return deck(cards, title=f"Chapter {chapter}, {CHAPTERS[chapter]}: check yourself")
