"""A busy machine's records: every figure draws and every claim says what the data show, none raises.

``./run`` on a classroom hub or beside other work records timings that need not show a chapter's timing lesson:
compute per rank that does not shrink as 1/k, two ranks no faster than one, an overlapped step no shorter than a
serial one. A chapter reading such records must still run top to bottom: a claim about time says what the data show
and why; only a correctness claim (equal gradients, identical replicas, bytes) may raise.

The records here are the shipped figure records, changed by :func:`busy`, a documented transformation of their
durations only (every gradient, parameter, byte and count is left as recorded, so every correctness claim still
holds):

* ``cores_taken``: other processes took the cores, so each rank ran as slowly as if the k ranks shared one core:
  every duration of a record on k ranks (p stages) is multiplied by k (p). Per-rank compute then no longer shrinks
  with k, and S(k) falls to about 1.
* ``load_grew``: that, and the load also grew while each record was made: the i-th of a record's settings (a
  hook, a mode, a ZeRO stage, a straggler's delay, an all-reduce method, local SGD's periods), recorded after the
  ones before it, ran 1 + i times slower. Whatever a record compares across its settings now goes the other way.
* ``load_fell``: the same with the load falling: the i-th of n settings ran n − i times slower.
* ``sync_waited``: the compute ran as on a quiet machine, but every all-reduce took 10 times as long (a rank
  descheduled by other work keeps the others waiting in the collective); each step's or update's total grows by
  what its all-reduces added, so the step still holds its parts.

* ``busiest``: ``load_grew``, then ``sync_waited``.

Each transformation scales whole records or whole settings, never one timestamp against another of the same step,
so every record stays self-consistent (its ``check()`` passes): it is a record that a busy machine could write.

Last, every chapter that reads the figure records runs top to bottom on the ``busiest`` records (they are saved to
a folder that ``DPVIZ_RECORDS`` names, as ``./run`` would leave them in ``my_figures/records``): no cell raises.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import nbformat  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402
from nbclient import NotebookClient  # noqa: E402

from dpviz.course import GROUPS  # noqa: E402
from dpviz.topics.ground_floor import timing  # noqa: E402
from dpviz.topics.speedup_model import claims as cost_claims  # noqa: E402
from dpviz.topics.speedup_model.figure_records import DerivationRecords  # noqa: E402
from dpviz.topics.speedup_model.figures import figure_s01_sync_timelines  # noqa: E402

# The arrays of each record kind that hold seconds (durations, or times since a step or a run began).
SECONDS = {
    "run": ("t_compute", "t_comm", "loop_seconds"),
    "accumulation": ("t_micro", "t_comm", "t_step"),
    "async_sgd": ("wall", "worker_idle", "worker_busy"),
    "bench": ("times", "median", "q25", "q75"),
    "compression": ("t_step", "t_exact"),
    "hierarchical": ("seconds",),
    "local_sgd": ("t_step_dp", "t_sync_dp", "t_step_local", "t_sync_local"),
    "lr_grid": ("seconds",),
    "overlap": ("t_forward_end", "t_grads_ready", "t_synced", "t_step_end", "comm_start", "comm_end"),
    "pipeline": ("fwd", "bwd", "send_fwd", "send_bwd", "finish"),
    "sharding": ("step_seconds", "trace_seconds"),
    "straggler": ("t_begin", "t_enter", "t_exit"),  # not `slept`: a sleep lasts as long on a busy machine
}
PER_SECOND = {"bench": ("algbw", "busbw")}  # rates: divided where the seconds are multiplied
# The axis along which a record's settings were recorded one after another (a mode, a hook, a stage, a delay).
SETTINGS_AXIS = {"compression": 0, "overlap": 0, "sharding": 0, "straggler": 0, "hierarchical": 1}
# For sync_waited: each record kind's all-reduce times, and the totals (a step, an update, a loop) that hold them.
SYNC = {
    "run": ("t_comm", ("loop_seconds",)),
    "accumulation": ("t_comm", ("t_step",)),
    "local_sgd": ("t_sync_dp", ("t_step_dp",)),
    "bench": ("times", ()),
    "hierarchical": ("seconds", ()),
}
SYNC_WAITED = 10.0  # the all-reduce's slowdown under sync_waited
TRANSFORMATIONS = ("cores_taken", "load_grew", "load_fell", "sync_waited", "busiest")


def _ranks(record) -> np.ndarray | int:
    if type(record).KIND.name == "bench":
        return np.asarray(record.arrays["k"])[:, None]  # one sweep over k: each point on its own k
    return int(record.meta.get("k") or record.meta.get("p") or 1)


def _settings_factor(n: int, how: str) -> np.ndarray:
    i = np.arange(n, dtype=float)
    return 1.0 + i if how == "load_grew" else float(n) - i


def _sync_waited(record):
    kind = type(record).KIND.name
    if kind not in SYNC:
        return record
    arrays = {name: np.asarray(record.arrays[name]) for name in record.arrays}
    pairs = [SYNC[kind]] + ([("t_sync_local", ("t_step_local",))] if kind == "local_sgd" else [])
    for sync, totals in pairs:
        added = arrays[sync] * (SYNC_WAITED - 1)
        arrays[sync] = arrays[sync] + added
        for total in totals:
            extra = added
            while extra.ndim > arrays[total].ndim:  # summed over what the total holds (micro-batches, steps)
                extra = extra.sum(axis=-1 if kind == "accumulation" else 0)
            arrays[total] = arrays[total] + extra
    if kind == "bench":
        for name in ("median", "q25", "q75"):
            arrays[name] = arrays[name] * SYNC_WAITED
        for name in PER_SECOND["bench"]:
            arrays[name] = arrays[name] / SYNC_WAITED
    return type(record)(dict(record.meta), arrays)


def busy(record, how: str):
    """``record`` as a busy machine could have recorded it (``how``: one of :data:`TRANSFORMATIONS`); durations only."""
    if how == "sync_waited":
        return _sync_waited(record)
    if how == "busiest":
        return _sync_waited(busy(record, "load_grew"))
    kind = type(record).KIND.name
    names = SECONDS.get(kind, ())
    if not names:
        return record
    arrays = {name: np.asarray(record.arrays[name]) for name in record.arrays}
    ranks = _ranks(record)
    for name in names:
        if name not in arrays:
            continue
        scale = ranks if kind != "bench" else ranks[:, 0].reshape((-1,) + (1,) * (arrays[name].ndim - 1))
        value = arrays[name] * scale
        if how != "cores_taken" and kind in SETTINGS_AXIS:
            axis = SETTINGS_AXIS[kind]
            shape = [1] * value.ndim
            shape[axis] = value.shape[axis]
            value = value * _settings_factor(value.shape[axis], how).reshape(shape)
        if how != "cores_taken" and kind == "local_sgd" and name.endswith("_local"):
            n = value.shape[0] + 1  # plain data parallelism first, then each period
            value = value * _settings_factor(n, how)[1:].reshape((-1,) + (1,) * (value.ndim - 1))
        if how != "cores_taken" and kind == "local_sgd" and name.endswith("_dp"):
            n = int(np.asarray(record.arrays["period"]).size) + 1
            value = value * _settings_factor(n, how)[0]
        arrays[name] = value
    for name in PER_SECOND.get(kind, ()):
        arrays[name] = arrays[name] / (ranks[:, 0] if kind == "bench" else ranks)
    return type(record)(dict(record.meta), arrays)


@pytest.fixture(scope="module")
def shipped():
    return {group.plan.name: group.plan.load() for group in GROUPS}


@pytest.fixture(scope="module", params=TRANSFORMATIONS)
def busy_records(request, shipped):
    return request.param, {name: {stem: busy(r, request.param) for stem, r in records.items()}
                           for name, records in shipped.items()}


def test_the_busy_records_are_records_a_machine_could_write(busy_records):
    how, records = busy_records
    for runs in records.values():
        for stem, run in runs.items():
            if hasattr(run, "check"):
                run.check()  # every correctness claim of the record still holds: only durations changed


def test_every_figure_draws_and_every_group_claim_prints_on_a_busy_machine(busy_records):
    how, records = busy_records
    for group in GROUPS:
        figures = group.draw(records[group.plan.name])
        assert figures, f"{group.plan.name}: no figure drawn"
        for name, (fig, _) in figures.items():
            matplotlib.pyplot.close(fig)
        if group.claims is not None:
            assert group.claims(records[group.plan.name])


def test_s01_says_compute_did_not_shrink_when_other_work_took_the_cores(busy_records):
    how, records = busy_records
    if how == "sync_waited":
        pytest.skip("sync_waited leaves compute as recorded")
    inputs = DerivationRecords.from_records(records["derivation"])
    times = timing.measured_step_times(inputs.mlp)
    found = cost_claims.compute_shrinks(times, cores=int(inputs.mlp[2].meta["cores"]))
    assert not found.holds and "shrinks as 1/k" not in found.says, found.says
    title = figure_s01_sync_timelines(inputs.mlp, inputs.bench).axes[0].get_title(loc="left")
    assert "does not show here" in title, title



def test_accumulation_says_why_one_process_was_not_slower_than_two_ranks(busy_records):
    from dpviz.topics.accumulation import claims as accumulation
    from dpviz.topics.accumulation.records import figure_selection

    how, records = busy_records
    runs = records["accumulation"]
    said, title = accumulation.timeline_sentences(runs)[0], accumulation.timelines_title(figure_selection(runs)["timelines"])
    assert "at least the 1.5×" not in said, said
    if how == "sync_waited":  # compute as recorded, the all-reduce slow: the shortfall, and what it cost
        assert "short of the 1.5× the lesson asks for: the all-reduce" in said, said
    else:  # the ranks computed more slowly than one process alone: other work took the cores
        assert "other work used the cores" in said, said
        assert title.endswith("no run here timed m ranks on free cores of their own"), title

# --- every chapter that reads the figure records, Run All on the busiest records ---------------------------------

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
READS_FIGURE_RECORDS = ("FIGURE_PLAN.load(", "load_inputs(", "figure_records(")


def chapters_reading_figure_records() -> list[Path]:
    return [path for path in sorted(NOTEBOOKS.glob("*.ipynb"))
            if any(call in cell.source for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
                   for call in READS_FIGURE_RECORDS)]


@pytest.fixture(scope="module")
def busiest_folder(tmp_path_factory, shipped):
    """The busiest records, saved where DPVIZ_RECORDS will name them: what ./run would leave in my_figures/records."""
    folder = tmp_path_factory.mktemp("busiest_records")
    for records in shipped.values():
        for stem, record in records.items():
            if not (folder / f"{stem}.json").is_file():
                busy(record, "busiest").save(folder / stem)
    return folder


def run_all(path: Path) -> nbformat.NotebookNode:
    """Run every cell of the chapter at ``path`` in a fresh kernel, in the notebooks folder; raises at a cell that raises."""
    nb = nbformat.read(path, as_version=4)
    sockets = tempfile.mkdtemp(prefix="dpviz-busy-kernel-")
    km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, "kernel"))
    try:
        NotebookClient(nb, km=km, timeout=300, resources={"metadata": {"path": str(path.parent)}}).execute()
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        shutil.rmtree(sockets, ignore_errors=True)
    return nb


def printed(nb) -> str:
    return "\n".join(str(out.get("text", "")) + str(out.get("data", {}).get("text/plain", ""))
                     for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", []))


def test_the_chapters_that_read_figure_records_are_found():
    names = [path.name[:2] for path in chapters_reading_figure_records()]
    assert len(names) >= 6 and not set(names) - {"02", "06", "07", "08", "09", "10", "12", "13", "14"}, names


@pytest.mark.parametrize("path", chapters_reading_figure_records(), ids=lambda path: path.stem)
def test_a_chapter_runs_all_on_a_busy_machines_records(path, busiest_folder, monkeypatch):
    monkeypatch.setenv("DPVIZ_RECORDS", str(busiest_folder))  # the kernel inherits it: the chapter reads these records
    nb = run_all(path)  # a cell that raises fails here, naming the cell
    if path.stem.startswith("06"):
        words = printed(nb)
        assert "Compute per rank did not shrink" in words or "less than 1/k" in words, words[:3000]


# --- where the chapters read from: ./run's records when whole, else the shipped ones; the tests always the shipped --

def test_a_plan_reads_my_figures_when_run_recorded_it_whole_and_the_tests_read_the_shipped(tmp_path, monkeypatch):
    from dpviz.engine import paths
    from dpviz.topics.accumulation.records import FIGURE_PLAN

    assert os.environ["DPVIZ_RECORDS"] == "shipped"  # the root conftest.py's: every test and nbval kernel reads shipped
    assert paths.figure_records(FIGURE_PLAN.stems) == paths.FIGURE_RECORDS
    mine = tmp_path / "my_figures"
    monkeypatch.setattr(paths, "MY_FIGURES", mine)
    monkeypatch.delenv("DPVIZ_RECORDS")  # a user's kernel
    assert paths.figure_records(FIGURE_PLAN.stems) == paths.FIGURE_RECORDS  # no ./run yet: the shipped records
    shipped = FIGURE_PLAN.load()
    first, *rest = FIGURE_PLAN.stems
    busy(shipped[first], "cores_taken").save(mine / "records" / first)
    assert paths.figure_records(FIGURE_PLAN.stems) == paths.FIGURE_RECORDS  # a plan half recorded: still shipped
    for stem in rest:
        busy(shipped[stem], "cores_taken").save(mine / "records" / stem)
    assert paths.figure_records(FIGURE_PLAN.stems) == mine / "records"  # recorded whole: this machine's
    loaded = FIGURE_PLAN.load()
    assert loaded[first].t_step[0, 0] == shipped[first].t_step[0, 0] * shipped[first].k
    monkeypatch.setenv("DPVIZ_RECORDS", "shipped")
    assert paths.figure_records(FIGURE_PLAN.stems) == paths.FIGURE_RECORDS
