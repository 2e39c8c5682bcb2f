"""The chapter's runs: the records behind its figures, and the longer runs shipped for its sliders.

    python -m dpviz.topics.waiting.run_figures                 # rewrites dpviz/records/shipped_runs/waiting_* (about a minute)
    python -m dpviz.topics.waiting.run_figures --out my_runs   # or somewhere else

What is recorded:

* straggler sweeps for k = 2, 3 and 4 ranks: every delay d in 0, 25, 50, 100 ms with every rank in
  turn as the slow one (the chapter's sliders browse them);
* an overlap run, k = 2: every way of syncing, 12 steps each;
* asynchronous and synchronous SGD through a parameter server, k = 3 workers of which one is five
  times slower, the same number of gradients in each.

``record_waiting_plan`` makes the (shorter) records behind figures/waiting_*.png; ``./run`` calls it.
``record_live`` runs the chapter's three short live runs in one launch.
"""

from __future__ import annotations

from pathlib import Path

from dpviz import course
from dpviz.engine.fronts import record_shipped
from dpviz.topics.waiting.records_async_sgd import SHIPPED as ASYNC_SHIPPED
from dpviz.topics.waiting.records_overlap import SHIPPED as OVERLAP_SHIPPED
from dpviz.engine.paths import SHIPPED_DIR
from dpviz.topics.waiting.records_straggler import SHIPPED_KS, shipped_name
from dpviz.topics.waiting.plan import ASYNC, DELAYS, FIGURE_PLAN, OVERLAP_STEPS, SYNC_UPDATES
from dpviz.topics.waiting import run_async_sgd as async_sgd, run_overlap as overlap, run_straggler as straggler
from dpviz.engine import launch as launcher
from dpviz.topics.waiting.run_async_sgd import record_async
from dpviz.topics.waiting.run_overlap import record_overlap
from dpviz.topics.waiting.run_straggler import record_straggler

LIVE_STRAGGLER = dict(k=2, delays=(0.0, 0.05), slow_ranks=(1,), steps=10)
LIVE_OVERLAP = dict(k=2, steps=3, warmup=1, modes=("serial", "per_parameter", "one_buffer", "buckets"))
LIVE_ASYNC = dict(k=1, updates=30)


def live_worker(rank: int, world_size: int, configs: tuple) -> dict:
    """One of the 2 processes of :func:`record_live`: the straggler, the overlap and the async run, one after another."""
    straggler_config, overlap_config, async_config = configs
    return {
        "straggler": straggler.straggler_worker(rank, world_size, straggler_config),
        "overlap": overlap.overlap_worker(rank, world_size, overlap_config),
        "async": async_sgd.async_worker(rank, world_size, async_config),
    }


def record_live(*, straggler_config=None, overlap_config=None, async_config=None, progress: bool = False) -> tuple:
    """The chapter's three short runs in one process group of 2: ``(StragglerRecord, OverlapRecord, AsyncRecord)``.

    The same runs as ``record_straggler``, ``record_overlap`` and ``record_async`` with these settings
    (by default: k = 2, d = 0 and 50 ms on rank 1; k = 2, the four hand-written modes, 3 steps; one
    worker and the server, 30 updates), but the processes start once instead of three times: starting
    a process and importing torch is most of what a short run costs.
    """
    configs = (straggler.make_config(straggler_config, **({} if straggler_config else LIVE_STRAGGLER)),
               overlap.make_config(overlap_config, **({} if overlap_config else LIVE_OVERLAP)),
               async_sgd.make_config(async_config, **({} if async_config else LIVE_ASYNC)))
    sizes = {"straggler_config.k": configs[0].k, "overlap_config.k": configs[1].k, "async_config.k + 1": configs[2].k + 1}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"straggler_config.k, overlap_config.k and async_config.k + 1 must be equal (one process group); "
                         f"got {sizes}.")
    results = launcher.launch(live_worker, configs[0].k, args=(configs,), backend="gloo", threads=1, progress=progress)
    return (straggler.assemble(configs[0], [r["straggler"] for r in results]),
            overlap.assemble(configs[1], [r["overlap"] for r in results]),
            async_sgd.assemble(configs[2], [r["async"] for r in results]))


def record_waiting_plan(*, quick: bool = False, progress: bool = False) -> dict:
    """The records behind the chapter's figures, {stem: record} (:data:`dpviz.topics.waiting.plan.FIGURE_PLAN`).

    A few seconds each; ``quick`` shortens them.
    """
    settings = FIGURE_PLAN.settings_for(quick=quick)
    # 4 processes (a server and 3 workers) on fewer cores only slow the run down; the figures say so
    with launcher.sharing_cores_said_elsewhere():
        return {
            "waiting_straggler": record_straggler(progress=progress, **settings["waiting_straggler"]),
            "waiting_overlap": record_overlap(progress=progress, **settings["waiting_overlap"]),
            "waiting_async": record_async(progress=progress, **settings["waiting_async"]),
            "waiting_sync": record_async(progress=progress, **settings["waiting_sync"]),
        }


def regenerate(out_dir=SHIPPED_DIR, *, progress: bool = True) -> list[Path]:
    """Record the shipped straggler sweeps and the async/sync pair afresh under ``out_dir``; returns the stems written."""
    out_dir = Path(out_dir)
    written = []
    # k = 3, 4 ranks on fewer cores take turns on the CPU; the records say how many cores there were
    with launcher.sharing_cores_said_elsewhere():
        for k in SHIPPED_KS:
            sweep = record_straggler(k=k, delays=DELAYS, slow_ranks=tuple(range(k)), steps=6, progress=progress)
            print(sweep.check())
            written.append(sweep.save(out_dir / shipped_name(k)))
        overlap_run = record_overlap(k=2, steps=OVERLAP_STEPS, progress=progress)
        print(overlap_run.check())
        written.append(overlap_run.save(out_dir / OVERLAP_SHIPPED))
        for mode, name in ASYNC_SHIPPED.items():
            updates = SYNC_UPDATES * (ASYNC["k"] if mode == "async" else 1)
            run = record_async(mode=mode, updates=updates, progress=progress, **ASYNC)
            print(run.check())
            written.append(run.save(out_dir / name))
    return written


def main(argv=None) -> None:
    record_shipped("python -m dpviz.topics.waiting.run_figures",
                   f"Record the runs {course.ref('waiting')}'s sliders browse (straggler sweeps, async/sync pair).",
                   regenerate, argv)


if __name__ == "__main__":
    main()
