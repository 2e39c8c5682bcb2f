"""Every figure draws from the committed records behind figures/, and says which run made it."""

import json
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from dpviz import figures
from dpviz.records import provenance
from dpviz.records.figure_set import load_inputs
from dpviz.regenerate import regenerate

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "figures" / "records"
EXPECTED = {
    "step1_loss", "step2_gradients", "step3_average_of_averages", "step4_devices", "step5_all_reduce",
    "step5_replicas", "step5_ring_vs_parameter_server", "s01_sync_timelines", "s02_speedup",
    "allreduce_time_vs_size", "summary",
}


@pytest.fixture(scope="module")
def drawn():
    inputs = load_inputs(RECORDS)
    figs = figures.draw_all(inputs)
    yield inputs, figs
    for fig, _ in figs.values():
        plt.close(fig)


def test_every_figure_of_the_notes_is_drawn(drawn):
    _, figs = drawn
    assert set(figs) == EXPECTED
    for name, (fig, sources) in figs.items():
        assert fig.axes, name
        assert all(ax.has_data() or ax.texts or ax.patches for ax in fig.axes), name
        assert sources, name


def test_every_figure_names_the_run_that_made_it(drawn):
    _, figs = drawn
    for name, (_, sources) in figs.items():
        for entry in map(provenance, sources):
            assert entry.get("source") or {"host", "cores", "date"} <= set(entry), (name, entry)


def test_records_behind_the_committed_figures_pass_their_checks(drawn):
    inputs, _ = drawn
    assert "bit-identical" in inputs.main.check()
    assert not inputs.alone.replicas_identical()[1:].any()
    assert inputs.ring.equal and inputs.server.equal
    for run in inputs.mlp.values():
        run.check()


def test_committed_manifest_lists_every_figure_with_its_files():
    manifest = json.loads((ROOT / "figures" / "manifest.json").read_text())
    assert EXPECTED <= set(manifest)  # and each chapter group's figures past Step 6 (dpviz.figures.GROUPS)
    for name, entry in manifest.items():
        for file in entry["files"]:
            assert (ROOT / "figures" / file).is_file(), file
        assert all("date" in s or "source" in s for s in entry["made_from"]), name


def test_missing_records_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="path"):
        load_inputs(tmp_path)


def test_committed_figures_are_what_the_committed_records_draw(tmp_path):
    """Same records, same pictures: drawing again from figures/records gives the committed SVGs byte for byte."""
    regenerate(tmp_path, records=RECORDS, progress=False)
    for svg in sorted((ROOT / "figures").glob("*.svg")):
        assert (tmp_path / svg.name).read_text() == svg.read_text(), f"{svg.name} differs from what its records draw now"
