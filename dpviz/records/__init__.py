"""Records: what a run leaves behind, in numpy arrays and JSON metadata (the boundary between runs and pictures).

One module per record kind, each declaring its arrays and metadata once
(:class:`~dpviz.records.schema.Kind`); the writer, :func:`load`, the validity check and
the README's record tables all come from that declaration. numpy only: importing this
package never imports torch.

* :mod:`dpviz.records.run`       ``Run``: a data-parallel training run, and the notes' claims checked on it
* :mod:`dpviz.records.bench`     ``BenchRecord``: all-reduce seconds over k, M and implementation
* :mod:`dpviz.records.schedule`  ``Schedule``: a hand-written all-reduce's transfers
* :mod:`dpviz.records.batchnorm` ``BatchNormRun``: a batch-norm layer under data parallelism, per-shard against all-reduced statistics
* :mod:`dpviz.records.accumulation`  ``AccumulationRun``: m micro-batches per update, one all-reduce or m
* :mod:`dpviz.records.pipeline`  ``PipelineRun``: one step of an MLP cut into p stages on m micro-batches (chapter 12)
* :mod:`dpviz.records.tensor_parallel` ``TensorSplit``: a linear layer split by columns and by rows over k ranks (chapter 12)
* :mod:`dpviz.records.zero`      ``ZeroRun``: plain data parallelism beside sharded Adam state, ZeRO-1 (chapter 12)
* :mod:`dpviz.records.sharding`  ``ShardingRun``: one MLP at ZeRO stages 0 to 3 (FSDP), memory and bytes per rank (shard everything)
* :mod:`dpviz.records.lr_grid`   ``LrGrid``: training runs over k, learning-rate rule and warm-up (chapter 09)
* :mod:`dpviz.records.straggler` ``StragglerRecord``: one rank sleeps a delay d, the others wait in the all-reduce (chapter 11)
* :mod:`dpviz.records.overlap`   ``OverlapRecord``: all-reduces started from backward hooks, per parameter, in buckets, DDP (chapter 11)
* :mod:`dpviz.records.async_sgd` ``AsyncRecord``: a parameter server applying gradients on arrival, with staleness τ (chapter 11)
* :mod:`dpviz.records.compression` ``CompressionRecord``: DDP comm hooks that compress (fp16, PowerSGD), bytes and gradient error per step (a cheaper sync)
* :mod:`dpviz.records.local_sgd` ``LocalSgdRecord``: local SGD at several H beside plain data parallelism and torch's averager (a cheaper sync)
* :mod:`dpviz.records.hierarchical` ``HierarchicalRecord``: a two-level all-reduce over subgroups, bytes per link (a cheaper sync)
* :mod:`dpviz.records.published` ``PublishedAllReduce``: all-reduce times measured by others on real GPU systems, with sources (chapter 07)
* :mod:`dpviz.records.shipped`   the real runs shipped with the package for the sliders
* :mod:`dpviz.records.paths`     ``SHIPPED_DIR`` (the shipped runs) and ``FIGURE_RECORDS`` (the figures' records, package data)
* :mod:`dpviz.records.tolerance` ``GRAD_TOLERANCE``: how closely two float32 gradients must agree
"""

from dpviz.records.bench import BenchRecord
from dpviz.records.run import Run, rel_err
from dpviz.records.schedule import Schedule
from dpviz.records.batchnorm import BatchNormRun
from dpviz.records.accumulation import AccumulationRun
from dpviz.records.pipeline import PipelineRun
from dpviz.records.tensor_parallel import TensorSplit
from dpviz.records.zero import ZeroRun
from dpviz.records.sharding import ShardingRun
from dpviz.records.lr_grid import LrGrid
from dpviz.records.straggler import StragglerRecord
from dpviz.records.overlap import OverlapRecord
from dpviz.records.async_sgd import AsyncRecord
from dpviz.records.published import PublishedAllReduce
from dpviz.records.compression import CompressionRecord
from dpviz.records.local_sgd import LocalSgdRecord
from dpviz.records.hierarchical import HierarchicalRecord
from dpviz.records.schema import KINDS, load, provenance

__all__ = ["CompressionRecord", "LocalSgdRecord", "HierarchicalRecord", "PublishedAllReduce", "AsyncRecord", "OverlapRecord", "StragglerRecord", "PipelineRun", "TensorSplit", "ZeroRun", "ShardingRun", "AccumulationRun", "BatchNormRun", "BenchRecord", "KINDS", "LrGrid", "Run", "Schedule", "load", "provenance", "rel_err"]
