"""The figure set recorded again on one core: every claim runs, and every title and sentence says what these data show.

``python -m dpviz figures --quick`` runs with every rank pinned to one core, the slowest place a chapter could be
re-recorded: k = 2 and k = 4 then take turns on that core, compute per rank cannot shrink as 1/k, two ranks are
no faster than one, and overlap has no second core to overlap on. Nothing may be asserted that these data
contradict: ``./run`` must end green, and the titles and sentences that the claims functions print must say that
the ranks shared one core instead of teaching the lesson.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from dpviz.topics.speedup_model.figures import figure_s01_sync_timelines  # noqa: E402
from dpviz.topics.speedup_model import claims as cost_claims  # noqa: E402
from dpviz.topics.whole_picture.claims import corner_bar  # noqa: E402
from dpviz.topics.speedup_model.figure_records import load_inputs  # noqa: E402
from dpviz.topics.ground_floor import timing  # noqa: E402

ONE_CORE = min(os.sched_getaffinity(0))


def pin_to_one_core():
    os.sched_setaffinity(0, {ONE_CORE})  # the fork server and every rank inherit it


@pytest.fixture(scope="module")
def one_core(tmp_path_factory):
    out = tmp_path_factory.mktemp("one_core")
    proc = subprocess.run([sys.executable, "-m", "dpviz", "figures", "--quick", "--out", str(out)],
                          preexec_fn=pin_to_one_core, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"./run on one core failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return out, proc.stdout


def test_every_figure_is_drawn_and_every_claim_printed(one_core):
    out, stdout = one_core
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest and all((out / f).is_file() for entry in manifest.values() for f in entry["files"])
    assert "on 1 cores" in stdout.splitlines()[-1]
    inputs = load_inputs(out / "records")
    assert {run.meta["cores"] for run in [*inputs.mlp.values(), inputs.half, inputs.bench]} == {1}


def test_s01_says_the_ranks_shared_one_core(one_core):
    out, _ = one_core
    inputs = load_inputs(out / "records")
    times = timing.measured_step_times(inputs.mlp)
    found = cost_claims.compute_shrinks(times, cores=1)
    assert not found.holds and "more ranks than cores" in found.says
    title = figure_s01_sync_timelines(inputs.mlp, inputs.bench).axes[0].get_title(loc="left")
    assert "shrinks as 1/k" not in title and "more ranks than cores" in title, title


def test_the_speedup_sentences_say_the_ranks_took_turns(one_core):
    out, _ = one_core
    inputs = load_inputs(out / "records")
    assert "took turns" in cost_claims.speedup_at_two(inputs.mlp, inputs.half)
    for line in cost_claims.against_the_model(inputs.mlp, inputs.bench):
        assert "above" in line or "shared 1 core," in line or "waited longer" in line, line
    assert "shared 1 core" in corner_bar(inputs.synced)
