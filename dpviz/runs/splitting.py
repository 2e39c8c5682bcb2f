"""Record, on this machine, the runs behind chapter 12's published figures (the torch side of ``./run`` for them).

    from dpviz.runs.splitting import record_figure_records
    records = record_figure_records(quick=False, progress=True)   # {stem: record}, the stems of dpviz.figures.SPLITTING_STEMS

Four launches: the p = 2 pipeline (every m with all-forwards-then-all-backwards, and m = 4 with
one-forward-one-backward), the p = 4 pipeline (every m; 4 stages on fewer cores say so on the
figure), the k = 2 tensor-parallel layer, and k = 4 plain data parallelism beside ZeRO-1.
"""

from __future__ import annotations

import warnings

from tqdm.auto import tqdm

from dpviz.figures import SPLITTING_PIPELINES, SPLITTING_STEMS
from dpviz.runs.pipeline import PipelineConfig, record_pipelines
from dpviz.runs.tensor_parallel import record_tensor_split
from dpviz.runs.zero import record_zero


def _pipelines(p: int, repeats: int) -> dict:
    keys = [key for key in SPLITTING_PIPELINES if key[0] == p]
    configs = [PipelineConfig(p=p, m=m, schedule=s, keep_grads=False, repeats=repeats) for _, m, s in keys]
    return {f"pipeline_p{p}_m{m}_{s}": run for (_, m, s), run in zip(keys, record_pipelines(configs))}


def record_figure_records(*, quick: bool = False, progress: bool = True) -> dict:
    """Record every run chapter 12's figures are drawn from; returns ``{stem: record}``.

    ``quick`` runs one timed pipeline step per setting instead of three (the record keeps the
    least disturbed of them).
    """
    repeats = 1 if quick else 3
    stages = [
        ("pipeline, p=2", lambda: _pipelines(2, repeats)),
        ("pipeline, p=4", lambda: _pipelines(4, repeats)),
        ("tensor-parallel layer, k=2", lambda: {"tensor_split_k2": record_tensor_split(k=2)}),
        ("ZeRO-1 beside plain data parallelism, k=4", lambda: {"zero_k4": record_zero(k=4)}),
    ]
    records = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 4 ranks on fewer cores: the figures drawn from those runs say so
        for _, make in tqdm(stages, desc="recording chapter 12", unit="launch", disable=not progress):
            records.update(make())
    assert set(records) == set(SPLITTING_STEMS)
    return records
