"""Predict, then run: a question the reader answers before a real run, and the run's answer after it.

A chapter asks before the cell whose run is the lesson, and answers after it from the record::

    guess = Prediction.number("How many times faster than one rank will k = 2 ranks be here?",
                              low=0.5, high=2.5, step=0.1, unit="×")
    guess                                      # the question, a control and a "Commit" button
    ...                                        # the run
    guess.answer(measured=speedup, said=f"{speedup:.2f}×",
                 why="the two ranks share this machine's cores, so ...")   # a sentence computed from the record

    guess = Prediction.choice("Do the four arrows agree?", ["exactly", "in direction only", "not at all"])
    guess.answer(measured="in direction only", why=...)

Nothing is graded and nothing waits: Run All goes through without a prediction. The answer then says the
question and what the run measured; where no widget runs (the book, a notebook saved without widget
state) the question shows as a collapsed ``<details>`` that holds the answer, as the self-check cards do.

``answer`` compares a committed number with the measured one within ``close`` (a fraction of the measured
value; 0.2 unless the chapter says otherwise) and a committed choice by equality, and adds ``why`` only when
the two differ: why the run gave what it gave (on this machine, or on the one that recorded it). A chapter prints every number in ``said`` and ``why`` from
its record, never by hand.
"""

from __future__ import annotations

import html
import math

import ipywidgets as widgets

from dpviz.engine.slider import widget_bundle

COMMIT, CHANGE = "Commit my prediction", "Change it"


def _sentence(text: str) -> str:
    text = text.strip()
    return text if not text or text[-1] in ".!?" else text + "."


class Prediction(widgets.VBox):
    """One question; :attr:`value` is the committed answer, ``None`` until the reader commits one."""

    def __init__(self, question: str, control: widgets.ValueWidget, *, kind: str, unit: str = "",
                 choices: tuple = ()):
        self.question = question
        self.kind = kind
        self.unit = unit
        self.choices = tuple(choices)
        self.value = None
        self.control = control
        self.button = widgets.Button(description=COMMIT, tooltip="Lock your answer before you run the next cell",
                                     layout=widgets.Layout(width="auto"))  # the default width cuts the label
        self.status = widgets.HTML("<i>No prediction yet: commit one, then run the cell below.</i>")
        self.button.on_click(self._toggle)
        super().__init__(
            [widgets.HTML(f"<b>Predict first.</b> {html.escape(question)}"),
             widgets.HBox([control, self.button]), self.status],
            layout=widgets.Layout(border="1px solid #ccc", padding="4px 8px", margin="4px 0"),
        )

    @classmethod
    def choice(cls, question: str, choices: list[str]) -> Prediction:
        if len(choices) < 2:
            raise ValueError(f"choices must hold at least 2 answers, got {len(choices)}")
        control = widgets.RadioButtons(options=list(choices), value=None, description="",
                                       layout=widgets.Layout(width="auto"))
        return cls(question, control, kind="choice", choices=tuple(choices))

    @classmethod
    def number(cls, question: str, *, low: float, high: float, step: float, unit: str = "") -> Prediction:
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"low must be below high, both finite; got low={low}, high={high}")
        if not 0 < step <= high - low:
            raise ValueError(f"step must be in (0, high - low] = (0, {high - low:g}], got {step}")
        control = widgets.BoundedFloatText(value=low, min=low, max=high, step=step,
                                           description=unit or "value", layout=widgets.Layout(width="14em"))
        return cls(question, control, kind="number", unit=unit)

    def _toggle(self, _button=None) -> None:
        if self.value is None:
            if self.kind == "choice" and self.control.value is None:
                self.status.value = "<i>Pick one answer first.</i>"
                return
            self.value = self.control.value
            self.control.disabled = True
            self.button.description = CHANGE
            self.status.value = f"Committed: <b>{html.escape(self.shown(self.value))}</b>. Now run the cell below."
        else:
            self.value = None
            self.control.disabled = False
            self.button.description = COMMIT
            self.status.value = "<i>No prediction yet: commit one, then run the cell below.</i>"

    def commit(self, value) -> None:
        """Commit ``value`` as the reader's prediction (what the button does with the control's value)."""
        if self.kind == "choice" and value not in self.choices:
            raise ValueError(f"value must be one of {list(self.choices)}, got {value!r}")
        if self.kind == "number" and not self.control.min <= value <= self.control.max:
            raise ValueError(f"value must be in [{self.control.min:g}, {self.control.max:g}], got {value}")
        if self.value is not None:
            self._toggle()
        self.control.value = value
        self._toggle()

    def shown(self, value) -> str:
        if self.kind == "number":
            return f"{value:g}{self.unit}" if self.unit in ("×", "%") else f"{value:g} {self.unit}".strip()
        return f"“{value}”"  # a choice is a phrase of the question's: quoted, any phrase reads right in a sentence

    def matches(self, measured, close: float = 0.2) -> bool:
        if self.value is None:
            return False
        if self.kind == "number":
            return abs(self.value - measured) <= close * abs(measured)
        return self.value == measured

    def answer(self, measured, *, said: str | None = None, why: str = "", close: float = 0.2) -> Answer:
        """What the run says against what was predicted; ``said`` is how to write ``measured`` (its record's
        number, as the chapter prints it), ``why`` the reason the run gave it, shown when they differ."""
        if self.kind == "choice" and measured not in self.choices:
            raise ValueError(f"measured must be one of {list(self.choices)}, got {measured!r}")
        said = said if said is not None else self.shown(measured)
        if self.value is None:
            head = f"No prediction was committed. The run measured {said}"
            text = [head, why]
        elif self.matches(measured, close):
            text = [f"You predicted {self.shown(self.value)}; the run measured {said}, as you said"]
        else:
            text = [f"You predicted {self.shown(self.value)}; the run measured {said}", why]
        return Answer(self.question, " ".join(_sentence(t) for t in text if t),
                      " ".join(_sentence(t) for t in (f"The run measured {said}", why) if t),
                      committed=self.value is not None)

    # ipywidgets 7 shows a widget from _ipython_display_, which IPython asks first; without it this bundle shows
    _ipython_display_ = None

    def _repr_mimebundle_(self, **kwargs):
        bundle = widget_bundle(self)
        options = f" ({'; '.join(self.choices)})" if self.choices else ""
        bundle["text/plain"] = f"Predict first: {self.question}{options}"
        listed = ("<ul>" + "".join(f"<li>{html.escape(c)}</li>" for c in self.choices) + "</ul>") if self.choices else ""
        bundle["text/html"] = (f'<div class="dpviz-prediction"><p><b>Predict first.</b> {html.escape(self.question)}'
                               f"</p>{listed}<p><i>Decide, then read the answer under the run.</i></p></div>")
        return bundle


class Answer:
    """The sentence after the run: printed as text, and where no widget ran, the question with its answer
    in a collapsed ``<details>``."""

    def __init__(self, question: str, text: str, key: str, *, committed: bool):
        self.question, self.text, self.key, self.committed = question, text, key, committed

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def _repr_html_(self) -> str:
        if self.committed:
            return f'<p class="dpviz-prediction-answer">{html.escape(self.text)}</p>'
        return (f'<details class="dpviz-prediction-answer"><summary><b>Predict first.</b> {html.escape(self.question)}'
                f"</summary><p><b>Answer.</b> {html.escape(self.key)}</p></details>")
