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

Each transformation scales whole records or whole settings, never one timestamp against another of the same step,
so every record stays self-consistent (its ``check()`` passes): it is a record that a busy machine could write.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

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
TRANSFORMATIONS = ("cores_taken", "load_grew", "load_fell")


def _ranks(record) -> np.ndarray | int:
    if type(record).KIND.name == "bench":
        return np.asarray(record.arrays["k"])[:, None]  # one sweep over k: each point on its own k
    return int(record.meta.get("k") or record.meta.get("p") or 1)


def _settings_factor(n: int, how: str) -> np.ndarray:
    i = np.arange(n, dtype=float)
    return 1.0 + i if how == "load_grew" else float(n) - i


def busy(record, how: str):
    """``record`` as a busy machine could have recorded it (``how``: one of :data:`TRANSFORMATIONS`); durations only."""
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
    inputs = DerivationRecords.from_records(records["derivation"])
    times = timing.measured_step_times(inputs.mlp)
    found = cost_claims.compute_shrinks(times, cores=int(inputs.mlp[2].meta["cores"]))
    assert not found.holds and "shrinks as 1/k" not in found.says, found.says
    title = figure_s01_sync_timelines(inputs.mlp, inputs.bench).axes[0].get_title(loc="left")
    assert "does not show here" in title, title
