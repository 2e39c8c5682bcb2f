"""Nothing lost, nothing mixed: a record's name keeps its dots, a save is all or nothing, and a hostile file is
refused in one sentence before it costs memory (the reliability issue's items 3, 4 and 7)."""

import errno
import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dpviz.topics.ground_floor.records import Run
from dpviz.engine.schema import load
from dpviz.engine import schema

FIGURE_RECORDS = Path(__file__).resolve().parents[1] / "figures" / "records"


@pytest.fixture(scope="module")
def run() -> Run:
    return Run.load(FIGURE_RECORDS / "line_k4")


def other(run: Run, **meta) -> Run:
    return Run({**run.meta, **meta}, dict(run.arrays))


def test_a_dotted_name_is_kept_whole(run, tmp_path):
    first = other(run, seed=1).save(tmp_path / "runs" / "lr0.1")
    second = other(run, seed=2).save(tmp_path / "runs" / "lr0.2")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["lr0.1.json", "lr0.1.npz", "lr0.2.json", "lr0.2.npz"]
    assert first == tmp_path / "runs" / "lr0.1" and load(first).meta["seed"] == 1
    assert load(tmp_path / "runs" / "lr0.2.json").meta["seed"] == 2


def test_one_run_s_header_never_passes_for_another_run_s_arrays(run, tmp_path):
    a = run.save(tmp_path / "a")
    changed = dict(run.arrays)
    changed["loss"] = changed["loss"] * 2
    b = Run(run.meta, changed).save(tmp_path / "b")
    (tmp_path / "a.npz").write_bytes((tmp_path / "b.npz").read_bytes())  # what a kill between the two writes left
    with pytest.raises(ValueError, match=r"a\.npz' is not the file its header .*a\.json' was saved with"):
        load(a)
    assert load(b).arrays["loss"][0, 0] == 2 * run.arrays["loss"][0, 0]


def test_a_failed_save_leaves_the_older_record_and_no_partial_file(run, tmp_path, monkeypatch):
    base = other(run, seed=7).save(tmp_path / "keep")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full_disk(file, arrays):
        file.write(b"\0" * 4096)  # part of the archive made it to disk, then the disk was full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(schema, "write_npz", full_disk)
    with pytest.raises(OSError, match=r"no space left to save the record at '.*keep': it needs up to .* free; any older"):
        other(run, seed=8).save(base)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary file, nothing replaced
    assert load(base).meta["seed"] == 7


def test_a_save_interrupted_between_the_renames_finishes_the_pair(run, tmp_path, monkeypatch):
    base = other(run, seed=7).save(tmp_path / "r")
    real = os.replace
    calls = []

    def interrupted_after_first(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process was interrupted after the .npz was in place
        real(src, dst)

    monkeypatch.setattr(schema.os, "replace", interrupted_after_first)
    changed = dict(run.arrays)
    changed["loss"] = changed["loss"] + 1
    with pytest.raises(KeyboardInterrupt):
        Run(run.meta, changed).save(base)
    monkeypatch.setattr(schema.os, "replace", real)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.npz"]  # the pair finished, nothing left
    assert np.array_equal(load(base).loss, changed["loss"])  # the new record, whole


def test_a_header_of_the_wrong_shape_is_one_sentence(run, tmp_path):
    base = run.save(tmp_path / "h")
    header = json.loads((tmp_path / "h.json").read_text())
    header["kind"] = ["run"]
    (tmp_path / "h.json").write_text(json.dumps(header))
    with pytest.raises(ValueError, match="kind must be a string"):
        load(base)
    (tmp_path / "h.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError, match="nested too deeply|not a record header"):
        load(base)


def test_a_zip_bomb_is_refused_before_it_is_decompressed(run, tmp_path):
    base = run.save(tmp_path / "bomb")
    header = {"descr": "<f8", "fortran_order": False, "shape": (400_000_000,)}  # 3.2 GB declared
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        for name, value in run.arrays.items():  # every array the header lists, the loss last
            if name != "loss":
                with z.open(f"{name}.npy", "w") as f:
                    np.lib.format.write_array(f, value)
        with z.open("loss.npy", "w") as f:
            np.lib.format.write_array_header_1_0(f, header)
            f.write(b"\0" * (1 << 20))
    meta = json.loads((tmp_path / "bomb.json").read_text())
    meta.pop("npz_sha256")
    (tmp_path / "bomb.json").write_text(json.dumps(meta))
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"declares arrays of more than 2 GiB in all .*'loss.npy' has shape \(400000000,\)"):
        load(base)
    assert time.perf_counter() - start < 1.0


def test_nan_or_inf_is_refused_where_the_kind_does_not_declare_it(run, tmp_path):
    changed = dict(run.arrays)
    changed["t_compute"] = changed["t_compute"].copy()
    changed["t_compute"][2, 1] = np.nan
    with pytest.raises(ValueError, match=r"array 't_compute' holds NaN or inf in 1 place; in a 'run' record every value"):
        Run(run.meta, changed)
    base = run.save(tmp_path / "nan")
    with np.load(tmp_path / "nan.npz") as z:
        arrays = {name: z[name] for name in z.files}
    arrays["t_comm"][0, 0] = np.inf
    np.savez_compressed(tmp_path / "nan.npz", **arrays)
    header = json.loads((tmp_path / "nan.json").read_text())
    header.pop("npz_sha256")
    (tmp_path / "nan.json").write_text(json.dumps(header))
    with pytest.raises(ValueError, match=r"array 't_comm' holds NaN or inf"):
        load(base)
    diverged = dict(run.arrays)
    diverged["loss"] = diverged["loss"].copy()
    diverged["loss"][-1] = np.inf  # a run whose training diverged: declared, so kept
    assert np.isinf(Run(run.meta, diverged).loss[-1]).all()
