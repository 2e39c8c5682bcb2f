"""dpviz.engine.predict: a prediction committed before a run, answered from the run after it."""

import pytest

from dpviz.engine.predict import Prediction


def test_a_number_close_to_the_measured_one_is_confirmed_and_a_far_one_gets_the_reason():
    guess = Prediction.number("How much faster will 2 ranks be?", low=0.5, high=2.5, step=0.1, unit="×")
    guess.commit(1.9)
    assert str(guess.answer(1.8, said="1.80×", why="they share cores")) == (
        "You predicted 1.9×; the run measured 1.80×, as you said.")
    guess.commit(1.0)
    assert str(guess.answer(1.8, said="1.80×", why="They share cores")) == (
        "You predicted 1×; the run measured 1.80×. They share cores.")


def test_no_prediction_still_answers_and_shows_the_question_collapsed_with_its_answer():
    guess = Prediction.choice("Do the arrows agree?", ["exactly", "in direction only"])
    answer = guess.answer("in direction only", why="each rank saw other rows")
    assert str(answer).startswith("No prediction was committed. The run measured “in direction only”.")
    html = answer._repr_html_()
    assert html.startswith("<details") and "Do the arrows agree?" in html and "each rank saw other rows" in html
    bundle = guess._repr_mimebundle_()
    assert "exactly" in bundle["text/html"] and "application/vnd.jupyter.widget-view+json" in bundle


def test_the_button_commits_the_controls_value_and_a_second_click_takes_it_back():
    guess = Prediction.choice("Which?", ["a", "b"])
    guess.button.click()
    assert guess.value is None and "Pick one" in guess.status.value
    guess.control.value = "b"
    guess.button.click()
    assert guess.value == "b" and guess.control.disabled
    assert str(guess.answer("b")).startswith("You predicted “b”; the run measured “b”, as you said")
    guess.button.click()
    assert guess.value is None and not guess.control.disabled


@pytest.mark.parametrize("call, word", [
    (lambda: Prediction.choice("q", ["only"]), "choices"),
    (lambda: Prediction.number("q", low=2, high=1, step=0.1), "low"),
    (lambda: Prediction.number("q", low=0, high=1, step=0), "step"),
    (lambda: Prediction.choice("q", ["a", "b"]).commit("c"), "value"),
    (lambda: Prediction.number("q", low=0, high=1, step=0.1).commit(3), "value"),
    (lambda: Prediction.choice("q", ["a", "b"]).answer("c"), "measured"),
])
def test_bad_input_names_its_argument(call, word):
    with pytest.raises(ValueError, match=f"^{word} "):
        call()
