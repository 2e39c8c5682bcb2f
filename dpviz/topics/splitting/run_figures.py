"""Record, on this machine, the runs behind the chapter's published figures (the torch side of ``./run`` for them).

    from dpviz.topics.splitting.run_figures import record_splitting_plan
    records = record_splitting_plan(quick=False, progress=True)   # {stem: record}: dpviz.topics.splitting.records_pipeline.FIGURE_PLAN

Four launches: the p = 2 pipeline (every m with all-forwards-then-all-backwards, and m = 4 with
one-forward-one-backward), the p = 4 pipeline (every m; 4 stages on fewer cores say so on the
figure), the k = 2 tensor-parallel layer, and k = 4 plain data parallelism beside ZeRO-1.
"""

from __future__ import annotations

import warnings

from tqdm.auto import tqdm

from dpviz.topics.splitting.records_pipeline import FIGURE_PLAN
from dpviz.topics.splitting.run_pipeline import PipelineConfig, record_pipelines
from dpviz.topics.splitting.run_tensor_parallel import record_tensor_split
from dpviz.topics.splitting.run_zero import record_zero


def _pipelines(settings: dict, p: int) -> dict:
    stems = [stem for stem, s in settings.items() if s.get("p") == p]
    return dict(zip(stems, record_pipelines([PipelineConfig(**settings[stem]) for stem in stems])))


def record_splitting_plan(*, quick: bool = False, progress: bool = True) -> dict:
    """Record every run the chapter's figures are drawn from (:data:`dpviz.topics.splitting.records_pipeline.FIGURE_PLAN`).

    Returns ``{stem: record}``. ``quick`` runs one timed pipeline step per setting instead of three
    (the record keeps the least disturbed of them).
    """
    settings = FIGURE_PLAN.settings_for(quick=quick)
    stages = [
        ("pipeline, p=2", lambda: _pipelines(settings, 2)),
        ("pipeline, p=4", lambda: _pipelines(settings, 4)),
        ("tensor-parallel layer, k=2", lambda: {"tensor_split_k2": record_tensor_split(**settings["tensor_split_k2"])}),
        ("ZeRO-1 beside plain data parallelism, k=4", lambda: {"zero_k4": record_zero(**settings["zero_k4"])}),
    ]
    records = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 4 ranks on fewer cores: the figures drawn from those runs say so
        for _, make in tqdm(stages, desc="recording the splitting chapter", unit="launch", disable=not progress):
            records.update(make())
    return records
