"""Record files: a missing, truncated or other-schema record gives one sentence naming the path."""

import json

import numpy as np
import pytest

from dpviz.records.run import Run
from dpviz.records.schema import load_record, save_record


def small_run() -> Run:
    meta = {"k": 1, "steps": 1}
    return Run(meta, {"reduced_grad": np.zeros((1, 1, 2), np.float32), "param_digest": np.array([[b"ab"], [b"ab"]])})


def test_round_trip_without_pickle(tmp_path):
    small_run().save(tmp_path / "r")
    meta, arrays = load_record(tmp_path / "r", "run", 1)
    assert meta == {"k": 1, "steps": 1}
    assert arrays["param_digest"].dtype.kind == "S"


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"path .*nothere\.json.* does not exist"):
        Run.load(tmp_path / "nothere")


def test_truncated_npz_names_the_path(tmp_path):
    small_run().save(tmp_path / "r")
    data = (tmp_path / "r.npz").read_bytes()
    (tmp_path / "r.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"path .*r\.npz.* is truncated"):
        Run.load(tmp_path / "r")


def test_truncated_json_names_the_path(tmp_path):
    small_run().save(tmp_path / "r")
    text = (tmp_path / "r.json").read_text()
    (tmp_path / "r.json").write_text(text[:20])
    with pytest.raises(ValueError, match=r"path .*r\.json.* is truncated"):
        Run.load(tmp_path / "r")


def test_other_schema_names_the_version(tmp_path):
    small_run().save(tmp_path / "r")
    header = json.loads((tmp_path / "r.json").read_text())
    header["schema_version"] = 99
    (tmp_path / "r.json").write_text(json.dumps(header))
    with pytest.raises(ValueError, match="schema_version 99"):
        Run.load(tmp_path / "r")


def test_other_kind_is_refused(tmp_path):
    save_record(tmp_path / "b", "bench", 1, {}, {"m": np.arange(3)})
    with pytest.raises(ValueError, match="'bench' record"):
        Run.load(tmp_path / "b")
