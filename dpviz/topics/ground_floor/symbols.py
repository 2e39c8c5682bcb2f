"""The course's symbols, one meaning each: the table chapter 00 prints and the README carries.

    from dpviz.topics.ground_floor.symbols import table
    print(table())          # the Markdown table, in the order the chapters introduce the symbols

``tests/test_symbols.py`` checks that the README holds exactly this table and that chapter 00 prints it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Symbol:
    symbol: str    # as the chapters write it, in $…$
    meaning: str   # one meaning, everywhere in the course
    unit: str      # its unit, or "count", or "" for a set or a function
    chapter: str   # the chapter that defines it


SYMBOLS = (
    Symbol("$\\mathbf{x}$, $y$", "one example: its input and its target", "", "00"),
    Symbol("$D$, $N$", "the data set, and the number of examples in it", "count", "00"),
    Symbol("$\\theta$", "the model's parameters (the knobs; $w$ and $c$ for the line)", "", "00"),
    Symbol("$L(\\theta)$, $\\nabla_\\theta L$", "the loss, and its gradient: the arrow pointing uphill", "", "00"),
    Symbol("$\\eta$", "the learning rate, the size of a step downhill", "", "00"),
    Symbol("$B$", "a mini-batch: the set of examples one step uses (never its size)", "set", "00"),
    Symbol("$b$", "examples per device per step, $b = \\lvert B\\rvert$ on one device", "count", "00"),
    Symbol("$k$", "devices (ranks) sharing one step; their global batch holds $kb$ examples", "count", "00"),
    Symbol("$\\mathbf{g}_i$", "rank $i$'s gradient, the mean over its own $b$ examples", "", "00"),
    Symbol("$T_{compute}$", "the time one device needs for a whole step's arithmetic", "seconds", "00"),
    Symbol("$T_{comm}$", "the time the devices spend in the sync (the all-reduce) per step", "seconds", "00"),
    Symbol("$S$", "the speedup: one device's step time over $k$ devices' step time", "ratio", "00"),
    Symbol("$M$", "the size of a message, for data parallelism the gradient in bytes", "bytes", "06"),
    Symbol("$\\alpha$", "a link's latency, paid once per round of messages", "seconds", "06"),
    Symbol("$\\beta$", "a link's bandwidth (Adam's $\\beta_1$, $\\beta_2$ in chapter 05 are decay rates, not this)",
           "bytes per second", "06"),
    Symbol("$m$", "micro-batches one batch is cut into (accumulation, a pipeline)", "count", "10"),
    Symbol("$p$", "pipeline stages, one per rank", "count", "12"),
)


def table() -> str:
    """The symbols as a Markdown table: symbol, meaning, unit, the chapter that defines it."""
    rows = ["| symbol | meaning | unit | defined in |", "| --- | --- | --- | --- |"]
    rows += [f"| {s.symbol} | {s.meaning} | {s.unit} | chapter {s.chapter} |" for s in SYMBOLS]
    return "\n".join(rows)
