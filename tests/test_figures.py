"""Every figure draws from the committed records behind figures/, and says which run made it.

Drawn again from those records, each committed SVG comes out the same picture: the same elements and
text, every number within a thousandth of a point (:mod:`svg_compare` says why that tolerance).
"""

import importlib.util
import json
import re
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from dpviz import course
from dpviz.engine.schema import provenance
from dpviz.topics.speedup_model.figure_records import FIGURE_PLAN, load_inputs
from dpviz.regenerate import regenerate
from dpviz.engine.svg_compare import svg_difference

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
    figs = {}
    for group in course.GROUPS:
        if group.plan is FIGURE_PLAN:  # the derivation's records: Steps 1 to 6, s01, s02, the all-reduce, the summary
            figs.update(group.draw(group.plan.load(RECORDS)))
    yield inputs, figs
    for fig, _ in figs.values():
        plt.close(fig)


def test_every_figure_of_the_notes_is_drawn(drawn):
    _, figs = drawn
    assert set(figs) == EXPECTED
    for name, (fig, sources) in figs.items():
        assert fig.axes, name
        assert all(ax.has_data() or ax.texts or ax.patches or ax.get_legend() for ax in fig.axes), name
        assert sources, name


def test_every_figure_names_the_run_that_made_it(drawn):
    _, figs = drawn
    for name, (_, sources) in figs.items():
        for entry in map(provenance, sources):
            assert entry.get("source") or {"host", "cores", "date"} <= set(entry), (name, entry)


def test_records_behind_the_committed_figures_pass_their_checks(drawn):
    inputs, _ = drawn
    assert "bit-identical" in inputs.synced.check()
    assert not inputs.unsynced.replicas_identical()[1:].any()
    assert inputs.ring.equal and inputs.server.equal
    for run in inputs.mlp.values():
        run.check()


def test_committed_manifest_lists_every_figure_with_its_files():
    manifest = json.loads((ROOT / "figures" / "manifest.json").read_text())
    assert EXPECTED <= set(manifest)  # and the figures of each later chapter's group (dpviz.course.GROUPS)
    for name, entry in manifest.items():
        for file in entry["files"]:
            assert (ROOT / "figures" / file).is_file(), file
        assert all("date" in s or "source" in s for s in entry["made_from"]), name
        assert entry["caption"] and "\n" not in entry["caption"], name  # the line printed under the figure


def test_missing_records_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="path"):
        load_inputs(tmp_path)


def test_committed_figures_are_what_the_committed_records_draw(tmp_path):
    """Same records, same pictures: drawing again from figures/records over a copy of figures/ gives each committed
    SVG up to last digits, and so leaves every file, PNGs and manifest included, byte for byte as it was."""
    committed = sorted(p for p in (ROOT / "figures").iterdir() if p.is_file())
    assert any(p.suffix == ".svg" for p in committed)
    for path in committed:
        shutil.copy2(path, tmp_path / path.name)
    regenerate(tmp_path, records=RECORDS, progress=False)
    differences = []
    for path in committed:
        drawn = tmp_path / path.name
        if drawn.read_bytes() == path.read_bytes():
            continue
        difference = svg_difference(path.read_text(), drawn.read_text()) if path.suffix == ".svg" else "rewritten"
        differences.append(f"{path.name}: {difference}")
    assert not differences, "drawn from their records now, these files differ:\n" + "\n".join(differences)


def test_the_manifest_names_only_modules_that_exist():
    text = (ROOT / "figures" / "manifest.json").read_text() + (ROOT / "figures" / "MANIFEST.md").read_text()
    for name in sorted(set(re.findall(r"\bdpviz(?:\.\w+)+", text))):
        module = name
        while not _is_module(module):  # a function's name after its module's
            module, _, _ = module.rpartition(".")
            assert module != "dpviz", f"the manifest names {name}, which no module of dpviz holds"


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a name inside a module, not a module
        return False


# The comparer itself, on a committed figure: a bar chart (per-rank memory) whose bars are patch_3 to patch_7.
BARS = ROOT / "figures" / "accumulation_memory.svg"


def element(svg: str, ident: str) -> tuple[int, int]:
    """Where the element ``<g id=ident>`` starts and ends in the text ``svg``."""
    start = svg.index(f'<g id="{ident}">')
    return start, svg.index("</g>", start)


def test_svg_comparer_lets_a_last_digit_pass():
    svg = BARS.read_text()
    start, end = element(svg, "patch_3")
    number = re.compile(r"\d+\.\d{6}").search(svg, start, end)  # a coordinate printed to all six decimals
    last = number.group()[-1]
    nudged = number.group()[:-1] + ("1" if last == "0" else str(int(last) - 1))
    assert svg_difference(svg, svg[:number.start()] + nudged + svg[number.end():]) is None


def test_svg_comparer_lets_a_renamed_hashed_id_pass():
    svg = BARS.read_text()
    ident = re.search(r'id="(p[0-9a-f]{10})"', svg).group(1)  # a clip path, named by a hash of its box
    assert svg_difference(svg, svg.replace(ident, "p0123456789")) is None


def test_svg_comparer_names_a_bar_whose_height_changed():
    svg = BARS.read_text()
    start, end = element(svg, "patch_3")
    top = re.findall(r"L [\d.]+ ([\d.]+)", svg[start:end])[1]  # the bar's top edge, a y coordinate in points
    taller = svg[:start] + svg[start:end].replace(f" {top} ", f" {float(top) - 3:g} ") + svg[end:]
    difference = svg_difference(svg, taller)
    assert difference is not None, "a bar 3 pt taller passed as the same figure"
    assert "g[@id='axes_1']/g[@id='patch_3']/path[1] @d" in difference
    assert f"is {top}, drawn as {float(top) - 3:g}" in difference


def test_svg_comparer_names_a_changed_label_and_a_missing_element():
    svg = BARS.read_text()
    comment = re.search(r"<!-- (.+?) -->", svg)
    relabelled = svg[:comment.start(1)] + comment.group(1) + "!" + svg[comment.end(1):]
    assert "comment" in svg_difference(svg, relabelled)
    start, end = element(svg, "patch_4")
    difference = svg_difference(svg, svg[:start] + svg[end + len("</g>"):])  # one bar fewer
    counts = re.search(r"g\[@id='axes_1'\]: (\d+) children, drawn with (\d+)", difference)
    assert counts and int(counts[1]) == int(counts[2]) + 1



def test_a_plan_that_fails_keeps_the_plans_recorded_before_it_and_saves_nothing_of_its_own(tmp_path, monkeypatch):
    """Recording stops at the first plan whose recipe raises or whose records are not the plan's stems: the plans
    recorded before it are saved, that plan's records are not, and the error goes up."""
    from dpviz import recipes

    plans = {group.plan.name: group.plan for group in course.GROUPS}
    names = list(plans)
    committed = {name: plan.load(RECORDS) for name, plan in plans.items()}  # stand-ins for fresh recordings
    monkeypatch.setattr(recipes, "warm_up", lambda: None)
    for failing, how in ((names[2], "raises"), (names[1], "returns too few")):
        out = tmp_path / how

        def recipe(name):
            def record(*, quick, progress):
                if name == failing and how == "raises":
                    raise RuntimeError("a rank failed")
                return dict(list(committed[name].items())[:-1]) if name == failing else committed[name]
            return record

        monkeypatch.setattr(recipes, "RECIPES", {name: recipe(name) for name in names})
        with pytest.raises(RuntimeError, match="a rank failed" if how == "raises" else "returned records"):
            regenerate(out, progress=False)
        saved = {p.name.removesuffix(".json") for p in (out / "records").glob("*.json")}
        before = names[:names.index(failing)]
        assert saved == {stem for name in before for stem in plans[name].stems}, how
