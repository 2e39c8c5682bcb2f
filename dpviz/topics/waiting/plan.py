"""What the waiting chapter records: its figure plan and the settings its shipped runs share (numpy only).

The chapter's figures draw three kinds (:mod:`~dpviz.topics.waiting.records_straggler`, :mod:`~dpviz.topics.waiting.records_overlap`,
:mod:`~dpviz.topics.waiting.records_async_sgd`); this module declares, once, the settings they are recorded with.
"""

from __future__ import annotations

from dpviz.engine.plan import FigurePlan

DELAYS = (0.0, 0.025, 0.05, 0.1)  # seconds a straggler sleeps, in turn
SLOW_DELAYS = (0.004, 0.004, 0.02)  # seconds per gradient: worker 3 is five times slower than the others
ASYNC = dict(k=3, delays=SLOW_DELAYS, lr=0.05, b=8, seed=0)
OVERLAP_STEPS = 12  # per mode, the first 2 left out of medians
SYNC_UPDATES = 30  # the async run makes k times as many updates: the same number of gradients in each
FIGURE_DELAY = 0.05  # seconds: the setting the straggler's timeline shows

FIGURE_PLAN = FigurePlan(
    name="waiting",
    settings={
        # 8 steps even when quick: with 4 (2 kept after the warm-up) the median wait at d = 0 swung by up to
        # 8 ms between runs on 2 cores, past the check's 5 ms; with 8 it stayed within 2.4 ms in 6 runs
        "waiting_straggler": dict(k=2, delays=DELAYS, slow_ranks=(0, 1), steps=8),   # dpviz.topics.waiting.run_straggler
        "waiting_overlap": dict(k=2, steps=OVERLAP_STEPS),                             # dpviz.topics.waiting.run_overlap
        "waiting_async": dict(mode="async", updates=ASYNC["k"] * SYNC_UPDATES, **ASYNC),  # dpviz.topics.waiting.run_async_sgd
        "waiting_sync": dict(mode="sync", updates=SYNC_UPDATES, **ASYNC),
    },
    quick={"waiting_straggler": dict(delays=(0.0, FIGURE_DELAY)), "waiting_overlap": dict(steps=4),
           "waiting_async": dict(updates=ASYNC["k"] * 8), "waiting_sync": dict(updates=8)},
)
