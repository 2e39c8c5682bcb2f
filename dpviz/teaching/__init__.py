"""Teaching: self-check cards and the question bank (no torch).

* :mod:`dpviz.teaching.cards`         ``Card``: one question, its answer, chapter and kind
* :mod:`dpviz.teaching.decks`         one deck per chapter, by topic; numeric cards beside what computes them
* :mod:`dpviz.teaching.questionbank`  every card, in chapter order; ``cards_for(chapter)``
* :mod:`dpviz.teaching.quiz`          cards as widgets with a "Show answer" button; ``show_cards(chapter)``
"""
