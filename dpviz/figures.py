"""Every published figure, one ``figure_<name>`` function each, drawn from records and theory.

The chapters and ``python -m dpviz figures`` call the same functions, so no layout is
written twice::

    from dpviz.records.figure_set import load_inputs
    from dpviz.figures import figure_step5_replicas
    inputs = load_inputs()                                   # the records behind figures/
    fig = figure_step5_replicas(inputs.main, inputs.alone)

:mod:`dpviz.regenerate` (what ``./run`` does) records fresh runs and calls :func:`draw_all`.
No torch here: figures are drawn from records and theory only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from matplotlib.figure import Figure

from dpviz.data import line_data
from dpviz.plots.bench import plot_allreduce_times
from dpviz.plots.speedup import plot_speedup
from dpviz.plots.step1 import plot_loss_along
from dpviz.plots.step2 import plot_example_grads
from dpviz.plots.step3 import plot_big_average, plot_group_averages
from dpviz.plots.step4 import plot_devices
from dpviz.plots.step5 import plot_all_reduce, plot_parameter_server, plot_replica_params, plot_ring_schedule
from dpviz.plots.style import stack_notes as _stack_notes
from dpviz.plots.summary import plot_summary
from dpviz.plots.timeline import plot_timelines
from dpviz.records import BenchRecord, Run, Schedule
from dpviz.records.figure_set import Inputs
from dpviz.theory import landscape, timing

def _figure(figsize, ncols=1, **kwargs):
    fig = Figure(figsize=figsize)
    axes = fig.subplots(1, ncols, **kwargs)
    return fig, axes


def figure_step1_loss(eta: float = 0.1) -> Figure:
    """Step 1: the loss along one knob of the line model on all 512 points, the red dot, the arrow and a few steps."""
    x, y = line_data()
    fig, ax = _figure((7.5, 4.8))
    plot_loss_along(landscape.step1_data(x, y, eta=eta), ax=ax)
    return fig


def figure_step2_gradients(run: Run, biased: Run) -> Figure:
    """Step 2: per-example gradients and their mean, a random grab beside a biased one, each beside the whole data set's gradient."""
    x, y = line_data()
    fig, (a, b) = _figure((12, 5.2), 2)
    plot_example_grads(run, ax=a, reference=landscape.full_grad(x, y, run.params[0, 0]))
    plot_example_grads(biased, ax=b, reference=landscape.full_grad(x, y, biased.params[0, 0]))
    _stack_notes((a, b))
    return fig


def figure_step3_average_of_averages(run: Run) -> Figure:
    """Step 3: all b·k arrows averaged at once beside the mean of the k group means."""
    fig, (a, b) = _figure((12, 5.2), 2)
    plot_big_average(run, ax=a)
    plot_group_averages(run, ax=b)
    _stack_notes((a, b))
    return fig


def figure_step4_devices(run: Run) -> Figure:
    """Step 4: k device boxes, one θ, different slices, different arrows."""
    fig, ax = _figure((11, 5))
    plot_devices(run, ax=ax)
    return fig


def figure_step5_all_reduce(run: Run) -> Figure:
    """Step 5: the k arrows funnelling into the all-reduce and the one mean coming back."""
    fig, ax = _figure((11, 6))
    plot_all_reduce(run, ax=ax)
    return fig


def figure_step5_replicas(run: Run, alone: Run) -> Figure:
    """Step 5: every replica's parameters with the all-reduce, beside the same run without it."""
    fig, (a, b) = _figure((12, 4.8), 2)
    plot_replica_params(run, ax=a)
    plot_replica_params(alone, ax=b)
    _stack_notes((a, b))
    return fig


def figure_step5_ring_vs_parameter_server(ring: Schedule, server: Schedule) -> Figure:
    """Step 5: the ring's transfers chunk by chunk, beside the parameter server's star."""
    fig, (a, b) = _figure((16, 6), 2, width_ratios=(1.5, 1))
    plot_ring_schedule(ring, ax=a)
    plot_parameter_server(server, ax=b)
    return fig


def figure_s01_sync_timelines(mlp: dict, bench: BenchRecord) -> Figure:
    """s01: compute and sync per step for each k, measured, beside the model fitted to this machine."""
    fig, ax = _figure((9, 4.6))
    plot_timelines(timing.machine_timelines(mlp, bench), ax=ax)
    return fig


def figure_s02_speedup(mlp: dict) -> Figure:
    """s02: speedup against k, modeled for three links, with this machine's measured points."""
    fig, ax = _figure((8, 5.5))
    t_compute = timing.measured_step_times(mlp)[1].t_compute
    curves = timing.speedup_curves(np.arange(1, 65), t_compute=t_compute, m=timing.grad_bytes(mlp[1]))
    plot_speedup(curves, measured=timing.measured_speedup(mlp), ax=ax)
    return fig


def figure_allreduce_time_vs_size(bench: BenchRecord) -> Figure:
    """Measured all-reduce time against M, with the notes' formula and the ring fitted."""
    fig, ax = _figure((8.5, 5.5))
    plot_allreduce_times(bench, ax=ax)
    return fig


def figure_summary(run: Run) -> Figure:
    """The whole story in one picture."""
    fig, ax = _figure((10, 10))
    plot_summary(run, timing.step_times(run), ax=ax)
    return fig


def draw_all(inputs: Inputs) -> dict:
    """Each published figure as (Figure, the records it came from)."""
    mlp = [*inputs.mlp.values()]
    return {
        "step1_loss": (figure_step1_loss(), ["line model in one process, all 512 points (numpy)"]),
        "step2_gradients": (figure_step2_gradients(inputs.main, inputs.biased), [inputs.main, inputs.biased]),
        "step3_average_of_averages": (figure_step3_average_of_averages(inputs.main), [inputs.main]),
        "step4_devices": (figure_step4_devices(inputs.main), [inputs.main]),
        "step5_all_reduce": (figure_step5_all_reduce(inputs.main), [inputs.main]),
        "step5_replicas": (figure_step5_replicas(inputs.main, inputs.alone), [inputs.main, inputs.alone]),
        "step5_ring_vs_parameter_server": (figure_step5_ring_vs_parameter_server(inputs.ring, inputs.server),
                                           [inputs.ring, inputs.server]),
        "s01_sync_timelines": (figure_s01_sync_timelines(inputs.mlp, inputs.bench), [*mlp, inputs.bench]),
        "s02_speedup": (figure_s02_speedup(inputs.mlp), mlp),
        "allreduce_time_vs_size": (figure_allreduce_time_vs_size(inputs.bench), [inputs.bench]),
        "summary": (figure_summary(inputs.main), [inputs.main]),
    }


@dataclass(frozen=True)
class FigureGroup:
    """The figures of one chapter past Step 6, and the records behind them.

    ``python -m dpviz figures`` calls ``record`` (a "module:function" of dpviz.runs, imported only
    when recording; it takes ``quick`` and ``progress`` and returns ``{stem: record}``), saves each
    record as ``figures/records/<stem>``, and draws with ``draw({stem: record})``, which returns
    ``{figure name: (Figure, [records it came from])}``. ``verify`` (optional) returns a line of the
    claims it asserted on the records, printed after drawing.
    """

    name: str
    stems: tuple
    record: str
    draw: Callable[[dict], dict]
    verify: Callable[[dict], str] | None = None


GROUPS: list[FigureGroup] = []  # one entry per chapter group past Step 6, appended below its figure functions
