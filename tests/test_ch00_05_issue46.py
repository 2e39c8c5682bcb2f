"""Chapters 00 to 05 against issue 46: predict before the lesson run, sliders that never move without changing the
picture, figures that read right, a checker that explains a typical mistake, imports a right answer needs, and chapters
short enough to read.

* Each of chapters 01 to 05 asks a :class:`~dpviz.engine.predict.Prediction` before the cell whose run is its lesson
  and answers it after from a claims function; each function is checked here on the record its chapter uses, and on
  copies tampered to show something else.
* Chapter 03's b slider at k = 7: every position changes the picture, and a b past what the record holds shows as
  capped on the control. Chapter 05's all-reduce at k = 1 fits its view; the ring's and the server's titles read as
  sentences once wrapped.
* Chapter 04's checker explains a division by len(model_grads), on real ranks.
* A reference answer written with ``np`` or ``math`` in the namespace of its chapter's import cell is accepted.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch.distributed as dist

from dpviz.engine.predict import Prediction
from dpviz.engine.schema import load
from dpviz.engine.verdict import FAILED, PASSED
from dpviz.exercises import ranked

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
FIGURES = ROOT / "figures" / "records"
MINE = ("ground_floor", "one_step", "mini_batch", "average_of_averages", "one_group_per_device", "all_reduce")


def notebook(stem: str) -> dict:
    found = sorted(NOTEBOOKS.glob(f"[0-9][0-9]_{stem}.ipynb"))
    assert len(found) == 1, found
    return json.loads(found[0].read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    return "".join(cell["source"])


def with_arrays(rec, **arrays):
    return type(rec)(rec.meta, dict(rec.arrays, **arrays))


def answered(guess: Prediction, value, answer: dict) -> str:
    guess.commit(value)
    return str(guess.answer(**answer))


# --- predict, then run: where each chapter asks and answers ---------------------------------------------------------

# (chapter, the call that makes the lesson's record or prints it, the claims function that answers)
ASKED = [
    ("one_step", "too_big = landscape.step1_data", "loss_after_too_big_steps"),
    ("mini_batch", 'biased = record_run(k=1, b=64, steps=1, sampling="biased")', "biased_grab_angle"),
    ("average_of_averages", "run = record_run(k=4, b=16", "where_the_mean_of_means_lands"),
    ("one_group_per_device", "figure_step4_devices(run)", "do_the_arrows_agree"),
    ("all_reduce", "run = record_run(k=4, b=8, steps=5)", "replicas_apart_after_the_sync"),
]


@pytest.mark.parametrize("stem, lesson, claim", ASKED, ids=[a[0] for a in ASKED])
def test_the_chapter_asks_before_its_lesson_run_and_answers_from_the_record_after(stem, lesson, claim):
    cells = [c for c in notebook(stem)["cells"] if c["cell_type"] == "code"]
    texts = [source(c) for c in cells]
    asked = [i for i, t in enumerate(texts) if re.search(r"^guess = Prediction\.(number|choice)\(", t, re.M)]
    run = [i for i, t in enumerate(texts) if lesson in t]
    answer = [i for i, t in enumerate(texts) if f"guess.answer(**{claim}(" in t]
    assert len(asked) == len(run) == len(answer) == 1, (asked, run, answer)
    assert asked[0] < run[0] < answer[0], "the question comes before the lesson's run and the answer after it"
    assert texts[asked[0]].rstrip().endswith("\nguess"), "the question cell shows the widget"
    said = [o for o in cells[answer[0]]["outputs"] if o.get("output_type") == "execute_result"]
    assert said, "the answer cell was run and shows its answer"
    text = "".join(said[0]["data"]["text/plain"])
    assert text.startswith("No prediction was committed. The run measured "), text
    assert "<details" in "".join(said[0]["data"]["text/html"]), "where no widget ran, the answer is a <details>"


def test_one_step_answer_follows_the_parabola():
    from dpviz.engine.data import line_data
    from dpviz.topics.one_step import landscape
    from dpviz.topics.one_step.claims import loss_after_too_big_steps

    x, y = line_data()
    too_big = landscape.step1_data(x, y, knob=0, eta=0.9, steps=5)
    answer = loss_after_too_big_steps(x, y, too_big)
    start, end = float(too_big.path_loss[0]), float(too_big.path_loss[-1])
    assert answer["measured"] == pytest.approx(end / start)
    assert answer["said"] == f"{end / start:.1f}× ({start:.1f} → {end:.1f} in 5 steps)"
    assert answer["why"].endswith(f"a loss of {end:.1f}"), "the parabola's arithmetic lands on the path's last loss"
    guess = Prediction.number("q", low=0, high=100, step=0.5, unit="×")
    assert "as you said" in answered(guess, round(end / start), answer)
    assert "1 − ηL'' = -1.45" in answered(guess, 2, answer)
    small = loss_after_too_big_steps(x, y, landscape.step1_data(x, y, knob=0, eta=0.1, steps=5))
    assert small["measured"] < 1 and "= +0.73" in small["why"], "a small η shrinks the distance every step"


@pytest.fixture(scope="module")
def grabs():
    from dpviz.topics.ground_floor.run_training import record_run

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return record_run(k=1, b=64, steps=1), record_run(k=1, b=64, steps=1, sampling="biased")


def test_mini_batch_answer_is_the_measured_angle_and_names_the_knob_that_disagrees(grabs):
    from dpviz.topics.mini_batch.claims import biased_grab_angle
    from dpviz.topics.one_step import landscape

    run, biased = grabs
    answer = biased_grab_angle(run, biased)
    full = landscape.full_grad(run.x, run.y, run.params[0, 0])
    assert answer["measured"] == pytest.approx(landscape.angle_deg(biased.local_grad[0, 0], full))
    assert answer["said"] == f"{answer['measured']:.1f} degrees"
    assert "all 64 of its examples are of the x ≥ 0 kind" in answer["why"]
    assert "they want c raised" in answer["why"] and "want it lowered" in answer["why"]
    guess = Prediction.number("q", low=0, high=180, step=1, unit="degrees")
    assert answered(guess, 0, answer).startswith("You predicted 0 degrees; the run measured ")
    # the random grab as the "biased" one: no knob disagrees in sign, and the words say so
    assert "the whole data set's signs" in biased_grab_angle(run, run)["why"]


def test_average_of_averages_answer_on_the_shipped_run_and_on_a_tampered_one():
    from dpviz.topics.average_of_averages.claims import LANDS, where_the_mean_of_means_lands
    from dpviz.topics.one_group_per_device.shipped import grid_runs

    run = grid_runs()[(4, 16)]
    answer = where_the_mean_of_means_lands(run)
    assert answer["measured"] == LANDS[0]
    assert "mean of all 64 examples" in answer["why"]
    guess = Prediction.choice("q", list(LANDS))
    assert "as you said" in answered(guess, LANDS[0], answer)
    assert "b cancels" in answered(guess, LANDS[2], answer)
    off = with_arrays(run, big_grad=run.big_grad * 1.05)
    assert where_the_mean_of_means_lands(off)["measured"] == LANDS[1]
    assert where_the_mean_of_means_lands(with_arrays(run, big_grad=-run.big_grad))["measured"] == LANDS[2]


def test_one_group_per_device_answer_measures_the_arrows():
    from dpviz.topics.one_group_per_device.claims import ARROWS, do_the_arrows_agree
    from dpviz.topics.one_group_per_device.shipped import grid_runs

    run = grid_runs()[(4, 8)]
    answer = do_the_arrows_agree(run)
    g = run.local_grad[0].astype(np.float64)
    lengths = np.linalg.norm(g, axis=1)
    assert answer["measured"] == ARROWS[1]
    assert f"lengths from {lengths.min():.2f} to {lengths.max():.2f}" in answer["said"]
    assert "all 4 agree that w should grow and c should shrink" in answer["why"]
    same = with_arrays(run, local_grad=np.broadcast_to(run.local_grad[:, :1], run.local_grad.shape).copy())
    assert do_the_arrows_agree(same)["measured"] == ARROWS[0]
    spread = run.local_grad.copy()
    spread[0, 1] *= -1
    spread[0, 3] = -spread[0, 0]
    wild = do_the_arrows_agree(with_arrays(run, local_grad=spread))
    assert wild["measured"] == ARROWS[2] and "do not even agree" in wild["why"]


def test_all_reduce_answer_counts_the_replicas_apart():
    from dpviz.topics.all_reduce.claims import replicas_apart_after_the_sync

    run = load(FIGURES / "line_k4")
    answer = replicas_apart_after_the_sync(run)
    assert answer["measured"] == 0 and answer["said"] == "0 of the 3"
    assert f"matched at {run.steps + 1} of the {run.steps + 1} states" in answer["why"]
    guess = Prediction.number("q", low=0, high=3, step=1)
    assert "as you said" in answered(guess, 0, answer)
    assert answered(guess, 3, answer).startswith("You predicted 3; the run measured 0 of the 3. At ")
    digests = run.param_digest.copy()
    digests[-1, 2] = b"0" * len(digests[-1, 2])
    assert replicas_apart_after_the_sync(with_arrays(run, param_digest=digests))["measured"] == 1


# --- sliders and figures ----------------------------------------------------------------------------------------------


def test_chapter_03_b_slider_at_k_7_changes_the_picture_or_shows_its_cap():
    from dpviz.topics.average_of_averages.widget import average_widget
    from dpviz.topics.one_group_per_device.shipped import grid_runs

    sf = average_widget(grid_runs()[(4, 16)])
    b = sf.controls["b"]
    sf.set(k=7)
    assert b.max == 64 // 7 and sf.values["b"] <= b.max, "at k = 7 the slider ends where 7·b fits the 64 examples"
    assert "k·b ≤ 64" in b.description, "the control says why it ends there"
    frames = []
    for value in range(1, b.max + 1):
        sf.set(b=value)
        frames.append(sf.png())
    assert len(set(frames)) == len(frames), "every position the slider offers draws another picture"
    sf.set(b=16)
    assert sf.values["b"] == 9, "a b past the cap shows as the cap on the control"
    sf.set(k=1)
    assert b.max == 64 and sf.values["b"] == 9, "back at k = 1 the whole record is offered again"
    plt.close(sf.fig)


def test_chapter_05_all_reduce_at_one_rank_fits_its_view():
    from dpviz.topics.one_group_per_device.shipped import grid_runs
    from dpviz.topics.one_group_per_device.widget import all_reduce_widget

    sf = all_reduce_widget(grid_runs())
    for k in (1, 2, 4):
        sf.set(k=k)
        holder = sf.view.holder
        lo, hi = holder.ax.get_xlim()
        box = holder.hub.get_x(), holder.hub.get_x() + holder.hub.get_width()
        assert lo <= box[0] and box[1] <= hi, f"at k = {k} the all-reduce box {box} leaves the view {lo, hi}"
    sf.set(k=1)
    assert sf.view.holder.verdict.get_text().startswith("one rank: nothing to average")
    plt.close(sf.fig)


def test_ring_and_server_titles_read_as_sentences_once_wrapped():
    from dpviz.topics.all_reduce.figures import figure_step5_ring_vs_parameter_server
    from dpviz.topics.speedup_model.figure_records import load_inputs

    inputs = load_inputs(FIGURES)
    fig = figure_step5_ring_vs_parameter_server(inputs.ring, inputs.server)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(titles) == 2
    for title in titles:
        repeated = re.findall(r"\b(\w+(?: \d)?) \1\b", title)
        assert not repeated, f"a wrapped title repeats {repeated}: {title!r}"
    assert "to its right; each rank sends" in titles[0] and titles[0].endswith("the result equals dist.all_reduce bit for bit")
    assert "all through rank 0, which receives and sends" in titles[1]
    plt.close(fig)


# --- chapter 04's checker: a division by the number of tensors -------------------------------------------------------


def avg_by_tensor_count(model_grads, world_size):
    for grad in model_grads:
        dist.all_reduce(grad)
        grad /= len(model_grads)


def test_dividing_by_len_model_grads_is_explained_on_real_ranks():
    (verdict,) = ranked.check_many([("average_gradients", avg_by_tensor_count)])
    assert verdict.status == FAILED, verdict
    assert "It is the sum divided by 4, the number of gradient tensors (len(model_grads)): divide by world_size, " \
           "the number of ranks that added in, 3." in verdict, verdict


def test_the_tensor_count_hint_needs_a_count_other_than_k():
    local = [np.full((2, 2), 1.0), np.full(2, 2.0), np.full((1, 2), 3.0)]
    mean = [2 * g for g in local]  # the mean over k = 3 ranks; their sum is 3 times it
    three = {"local": local, "expected": mean, "got": [3 * m / 3 for m in mean]}
    assert ranked._average_hint(three, 0, 0, 3) == "", "with 3 tensors on 3 ranks the division is right by chance"
    four = {"local": local + [np.ones(1)], "expected": mean + [np.ones(1)], "got": [3 * m / 4 for m in mean]}
    assert "the number of gradient tensors (len(model_grads))" in ranked._average_hint(four, 0, 0, 3)


# --- a right answer written with np or math is accepted -----------------------------------------------------------------

ANSWERS = {  # chapter: a right answer as a student could write it after the chapter, using np and math
    "one_step": ("check_sgd_step", '''
def sgd_step(theta, grad, eta):
    return np.subtract(theta, math.fabs(eta) * np.asarray(grad))
'''),
    "mini_batch": ("check_mean_gradient", '''
def mean_gradient(example_grads):
    return np.sum(example_grads, axis=0) / math.prod(np.shape(example_grads)[:1])
'''),
    "average_of_averages": ("check_weighted_mean", '''
def weighted_mean(group_grads, group_sizes):
    return np.average(group_grads, axis=0, weights=group_sizes) * math.fsum(group_sizes) / sum(group_sizes)
'''),
}


def import_cell(stem: str) -> str:
    """The chapter's first code cell as plain Python: IPython's magics and the fork server's warm-up left out."""
    cell = next(c for c in notebook(stem)["cells"] if c["cell_type"] == "code")
    return "\n".join(line for line in source(cell).splitlines()
                     if not line.lstrip().startswith("%") and "warm_up" not in line)


@pytest.mark.parametrize("stem", MINE[1:])
def test_the_import_cell_gives_np_and_math(stem):
    namespace: dict = {}
    exec(compile(import_cell(stem), f"<{stem} import cell>", "exec"), namespace)
    assert {"np", "math"} <= set(namespace), f"{stem}'s import cell must import numpy as np and math"


@pytest.mark.parametrize("stem", sorted(ANSWERS))
def test_a_right_answer_with_np_and_math_is_accepted(stem, tmp_path):
    import dpviz.exercises as ex

    checker, answer = ANSWERS[stem]
    path = tmp_path / f"answer_{stem}.py"  # a file, so that the checker can read the function's source
    path.write_text(import_cell(stem) + "\n" + answer, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    name = re.search(r"def (\w+)", answer).group(1)
    verdict = getattr(ex, checker)(getattr(module, name))
    assert verdict.status == PASSED, verdict


# --- length ----------------------------------------------------------------------------------------------------------


def words(path: Path) -> int:
    """Every word of a chapter's markdown cells, tables included."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    return sum(len(re.findall(r"\S+", source(c))) for c in nb["cells"] if c["cell_type"] == "markdown")


@pytest.mark.parametrize("stem", MINE)
def test_chapters_00_to_05_are_short(stem):
    (path,) = NOTEBOOKS.glob(f"[0-9][0-9]_{stem}.ipynb")
    assert words(path) <= 3000 if stem == "ground_floor" else words(path) <= 2500, (stem, words(path))


# --- figures the cells used to lay out by hand -------------------------------------------------------------------------


def test_the_figures_once_laid_out_in_cells_are_figure_functions(grabs):
    from dpviz.topics.all_reduce.figures import figure_replicas_by_optimizer
    from dpviz.topics.average_of_averages.figures import figure_unequal_groups
    from dpviz.topics.mini_batch.figures import figure_example_grads, figure_mean_vs_sum
    from dpviz.topics.one_group_per_device.shipped import drift_runs, grid_runs
    from dpviz.topics.ground_floor.run_training import record_run

    run, _ = grabs
    for fig in (figure_example_grads(run), figure_mean_vs_sum(run)):
        assert fig.caption.startswith(run.describe()) and fig.get_figwidth() <= 6.8
        plt.close(fig)
    drift = drift_runs()
    fig = figure_replicas_by_optimizer(drift)
    assert [ax.get_title() for ax in fig.axes] == [f"{opt}, {w} the all-reduce" for opt in ("sgd", "momentum", "adam")
                                                  for w in ("with", "without")]
    assert sum(ax.get_legend() is not None for ax in fig.axes) == 1
    plt.close(fig)
    with pytest.raises(ValueError, match="drift must hold"):
        figure_replicas_by_optimizer({("sgd", True): drift[("sgd", True)]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        uneven = record_run(k=2, shard_sizes=(4, 28), mean="weighted", steps=1)
    fig = figure_unequal_groups(uneven)
    assert [ax.get_title() for ax in fig.axes] == ["Plain mean of unequal groups: misses",
                                                  "Weighted mean, from the all-reduce: hits"]
    plt.close(fig)
    with pytest.raises(ValueError, match="unequal shards"):
        figure_unequal_groups(grid_runs()[(2, 8)])   # equal groups: the titles would not be true
