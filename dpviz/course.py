"""The course in order: one entry per chapter, and the only place where a chapter's number is decided.

A chapter's number is its place in :data:`COURSE` (``"00"`` for the first). Its library code is the folder
``dpviz/topics/<topic>/``, and its notebook is ``notebooks/<number>_<notebook>.ipynb``. To renumber a
chapter or insert one, move or add its line here, then run ``python -m dpviz.renumber``: it renames the notebooks and
rewrites the numbers their prose gives (:mod:`dpviz.renumber`). Nothing else names a number.

What the entries point to is imported only when asked for (:func:`topic_module`), so importing this
module imports nothing of dpviz, and the engine may read it without depending on any chapter::

    from dpviz import course
    course.chapter("cheaper_sync").number       # '14'
    course.figure_groups()                      # every chapter's published figures, in course order

Everything else under ``dpviz/`` that names a chapter asks this module for its number (``tests/test_layers.py``
holds it to that): a chapter's own modules with :func:`number_of` (``HERE = course.number_of(__name__)``), a
sentence that points to another chapter with :func:`ref` or :func:`Ref`::

    course.ref("speedup_model")                          # 'chapter 06'
    course.Ref("one_group_per_device", "all_reduce")     # 'Chapters 04 and 05', to start a sentence
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Chapter:
    topic: str                   # the folder under dpviz/topics/
    notebook: str                # the notebook's name after its number
    title: str                   # the heading of its self-check cards
    records: tuple = ()          # its modules that declare record kinds (load() reads those kinds)
    figures: bool = False        # its figures.py ends with GROUP: published figures that ./run regenerates
    recipe: tuple = ()           # (figure plan's name, "module:function" of this topic that records the plan's runs)

    @property
    def number(self) -> str:
        return f"{COURSE.index(self):02d}"

    @property
    def stem(self) -> str:
        """The notebook's file name without ``.ipynb``: ``14_cheaper_sync``."""
        return f"{self.number}_{self.notebook}"

    @property
    def package(self) -> str:
        return f"dpviz.topics.{self.topic}"


COURSE: tuple[Chapter, ...] = (
    Chapter("ground_floor", "ground_floor", "the ground floor: every symbol", records=("records",)),
    Chapter("one_step", "one_step", "one training step"),
    Chapter("mini_batch", "mini_batch", "a mini-batch"),
    Chapter("average_of_averages", "average_of_averages", "the average of averages"),
    Chapter("one_group_per_device", "one_group_per_device", "one group per device"),
    Chapter("all_reduce", "all_reduce", "all-reduce", records=("records",)),
    Chapter("speedup_model", "speedup_model", "the speedup model", records=("records",)),
    Chapter("measuring", "measuring_an_all_reduce", "measuring an all-reduce", records=("records",), figures=True),
    Chapter("whole_picture", "whole_picture", "the whole picture", records=("records",), figures=True,
            recipe=("derivation", "run_figures:record_derivation_plan")),
    Chapter("bigger_batch", "bigger_batch_bigger_step", "a bigger batch wants a bigger step", records=("records",),
            figures=True, recipe=("bigger_batch", "run_lr_sweep:record_bigger_batch_plan")),
    Chapter("accumulation", "gradient_accumulation", "gradient accumulation", records=("records",), figures=True,
            recipe=("accumulation", "run_accumulation:record_accumulation_plan")),
    Chapter("waiting", "waiting", "waiting: stragglers, overlap, asynchronous SGD",
            records=("records_straggler", "records_overlap", "records_async_sgd"), figures=True,
            recipe=("waiting", "run_figures:record_waiting_plan")),
    Chapter("splitting", "splitting_the_model", "splitting the model: pipeline, tensor, sharded optimizer state",
            records=("records_pipeline", "records_tensor_parallel", "records_zero"), figures=True,
            recipe=("splitting", "run_figures:record_splitting_plan")),
    Chapter("sharding", "shard_everything", "shard everything: ZeRO-2, ZeRO-3 and FSDP", records=("records",),
            figures=True, recipe=("sharding", "run_sharding:record_sharding_plan")),
    Chapter("cheaper_sync", "cheaper_sync", "a cheaper sync: compression, local SGD, two levels",
            records=("records_compression", "records_local_sgd", "records_hierarchical"), figures=True,
            recipe=("cheaper_sync", "run_local_sgd:record_cheaper_sync_plan")),
    Chapter("when_a_replica_fails", "when_a_replica_fails", "when a replica fails: restart, carry on, sync rarely",
            records=("records",)),
    Chapter("question_bank", "question_bank", "the question bank"),
)

NUMBERS: tuple[str, ...] = tuple(c.number for c in COURSE)
TOPICS: tuple[str, ...] = tuple(c.topic for c in COURSE)


def chapter(key: str) -> Chapter:
    """A chapter by its topic (``"cheaper_sync"``) or its number (``"14"``)."""
    for c in COURSE:
        if key in (c.topic, c.number):
            return c
    raise ValueError(f"chapter must be one of the topics {', '.join(c.topic for c in COURSE)} or a number "
                     f"00 to {COURSE[-1].number}; got {key!r}.")


def topic_of(module: str) -> str:
    """The topic whose folder holds ``module``, a module's ``__name__``: ``topic_of("dpviz.topics.speedup_model.deck")``
    is ``'speedup_model'``. A card's key starts with it, so keys stay put when chapters are renumbered."""
    parts = module.split(".")
    if len(parts) < 3 or parts[:2] != ["dpviz", "topics"]:
        raise ValueError(f"module must be one of a chapter's, dpviz.topics.<topic>.<name>; got {module!r}.")
    return chapter(parts[2]).topic


def number_of(module: str) -> str:
    """The number of the chapter whose topic folder holds ``module``, a module's ``__name__``:
    ``number_of("dpviz.topics.speedup_model.deck")`` is ``'06'``, so a deck writes
    ``HERE = course.number_of(__name__)``."""
    return chapter(topic_of(module)).number


def ref(*topics: str) -> str:
    """The chapters ``topics`` as a sentence names them: ``ref("speedup_model")`` is ``'chapter 06'``,
    ``ref("one_group_per_device", "all_reduce")`` is ``'chapters 04 and 05'`` (three or more: ``'chapters 02, 03
    and 10'``)."""
    if not topics:
        raise ValueError("topics must name at least one chapter; got none.")
    numbers = [chapter(topic).number for topic in topics]
    if len(numbers) == 1:
        return f"chapter {numbers[0]}"
    return f"chapters {', '.join(numbers[:-1])} and {numbers[-1]}"


def Ref(*topics: str) -> str:  # noqa: N802  (named for the capital it writes)
    """:func:`ref` at the start of a sentence: ``Ref("splitting")`` is ``'Chapter 12'``."""
    words = ref(*topics)
    return words[0].upper() + words[1:]


def topic_module(key: str, name: str):
    """The module ``dpviz.topics.<topic>.<name>`` of one chapter, imported now."""
    return importlib.import_module(f"{chapter(key).package}.{name}")


def import_record_kinds() -> None:
    """Import every chapter's record-kind modules, so that each kind is registered with the engine's schema."""
    for c in COURSE:
        for name in c.records:
            topic_module(c.topic, name)


def figure_groups() -> tuple:
    """Every chapter's :class:`~dpviz.engine.figure_group.FigureGroup`, in course order."""
    return tuple(topic_module(c.topic, "figures").GROUP for c in COURSE if c.figures)


def recipes() -> dict:
    """Each figure plan's recorder, by the plan's name: ``recorder(quick=..., progress=...) -> {stem: record}``."""
    found = {}
    for c in COURSE:
        if c.recipe:
            plan, entry = c.recipe
            module, function = entry.split(":")
            found[plan] = getattr(topic_module(c.topic, module), function)
    return found


def cards_for(key: str) -> list:
    """The self-check cards of one chapter, by its number (``"00"`` to the last) or its topic, in teaching order
    (its ``deck.py``'s ``CARDS``)."""
    from dpviz.engine.checks import check_choice  # the engine's wording for a value out of range

    if key not in TOPICS:
        check_choice("chapter", key, NUMBERS)
    c = chapter(key)
    return [card for card in topic_module(c.topic, "deck").CARDS if card.chapter == c.number]


def __getattr__(name):
    if name == "GROUPS":  # every published figure group, imported on first use
        return figure_groups()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
