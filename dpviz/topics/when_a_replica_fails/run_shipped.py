"""Record again the runs this chapter ships in ``dpviz/records/shipped_runs/`` (its figures and its slider).

    python -m dpviz.topics.when_a_replica_fails.run_shipped                 # rewrites the four records (a minute)
    python -m dpviz.topics.when_a_replica_fails.run_shipped --out my_runs   # or somewhere else

Four records (:mod:`dpviz.topics.when_a_replica_fails.records`): two ranks killed and restarted beside the
unfailed run, the Young/Daly check at C = 1, 2, 4, 8, DiLoCo beside local SGD and plain data parallelism, and
three ranks of which one dies, two carry on and a newcomer joins.
"""

from __future__ import annotations

from pathlib import Path

from dpviz import course
from dpviz.engine.fronts import record_shipped
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.engine.schema import load
from dpviz.engine.where import where_it_ran
from dpviz.engine.launch import sharing_cores_said_elsewhere
from dpviz.topics.when_a_replica_fails.records import (CARRY_ON_STEM, DILOCO_STEM, RESTART_STEM, YOUNG_DALY_STEM,
                                                       CarryOnRecord, DilocoRecord, RestartRecord, YoungDalyRecord)
from dpviz.topics.when_a_replica_fails.run_diloco import record_diloco
from dpviz.topics.when_a_replica_fails.run_failure import (record_carry_on, record_restarts, record_unfailed,
                                                           record_young_daly)

RESTART = {"k": 2, "steps": 24, "checkpoint_every": 4}
KILLS = ((1, 10), (0, 17))          # rank 1 dies at step 10 (back to 8), then rank 0 at step 17 (back to 16)
YOUNG_DALY = {"k": 2, "steps": 32, "every": (1, 2, 4, 8), "mtbf_steps": 10.0, "failure_seed": 0}
DILOCO = {"k": 2, "steps": 48, "H": 8}
CARRY_ON = {"k": 3, "steps": 24}
SHRINK = {"kill": (1, 8), "regrow_at": 16, "lr_rule": "linear"}  # rank 1 of 3 dies at step 8; one joins at 16


def regenerate(out_dir=SHIPPED_DIR, *, progress: bool = True) -> list[Path]:
    """Record the chapter's four runs afresh under ``out_dir``; returns the stems written."""
    out_dir = Path(out_dir)
    written = []
    clean = record_unfailed(**RESTART)
    run = record_restarts(kills=KILLS, **RESTART)
    record = RestartRecord.of(run, clean, where_it_ran(RestartRecord, backend="gloo", threads_per_rank=1))
    if progress:
        print(record.check())
    written.append(record.save(out_dir / RESTART_STEM))
    check = record_young_daly(**YOUNG_DALY)
    written.append(YoungDalyRecord.of(check, where_it_ran(YoungDalyRecord, backend="gloo", threads_per_rank=1),
                                      failure_seed=YOUNG_DALY["failure_seed"]).save(out_dir / YOUNG_DALY_STEM))
    diloco = record_diloco(**DILOCO)
    written.append(DilocoRecord.of(diloco, where_it_ran(DilocoRecord, backend="gloo", threads_per_rank=1))
                   .save(out_dir / DILOCO_STEM))
    with sharing_cores_said_elsewhere():  # three ranks on two cores: slower, and the record says how many cores
        clean = record_unfailed(**CARRY_ON)
        shrunk = record_carry_on(**SHRINK, **CARRY_ON)
    record = CarryOnRecord.of(shrunk, clean, where_it_ran(CarryOnRecord, backend="gloo", threads_per_rank=1),
                              regrow_at=SHRINK["regrow_at"], lr_rule=SHRINK["lr_rule"])
    written.append(record.save(out_dir / CARRY_ON_STEM))
    return written


def shipped(folder=SHIPPED_DIR) -> tuple:
    """(restart, Young/Daly, DiLoCo) records, as shipped (or from ``folder``)."""
    folder = Path(folder)
    return tuple(load(folder / stem) for stem in (RESTART_STEM, YOUNG_DALY_STEM, DILOCO_STEM))


def shipped_carry_on(folder=SHIPPED_DIR):
    """The carry-on record, as shipped (or from ``folder``)."""
    return load(Path(folder) / CARRY_ON_STEM)


def main(argv=None) -> None:
    record_shipped("python -m dpviz.topics.when_a_replica_fails.run_shipped",
                   f"Record the runs {course.ref('when_a_replica_fails')}'s figures and slider draw.", regenerate, argv)


if __name__ == "__main__":
    main()
