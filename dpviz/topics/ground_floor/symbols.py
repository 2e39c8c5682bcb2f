"""The course's symbols, one meaning each: the table the ground floor prints and the README carries.

    from dpviz.topics.ground_floor.symbols import table
    print(table())          # the Markdown table, in the order the chapters introduce the symbols
    symbols_table()         # a notebook cell's last line: the same table, rendered

``tests/test_symbols.py`` checks that the README holds exactly this table and that the ground floor's notebook shows
it from this code.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpviz import course


@dataclass(frozen=True)
class Symbol:
    symbol: str    # as the chapters write it, in $…$
    meaning: str   # one meaning, everywhere in the course
    unit: str      # its unit, or "count", or "" for a set or a function
    topic: str     # the chapter that defines it, by its topic (see dpviz.course)

    @property
    def chapter(self) -> str:
        """The number of the chapter that defines it, from its place in :data:`dpviz.course.COURSE`."""
        return course.chapter(self.topic).number


SYMBOLS = (
    Symbol("$\\mathbf{x}$, $y$", "one example: its input and its target", "", "ground_floor"),
    Symbol("$D$, $N$", "the data set, and the number of examples in it", "count", "ground_floor"),
    Symbol("$\\theta$", "the model's parameters (the knobs; $w$ and $c$ for the line)", "", "ground_floor"),
    Symbol("$L(\\theta)$, $\\nabla_\\theta L$", "the loss, and its gradient: the arrow pointing uphill", "",
           "ground_floor"),
    Symbol("$\\eta$", "the learning rate, the size of a step downhill", "", "ground_floor"),
    Symbol("$B$", "a mini-batch: the set of examples one step uses (never its size)", "set", "ground_floor"),
    Symbol("$b$", "examples per device per step, $b = \\lvert B\\rvert$ on one device", "count", "ground_floor"),
    Symbol("$k$", "devices (ranks) sharing one step; their global batch holds $kb$ examples", "count", "ground_floor"),
    Symbol("$\\mathbf{g}_i$", "rank $i$'s gradient, the mean over its own $b$ examples", "", "ground_floor"),
    Symbol("$T_{compute}$", "the time one device needs for a whole step's arithmetic", "seconds", "ground_floor"),
    Symbol("$T_{comm}$", "the time the devices spend in the sync (the all-reduce) per step", "seconds", "ground_floor"),
    Symbol("$S$", "the speedup: one device's step time over $k$ devices' step time", "ratio", "ground_floor"),
    Symbol("$M$", "the size of a message, for data parallelism the gradient in bytes", "bytes", "speedup_model"),
    Symbol("$\\alpha$", "a link's latency, paid once per round of messages", "seconds", "speedup_model"),
    Symbol("$\\beta$",
           f"a link's bandwidth (Adam's $\\beta_1$, $\\beta_2$ in {course.ref('all_reduce')} are decay rates, "
           "not this)",
           "bytes per second", "speedup_model"),
    Symbol("$m$", "micro-batches one batch is cut into (accumulation, a pipeline)", "count", "accumulation"),
    Symbol("$p$", "pipeline stages, one per rank", "count", "splitting"),
)


def table() -> str:
    """The symbols as a Markdown table: symbol, meaning, unit, the chapter that defines it."""
    rows = ["| symbol | meaning | unit | defined in |", "| --- | --- | --- | --- |"]
    rows += [f"| {s.symbol} | {s.meaning} | {s.unit} | chapter {s.chapter} |" for s in SYMBOLS]
    return "\n".join(rows)


class SymbolTable:
    """:func:`table` as a notebook shows it: rendered Markdown (its math too), and the same text where only text shows."""

    def __repr__(self) -> str:
        return table()

    def _repr_markdown_(self) -> str:
        return table()

    def _repr_html_(self) -> str:
        """The same table in HTML, its math in the spans the book's MathJax and JupyterLab's typeset (Markdown
        output reaches the book with its TeX untouched)."""
        from dpviz.engine.quiz import inline_html

        head = "".join(f"<th>{h}</th>" for h in ("symbol", "meaning", "unit", "defined in"))
        rows = "".join(
            "<tr>" + "".join(f"<td>{inline_html(cell)}</td>"
                             for cell in (s.symbol, s.meaning, s.unit, f"chapter {s.chapter}")) + "</tr>"
            for s in SYMBOLS)
        return f'<table class="dpviz-symbols"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def symbols_table() -> SymbolTable:
    """The course's symbols, for a notebook cell's last line: ``symbols_table()`` shows :func:`table` rendered."""
    return SymbolTable()
