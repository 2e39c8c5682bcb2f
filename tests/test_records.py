"""Records: every kind declared once; load refuses what does not fit the declaration, in one sentence naming the file."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from dpviz.engine.schema import kinds, load, provenance
from dpviz.topics.speedup_model.records import BenchRecord
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.all_reduce.records import Schedule
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine.schema import Array, Kind, Meta

FIGURE_RECORDS = Path(__file__).resolve().parents[1] / "figures" / "records"
RECORDS_DOC = Path(__file__).resolve().parents[1] / "docs" / "records.md"


@pytest.fixture(scope="module")
def run() -> Run:
    return Run.load(FIGURE_RECORDS / "line_k4")


def one_sentence(message: str) -> bool:
    return message.count(". ") == 0 and message.endswith(".")


def test_every_shipped_and_figure_record_loads_as_its_kind():
    stems = sorted({p.with_suffix("") for p in [*FIGURE_RECORDS.glob("*.json"), *SHIPPED_DIR.glob("*.json")]})
    kinds = {type(load(s)).__name__ for s in stems}
    # the chapters past Step 6 add kinds and records of their own (lr_grid: chapter 09)
    assert {"Run", "BenchRecord", "Schedule"} <= kinds and len(stems) >= 18 + 9


def test_every_declared_field_is_an_attribute_of_its_declared_type():
    """Declared once, read everywhere: run.k, record.cores... come from the declaration, not from hand-written properties."""
    stems = sorted({p.with_suffix("") for p in [*FIGURE_RECORDS.glob("*.json"), *SHIPPED_DIR.glob("*.json")]})
    types = {"int": int, "float": (int, float), "str": str, "bool": bool, "list": list}
    seen = set()
    for stem in stems:
        record = load(stem)
        seen.add(record.KIND.name)
        arrays = {a.name for a in record.KIND.arrays}
        for field in record.KIND.meta:
            if field.name in arrays or field.name in vars(type(record)):
                continue  # the array, or the class's own reading of the field, keeps the name
            value = getattr(record, field.name)
            assert value == record.meta[field.name], (stem.name, field.name)
            if field.type in types:
                assert isinstance(value, types[field.type]), (stem.name, field.name, value)
    assert len(seen) >= 12  # every kind with committed records


def test_oversubscribed_counts_every_process_of_the_run():
    from dpviz.topics.waiting.records_async_sgd import AsyncRecord
    from dpviz.topics.splitting.records_pipeline import PipelineRun
    from dpviz.topics.waiting.records_straggler import StragglerRecord
    from dpviz.engine.schema import RankRecord

    def make(cls, **meta):
        record = object.__new__(cls)  # no arrays needed: the property reads the metadata alone
        record.meta, record.arrays = meta, {}
        return record

    assert make(StragglerRecord, k=2, cores=2).oversubscribed is False
    assert make(StragglerRecord, k=3, cores=2).oversubscribed is True
    assert make(AsyncRecord, k=2, cores=2).oversubscribed is True  # two workers and the server
    assert make(PipelineRun, p=4, k=1, cores=2).oversubscribed is True  # one process per stage
    assert make(PipelineRun, p=2, k=1, cores=2).oversubscribed is False
    assert all(issubclass(cls, RankRecord) for cls in (AsyncRecord, PipelineRun, StragglerRecord))


def test_round_trip_keeps_every_array_and_field(run, tmp_path):
    stem = run.save(tmp_path / "copy")
    back = Run.load(stem)
    assert back.meta == run.meta
    for name, value in run.arrays.items():
        np.testing.assert_array_equal(back.arrays[name], value)
    header = json.loads((tmp_path / "copy.json").read_text())
    assert header["kind"] == "run" and header["schema_version"] == Run.KIND.version
    with np.load(tmp_path / "copy.npz", allow_pickle=False) as z:  # numpy alone reads it
        assert set(z.files) == set(run.arrays)


def test_large_arrays_are_read_from_their_file_at_each_use_and_survive_a_replaced_path(tmp_path):
    import copy
    import pickle

    from dpviz.engine import schema

    big = Run.load(FIGURE_RECORDS / "mlp_k2")
    stored = {name for name, a in big.arrays.items() if a.nbytes > schema.HELD_BYTES}
    assert {"local_grad", "reduced_grad", "big_grad"} <= stored  # the MLP gradients: every rank at every step
    assert stored == set(big.arrays._stored) and not stored & set(big.arrays._held)
    first = big.local_grad
    assert first is not big.local_grad and np.array_equal(first, big.local_grad)
    with pytest.raises(ValueError, match="read-only"):
        first[0, 0, 0] = 1.0  # a change that the next read would lose is refused
    assert big.check().startswith("every rank received")

    stem = big.save(tmp_path / "big")
    again = Run.load(stem)
    want = np.array(again.local_grad)
    small = Run.load(FIGURE_RECORDS / "line_k4")
    small.save(tmp_path / "big")  # the path now names another record, written by an atomic rename
    np.testing.assert_array_equal(again.local_grad, want)  # the open file is the one that was loaded and checked

    for clone in (pickle.loads(pickle.dumps(big)), copy.deepcopy(big)):
        assert type(clone.arrays) is dict and np.array_equal(clone.local_grad, first)
    big.arrays["local_grad"] = np.zeros_like(first)  # an assigned array is held
    assert not big.local_grad.any() and "local_grad" in big.arrays and len(big.arrays) == len(clone.arrays)


def test_loading_a_record_that_drops_large_arrays_gives_their_memory_back(monkeypatch):
    """A load that let large arrays go asks the C library to return their pages; one that kept everything does not."""
    from dpviz.engine import schema

    calls = []
    monkeypatch.setattr(schema, "release_freed_memory", lambda: calls.append(1))
    Run.load(FIGURE_RECORDS / "mlp_k2")  # its gradients are over HELD_BYTES
    assert calls == [1]
    Run.load(FIGURE_RECORDS / "line_k4")  # every array held
    assert calls == [1]
    monkeypatch.undo()
    schema.release_freed_memory()  # on this platform: a call that returns (glibc) or does nothing


def test_declared_arrays_are_attributes(run):
    assert run.local_grad.shape == (run.steps, run.k, 2)
    assert Run.local_grad.__doc__.startswith("(steps, k, P)")


def _rewrite(stem: Path, change) -> None:
    with np.load(stem.with_suffix(".npz"), allow_pickle=False) as z:
        arrays = {name: z[name] for name in z.files}
    header = json.loads(stem.with_suffix(".json").read_text())
    change(arrays, header)
    header["arrays"] = sorted(arrays)
    np.savez_compressed(stem.with_suffix(".npz"), **arrays)
    header.pop("npz_sha256", None)  # a hand-made pair: no digest binds it
    stem.with_suffix(".json").write_text(json.dumps(header))


@pytest.mark.parametrize("change, pattern", [
    (lambda a, h: a.pop("big_grad"), r"lacks the array 'big_grad'"),
    (lambda a, h: a.update(extra=np.zeros(3)), r"holds the array 'extra', which a 'run' record of schema_version 2 does not declare"),
    (lambda a, h: a.update(loss=a["loss"][:, :2]), r"array 'loss' has shape \(5, 2\); a 'run' record declares \(steps, k\), which here means \(5, 4\)"),
    (lambda a, h: a.update(t_comm=a["t_comm"].astype(np.float32)), r"array 't_comm' has dtype float32; a 'run' record declares float64"),
    (lambda a, h: h.update(schema_version=3), r"holds a 'run' record of schema_version 3; this dpviz reads schema_version 2"),
    (lambda a, h: h["meta"].pop("lr"), r"lacks the metadata field 'lr'"),
    (lambda a, h: h.update(kind="mystery"), r"holds a record of kind 'mystery'"),
])
def test_load_refuses_what_the_declaration_does_not_allow(run, tmp_path, change, pattern):
    stem = run.save(tmp_path / "r")
    _rewrite(stem, change)
    with pytest.raises(ValueError, match=pattern) as info:
        load(stem)
    assert "r.npz" in str(info.value) or "r.json" in str(info.value)
    assert one_sentence(str(info.value))


def test_missing_and_truncated_files_name_the_path(run, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"nothere\.json.* does not exist"):
        Run.load(tmp_path / "nothere")
    stem = run.save(tmp_path / "r")
    data = stem.with_suffix(".npz").read_bytes()
    stem.with_suffix(".npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"r\.npz.* is truncated"):
        Run.load(stem)
    stem = run.save(tmp_path / "j")
    stem.with_suffix(".json").write_text(stem.with_suffix(".json").read_text()[:20])
    with pytest.raises(ValueError, match=r"j\.json.* is truncated"):
        Run.load(stem)


def test_a_record_of_another_kind_is_refused_by_class():
    with pytest.raises(ValueError, match="holds a 'bench' record, not a 'run' record"):
        Run.load(FIGURE_RECORDS / "bench")


def test_a_record_that_breaks_its_declaration_cannot_be_made(run):
    arrays = dict(run.arrays)
    arrays.pop("x")
    with pytest.raises(ValueError, match="lacks the array 'x'"):
        Run(run.meta, arrays)


def test_optional_arrays_may_be_absent(run):
    arrays = {name: value for name, value in run.arrays.items() if name not in ("params", "example_grad")}
    lean = Run(run.meta, arrays)
    assert lean.params is None and lean.example_grad is None


def test_symbols_bind_across_arrays():
    kind = Kind("demo", 1, (Array("a", ("n", 2), "float64", "first"), Array("b", ("n+1",), "int64", "second")),
                (Meta("k", "int", "ranks"),))
    kind.validate({"k": 1}, {"a": np.zeros((3, 2)), "b": np.zeros(4, np.int64)}, "demo")
    with pytest.raises(ValueError, match=r"array 'b' has shape \(3,\).*which here means \(4,\)"):
        kind.validate({"k": 1}, {"a": np.zeros((3, 2)), "b": np.zeros(3, np.int64)}, "demo")


def test_provenance_works_for_every_kind(run):
    for record in (run, BenchRecord.load(FIGURE_RECORDS / "bench"), Schedule.load(FIGURE_RECORDS / "schedule_ring")):
        entry = provenance(record)
        assert entry["kind"] == record.KIND.name and entry["describe"] == record.describe()
        assert entry["host"] and entry["date"]
    assert provenance("one process") == {"source": "one process"}
    with pytest.raises(TypeError, match="record must be"):
        provenance(3)


def test_run_description_comes_from_the_record():
    mlp = Run.load(FIGURE_RECORDS / "mlp_k2")
    words = mlp.describe()
    m = mlp.meta
    assert f"k={m['k']}" in words and f"{m['n_params']:,} parameters" in words and f"{m['steps']} steps" in words
    assert f"MLP {m['depth']}×{m['width']}" in words


def test_record_reference_tables_are_the_declarations():
    text = RECORDS_DOC.read_text()
    for cls in kinds().values():
        assert cls.KIND.markdown() in text, f"docs/records.md's table for {cls.KIND.name!r} records is out of step: run python -m dpviz.docs"
    assert set(re.findall(r"### `(\w+)` records", text)) == set(kinds())


def test_arrays_are_deflated_only_where_deflating_pays(tmp_path):
    """A record's .npz stores float noise as it is and deflates what shrinks; numpy reads both back exactly, and the
    same arrays give the same bytes."""
    import io
    import zipfile

    from dpviz.engine.schema import write_npz

    arrays = {"noise": np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32),
              "steps": np.repeat(np.arange(64), 1024), "flags": np.zeros((3, 4), bool), "empty": np.zeros((0, 2)),
              "words": np.array(["fp16", "powersgd_r2"]), "late": np.asfortranarray(np.ones((50, 60)))}
    first, second = io.BytesIO(), io.BytesIO()
    write_npz(first, arrays)
    write_npz(second, arrays)
    assert first.getvalue() == second.getvalue()
    how = {info.filename: info.compress_type for info in zipfile.ZipFile(first).infolist()}
    assert how.pop("noise.npy") == zipfile.ZIP_STORED
    assert set(how.values()) == {zipfile.ZIP_DEFLATED}
    back = np.load(io.BytesIO(first.getvalue()), allow_pickle=False)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array), name
