"""Self-check cards for gradient accumulation: m micro-batches in a row give the big-batch gradient, and cost time.

Here k counts ranks, so the micro-batches are m.
"""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.ground_floor import costmodel

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def accumulation_costs(k, m, t_micro, t_comm):
    """One update of k ranks with m micro-batches each: all-reduce calls and seconds, per micro-batch or once."""
    every = costmodel.accumulation_update_time(m, t_micro, t_comm, sync="every")
    once = costmodel.accumulation_update_time(m, t_micro, t_comm, sync="accumulate")
    calls_every = costmodel.accumulation_allreduces(m, sync="every")
    calls_once = costmodel.accumulation_allreduces(m, sync="accumulate")
    return {
        "t_every": every,
        "t_once": once,
        "calls_every": calls_every,
        "calls_once": calls_once,
        "calls_saved": calls_every - calls_once,
        "t_saved": every - once,
        "t_alone": costmodel.accumulation_update_time(k * m, t_micro, 0.0),  # one process, all k·m micro-batches
    }


CARDS = (
    Card(
        "True or false: one process that runs m micro-batches one after another, adds up their "
        "gradients and divides by m steps exactly as if it had run the whole batch in one pass.",
        "True, up to rounding. With micro-batches of equal size, the mean of their mean gradients is "
        f"the mean over all the examples: the average-of-averages argument of {course.ref('average_of_averages')}, "
        "spread over "
        "time instead of over devices. In floating point the additions happen in another order, and "
        f"addition is not associative, so the last bits may differ; {course.ref('accumulation')} checks the difference "
        "stays within float32 rounding on real runs.",
        "true/false", HERE, f"{TOPIC}-tf-same-gradient",
    ),
    Card(
        "True or false: the gradient one process accumulates over m micro-batches is the gradient that "
        "k = m ranks, one micro-batch each, get from the all-reduce.",
        "True, to rounding. Both add the same m micro-batch gradients and divide by m; one process adds "
        "them one after another, the all-reduce adds them across ranks. Only the order of the sums "
        "differs.",
        "true/false", HERE, f"{TOPIC}-tf-equals-all-reduce",
    ),
    Card(
        "Spot the error: “Accumulating m micro-batches gives the big-batch update, so a step ends as "
        "soon as it would on m devices.”",
        "The update matches; the clock need not. One process runs the m forward and backward passes "
        "in a row, so the model puts an update at about m times one micro-batch's compute, where m "
        "devices run those passes side by side and then pay one all-reduce. Whether a run shows that "
        "depends on the all-reduce costing less than the compute it saves, and on each device having "
        "a core of its own: this chapter prints what its runs measured. Accumulation buys memory with time.",
        "spot the error", HERE, f"{TOPIC}-spot-just-as-fast",
    ),
    Card(
        "Edge case: gradient accumulation with m = 1 micro-batch. What changes?",
        "Nothing. The one gradient is added to zero and divided by 1, which leaves its bits as they "
        "were: the update is the plain one-batch update, with the same memory and the same work.",
        "edge case", HERE, f"{TOPIC}-edge-m-one",
    ),
    Card(
        "k ranks each accumulate m micro-batches. Why is all-reducing once, after the last "
        "micro-batch, the same update as all-reducing after every one?",
        "Sums can be regrouped: adding each rank's m gradients first and then summing over ranks "
        "gives the total that summing over ranks m times and then adding does. One all-reduce of the "
        "accumulated gradient replaces m of them, each as large; this is what DDP's no_sync() "
        "does. Only rounding can tell the two apart.",
        "why", HERE, f"{TOPIC}-why-one-all-reduce",
    ),
    Card(
        "Shrinking micro-batches lowers the memory a training step needs. Which memory, and which "
        "not?",
        "Only what the forward pass keeps for the backward pass: the activations, which grow with "
        "the number of examples in a pass. The parameters, the summed gradient (as large as the "
        "parameters) and the optimizer's state stay as they were, whatever m is.",
        "self-check", HERE, f"{TOPIC}-what-memory",
    ),
    Card(
        "k = {k} ranks each run m = {m} micro-batches per update, each taking t_micro = {t_micro:g} s; "
        "one all-reduce of the gradient takes t_comm = {t_comm:g} s. How long is an update when each "
        "micro-batch is all-reduced, and when the micro-batches are accumulated first?",
        "After every micro-batch: {calls_every:g} all-reduces and m·(t_micro + t_comm) = "
        "{t_every:.3g} s. Accumulated first: {calls_once:g} all-reduce and m·t_micro + t_comm = "
        "{t_once:.3g} s, which saves {calls_saved:g} calls and {t_saved:.3g} s per update. One "
        "process running all k·m micro-batches alone would need {t_alone:.3g} s.",
        "numeric", HERE, f"{TOPIC}-num-all-reduces",
        compute=accumulation_costs, params={"k": 4, "m": 8, "t_micro": 0.05, "t_comm": 0.02},
    ),
)
