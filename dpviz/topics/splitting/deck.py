"""Self-check cards for splitting the model: pipeline stages, tensor-parallel layers, and sharded optimizer state."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.splitting import (
    theory_memory as memory, theory_pipeline as pipeline, theory_tensor_parallel as tensor_parallel,
)

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def pipeline_bubbles(p, ms):
    """The idle share (p-1)/(m+p-1) of a p-stage pipeline for each m."""
    return {"bubble": [pipeline.bubble_fraction(p, m) for m in ms]}


def training_memory(n_params, memory_gb, k):
    """Bytes per device for parameters, gradients and Adam state (float32): plain data parallelism and ZeRO-1, 3."""
    plain = memory.bytes_per_rank(n_params, k, zero_stage=0)["total"]
    zero1 = memory.bytes_per_rank(n_params, k, zero_stage=1)["total"]
    limit = memory_gb * 1e9
    return {
        "per_param": memory.bytes_per_parameter(1, zero_stage=0),
        "plain_gb": plain / 1e9,
        "zero1_gb": zero1 / 1e9,
        "zero1_per_param": memory.bytes_per_parameter(k, zero_stage=1),
        "fewest_zero1": memory.smallest_k(n_params, limit, zero_stage=1),
        "fewest_zero3": memory.smallest_k(n_params, limit, zero_stage=3),
    }


def tensor_against_data(batch, width, layers, k):
    """Bytes each rank sends per step: every layer column-split (forward and backward) against one gradient all-reduce."""
    per_layer = tensor_parallel.exchange_bytes(batch, width, width, k, "column")
    tp = layers * (per_layer["forward"] + per_layer["backward"])
    dp = tensor_parallel.data_parallel_bytes(layers * width * width, k)
    return {"tp_gb": tp / 1e9, "dp_gb": dp / 1e9, "tp_calls": 2 * layers, "ratio": tp / dp}


CARDS = (
    Card(
        "True or false: tensor parallelism and pipeline parallelism split the model the same way.",
        "False. A tensor-parallel layer has its weight matrix cut into blocks, so every rank holds a piece of "
        "every split layer; a pipeline hands each rank a run of whole layers, and the ranks work one after "
        "the other on each micro-batch. This chapter runs both: a linear layer split by columns and by rows, "
        "and an MLP cut into stages.",
        "true/false", HERE, f"{TOPIC}-tf-tensor-pipeline",
    ),
    Card(
        "Spot the error: “With a pipeline, no GPU ever waits: while one stage computes, the others do too.”",
        "At the start of a step the later stages have nothing to work on until the first micro-batch "
        "reaches them; in the middle an early stage, its forwards done, waits for the first gradient to "
        "come back through the later ones; at the end the later stages are done while the last backward "
        "passes travel back to the first. With p equal stages, m micro-batches and free hand-offs each "
        "stage idles for the share (p−1)/(m+p−1) of the step. The Gantt charts of this chapter show the "
        "grey gaps on real stages, and print where each stage waited.",
        "spot the error", HERE, f"{TOPIC}-spot-bubbles",
    ),
    Card(
        "Why does a pipeline cut the batch into micro-batches?",
        "So that stages can work at once on different pieces: while stage 1 runs micro-batch 0, stage 0 "
        "already runs micro-batch 1. With one micro-batch only one stage works at any moment; with m of "
        "them the idle share falls to (p−1)/(m+p−1).",
        "why", HERE, f"{TOPIC}-why-micro-batches",
    ),
    Card(
        "All-forwards-then-all-backwards and one-forward-one-backward leave the same bubble. What does "
        "the second one buy?",
        "Memory. A stage must keep a micro-batch's activations from its forward pass until its backward "
        "pass. Running all m forwards first keeps m sets at once; alternating keeps at most p − s on stage "
        "s, whatever m is. The shipped runs record this as max_in_flight.",
        "self-check", HERE, f"{TOPIC}-one-f-one-b",
    ),
    Card(
        "A pipeline with a single stage, p = 1, or a single micro-batch, m = 1: what does the bubble "
        "formula give, and why?",
        "p = 1: (1−1)/(m+0) = 0; one stage never waits for a neighbour (and nothing is split). m = 1: "
        "(p−1)/p; the one micro-batch visits the stages one at a time, so each stage works 1/p of the "
        "step and waits the rest.",
        "edge case", HERE, f"{TOPIC}-edge-bubble-limits",
    ),
    Card(
        "Why do the ranks of a split model send each other data inside every forward and backward pass, "
        "when data-parallel ranks talk once per step?",
        "A split model's computation crosses ranks: a stage needs the previous stage's activations before "
        "it can start, and the gradient of its output from the next stage before it can run backward; a "
        "tensor-parallel layer needs the other ranks' blocks of its output. Data-parallel ranks hold whole "
        "models, so they only need to agree on the gradient, in one all-reduce per step.",
        "why", HERE, f"{TOPIC}-why-activations-move",
    ),
    Card(
        "A linear layer Y = X W is split over two ranks. With W cut by columns the ranks finish with an "
        "all-gather; with W cut by rows, with an all-reduce. Why the difference?",
        "By columns, each rank computes a different block of Y's columns, complete as it stands: putting "
        "the blocks side by side (gathering) gives Y. By rows, each rank multiplies its slice of X's columns "
        "by its rows of W and gets a full-size Y that is only one term of a sum: the terms must be added "
        "(reduced). The backward pass swaps them: column split sums the pieces of dX, row split gathers them.",
        "why", HERE, f"{TOPIC}-why-gather-or-reduce",
    ),
    Card(
        "True or false: with ZeRO stage 1 each rank holds only 1/k of the model's parameters.",
        "False. Stage 1 shards only the optimizer state (Adam's two running means): each rank updates its "
        "own 1/k of the parameters, then an all-gather hands everyone the whole updated vector, so every "
        "rank still holds all parameters and all gradients. Sharding the gradients too is stage 2, and the "
        "parameters as well stage 3.",
        "true/false", HERE, f"{TOPIC}-tf-zero-params",
    ),
    Card(
        "Why does training with sharded Adam state give the same parameters as plain data parallelism?",
        "Adam works coordinate by coordinate: the update of one parameter depends on its own gradient and "
        "its own two running means only. Splitting the coordinates among ranks changes who computes each "
        "update, not the update. The reduce-scatter may add the ranks' gradients in another order than the "
        "all-reduce, so the match is to rounding (floating-point addition is not associative).",
        "why", HERE, f"{TOPIC}-why-zero-same",
    ),
    Card(
        "How many bytes does each rank send in ZeRO-1's reduce-scatter of an M-byte gradient over a ring "
        "of k ranks, and which formula of the notes is that?",
        "(k−1)/k · M: k−1 steps, each passing one chunk of M/k bytes. That is the bandwidth term of the "
        "notes' all-reduce formula, which therefore prices a reduce-scatter, half an all-reduce. This "
        "chapter counts it on a real run.",
        "self-check", HERE, f"{TOPIC}-reduce-scatter-bytes",
    ),
    Card(
        "A pipeline has p = {p} equal stages and transfers are free. What share of the step does each stage "
        "sit idle with m = {ms[0]}, {ms[1]}, {ms[2]} and {ms[3]} micro-batches?",
        "(p−1)/(m+p−1): {bubble[0]:.0%}, {bubble[1]:.0%}, {bubble[2]:.0%} and {bubble[3]:.0%}. The bubble "
        "shrinks as micro-batches are added, but each micro-batch is then smaller and its transfers relatively "
        "dearer.",
        "numeric", HERE, f"{TOPIC}-num-bubble",
        compute=pipeline_bubbles, params={"p": 4, "ms": (1, 4, 16, 64)},
    ),
    Card(
        "A model of {n_params:,} parameters is trained with Adam in float32 on devices of {memory_gb:g} GB. "
        "How much does one device hold for parameters, gradients and Adam state under plain data "
        "parallelism, and with ZeRO-1 on k = {k} devices?",
        "Plain: {per_param:g} bytes per parameter, {plain_gb:.0f} GB on every device against {memory_gb:g} GB "
        "of memory; that number does not depend on k, so more devices never make it fit. ZeRO-1 on {k}: "
        "{zero1_per_param:g} bytes per parameter, {zero1_gb:.0f} GB (activations aside). The fewest devices on "
        "which ZeRO-1 fits: {fewest_zero1}; sharding everything (stage 3): {fewest_zero3}.",
        "numeric", HERE, f"{TOPIC}-num-too-big",
        compute=training_memory, params={"n_params": 7_000_000_000, "memory_gb": 80, "k": 8},
    ),
    Card(
        "{layers} layers of width {width}, a batch of {batch:,} rows, k = {k}. Per step, how many bytes does "
        "each rank send if every layer is split by columns (tensor parallelism), and if the ranks instead "
        "all-reduce the gradient (data parallelism)?",
        "Tensor parallelism: {tp_gb:.1f} GB in {tp_calls} exchanges, two per layer. Data parallelism: "
        "{dp_gb:.1f} GB in one all-reduce. The first grows with the batch (it moves activations), the second "
        "with the parameters; here the ratio is {ratio:.1f}. Tensor parallelism also makes every layer wait "
        "for its exchange, so it needs the fastest links.",
        "numeric", HERE, f"{TOPIC}-num-tensor-bytes",
        compute=tensor_against_data, params={"batch": 16384, "width": 4096, "layers": 32, "k": 2},
    ),
)
