"""The question bank: the notes' whole bank retold, to review every chapter.

Recall, true/false, spot the error, why and edge cases, in that order, then the numeric cards of
:mod:`dpviz.topics.question_bank.deck_numbers`.
"""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.question_bank.deck_numbers import NUMERIC

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number

_RECALL = (
    Card(
        "Data parallelism: what does it copy and what does it split?",
        "Each device holds the whole model and works on its own slice of the data; the gradients "
        "are all-reduced every step so that all copies stay identical.",
        "self-check", HERE, f"{TOPIC}-recall-data-parallel",
    ),
    Card(
        "Model parallelism: what is it, and what are its two common kinds?",
        "The model itself is cut up so that no device holds all the weights. Splitting inside a "
        "layer is tensor parallelism; giving each device a group of whole layers is pipeline "
        "parallelism.",
        "self-check", HERE, f"{TOPIC}-recall-model-parallel",
    ),
    Card(
        "All-reduce: what comes out, and who gets it?",
        "The sum (or, divided by k, the mean) of one tensor from every device, and every device "
        "receives the same copy.",
        "self-check", HERE, f"{TOPIC}-recall-all-reduce",
    ),
)

_TRUE_FALSE = (
    Card(
        "True or false: each GPU you add to a data-parallel job shortens the time to train.",
        "False. The compute share per device falls like T_compute/k, but T_comm does not fall: its "
        "bandwidth part levels off and its latency part keeps growing with k (log2 k rounds by the "
        "notes' count, 2(k−1) hops in a ring). Beyond some k a new device adds more sync time than "
        f"it saves, and steps get slower; {course.ref('speedup_model')} has a numeric example.",
        "true/false", HERE, f"{TOPIC}-tf-more-gpus",
    ),
    Card(
        "True or false: k devices with local batch b train exactly like one device with batch b·k.",
        "True in exact arithmetic, given equal local batches, the same starting θ and optimizer "
        "state, and the η the big-batch run would use: by linearity the averaged gradient is the "
        "big-batch gradient. Two caveats. Against a run at batch b the batch is k times larger, so "
        "η usually has to change (linear rule ×k, or square-root rule ×√k). And in floating point "
        "the match holds to rounding, not to the last bit.",
        "true/false", HERE, f"{TOPIC}-tf-equivalent",
    ),
    Card(
        "True or false: with enough GPUs, plain data parallelism can train a model too big for one "
        "GPU's memory.",
        "False. Every device holds the whole model, so if one copy does not fit, more copies do not "
        "help. Dividing the weights themselves takes model parallelism (tensor or pipeline), or "
        f"sharding parameters and optimizer state. {course.Ref('splitting')} counts the bytes one rank holds on a "
        "real run.",
        "true/false", HERE, f"{TOPIC}-tf-too-big",
    ),
    Card(
        "True or false: gradient accumulation reaches the large-batch update while holding only one "
        "micro-batch in memory at a time.",
        "True. Run k equal micro-batches one after another, add their gradients, divide by k, then "
        "step: that is the big-batch mean gradient. Memory per pass is one micro-batch's; the price "
        f"is k forward and backward passes, in sequence, per update. {course.Ref('accumulation')} shows this on real "
        "runs "
        "(it calls the number of micro-batches m, since k counts ranks there).",
        "true/false", HERE, f"{TOPIC}-tf-accumulation",
    ),
    Card(
        "True or false: synchronous SGD ends with a different model from single-device SGD on the "
        "same combined batch.",
        "False in exact arithmetic: from the same start, applying the averaged gradient follows the "
        "big-batch path, which is the main point of synchronous SGD. In floating point, though, the "
        "sums run in another order, and floating-point addition is not associative, so the weights "
        "can differ in the last bits from the single device's, and on some steps do not (the replicas "
        "stay bit-identical to one another).",
        "true/false", HERE, f"{TOPIC}-tf-sync-sgd",
    ),
    Card(
        "True or false: asynchronous SGD traces the same path as synchronous SGD, only sooner.",
        "False. A worker may compute its gradient at θ_t and see it applied once the weights have "
        "already moved on, to θ_{t+5} say. Such stale gradients change the optimisation path and "
        f"can change the final accuracy. {course.Ref('waiting')} shows this on real runs: a parameter server's "
        "asynchronous path beside the synchronous one.",
        "true/false", HERE, f"{TOPIC}-tf-async",
    ),
    Card(
        "True or false: tensor parallelism and pipeline parallelism are one technique under two names.",
        "False. Tensor parallelism cuts one layer's matrices into blocks held by different devices; "
        "pipeline parallelism gives each device a run of whole layers, like stations along a "
        f"production line. The two can be used together. {course.Ref('splitting')} shows both on real runs.",
        "true/false", HERE, f"{TOPIC}-tf-tensor-pipeline",
    ),
    Card(
        "True or false: a scaling efficiency above 1 always means the measurement is wrong.",
        "False. Super-linear speedup can be genuine: each device now handles a smaller share, which "
        "may fit into a faster cache or memory, so every device runs faster than the lone device "
        f"did. Rule out a measuring mistake first, then test the cause: {course.ref('speedup_model')} times one "
        "process "
        "on the share one of two ranks holds, and compares the compute per example of the three runs.",
        "true/false", HERE, f"{TOPIC}-tf-superlinear",
    ),
    Card(
        "True or false: a link with twice the bandwidth doubles the speedup.",
        "False. Bandwidth shrinks only the M/β part of T_comm; the compute share T_compute/k and "
        "the latency part stay as they were, so S = T_compute/(T_compute/k + T_comm) rises by less, "
        "hardly at all when compute already dominates. A numeric card in this chapter puts numbers "
        "on it.",
        "true/false", HERE, f"{TOPIC}-tf-double-bandwidth",
    ),
)

_SPOT = (
    Card(
        "Spot the error: “Four GPUs, data parallel, 32 examples each, so we keep the learning rate "
        "of our one-GPU runs at batch 32.”",
        "Each update now averages over 4 × 32 = 128 examples, not 32: a less noisy gradient and four "
        "times fewer updates per epoch, so the old η usually learns too slowly. Scale η up, by the "
        f"linear rule (×4) or the more cautious square-root rule (×2), with a warm-up. {course.Ref('bigger_batch')} "
        "shows "
        "this on real runs.",
        "spot the error", HERE, f"{TOPIC}-spot-lr",
    ),
    Card(
        "Spot the error: “The model does not fit on one GPU, so we moved to data parallelism on 8 "
        "GPUs.”",
        "Data parallelism copies the model onto each device; it divides the data, not the weights. "
        "Each of the 8 copies is as large as before and still does not fit. Tensor or pipeline "
        f"parallelism, or sharding parameters and optimizer state, is what splits the model. {course.Ref('splitting')} "
        "shows this on real runs, with the memory each rank holds.",
        "spot the error", HERE, f"{TOPIC}-spot-too-big",
    ),
    Card(
        "Spot the error: “Asynchronous SGD always wins, because no worker ever waits.”",
        "The waiting is traded for stale gradients. The hardware is kept busier, but updates "
        "computed on old weights can slow convergence or unsettle it; which approach wins depends "
        f"on the workload. {course.Ref('waiting')} shows this on real runs, with the staleness of every update.",
        "spot the error", HERE, f"{TOPIC}-spot-async",
    ),
    Card(
        "Spot the error: “Our 4 GPUs gave a 4× speedup, so our efficiency is over 100%.”",
        "Efficiency is S/k. A speedup equal to the number of devices is exactly 100%, the ideal; "
        "to go above it the speedup on 4 GPUs would have to exceed 4.",
        "spot the error", HERE, f"{TOPIC}-spot-efficiency",
    ),
    Card(
        "Spot the error: “Pipeline parallelism is a production line, so every GPU in it works all the "
        "time.”",
        "Pipelines have bubbles. While a batch enters, later stages wait for their first input; the "
        "first stage then waits in the middle, from its last forward pass until the first backward "
        "pass comes back to it, and the last stage waits again at the end. Unless the batch is cut into "
        f"micro-batches, these idle stretches take a large share of the time. {course.Ref('splitting')} shows this on "
        "real runs: Gantt charts of real stages beside the formula (p−1)/(m+p−1).",
        "spot the error", HERE, f"{TOPIC}-spot-bubbles",
    ),
    Card(
        "Spot the error: “All-reduce is a bottleneck because all the gradients go through one "
        "central server.”",
        "That describes a parameter server. An all-reduce such as the ring has no centre: each "
        "device exchanges chunks with its neighbours. Its cost comes from the bytes each device "
        "must move and the number of latency hops, which depend on M and k.",
        "spot the error", HERE, f"{TOPIC}-spot-central-server",
    ),
    Card(
        "Spot the error: “Gradient accumulation gives the same update as the big batch, so our "
        "training will finish just as quickly.”",
        "The update is the same; the clock need not be. The k micro-batches pass forward and backward "
        "one after another, so the model puts an update at about k times one micro-batch pass, while k "
        "devices do those passes at once and add one all-reduce. Memory was traded for time, as long as "
        "the all-reduce costs less than the compute it saves and each device has its own core. "
        f"{course.Ref('accumulation')} times both on real runs, timelines side by side, and prints what they measured.",
        "spot the error", HERE, f"{TOPIC}-spot-accumulation-speed",
    ),
)

_WHY = (
    Card(
        "Why average the devices' gradients instead of adding them up?",
        "The big-batch gradient is a mean over all its examples. Each device already returns the "
        "mean of its own sub-batch, and with equal sub-batch sizes the mean of those means is the "
        "mean over everything (Step 3). A sum would be k times too large, as if η had been "
        "multiplied by k.",
        "why", HERE, f"{TOPIC}-why-average",
    ),
    Card(
        "Why does scaling efficiency fall as devices are added?",
        "The compute share T_compute/k keeps shrinking while T_comm stays the same or grows (more "
        "latency hops, and a bandwidth part that approaches a constant), so syncing fills an ever "
        "larger part of each step and S/k drops.",
        "why", HERE, f"{TOPIC}-why-efficiency-drops",
    ),
    Card(
        "Why sync the gradients at every step rather than once in a while?",
        "So that every copy of the model stays identical. Copies that skip syncs each follow their "
        "own gradients and turn into different models, and averaging such diverged copies later is "
        "no longer the big-batch update. (Methods that sync only now and then, such as local SGD, "
        "exist; they give up that exactness to communicate less.)",
        "why", HERE, f"{TOPIC}-why-every-step",
    ),
    Card(
        "Why is a fast interconnect (NVLink, InfiniBand) worth its price for large models?",
        "A large model has a large gradient, so M is large and the part of T_comm proportional to "
        "M/β dominates on a slow link. Raising β cuts that part and recovers much of the speedup "
        "that was lost. The notes quote a BERT-Large speedup comparison at this point, but we could find "
        f"no source for it, so it is not used here; {course.ref('speedup_model')} shows the effect with modeled curves "
        "and with α, β measured on this machine.",
        "why", HERE, f"{TOPIC}-why-fast-link",
    ),
    Card(
        "Why does model parallelism move data between devices inside every forward and backward "
        "pass, when data parallelism talks only once per step?",
        "With layers on different devices, activations have to cross from one device to the next "
        "on the way forward, and their gradients on the way back, at every boundary between "
        "devices. Data parallelism keeps all layers on every device and only exchanges gradients, "
        f"in one all-reduce per step. {course.Ref('splitting')} shows this on real runs and counts the bytes.",
        "why", HERE, f"{TOPIC}-why-model-parallel-traffic",
    ),
    Card(
        "Why can a single slow device hold back synchronous SGD but not asynchronous SGD?",
        "Synchronous SGD moves in lockstep: no one updates until the all-reduce finishes, and it "
        "finishes only when the slowest device has its gradient ready. Asynchronous workers send "
        f"their updates when they are done and never wait for one another. {course.Ref('waiting')} shows this on "
        "real runs: an injected straggler, then a parameter server with one slow worker.",
        "why", HERE, f"{TOPIC}-why-straggler",
    ),
    Card(
        "Why does the linear scaling rule multiply η by k, and not by √k?",
        "Take k small steps at rate η, each on its own small batch: if θ hardly moves between them, "
        "they add up to −η·Σ g_i. One step on the merged batch uses the mean Σ g_i / k, so to go as "
        "far it needs the rate k·η; the k comes from the averaging. √k measures something else: how "
        "much the standard deviation of the gradient noise falls when the batch grows k-fold. The "
        "square-root rule (×√k) scales η by that, the gentler choice. Either is usually paired with "
        f"a warm-up that ramps η up over the first steps. {course.Ref('bigger_batch')} shows this on real runs.",
        "why", HERE, f"{TOPIC}-why-linear-rule",
    ),
)

_EDGE = (
    Card(
        "The claim “the effective batch is b·k” assumes equal local batches. What if they differ?",
        "The plain mean over devices is then slightly off: a device with few examples counts as "
        "much as one with many. Weight each device's gradient by its number of examples b_i: "
        f"Σ b_i·g_i divided by Σ b_i. {course.Ref('average_of_averages')} shows this on real runs.",
        "edge case", HERE, f"{TOPIC}-edge-unequal",
    ),
    Card(
        "What speedup does the formula give when T_comm equals the compute share T_compute/k?",
        "The denominator becomes 2·T_compute/k, so S = k/2: an efficiency of 50%, with half of what "
        "the devices could give spent on syncing.",
        "edge case", HERE, f"{TOPIC}-edge-half",
    ),
    Card(
        "For a single device, k = 1, what does S = T_compute / (T_compute/k + T_comm) give?",
        "There is nobody to sync with, so T_comm = 0: log2 1 and (k−1)/k vanish in the notes' "
        "count, and so do the 2(k−1) terms of the ring. Then S = T_compute/T_compute = 1, the "
        "single-device baseline.",
        "edge case", HERE, f"{TOPIC}-edge-k1",
    ),
    Card(
        "What happens to the bandwidth factor (k−1)/k as k becomes very large?",
        "It rises steadily from 0 at k = 1 (and 1/2 at k = 2) toward 1, never reaching it. So the "
        "bandwidth part of T_comm levels off near M/β by the notes' formula, which counts only the "
        "reduce-scatter half, and near 2M/β for a full ring all-reduce. What keeps growing is the "
        "latency part: α·log2 k by the notes' count, 2(k−1)·α for a ring.",
        "edge case", HERE, f"{TOPIC}-edge-fraction",
    ),
    Card(
        "Gradient accumulation over k micro-batches with k = 1: what is left?",
        "Ordinary training on one batch. Adding up one gradient and dividing by 1 changes nothing: "
        f"no memory saved, no time lost. {course.Ref('accumulation')} shows this on real runs: with one micro-batch "
        "the "
        "update is the plain gradient bit for bit.",
        "edge case", HERE, f"{TOPIC}-edge-accumulate-one",
    ),
    Card(
        "A model only just fits on one GPU. Is a two-GPU pipeline sure to train it faster?",
        "No. The second device adds compute, but the activations now travel between the two and "
        "each stage idles in bubbles while waiting for the other: at best the pair is p·m/(m+p−1) times "
        "as fast as one device (1.6× for m = 4 micro-batches), never twice. For a small model the "
        f"hand-overs can cancel the gain or even make it slower. {course.Ref('splitting')} times two stages on two "
        "ranks against the same model, data and micro-batches on one process, prints whether the "
        "pipeline was faster and by how much beside that bound, and splits the gap into the passes "
        "themselves and the time lost in hand-overs.",
        "edge case", HERE, f"{TOPIC}-edge-pipeline-two",
    ),
    Card(
        "Tensor parallelism splits W by columns, [W1 W2], over two devices. What must happen before "
        "a next layer that needs the whole output?",
        "Each device holds only its part of the output, Y1 or Y2. The parts must be combined across "
        "the devices (concatenated by an all-gather for a column split, summed by an all-reduce for "
        f"a row split): a communication step between the layers. {course.Ref('splitting')} shows this on real runs.",
        "edge case", HERE, f"{TOPIC}-edge-tensor-gather",
    ),
    Card(
        "For a fixed data set, what caps the useful number of data-parallel replicas?",
        "As replicas are added, each device's local batch shrinks toward a single example (or the "
        "global batch grows so large that it hurts generalisation). Beyond that, new replicas bring "
        "no more work to share, and communication takes over.",
        "edge case", HERE, f"{TOPIC}-edge-max-replicas",
    ),
)

CARDS = _RECALL + _TRUE_FALSE + _SPOT + _WHY + _EDGE + NUMERIC
