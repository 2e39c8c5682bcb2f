"""The self-check cards: every chapter has a deck, in chapter order, chapter 15 holds the whole question
bank, numeric answers match closed-form arithmetic typed here, the reveal button works, and no card copies
the notes or repeats their known errors.

The notes themselves are not part of the repository. What the copying check needs of them, a hash of every
run of 12 words, ships in tests/data; where the notes sit beside this checkout (``../shared/seeds``, or the
folder named by ``DPVIZ_SEEDS``) a test checks those hashes against them, and
``python tests/test_quiz.py`` writes them again.
"""

from __future__ import annotations

import hashlib
import html
import math
import os
import re
from collections import Counter
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import pytest

from dpviz import course
from dpviz.topics.ground_floor import costmodel  # only to plant wrong formulas; expectations never call it
from dpviz.topics.ground_floor.links import PRESETS
from dpviz.topics.question_bank.bank import ALL_CARDS, cards_for
from dpviz.engine.cards import CHAPTERS, KINDS, Card
from dpviz.engine.quiz import CardWidget, Deck, card_widget, deck, show_cards

SEEDS = Path(os.environ.get("DPVIZ_SEEDS", Path(__file__).resolve().parents[2] / "shared" / "seeds"))
NOTE_FILES = ("000_872f4da5a8dd4301.txt", "001_40e6aeb320704928.txt", "003_79350ba4f796b0ec.txt")
NOTE_RUNS = Path(__file__).with_name("data") / "notes_12_word_runs.txt"
RUN = 12  # words: a card sharing this many words in a row with the notes copies them
ALL_TEXT = {card.key: card.question_text() + "\n" + card.answer_text() for card in ALL_CARDS}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _grams(words, n):
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


# ---------------------------------------------------------------------------------------------
# Coverage


def test_every_chapter_has_cards():
    assert list(CHAPTERS) == [f"{i:02d}" for i in range(len(course.COURSE))]  # numbered without a gap, in course order
    assert course.COURSE[-1].topic == "question_bank"  # the question bank last
    for chapter in CHAPTERS:
        cards = cards_for(chapter)
        assert cards, chapter
        assert all(card.chapter == chapter for card in cards)
    assert sum(len(cards_for(ch)) for ch in CHAPTERS) == len(ALL_CARDS)


def test_all_cards_run_in_chapter_order():
    order = list(CHAPTERS)
    positions = [order.index(card.chapter) for card in ALL_CARDS]
    assert positions == sorted(positions)


def test_keys_are_unique_and_kinds_known():
    keys = [card.key for card in ALL_CARDS]
    assert len(keys) == len(set(keys))
    assert {card.kind for card in ALL_CARDS} <= set(KINDS)


def test_chapter_13_holds_the_whole_question_bank():
    counts = Counter(card.kind for card in cards_for("question_bank"))
    assert set(counts) == set(KINDS)  # every category, the recall items and numeric ones too
    # The note's bank: 9 true/false, 7 spot-the-error, 6 why, 8 edge cases.
    assert counts["true/false"] >= 9
    assert counts["spot the error"] >= 7
    assert counts["why"] >= 6
    assert counts["edge case"] >= 8
    assert len(cards_for("question_bank")) >= 9 + 7 + 6 + 8


def test_self_check_lists_are_covered():
    # 001's self-check has 8 questions, 000's quick self-check 6.
    assert sum(card.kind == "self-check" for card in cards_for("ground_floor")) >= 8
    assert sum(card.kind == "self-check" for card in cards_for("whole_picture")) >= 6


# ---------------------------------------------------------------------------------------------
# Numeric cards: each expectation is the closed form typed from the notes' formulas, computed here from
# the card's params and the link presets' α and β, never by the theory function the card calls.


def _speedup(t_compute, k, t_comm):
    return t_compute / (t_compute / k + t_comm)  # S = T_compute / (T_compute/k + T_comm)


def _ring(k, M, alpha, beta):
    return 2 * (k - 1) * alpha + 2 * (k - 1) / k * M / beta  # a ring all-reduce: reduce-scatter, then all-gather


def _notes(k, M, alpha, beta):
    return alpha * math.log2(k) + (k - 1) / k * M / beta  # the notes' formula: a reduce-scatter alone


def _expect_half(p):
    t, k = p["t_compute"], p["k"]
    t_comm = t / k
    s = _speedup(t, k, t_comm)
    assert math.isclose(s, k / 2)
    return {"t_comm": t_comm, "s": s, "eff": s / k, "half_k": k / 2}


def _expect_k1(p):
    link = PRESETS[p["link"]]
    t_notes, t_ring = _notes(1, p["M"], link.alpha, link.beta), _ring(1, p["M"], link.alpha, link.beta)
    assert t_notes == t_ring == 0.0
    return {"t_notes": t_notes, "t_ring": t_ring, "s": _speedup(p["t_compute"], 1, 0.0)}


def _expect_fraction(p):
    return {"f": [(k - 1) / k for k in p["ks"]]}


def _expect_efficiency(p):
    s_model = _speedup(p["t_compute"], p["k"], 0.0)
    assert s_model == p["k"]
    return {"eff": p["s_measured"] / p["k"], "s_model": s_model, "eff_model": s_model / p["k"]}


def _expect_lr(p):
    return {"lr_lin": p["lr_base"] * p["k"], "lr_sq": p["lr_base"] * math.sqrt(p["k"]), "root": math.sqrt(p["k"])}


def _expect_notes_vs_ring(p):
    k, M, link = p["k"], p["M"], PRESETS[p["link"]]
    t_notes, t_ring = _notes(k, M, link.alpha, link.beta), _ring(k, M, link.alpha, link.beta)
    return {
        "alpha_us": link.alpha * 1e6,
        "beta_gbs": link.beta / 1e9,
        "t_notes_ms": t_notes * 1e3,
        "t_ring_ms": t_ring * 1e3,
        "ratio": t_ring / t_notes,
    }


def _expect_ceiling(p):
    s = [_speedup(p["t_compute"], k, p["t_comm"]) for k in p["ks"]]
    ceiling = p["t_compute"] / p["t_comm"]
    assert max(s) < ceiling
    return {"ceiling": ceiling, "s": s}


def _expect_double_bandwidth(p):
    t, k, M = p["t_compute"], p["k"], p["M"]
    out = {}
    for tag, name in zip("ab", p["links"]):
        link = PRESETS[name]
        s = [_speedup(t, k, _ring(k, M, link.alpha, beta)) for beta in (link.beta, 2 * link.beta)]
        assert s[1] < 2 * s[0]
        out[f"s_{tag}"], out[f"gain_{tag}"] = s, s[1] / s[0]
    return out


def _expect_best_k(p):
    link = PRESETS[p["link"]]
    ks = range(1, p["k_max"] + 1)
    s = [_speedup(p["t_compute"], k, _ring(k, p["M"], link.alpha, link.beta)) for k in ks]
    best = max(ks, key=lambda k: s[k - 1])
    assert 1 < best < p["k_max"]  # the card's point: more devices can be slower
    return {"best_k": best, "s_best": s[best - 1], "s_last": s[-1]}


def _expect_limits(p):
    s = [_speedup(p["t_compute"], p["k"], t_comm) for t_comm in p["t_comms"]]
    assert s[0] == p["k"]
    return {"s": s, "ceiling_last": p["t_compute"] / p["t_comms"][-1]}


def _lr_grid(model):
    from dpviz.topics.bigger_batch.records import LrGrid

    return LrGrid.shipped(model)


def _expect_three_lr_rules(p):
    return {"x1": p["lr_base"], "sqrt": p["lr_base"] * math.sqrt(p["k"]), "linear": p["lr_base"] * p["k"],
            "root": math.sqrt(p["k"])}


def _examples_to(grid, row, target):
    loss = grid.loss[row, : grid.steps[row] + 1]
    hit = np.flatnonzero(np.isfinite(loss) & (loss <= target))
    return hit[0] * grid.k[row] * grid.meta["b"] if hit.size else math.inf


def _expect_examples_needed(p):
    grid = _lr_grid(p["model"])
    row = {(int(k), round(float(m), 6), int(w)): i for i, (k, m, w) in enumerate(zip(grid.k, grid.multiplier, grid.warmup))}
    ref = row[(1, 1.0, 0)]
    target = grid.loss[ref, round(grid.steps[ref] / 8)]
    out = {}
    for rule, m in (("x1", 1.0), ("sqrt", math.sqrt(p["k"])), ("linear", float(p["k"]))):
        out[rule] = _examples_to(grid, row[(p["k"], round(m, 6), 0)], target) / _examples_to(grid, ref, target)
    assert abs(out["linear"] - 1) < 0.15 and abs(out["x1"] / p["k"] - 1) < 0.15  # the card's point
    return out | {"root": math.sqrt(p["k"])}


def _expect_bowl_gap(p):
    from dpviz.engine.data import line_data

    x = line_data()[0][:, 0].astype(float)
    h = 2 * np.array([[np.mean(x * x), np.mean(x)], [np.mean(x), 1.0]])
    lam = sorted(np.linalg.eigvalsh(h), reverse=True)
    grid, k = _lr_grid("line"), p["k"]
    etas, measured = [], []
    for m in p["multipliers"]:
        (r,) = np.flatnonzero((grid.k == k) & (grid.multiplier == m) & (grid.warmup == 0))
        n = grid.steps[r]
        etas.append(grid.meta["base_lr"] * m / k)
        measured.append(float(np.median(grid.step_gap[r, :n].astype(float) / grid.step_length[r, :n])))
    modeled = [abs((1 - e * lam[0]) ** k - (1 - k * e * lam[0])) / (k * e * lam[0]) for e in etas]
    limit = 2 / lam[0]
    return {"lam": lam, "limit": limit, "etas": etas, "modeled": modeled, "measured": measured,
            "big": [k * e for e in etas]}


def _expect_warmup(p):
    return {"rates": [p["lr"] * min(1.0, (t + 1) / p["warmup"]) for t in range(p["steps"])]}


def _expect_divergence(p):
    grid = _lr_grid(p["model"])
    rows = [int(np.flatnonzero((grid.k == p["k"]) & (grid.multiplier == p["multiplier"]) & (grid.warmup == w))[0])
            for w in grid.meta["warmups"]]
    steps = [int(grid.diverged_at[r]) for r in rows]
    assert min(steps) >= 0  # the card's point: every warm-up diverged
    return {"warmups": grid.meta["warmups"], "steps": steps, "lr": grid.meta["base_lr"] * p["multiplier"],
            "total": int(grid.steps[rows[0]])}


def _expect_accumulation(p):
    k, m, t_micro, t_comm = p["k"], p["m"], p["t_micro"], p["t_comm"]
    every, once = m * (t_micro + t_comm), m * t_micro + t_comm  # one all-reduce per micro-batch, or one per update
    return {"t_every": every, "t_once": once, "calls_every": m, "calls_once": 1, "calls_saved": m - 1,
            "t_saved": every - once, "t_alone": k * m * t_micro}


def _expect_straggler(p):
    k, t, d, c = p["k"], p["t_compute"], p["delay"], p["t_comm"]
    step = t + d + c  # the late rank's compute, then the all-reduce, for every rank
    return {"t_step_ms": step * 1e3, "t_base_ms": (t + c) * 1e3, "wait_ms": d * 1e3, "others": k - 1,
            "idle": (k - 1) * d / (k * step), "slowdown": step / (t + c)}


def _expect_overlap(p):
    f, b, c = p["t_forward"], p["t_backward"], p["t_comm"]
    serial, best = f + b + c, f + max(b, c)
    return {"serial_ms": serial * 1e3, "best_ms": best * 1e3, "saving_ms": (serial - best) * 1e3,
            "saving": (serial - best) / serial}


def _expect_async(p):
    t = list(p["t_grad"])
    tau = [sum(t[i] / t[j] for j in range(len(t)) if j != i) for i in range(len(t))]
    return {"tau": tau, "sync_rate": 1 / max(t), "async_rate": sum(1 / x for x in t), "sync_grads": len(t) / max(t)}


def _expect_bubble(p):
    return {"bubble": [(p["p"] - 1) / (m + p["p"] - 1) for m in p["ms"]]}


def _expect_training_memory(p):
    n, k, limit = p["n_params"], p["k"], p["memory_gb"] * 1e9
    plain, zero1 = 16 * n, (4 + 4) * n + 8 * math.ceil(n / k)  # float32 θ and g, Adam's m and v (sharded in ZeRO-1)
    fewest = lambda total: next(j for j in range(1, 1000) if total(j) <= limit)  # noqa: E731
    return {
        "per_param": 16.0,
        "plain_gb": plain / 1e9,
        "zero1_gb": zero1 / 1e9,
        "zero1_per_param": 8 + 8 / k,
        "fewest_zero1": fewest(lambda j: 8 * n + 8 * math.ceil(n / j)),
        "fewest_zero3": fewest(lambda j: 16 * math.ceil(n / j)),
    }


def _expect_tensor_bytes(p):
    b, w, layers, k = p["batch"], p["width"], p["layers"], p["k"]
    gather, reduce = (k - 1) / k * b * w * 4, 2 * (k - 1) / k * b * w * 4  # all-gather of Y, all-reduce of dX
    tp, dp = layers * (gather + reduce), 2 * (k - 1) / k * layers * w * w * 4
    return {"tp_gb": tp / 1e9, "dp_gb": dp / 1e9, "tp_calls": 2 * layers, "ratio": tp / dp}


def _expect_paper(p):
    n, k = p["n_params"], p["k"]  # mixed precision: 2 + 2 + 12 bytes per parameter, sharded stage by stage
    return {"plain": 16 * n / 1e9, "zero1": (4 * n + 12 * n / k) / 1e9, "zero2": (2 * n + 14 * n / k) / 1e9,
            "zero3": 16 * n / k / 1e9}


def _expect_stage_bytes(p):
    M, k = p["n_params"] * p["element_bytes"], p["k"]
    plain, full = 2 * (k - 1) / k * M, 3 * (k - 1) / k * M  # two ring passes, or three
    return {"plain_gb": plain / 1e9, "zero3_gb": full / 1e9, "ratio": full / plain}


def _expect_busbw(p):
    algbw = p["M"] / (p["ms"] / 1e3)  # bytes per second
    return {"algbw": algbw / 1e9, "busbw": algbw * 2 * (p["k"] - 1) / p["k"] / 1e9}


def _expect_powersgd(p):
    rows, cols, r = p["rows"], p["cols"], p["r"]
    before, after = 4 * rows * cols, 4 * (rows + cols) * r  # float32: the matrix, against P (rows×r) and Q (cols×r)
    return {"before_mb": before / 1e6, "after_kb": after / 1e3, "ratio": before / after}


def _expect_two_levels(p):
    k, g, M = p["k"], p["g"], p["M"]
    G = k // g
    flat, two = 2 * (k - 1) / k * M, 2 * (G - 1) / G * M / g  # a flat ring's edge rank; one rank's share across
    return {"machines": G, "flat_gb": flat / 1e9, "two_gb": two / 1e9, "ratio": flat / two}


def _expect_young_daly(p):
    delta, mtbf = p["delta_s"], p["mtbf_h"] * 3600.0
    tau = (2 * delta * mtbf) ** 0.5  # Young: √(2·δ·M) seconds
    return {"tau_min": tau / 60, "waste_pct": 100 * (delta / tau + tau / (2 * mtbf))}


def _expect_diloco_bytes(p):
    return {"dp_gb": 4 * p["P"] / 1e9, "diloco_mb": 4 * p["P"] / p["H"] / 1e6}  # float32 every step, or per H steps


EXPECTED = {  # in chapter order
    "all_reduce-num-notes-vs-ring": _expect_notes_vs_ring,
    "speedup_model-num-best-k": _expect_best_k,
    "speedup_model-num-limits": _expect_limits,
    "measuring-num-busbw": _expect_busbw,
    "bigger_batch-num-rules": _expect_three_lr_rules,
    "bigger_batch-num-examples": _expect_examples_needed,
    "bigger_batch-num-gap": _expect_bowl_gap,
    "bigger_batch-num-warmup": _expect_warmup,
    "bigger_batch-num-diverge": _expect_divergence,
    "accumulation-num-all-reduces": _expect_accumulation,
    "waiting-num-straggler": _expect_straggler,
    "waiting-num-overlap": _expect_overlap,
    "waiting-num-async": _expect_async,
    "splitting-num-bubble": _expect_bubble,
    "splitting-num-too-big": _expect_training_memory,
    "splitting-num-tensor-bytes": _expect_tensor_bytes,
    "sharding-num-paper": _expect_paper,
    "sharding-num-step-bytes": _expect_stage_bytes,
    "cheaper_sync-num-powersgd": _expect_powersgd,
    "cheaper_sync-num-two-levels": _expect_two_levels,
    "when_a_replica_fails-num-young-daly": _expect_young_daly,
    "when_a_replica_fails-num-diloco-bytes": _expect_diloco_bytes,
    "question_bank-num-half": _expect_half,
    "question_bank-num-k1": _expect_k1,
    "question_bank-num-fraction": _expect_fraction,
    "question_bank-num-efficiency": _expect_efficiency,
    "question_bank-num-lr": _expect_lr,
    "question_bank-num-ring": _expect_notes_vs_ring,
    "question_bank-num-ceiling": _expect_ceiling,
    "question_bank-num-double-bandwidth": _expect_double_bandwidth,
}

NUMERIC = [card for card in ALL_CARDS if card.numeric]


def test_enough_numeric_cards_and_each_has_a_check():
    assert len(NUMERIC) >= 8
    assert [card.key for card in NUMERIC] == list(EXPECTED)
    assert all(card.kind == "numeric" for card in NUMERIC)


# A slip in the cost model, and the numeric cards whose numbers it must spoil.
WRONG_FORMULAS = {
    "t_comm_ring": (costmodel.t_comm_notes,  # the notes' reduce-scatter priced as the whole all-reduce
                    {"all_reduce-num-notes-vs-ring", "speedup_model-num-best-k", "question_bank-num-ring", "question_bank-num-double-bandwidth"}),
    "speedup": (lambda t_compute, k, t_comm: np.multiply(k, t_compute) / (t_compute + t_comm),  # compute not split
                {"speedup_model-num-best-k", "speedup_model-num-limits", "question_bank-num-half", "question_bank-num-ceiling", "question_bank-num-double-bandwidth"}),
}


@pytest.mark.parametrize("name", WRONG_FORMULAS)
def test_a_wrong_cost_model_formula_fails_the_numeric_checks(monkeypatch, name):
    wrong, keys = WRONG_FORMULAS[name]
    monkeypatch.setattr(costmodel, name, wrong)
    for card in NUMERIC:
        if card.key in keys:
            expected, got = EXPECTED[card.key](card.params), card.values()
            assert any(not np.allclose(np.asarray(got[n], float), np.asarray(v, float), rtol=1e-9)
                       for n, v in expected.items()), card.key


@pytest.mark.parametrize("card", NUMERIC, ids=lambda c: c.key)
def test_numeric_answer_matches_an_independent_computation(card):
    expected = EXPECTED[card.key](card.params)
    got = card.values()
    assert set(got) == set(expected)
    for name, value in expected.items():
        np.testing.assert_allclose(np.asarray(got[name], float), np.asarray(value, float), rtol=1e-12, err_msg=name)
    # The shown text is the template filled with the independently computed numbers.
    assert card.answer_text() == card.answer.format(**card.params, **expected)
    assert "{" not in card.answer_text() and "{" not in card.question_text()


# ---------------------------------------------------------------------------------------------
# Widgets


def test_button_reveals_then_hides_the_answer():
    for card in ALL_CARDS:
        w = card_widget(card)
        assert isinstance(w, widgets.Widget)
        assert w.button.description == "Show answer"
        assert w.answer.value == "" and w.answer.layout.display == "none"
        w.button.click()
        assert w.revealed and w.answer.layout.display != "none"
        assert w.button.description == "Hide answer"
        first_line = card.answer_text().split("\n")[0]
        assert html.escape(first_line[:40]) in w.answer.value
        w.button.click()
        assert not w.revealed and w.answer.value == "" and w.answer.layout.display == "none"
        assert w.button.description == "Show answer"


def test_deck_has_one_row_per_card_and_an_answer_key_fallback():
    """The widget holds one row per card; the static fallback is the answer key (tests/test_answer_keys.py)."""
    for chapter in CHAPTERS:
        d = show_cards(chapter)
        assert isinstance(d, Deck)
        cards = cards_for(chapter)
        assert [w.card for w in d.card_widgets] == cards
        assert all(isinstance(w, CardWidget) for w in d.card_widgets)
        bundle = d._repr_mimebundle_()
        key = bundle["text/html"]
        assert "application/vnd.jupyter.widget-view+json" in bundle
        again = show_cards(chapter)._repr_mimebundle_()  # a fresh deck: same text, so nbval sees no change
        assert bundle["text/plain"] == again["text/plain"] and key == again["text/html"]
        assert key.count("<details>") == len(cards) and "<details open" not in key
        for card in cards:
            assert html.escape(card.question_text(), quote=False) in key
            assert html.escape(card.answer_text(), quote=False) in key


def test_deck_from_a_list_and_card_text():
    cards = cards_for("average_of_averages")[:2]
    d = deck(cards)
    assert len(d.card_widgets) == 2
    d.card_widgets[1].button.click()
    assert d.card_widgets[1].answer.value and not d.card_widgets[0].answer.value
    for card in ALL_CARDS:
        text = card.text()
        assert card.question_text() in text and card.answer_text() in text

# ---------------------------------------------------------------------------------------------
# Honesty: own words, and none of the notes' known errors


def _run_hash(words) -> str:
    """A run of words, joined by single spaces, as the short hash that tests/data keeps of the notes."""
    return hashlib.blake2b(" ".join(words).encode(), digest_size=5).hexdigest()


def _note_runs(seeds: Path) -> set[str]:
    """The hash of every run of RUN words in the three notes."""
    runs = set()
    for name in NOTE_FILES:
        runs |= {_run_hash(gram) for gram in _grams(_words((seeds / name).read_text()), RUN)}
    return runs


def _shipped_note_runs() -> set[str]:
    return {line for line in NOTE_RUNS.read_text().splitlines() if line and not line.startswith("#")}


def test_no_card_copies_twelve_words_of_the_notes():
    notes = _shipped_note_runs()
    assert len(notes) > 5000  # the three notes hold about 5,400 words
    for key, text in ALL_TEXT.items():
        copied = [gram for gram in _grams(_words(text), RUN) if _run_hash(gram) in notes]
        assert not copied, f"{key}: {' '.join(copied[0])}"


@pytest.mark.skipif(not all((SEEDS / name).is_file() for name in NOTE_FILES),
                    reason=f"the source notes are not in {SEEDS}; set DPVIZ_SEEDS to their folder")
def test_shipped_runs_are_those_of_the_notes():
    assert _shipped_note_runs() == _note_runs(SEEDS), f"{NOTE_RUNS} is stale: run python tests/test_quiz.py"


def test_notes_all_reduce_formula_is_always_called_a_reduce_scatter():
    formula = re.compile(r"log\s*[2₂_]")
    for key, text in ALL_TEXT.items():
        if formula.search(text) and "(k−1)/k" in text and "M/β" in text:
            assert "reduce-scatter" in text or "half" in text, key
    spot = next(c for c in ALL_CARDS if c.key == "all_reduce-spot-formula").answer_text()
    assert "2(k−1)·α + 2(k−1)/k·M/β" in spot


def test_bert_example_is_not_presented_as_measured():
    for key, text in ALL_TEXT.items():
        assert not re.search(r"[13]\.3\s*[×x]", text), key
        if "BERT" in text:
            assert "source" in text, key


def test_lr_contrast_is_linear_against_square_root():
    text = ALL_TEXT["question_bank-why-linear-rule"]
    assert "×√k" in text and "k·η" in text
    assert "√k" in ALL_TEXT["bigger_batch-why-sqrt"] and "×k" in ALL_TEXT["bigger_batch-why-sqrt"]
    assert not re.search(r"\bby k, not k\b|\bk, not k\b", " ".join(ALL_TEXT.values()))


def test_bit_identity_is_claimed_only_between_replicas():
    for key, text in ALL_TEXT.items():
        if re.search(r"bit-for-bit|bit-identical|last bit", text):
            assert "associative" in text or "rounding" in text, key


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize("bad", ["9", "8", "", 8, None])
def test_unknown_chapter_is_one_sentence_naming_the_argument(bad):
    for fn in (cards_for, show_cards):
        with pytest.raises(ValueError) as err:
            fn(bad)
        message = str(err.value)
        assert message.startswith("chapter ")
        assert message.count(". ") == 0 and message.endswith(".")


def test_bad_cards_and_decks():
    with pytest.raises(ValueError, match="kind"):
        Card("q?", "a.", "riddle", "00", "x")
    with pytest.raises(ValueError, match="chapter"):
        Card("q?", "a.", "why", f"{len(course.COURSE):02d}", "x")  # one past the last chapter
    with pytest.raises(ValueError, match="compute"):
        Card("q?", "a.", "numeric", "15", "x")
    with pytest.raises(ValueError, match="cards"):
        deck([])
    with pytest.raises(TypeError, match="cards"):
        deck(["not a card"])
    with pytest.raises(TypeError, match="card"):
        card_widget("not a card")


def write_note_runs(seeds: Path = SEEDS) -> None:
    """Write tests/data's hashes of the notes' 12-word runs from the three notes in ``seeds``."""
    header = [
        f"# Every run of {RUN} consecutive words in the three source notes,",
        f"# {', '.join(NOTE_FILES)},",
        "# kept as a hash, never as text: a word is a run of [a-z0-9] in the lowercased note, a run's words are",
        "# joined by single spaces, and each line is the run's 5-byte blake2b digest in hex. tests/test_quiz.py",
        "# checks that no card shares such a run; `python tests/test_quiz.py` writes this file again from the notes.",
    ]
    NOTE_RUNS.parent.mkdir(exist_ok=True)
    NOTE_RUNS.write_text("\n".join(header + sorted(_note_runs(seeds))) + "\n")


if __name__ == "__main__":
    write_note_runs()
