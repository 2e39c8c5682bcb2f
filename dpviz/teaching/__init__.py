"""Teaching: self-check cards and the question bank (no torch).

* :mod:`dpviz.teaching.cards`         ``Card``: one question, its answer, chapter and kind
* :mod:`dpviz.teaching.questionbank`  every card, by chapter; numeric answers computed by the cost model
* :mod:`dpviz.teaching.quiz`          cards as widgets with a "Show answer" button; ``show_cards(chapter)``
"""
