"""Every published figure, one ``figure_<name>`` function each, drawn from records and theory; no torch.

The chapters and ``python -m dpviz figures`` call the same functions, so no layout is written twice::

    from dpviz.records.figure_set import load_inputs
    from dpviz.figures import figure_step5_replicas
    inputs = load_inputs()                                   # the records behind figures/
    fig = figure_step5_replicas(inputs.main, inputs.alone)

One module per chapter, each ending with its :class:`FigureGroup` (the plan of records it draws from,
its ``draw`` and its claims); :data:`GROUPS` lists them in the course's order. :mod:`dpviz.regenerate`
(what ``./run`` does) records each group's plan, draws and checks it.

* :mod:`dpviz.figures.steps`         Steps 1 to 5 and the one-picture summary
* :mod:`dpviz.figures.sync_costs`    s01, s02 and the all-reduce against M
* :mod:`dpviz.figures.bigger_batch`  the learning-rate rules and warm-up
* :mod:`dpviz.figures.accumulation`  gradient accumulation
* :mod:`dpviz.figures.waiting`       stragglers, overlap, asynchronous SGD
* :mod:`dpviz.figures.splitting`     pipeline, tensor parallelism, ZeRO-1
* :mod:`dpviz.figures.sharding`      ZeRO-1 to 3 (FSDP): memory per rank, bytes per step
* :mod:`dpviz.figures.cheaper_sync`  compression, local SGD, two levels, each priced
"""

from dpviz.figures import accumulation, bigger_batch, cheaper_sync, sharding, splitting, steps, sync_costs, waiting
from dpviz.figures.accumulation import figure_accumulation_memory, figure_accumulation_sync, figure_accumulation_timelines
from dpviz.figures.bigger_batch import figure_lr_linear_rule, figure_lr_loss_curves, figure_lr_warmup
from dpviz.figures.cheaper_sync import (
    figure_cheaper_sync_bytes, figure_cheaper_sync_local_sgd, figure_cheaper_sync_loss, figure_cheaper_sync_measured,
    figure_cheaper_sync_two_levels,
)
from dpviz.figures.group import FigureGroup
from dpviz.figures.sharding import figure_sharding_bytes, figure_sharding_memory, figure_sharding_timeline
from dpviz.figures.splitting import figure_pipeline_gantt, figure_tensor_parallel, figure_zero_memory
from dpviz.figures.steps import (
    figure_step1_loss, figure_step2_gradients, figure_step3_average_of_averages, figure_step4_devices,
    figure_step5_all_reduce, figure_step5_replicas, figure_step5_ring_vs_parameter_server, figure_summary,
)
from dpviz.figures.sync_costs import figure_allreduce_time_vs_size, figure_s01_sync_timelines, figure_s02_speedup
from dpviz.figures.waiting import (
    figure_waiting_overlap, figure_waiting_stale_arrows, figure_waiting_straggler, figure_waiting_sync_vs_async,
)

GROUPS: tuple[FigureGroup, ...] = (steps.GROUP, sync_costs.GROUP, bigger_batch.GROUP, accumulation.GROUP,
                                   waiting.GROUP, splitting.GROUP, sharding.GROUP, cheaper_sync.GROUP)

__all__ = ["GROUPS", "FigureGroup", *sorted(name for name in dir() if name.startswith("figure_"))]
