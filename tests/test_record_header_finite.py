"""A record's header holds numbers as JSON, which writes NaN and Infinity as readily as 0.05: a float field of the
metadata is refused when it is not finite, unless its kind declares when it may be (issue 54, item 2)."""

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from dpviz.engine.schema import load
from dpviz.topics.ground_floor.records import Run
from dpviz.topics.when_a_replica_fails.records import YoungDalyRecord

ROOT = Path(__file__).resolve().parents[1]
LINE_K4 = ROOT / "figures" / "records" / "line_k4"
YOUNG_DALY = ROOT / "dpviz" / "records" / "shipped_runs" / "replica_young_daly"


def copy_with_lr(tmp_path: Path, lr) -> Path:
    """A copy of a shipped run whose header's lr was edited to ``lr`` by hand (its arrays untouched)."""
    base = tmp_path / "line_k4"
    shutil.copy(LINE_K4.with_name("line_k4.npz"), base.with_name("line_k4.npz"))
    header = json.loads(LINE_K4.with_name("line_k4.json").read_text())
    header["meta"]["lr"] = lr
    base.with_name("line_k4.json").write_text(json.dumps(header))  # json writes NaN and Infinity
    return base


def test_the_untouched_copy_loads_and_passes_its_check(tmp_path):
    run = load(copy_with_lr(tmp_path, Run.load(LINE_K4).meta["lr"]))
    assert math.isfinite(run.lr)
    run.check()


@pytest.mark.parametrize("lr, written", [(math.nan, "NaN"), (math.inf, "Infinity"), (-math.inf, "-Infinity")])
def test_a_header_with_a_nonfinite_lr_is_refused_naming_the_field(tmp_path, lr, written):
    base = copy_with_lr(tmp_path, lr)
    assert f'"lr": {written}' in base.with_name("line_k4.json").read_text()
    with pytest.raises(ValueError, match=rf"line_k4\.npz': metadata field 'lr' is {written}; in a 'run' record it "
                                         r"must be a finite number \(learning rate η\)\.$"):
        load(base)


def test_a_record_being_made_with_a_nan_lr_is_refused_before_it_is_saved(tmp_path):
    run = Run.load(LINE_K4)
    with pytest.raises(ValueError, match=r"metadata field 'lr' is \S*nan\S*; in a 'run' record it must be a finite "
                                         "number"):  # numpy 2 writes np.float32(nan), numpy 1 nan
        Run({**run.meta, "lr": np.float32("nan")}, dict(run.arrays))
    assert not list(tmp_path.iterdir())


def test_a_field_declared_nonfinite_keeps_its_nan_and_its_neighbours_do_not():
    shipped = YoungDalyRecord.load(YOUNG_DALY)
    # no save in any run (every C the whole run) leaves the median save undefined: declared, so kept
    nothing_saved = YoungDalyRecord({**shipped.meta, "save_seconds": math.nan}, dict(shipped.arrays))
    assert math.isnan(nothing_saved.save_seconds)
    with pytest.raises(ValueError, match=r"metadata field 'step_seconds' is NaN; in a 'replica_young_daly' record it "
                                         "must be a finite number"):
        YoungDalyRecord({**shipped.meta, "step_seconds": math.nan}, dict(shipped.arrays))
