"""The answer keys: where no widget runs (the saved notebook on GitHub, an HTML export, the book) a deck shows
its cards as static HTML, each question the ``<summary>`` of a collapsed ``<details>`` holding the answer.

Every card of the bank appears in its chapter's deck, with the answer the widget would reveal (numeric answers
filled from ``compute``), collapsed; text is escaped; ``$...$`` becomes the math span MathJax typesets; the
output still leads with the widget view, so JupyterLab and Voilà show the widget, and its text/plain stays short
and the same from run to run (nbval compares it with the saved one).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from dpviz.engine.cards import CHAPTERS, Card
from dpviz.topics.question_bank.bank import ALL_CARDS, cards_for
from dpviz.engine.quiz import SHOW, answer_key_html, card_widget, deck, show_cards

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


class AnswerKey(HTMLParser):
    """Reads an answer key: its headings, and per ``<details>`` its attributes, summary and the rest of its text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.headings: list[str] = []
        self.details: list[dict] = []
        self.stack: list[str] = []
        self._heading: list[str] | None = None
        self.feed(text)
        self.close()
        assert not self.stack, f"unclosed elements: {self.stack}"

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "hr"):
            return
        self.stack.append(tag)
        if tag == "details":
            self.details.append({"attrs": dict(attrs), "summary": "", "answer": "", "summary_first": None})
        elif tag == "summary" and self.details:
            self.details[-1]["summary_first"] = self.details[-1]["summary_first"] is None \
                and not self.details[-1]["answer"].strip()
        elif re.fullmatch(r"h[1-6]", tag):
            self._heading = []

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:] or 'nothing'}"
        self.stack.pop()
        if re.fullmatch(r"h[1-6]", tag):
            self.headings.append(_squash("".join(self._heading)))
            self._heading = None

    def handle_data(self, data):
        if self._heading is not None:
            self._heading.append(data)
        if "details" in self.stack:
            self.details[-1]["summary" if "summary" in self.stack else "answer"] += data


def _bundle(obj) -> dict:
    return obj._repr_mimebundle_()


@pytest.mark.parametrize("chapter", list(CHAPTERS))
def test_every_card_answer_is_in_its_chapter_answer_key_collapsed(chapter):
    d = show_cards(chapter)
    bundle = _bundle(d)
    key = AnswerKey(bundle["text/html"])
    assert key.headings == [d.title], key.headings
    cards = cards_for(chapter)
    assert len(key.details) == len(cards)
    for card, details in zip(cards, key.details):
        assert "open" not in details["attrs"], f"{card.key}: its <details> is open"
        assert details["summary_first"], f"{card.key}: the <summary> is not the first thing in its <details>"
        assert _squash(card.question_text()) in _squash(details["summary"]), card.key
        assert card.kind in details["summary"]
        assert _squash(card.answer_text()) in _squash(details["answer"]), card.key
        assert _squash(card.answer_text()) not in _squash(details["summary"]), card.key


def test_all_cards_have_exactly_one_answer_in_the_chapter_keys():
    answers = [_squash(d["answer"]) for ch in CHAPTERS for d in AnswerKey(_bundle(show_cards(ch))["text/html"]).details]
    assert len(answers) == len(ALL_CARDS)
    for card, answer in zip(ALL_CARDS, answers):  # ALL_CARDS is in chapter order
        assert _squash(card.answer_text()) in answer, card.key


def test_numeric_answers_are_filled_as_the_widget_fills_them():
    numeric = [card for card in ALL_CARDS if card.numeric]
    assert numeric
    for card in numeric:
        w = card_widget(card)
        w.button.click()
        details = AnswerKey(_bundle(w)["text/html"]).details
        assert len(details) == 1
        assert "{" not in details[0]["answer"], card.key
        # the widget's revealed HTML, read back as text, is the answer in the key
        revealed = AnswerKey(f"<details><summary>q</summary>{w.answer.value}</details>").details[0]["answer"]
        assert _squash(revealed) in _squash(details[0]["answer"]), card.key


def test_the_output_keeps_the_widget_view_first_and_short_stable_text():
    for chapter in ("03", "15"):
        one, two = _bundle(show_cards(chapter)), _bundle(show_cards(chapter))
        assert WIDGET_VIEW in one  # JupyterLab and Voilà rank it above text/html: the widget shows, not the key
        assert one["text/plain"] == two["text/plain"] and one["text/html"] == two["text/html"]
        assert one["text/plain"].startswith("Deck of ") and "\n" not in one["text/plain"]
        assert len(one["text/plain"]) < 200
        assert "text/markdown" not in one  # one static fallback, not two to keep in step
    bank = deck(cards_for("question_bank")[:3], title="Three")
    assert _bundle(bank)["text/plain"] == "Deck of 3 self-check cards: Three"


def test_the_widget_still_hides_its_answer_until_clicked():
    d = show_cards("all_reduce")
    for w in d.card_widgets:
        assert w.answer.value == "" and w.button.description == SHOW
    # the key sits only in the output's text/html, never in the widgets' own values
    assert all(w.card.answer_text() not in w.question.value for w in d.card_widgets)


def test_text_is_escaped_and_math_becomes_a_math_span():
    card = Card("Is <b>1 < 2</b> & is $a_i^2$ math?", "Yes: <script>alert(1)</script> & $\\sqrt{k}$.",
                "why", "03", "test-escape")
    text = answer_key_html([card], title="<Title> & more")
    assert "<script>" not in text and "<b>1" not in text
    assert "&lt;script&gt;" in text and "&amp;" in text and "&lt;Title&gt; &amp; more" in text
    assert '<span class="math notranslate nohighlight">\\(a_i^2\\)</span>' in text
    assert '<span class="math notranslate nohighlight">\\(\\sqrt{k}\\)</span>' in text
    key = AnswerKey(text)
    assert key.headings == ["<Title> & more"]
    assert "Yes: <script>alert(1)</script> &" in key.details[0]["answer"]
    assert "$" not in text  # no raw TeX left for a page to show as text
    price = Card("What does a \\$5 card cost?", "Five dollars, \\$5.", "why", "03", "test-dollar")
    assert "math" not in answer_key_html([price])


def test_an_untitled_deck_and_a_single_card_still_have_a_heading():
    assert AnswerKey(_bundle(deck(cards_for("one_step")))["text/html"]).headings == ["Check yourself"]
    assert AnswerKey(_bundle(card_widget(cards_for("one_step")[0]))["text/html"]).headings == ["Self-check card"]
