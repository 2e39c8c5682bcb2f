"""The question bank: the library code of the notebook ``question_bank``.

* ``bank``: Every self-check question of the notes, retold, with the cards for each chapter.
* ``claims``: The question bank: the edge-case cards' claims, asserted on the cost model and on a real run (numpy
  only).
* ``deck``: The question bank: the notes' whole bank retold, to review every chapter.
* ``deck_numbers``: The question bank's numeric cards, each computed here by
  ``dpviz.topics.ground_floor.costmodel``.
"""
