"""Self-check cards: a question, a hidden answer, and a button that reveals it.

Every chapter ends with a deck of cards. A card's answer stays hidden until the reader clicks
"Show answer" (a second click hides it again), so a student can commit to an answer first.

Numeric cards never carry a typed-in number. Their ``answer`` is a ``str.format`` template, and
``compute(**params)`` works out the values with ``dpviz.topics.ground_floor.costmodel`` and ``dpviz.topics.ground_floor.links`` each time
the answer is shown::

    card = cards_for("question_bank")[0]   # a chapter by its topic, or by its number
    card.text()            # question and answer as plain text
    display(deck(cards_for("question_bank")))   # or simply: show_cards("question_bank")

A deck's output carries two views, and each front end shows one. Where a widget manager renders it (JupyterLab
and Voilà once the cell has run) it is the widget, with its "Show answer" buttons. Where none does it is the
``text/html`` answer key, :func:`answer_key_html`: a heading, then each card's question as the ``<summary>`` of a
collapsed ``<details>`` that holds the answer, filled exactly as the widget fills it. That is what the book shows,
what nbconvert's HTML shows for a notebook saved without widget state (with widget state it embeds the widget
instead), and what JupyterLab shows for a saved chapter it does not yet trust, until the cell runs.
"""

from __future__ import annotations

import html
import re

import ipywidgets as widgets

from dpviz import course
from dpviz.course import cards_for
from dpviz.engine.cards import Card
from dpviz.engine.slider import widget_bundle

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

    # ipywidgets 7 shows a widget from _ipython_display_, which IPython asks first; without it this bundle shows,
    # the live widget and its static answer key, in ipywidgets 7 and 8 alike
    _ipython_display_ = None

    def _repr_mimebundle_(self, **kwargs):
        bundle = widget_bundle(self)
        bundle["text/plain"] = f"Card {self.card.key}: {self.card.question_text()}"
        bundle["text/html"] = answer_key_html([self.card])
        return bundle


class Deck(widgets.VBox):
    """A titled vertical stack of ``CardWidget``s, one card per row."""

    def __init__(self, cards: list[Card], *, title: str = ""):
        self.cards = list(cards)
        self.title = title
        self.card_widgets = [CardWidget(card, number=i) for i, card in enumerate(self.cards, start=1)]
        header = [widgets.HTML(f"<h3>{html.escape(title)}</h3>")] if title else []
        super().__init__(header + self.card_widgets)

    # ipywidgets 7 shows a widget from _ipython_display_, which IPython asks first; without it this bundle shows,
    # the live widget and its static answer key, in ipywidgets 7 and 8 alike
    _ipython_display_ = None

    def _repr_mimebundle_(self, **kwargs):
        bundle = widget_bundle(self)
        # Fixed text: nbval compares text/plain and text/html, so no ids, times or addresses.
        bundle["text/plain"] = f"Deck of {len(self.cards)} self-check cards" + (f": {self.title}" if self.title else "")
        bundle["text/html"] = answer_key_html(self.cards, title=self.title)
        return bundle


# $...$ in a card's text, not preceded by a backslash: inline math
_MATH = re.compile(r"(?<!\\)\$([^$\n]+?)(?<!\\)\$")


def inline_html(text: str) -> str:
    """Escaped text for HTML; $x$ becomes \\(x\\) in a ``math`` span, the form Sphinx gives MathJax."""
    parts = _MATH.split(text)
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f'<span class="math notranslate nohighlight">\\({html.escape(part, quote=False)}\\)</span>')
        else:
            out.append(html.escape(part, quote=False).replace("\n", "<br>"))
    return "".join(out)


def answer_key_html(cards: list[Card], *, title: str = "") -> str:
    """The cards as a static answer key: a heading, then one collapsed ``<details>`` per card, its question the
    ``<summary>`` and its answer inside, numeric answers filled as the widget fills them. A deck shows this where
    no widget can run."""
    heading = title or ("Check yourself" if len(cards) > 1 else "Self-check card")
    rows = []
    for card in cards:
        rows.append(
            "<li><details>"
            f'<summary><i>{html.escape(card.kind, quote=False)}</i> &nbsp; {inline_html(card.question_text())}</summary>'
            f"<p><b>Answer.</b> {inline_html(card.answer_text())}</p>"
            "</details></li>"
        )
    return "\n".join([
        '<section class="dpviz-answer-key">',
        f"<h3>{html.escape(heading, quote=False)}</h3>",
        "<ol>",
        *rows,
        "</ol>",
        "<p><i>Answers: run this notebook in JupyterLab or Voilà for the “Show answer” buttons; "
        "here, click a question to open its answer.</i></p>",
        "</section>",
    ])


def card_widget(card: Card) -> CardWidget:
    """One card as a widget with a "Show answer" button."""
    if not isinstance(card, Card):
        raise TypeError(f"card must be a dpviz.engine.quiz.Card; got {type(card).__name__}.")
    return CardWidget(card)


def deck(cards, *, title: str = "") -> Deck:
    """A vertical stack of card widgets, one per row, in the order given."""
    cards = list(cards)
    if not cards:
        raise ValueError("cards must hold at least one Card; got none.")
    for card in cards:
        if not isinstance(card, Card):
            raise TypeError(f"cards must hold only dpviz.engine.quiz.Card objects; got {type(card).__name__}.")
    return Deck(cards, title=title)


def show_cards(chapter: str) -> Deck:
    """The deck for one chapter, by its number or its topic, titled with the chapter's number and name."""
    cards = cards_for(chapter)
    c = course.chapter(chapter)
    return deck(cards, title=f"Chapter {c.number}, {c.title}: check yourself")
