"""Every "your turn" exercise, chapter by chapter: what the reader writes, the stub a chapter shows, and its checker.

The chapters' "Your turn" cells are written from this table (the markdown, the stub and the
``print(check_<name>(<name>))`` cell) by ``python -m dpviz.exercises.write_cells``, and
``tests/test_chapter_exercises.py`` holds every chapter to it, so the words a student reads and the
checker that answers them cannot drift apart. Plain Python: importing it starts nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpviz import course


@dataclass(frozen=True)
class Exercise:
    topic: str        # the chapter whose "Your turn" section holds it, by its topic (see dpviz.course)
    name: str         # the function the reader writes
    params: str       # its parameters, as the def line shows them
    title: str        # the heading of its markdown cell
    text: str         # markdown: what to write, and a hint
    doc: str          # the stub's one-line docstring
    points: int = 1   # what its check cell is worth when graded (nbgrader, see dpviz.grading); 2 on ranks

    @property
    def chapter(self) -> str:
        """The number of the chapter that holds it, from its place in :data:`dpviz.course.COURSE`."""
        return course.chapter(self.topic).number

    @property
    def checker(self) -> str:
        return f"check_{self.name}"

    def markdown(self) -> str:
        """The markdown cell above the stub: the title as a level-3 heading, then the text."""
        return f"### {self.title}\n\n{self.text}"

    def stub(self) -> str:
        """The code cell the chapter shows: the def line, the docstring, and a NotImplementedError to replace."""
        return f'def {self.name}({self.params}):\n    """{self.doc}"""\n    raise NotImplementedError  # your code here'

    def check_cell(self) -> str:
        return f"from dpviz.exercises import {self.checker}\n\nprint({self.checker}({self.name}))"


RANKS_NOTE = ("It runs inside each of 3 real ranks, where `torch` and `dist` (`torch.distributed`) are already "
              "imported; the checker sends the ranks your function's source, so anything else it needs must be "
              "imported inside it.")
# the first line nbgrader gives a graded cell it puts back (one line: nbgrader makes it a comment); here, where both
# dpviz.grading (which writes the config) and dpviz.exercises.regrade (which repeats it in the feedback) find it
RESTORED = "This check cell ({cell_id}) was deleted from the notebook handed in; nbgrader put it back to grade it."

EXERCISES = (
    Exercise(
        "one_step", "sgd_step", "theta, grad, eta", "One step downhill",
        "Write `sgd_step(theta, grad, eta)`: given the knobs $\\theta$ (an array of two numbers, $w$ and $c$), "
        "the gradient $\\nabla_\\theta L$ at $\\theta$ and the step size $\\eta$, return the knobs after one "
        "step of gradient descent.\n\n"
        "*Hint:* one line. Which way does the gradient point, and which way do we want to go?\n\n"
        "The checker replays the line model's descent path from this chapter, with $\\eta = 0.1$ and with the "
        "too-large $\\eta = 0.9$, and compares your step with each next $\\theta$ on it.",
        "Return theta after one gradient-descent step of size eta.",
    ),
    Exercise(
        "mini_batch", "mean_gradient", "example_grads", "The batch's arrow",
        "Write `mean_gradient(example_grads)`: `example_grads` has one row per example of a mini-batch "
        "(shape `(b, P)`, a grey arrow per row); return the batch's gradient, the red arrow, as `P` numbers.\n\n"
        "*Hint:* mean or sum, and along which axis?\n\n"
        "The checker feeds it the per-example gradients of a recorded run and compares the result with the "
        "gradient torch's `backward()` computed for the whole batch at once.",
        "Return the mini-batch's gradient from its per-example gradients (one row each).",
    ),
    Exercise(
        "average_of_averages", "weighted_mean", "group_grads, group_sizes", "Groups of different sizes",
        "Write `weighted_mean(group_grads, group_sizes)`: row $i$ of `group_grads` is the mean gradient "
        "$\\mathbf{g}_i$ of a group of $b_i$ examples (`group_sizes[i]`); return the gradient of all the "
        "examples together.\n\n"
        "*Hint:* a group of 9 examples should count more than a group of 2. What is the total number of examples?\n\n"
        "The checker cuts recorded batches into groups of unequal size and compares your answer with the "
        "gradient of the whole batch.",
        "Return the mean gradient of all examples, from each group's mean gradient and size.",
    ),
    Exercise(
        "one_group_per_device", "average_gradients", "model_grads, world_size",
        "Average the gradients across the ranks",
        "Write `average_gradients(model_grads, world_size)`, the function every rank calls after its backward "
        "pass: `model_grads` is the list of this rank's gradient tensors (one per parameter tensor of the "
        "model). Change each, in place, into the mean of that tensor over all `world_size` ranks.\n\n"
        "*Hint:* `dist.all_reduce(tensor)` sums a tensor over the ranks, in place. Is a sum what we want?\n\n"
        + RANKS_NOTE + " The checker compares each rank's result with `dist.all_reduce` divided by $k$, and "
        "with the gradient of the whole global batch.",
        "Turn each of this rank's gradient tensors into its mean over the ranks, in place.",
        points=2,
    ),
    Exercise(
        "all_reduce", "reduce_scatter_step", "chunks, rank, world_size, step", "One step of the ring's reduce-scatter",
        "Write `reduce_scatter_step(chunks, rank, world_size, step)`: `chunks` is this rank's tensor cut into "
        "`world_size` equal pieces. Do step `step` of the reduce-scatter: send one chunk to the right "
        "neighbour, receive one from the left neighbour, and add what arrives into your own copy of that "
        "chunk. The checker calls it for `step = 0, 1, …, world_size − 2`.\n\n"
        "*Hint:* `left = (rank - 1) % world_size` and `right = (rank + 1) % world_size`. At step $s$ rank $r$ "
        "passes on the chunk it added into at the step before; at step 0 that is its own chunk $r$. Post the "
        "send with `dist.isend` before the blocking `dist.recv`, and receive into a fresh buffer.\n\n"
        + RANKS_NOTE + " After every step the checker compares each rank's chunks with the library's ring, "
        "and at the end with `dist.all_reduce`.",
        "Do step `step` of the ring's reduce-scatter on this rank's chunks.",
        points=2,
    ),
    Exercise(
        "speedup_model", "t_comm_ring", "k, M, alpha, beta", "The ring's cost",
        "Write `t_comm_ring(k, M, alpha, beta)`: the seconds a ring all-reduce of `M` bytes over `k` ranks takes, "
        "with latency `alpha` seconds per step and bandwidth `beta` bytes per second.\n\n"
        "*Hint:* count the steps of both phases, and the bytes one rank sends in each step.\n\n"
        "The checker compares it with the cost model behind this chapter's figures.",
        "Return the seconds of a ring all-reduce of M bytes over k ranks.",
    ),
    Exercise(
        "speedup_model", "speedup", "t_compute, k, t_comm", "The speedup",
        "Write `speedup(t_compute, k, t_comm)`: how many times faster a step is on `k` ranks than on one, when "
        "one rank alone computes for `t_compute` seconds and the sync costs `t_comm` seconds.\n\n"
        "*Hint:* which part of the step shrinks with $k$, and which does not?",
        "Return the speedup S of k ranks over one.",
    ),
    Exercise(
        "measuring", "bus_bandwidth", "M, seconds, k", "The bandwidth a benchmark reports",
        "Write `bus_bandwidth(M, seconds, k)`: an all-reduce of `M` bytes over `k` ranks took `seconds`; return "
        "its bus bandwidth in bytes per second, the number `nccl-tests` prints as busbw and the one to compare "
        "with a link's $\\beta$.\n\n"
        "*Hint:* start from the algorithm bandwidth $M/T$, then count the bytes each rank sends in a ring "
        "all-reduce.\n\n"
        "The checker compares it with the cost model's `bus_bandwidth`, $k = 1$ included.",
        "Return the bus bandwidth, in bytes per second, of an all-reduce of M bytes over k ranks.",
    ),
    Exercise(
        "whole_picture", "data_parallel_step", "theta, rank_grads, eta", "The whole step in one function",
        "Write `data_parallel_step(theta, rank_grads, eta)`: row $i$ of `rank_grads` is rank $i$'s gradient "
        "$\\mathbf{g}_i$ (all groups the same size); return the knobs every replica holds after the all-reduce "
        "and the SGD step.\n\n"
        "*Hint:* this chapter's one picture, followed from its first panel to its last, is the function.\n\n"
        "The checker replays a recorded SGD run on 4 real ranks and compares your step with the parameters the "
        "replicas held after each step.",
        "Return theta after one data-parallel SGD step with the k ranks' gradients.",
    ),
    Exercise(
        "bigger_batch", "lr_for_k", "lr_base, k, rule", "Scale the learning rate",
        "Write `lr_for_k(lr_base, k, rule)`: the learning rate for a global batch $k$ times larger, from the rate "
        "`lr_base` tuned on one rank, by the linear rule (`rule == \"linear\"`) or the square-root rule "
        "(`rule == \"sqrt\"`).\n\n"
        "*Hint:* `math.sqrt`.",
        "Return the learning rate for k ranks by the named rule.",
    ),
    Exercise(
        "bigger_batch", "warmup_lr", "lr, step, warmup", "A linear warm-up",
        "Write `warmup_lr(lr, step, warmup)`: the rate at step `step` (counted from 0) of a linear warm-up that "
        "reaches `lr` after `warmup` steps and then stays there; `warmup = 0` means no warm-up.\n\n"
        "*Hint:* the first step should already move, and step `warmup − 1` should use the full rate.",
        "Return the learning rate at this step of a linear warm-up.",
    ),
    Exercise(
        "accumulation", "accumulated_gradient", "micro_grads", "Accumulate, then divide",
        "Write `accumulated_gradient(micro_grads)`: row $j$ of `micro_grads` is the mean gradient of micro-batch "
        "$j$ (all the same size); return the gradient of the whole batch, as the optimizer should see it.\n\n"
        "*Hint:* `backward()` adds each micro-batch's gradient to `.grad`. What does that leave you with after "
        "$m$ micro-batches?\n\n"
        "The checker cuts recorded batches into $m$ micro-batches and compares your answer with the gradient of "
        "the whole batch.",
        "Return the whole batch's gradient from m micro-batch gradients (one row each).",
    ),
    Exercise(
        "waiting", "wait_times", "compute", "Waiting for the straggler",
        "Write `wait_times(compute)`: `compute[r]` is how many seconds rank $r$ computes before it reaches the "
        "all-reduce; return how long each rank sits there waiting before the sync can start.\n\n"
        "*Hint:* nobody leaves the all-reduce before the last rank has arrived.",
        "Return each rank's wait at the all-reduce, in seconds.",
    ),
    Exercise(
        "waiting", "staleness", "t_grad", "How stale is an asynchronous gradient?",
        "Write `staleness(t_grad)`: in asynchronous SGD worker $i$ takes `t_grad[i]` seconds per gradient; return, "
        "per worker, how many updates from the others typically land on the parameters while it computes one "
        "gradient.\n\n"
        "*Hint:* while worker $i$ computes once, worker $j$ delivers $t_i / t_j$ updates.",
        "Return each worker's typical staleness, in updates.",
    ),
    Exercise(
        "splitting", "bubble", "p, m", "The bubble",
        "Write `bubble(p, m)`: the fraction of a pipelined step that each of `p` stages spends idle when the "
        "batch is cut into `m` micro-batches.\n\n"
        "*Hint:* draw the schedule: how many time slots does the run last, and in how many does a stage work?",
        "Return the idle fraction of a p-stage pipeline fed m micro-batches.",
    ),
    Exercise(
        "splitting", "gather_columns", "y_block, world_size", "The column split's all-gather",
        "Write `gather_columns(y_block, world_size)`: rank $r$ holds `y_block` $= X W_r$, the $r$-th column block "
        "of a layer's output $Y = XW$ split by columns. Return the whole $Y$ on every rank.\n\n"
        "*Hint:* `dist.all_gather(list_of_tensors, tensor)`, then join the blocks in the right direction.\n\n"
        + RANKS_NOTE + " The checker compares your $Y$ with the unsplit layer's.",
        "Return the whole output Y from this rank's column block.",
        points=2,
    ),
    Exercise(
        "sharding", "owned_shard", "layer, rank, k", "Which shard does a rank keep?",
        "Write `owned_shard(layer, rank, k)`: `layer` is one layer's parameters laid end to end (a numpy vector). "
        "Under ZeRO-3 it is padded with zeros to a multiple of `k` and cut into `k` equal chunks; return the chunk "
        "rank `rank` keeps at rest.\n\n"
        "Any layout in which the `k` ranks keep `k` different chunks is right: torch's FSDP gives rank `r` chunk "
        "`r`.\n\n"
        "*Hint:* the ring's reduce-scatter leaves one chunk complete on each rank, and keeping that one costs no "
        f"extra send: which one was it ({course.ref('all_reduce')})? `np.pad` or `np.concatenate` adds the zeros.",
        "Return the chunk of the padded layer that this rank keeps under ZeRO-3.",
    ),
    Exercise(
        "sharding", "step_bytes", "k, M, zero_stage", "The bytes of each stage",
        "Write `step_bytes(k, M, zero_stage)`: the bytes one rank sends per step in a ring of `k` ranks at ZeRO "
        "stage `zero_stage` (0 is plain data parallelism), where `M` is the bytes of the whole gradient (and of "
        "the whole parameter vector).\n\n"
        "*Hint:* count the ring passes each stage makes per step, reduce-scatters and all-gathers; each pass "
        "sends $(k-1)/k \\cdot M$ per rank.",
        "Return the bytes one rank sends per step at this ZeRO stage.",
    ),
    Exercise(
        "cheaper_sync", "powersgd_bytes", "rows, cols, r", "What PowerSGD sends",
        "Write `powersgd_bytes(rows, cols, r)`: the bytes PowerSGD all-reduces for one float32 gradient matrix of "
        "$n_1$ = `rows` rows and $n_2$ = `cols` columns at rank `r`. It sends the factors P ($n_1 \\times r'$) and "
        "Q ($n_2 \\times r'$) with $r' = \\min(n_1, n_2, r)$, but only where that saves at least half, "
        "$(n_1 + n_2)\\,r' \\cdot 2 < n_1 n_2$ (torch's "
        "`min_compression_rate`); otherwise it sends the matrix as it is.\n\n"
        "*Hint:* a float32 value is 4 bytes. A bias, `cols = 1`, is never worth compressing.",
        "Return the bytes PowerSGD sends for a rows×cols float32 matrix at rank r.",
    ),
    Exercise(
        "cheaper_sync", "slow_link_bytes", "k, g, M", "Bytes over the slow link",
        "Write `slow_link_bytes(k, g, M)`: `k` ranks sit in groups of `g` on fast links, the groups joined by a "
        "slow one. In the two-level all-reduce of `M` bytes, how many bytes does one rank send across the slow "
        "link?\n\n"
        "*Hint:* after the reduce-scatter inside its group a rank owns $1/g$ of the sum, and all-reduces that "
        "share in a ring over the $G = k/g$ groups. What does a ring of $G$ send per rank, for $M/g$ bytes?",
        "Return the bytes one rank sends between groups in the two-level all-reduce.",
    ),
    Exercise(
        "when_a_replica_fails", "young_daly_interval", "delta, mtbf", "How often to save",
        "Write `young_daly_interval(delta, mtbf)`: the seconds of work between two checkpoints that lose the least "
        "time by Young's rule, when one save costs `delta` seconds and a failure comes every `mtbf` seconds on "
        "average.\n\n"
        "*Hint:* per second of work the saves cost $\\delta/\\tau$ and the redone work $\\tau/(2M)$; where are the two "
        "equal? `math.sqrt` or `** 0.5` takes the root.\n\n"
        "The checker compares it with the interval this chapter's slider draws, for saves from half a second to "
        "five minutes.",
        "Return Young's checkpoint interval, in seconds.",
    ),
    Exercise(
        "when_a_replica_fails", "survivor_average", "model_grads, group", "Average over the survivors",
        "Write `survivor_average(model_grads, group)`, what each surviving rank calls after its backward pass once a "
        "rank has died: `model_grads` is this rank's list of gradient tensors and `group` the process group of the "
        "survivors. Change each tensor, in place, into its mean over the survivors.\n\n"
        "*Hint:* every collective takes `group=`, and `dist.get_world_size(group)` counts that group's ranks. What "
        "does `dist.get_world_size()` count now?\n\n"
        + RANKS_NOTE + " Here rank 1 has died before the all-reduce, so only ranks 0 and 2 call your function. The "
        "checker compares what they hold with `dist.all_reduce` over the survivors' group divided by its size, and "
        "with the gradient of the survivors' examples in one batch.",
        "Turn each of this survivor's gradient tensors into its mean over the survivors' group, in place.",
        points=2,
    ),
)

BY_NAME = {e.name: e for e in EXERCISES}


def for_chapter(chapter: str) -> list[Exercise]:
    """The chapter's exercises, by its number or its topic, in the order its "Your turn" section shows them."""
    return [e for e in EXERCISES if chapter in (e.chapter, e.topic)]
