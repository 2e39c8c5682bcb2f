"""A self-check card: a question, its answer, its chapter and kind; numeric cards compute their numbers.

The cards themselves are in each chapter's ``deck.py`` (``dpviz/topics/<topic>/deck.py``);
:mod:`dpviz.topics.question_bank.bank` puts them together in course order; :mod:`dpviz.engine.quiz` shows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from dpviz import course
from dpviz.engine.checks import check_choice

KINDS = ("true/false", "spot the error", "why", "edge case", "self-check", "numeric")

CHAPTERS = {c.number: c.title for c in course.COURSE}  # a chapter's number -> the heading of its cards



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
    chapter: str  # one of CHAPTERS, a chapter's number (its deck's course.number_of(__name__))
    key: str  # short unique name, the chapter's topic first, e.g. f"{TOPIC}-tf-more-gpus"
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
