"""Every self-check question of the notes, retold, with the cards for each chapter.

Chapter 00 takes the symbols note's self-check, chapter 07 the walkthrough's quick self-check,
chapter 13 the whole question bank (true/false, spot the error, why, edge cases), and chapters 01
to 06 cards written for their step. Numeric cards compute their numbers with ``dpviz.theory.costmodel``
and the link presets of ``dpviz.theory.links``; nothing shown as a result is typed in.

Where the notes slip (see shared/seeds/README.md) the cards say what is right: the notes'
all-reduce formula prices a reduce-scatter, half an all-reduce; the learning-rate contrast is
linear (×k) against square root (×√k); replicas match one another bit for bit but match a
single big-batch device only to rounding; the BERT-Large speedups have no traceable source and
are not used.
"""

from __future__ import annotations

import numpy as np

from dpviz.data import line_data
from dpviz.theory import costmodel
from dpviz.theory import lr_rules as lr_theory  # lr_rules() below is a card's compute function
from dpviz.checks import check_choice
from dpviz.theory.links import PRESETS
from dpviz.teaching.cards import CHAPTERS, Card

# ---------------------------------------------------------------------------------------------
# What the numeric cards compute. Each takes the card's params and returns the named values
# its answer template shows.


def _link(name):
    check_choice("link", name, tuple(PRESETS))
    return PRESETS[name]


def equal_sync_and_compute(t_compute, k):
    """S and S/k when T_comm is set equal to the compute share T_compute/k."""
    t_comm = t_compute / k
    return {
        "t_comm": t_comm,
        "s": costmodel.speedup(t_compute, k, t_comm),
        "eff": costmodel.efficiency(t_compute, k, t_comm),
        "half_k": k / 2,
    }


def single_device(t_compute, m, link):
    """T_comm by both formulas, and S, for k = 1."""
    lk = _link(link)
    t_ring = costmodel.t_comm_ring(1, m, lk.alpha, lk.beta)
    return {
        "t_notes": costmodel.t_comm_notes(1, m, lk.alpha, lk.beta),
        "t_ring": t_ring,
        "s": costmodel.speedup(t_compute, 1, t_ring),
    }


def bandwidth_fractions(ks):
    """(k-1)/k for each k."""
    return {"f": [costmodel.bandwidth_fraction(k) for k in ks]}


def efficiency_of(s_measured, k, t_compute):
    """S/k for a measured speedup, and the T_comm = 0 case of the cost model, which reaches it."""
    return {
        "eff": s_measured / k,
        "s_model": costmodel.speedup(t_compute, k, 0.0),
        "eff_model": costmodel.efficiency(t_compute, k, 0.0),
    }


def lr_rules(lr_base, k):
    """The linear and square-root learning rates for a batch k times larger."""
    return {
        "lr_lin": costmodel.lr_linear(lr_base, k),
        "lr_sq": costmodel.lr_sqrt(lr_base, k),
        "root": float(np.sqrt(k)),
    }


def notes_against_ring(k, m, link):
    """All-reduce time of m bytes on a preset link by the notes' formula and by the ring formula."""
    lk = _link(link)
    t_notes = costmodel.t_comm_notes(k, m, lk.alpha, lk.beta)
    t_ring = costmodel.t_comm_ring(k, m, lk.alpha, lk.beta)
    return {
        "alpha_us": lk.alpha * 1e6,
        "beta_gbs": lk.beta / 1e9,
        "t_notes_ms": t_notes * 1e3,
        "t_ring_ms": t_ring * 1e3,
        "ratio": t_ring / t_notes,
    }


def speedup_ceiling(t_compute, t_comm, ks):
    """The ceiling T_compute/T_comm and the speedup S at each k for a fixed T_comm."""
    return {
        "ceiling": t_compute / t_comm,
        "s": [costmodel.speedup(t_compute, k, t_comm) for k in ks],
    }


def doubled_bandwidth(t_compute, k, m, links):
    """S with each link's beta and with twice that beta (ring all-reduce), and the gain."""
    out = {}
    for tag, name in zip("ab", links):
        lk = _link(name)
        before = costmodel.speedup(t_compute, k, costmodel.t_comm_ring(k, m, lk.alpha, lk.beta))
        after = costmodel.speedup(t_compute, k, costmodel.t_comm_ring(k, m, lk.alpha, 2 * lk.beta))
        out[f"s_{tag}"] = [before, after]
        out[f"gain_{tag}"] = after / before
    return out


def best_device_count(t_compute, m, link, k_max):
    """The k in 1..k_max with the largest modeled S (ring all-reduce), and S there and at k_max."""
    lk = _link(link)
    ks = np.arange(1, k_max + 1)
    s = costmodel.speedup(t_compute, ks, costmodel.t_comm_ring(ks, m, lk.alpha, lk.beta))
    best = int(np.argmax(s))
    return {"best_k": int(ks[best]), "s_best": float(s[best]), "s_last": float(s[-1])}


def sync_limits(t_compute, k, t_comms):
    """S at one k for several T_comm, from free sync to sync longer than the whole compute."""
    return {
        "s": [costmodel.speedup(t_compute, k, t) for t in t_comms],
        "ceiling_last": t_compute / t_comms[-1],
    }


# ---------------------------------------------------------------------------------------------
# Chapter 00: the symbols note's self-check.

_CH00 = [
    Card(
        "What does θ stand for, and what does data parallelism do with it?",
        "θ is the whole set of adjustable numbers in the model: every weight and every bias. "
        "Under data parallelism each device keeps its own complete copy of θ; what gets divided "
        "between the devices is the data.",
        "self-check", "00", "00-theta",
    ),
    Card(
        "In which direction does ∇θL point?",
        "Toward the steepest increase of the loss. It holds one slope per parameter, and together "
        "those slopes aim uphill; training moves against them.",
        "self-check", "00", "00-gradient-direction",
    ),
    Card(
        "The update reads θ ← θ − η∇θL. What is the minus sign doing there?",
        "The gradient aims uphill, and we want a lower loss, so we subtract it: the step goes "
        "downhill.",
        "self-check", "00", "00-minus-sign",
    ),
    Card(
        "What is η, and what goes wrong when it is too big?",
        "η is the learning rate: how far each update moves along the negative gradient. A value "
        "that is too large jumps over the bottom of the valley, and the loss can bounce around or "
        "grow without limit.",
        "self-check", "00", "00-eta",
    ),
    Card(
        "Why may a batch gradient be worked out in pieces on several machines and combined later?",
        "Because the batch gradient is a mean, and taking a mean is linear: the mean of equally "
        "sized partial means is the mean of the whole batch. Combining the machines' results gives "
        "back the big-batch gradient (up to floating-point rounding).",
        "self-check", "00", "00-split-safely",
    ),
    Card(
        "Say in plain words what an all-reduce does.",
        "Each device puts in its own gradient; the gradients are added together (and divided by k "
        "when we want their mean); every device then gets an identical copy of that result.",
        "self-check", "00", "00-all-reduce",
    ),
    Card(
        "In S = T_compute / (T_compute/k + T_comm), which term keeps S from reaching k?",
        "T_comm, the time spent syncing. It is not divided by k, so once it is comparable with "
        "T_compute/k it holds S well below k.",
        "self-check", "00", "00-what-caps-s",
    ),
    Card(
        "How is x different from y?",
        "x is the input, a vector of numbers that describes one example (its pixels, its word "
        "codes); y is the target, the right answer the model should give for that x.",
        "self-check", "00", "00-x-and-y",
    ),
    Card(
        "Of the pieces x, y, D, θ, which does data parallelism copy to every device and which does "
        "it share out?",
        "It copies θ (and the optimizer's state) to every device, and it shares out the data: each "
        "device works on different rows of D, that is different pairs (x, y).",
        "self-check", "00", "00-copy-or-split",
    ),
]

# ---------------------------------------------------------------------------------------------
# Chapter 01: one training step.

_CH01 = [
    Card(
        "Name the stages of one training step on a single device, in order.",
        "Forward pass: the model f turns x into a prediction using θ. Loss: L scores that "
        "prediction against y. Backward pass: backpropagation returns ∇θL. Update: θ moves by −η "
        "times that gradient.",
        "self-check", "01", "01-stages",
    ),
    Card(
        "Why use the gradient instead of nudging each parameter up and down to see which way helps?",
        "With billions of parameters, trying them one by one would cost billions of forward "
        "passes. One backward pass gives the slope for every parameter at once.",
        "why", "01", "01-why-gradient",
    ),
    Card(
        "True or false: going distributed changes the update rule θ ← θ − η∇θL.",
        "False. The rule is the same; what changes is where the gradient is computed. Data "
        "parallelism assembles ∇θL from pieces worked out on several devices and then applies this "
        "very update on each of them.",
        "true/false", "01", "01-tf-same-rule",
    ),
    Card(
        "What does a step with η = 0 do? And one with a very large η?",
        "With η = 0, θ does not move and nothing is learned. A very large η overshoots the "
        "minimum, possibly landing higher on the far side, so the loss can oscillate or blow up; "
        "the η slider of this chapter shows both.",
        "edge case", "01", "01-eta-extremes",
    ),
    Card(
        "Why must the loss be a graded number rather than a right-or-wrong verdict?",
        "A graded score changes smoothly as θ changes, so it has a slope to follow. A verdict "
        "that only flips between right and wrong is flat almost everywhere and gives no direction.",
        "why", "01", "01-why-graded-loss",
    ),
]

# ---------------------------------------------------------------------------------------------
# Chapter 02: a mini-batch.

_CH02 = [
    Card(
        "Why is the mini-batch gradient the mean over its b examples and not their sum?",
        "A mean keeps the gradient's size independent of b, so a learning rate tuned at one batch "
        "size still makes sense at another. With a sum, doubling b would double every step and η "
        "would need retuning.",
        "why", "02", "02-mean-not-sum",
    ),
    Card(
        "Why must a mini-batch be drawn at random?",
        "Only an unbiased sample has the full-data gradient as its expected value. A grab that "
        "favours one kind of example (only cats, say) tilts the red mean arrow toward what those "
        "examples want, no matter how exactly it is averaged.",
        "why", "02", "02-random",
    ),
    Card(
        "In the Step 2 picture, what are the grey arrows and what is the red arrow?",
        "Each grey arrow is the gradient of one example. The red arrow is their mean, the "
        "mini-batch gradient g that the update uses.",
        "self-check", "02", "02-arrows",
    ),
    Card(
        "What does a batch of b = 1 give, and why not always train that way?",
        "The mean of one arrow is that arrow: one example's gradient. It is unbiased but very "
        "noisy, so the steps jitter; a larger b averages the noise down. The opposite extreme, the "
        "whole data set per step, is accurate but slow.",
        "edge case", "02", "02-b-equals-one",
    ),
    Card(
        "True or false: the mini-batch gradient is a single number.",
        "False. It is a vector with one slope per parameter, as many entries as θ has; that is why "
        "the notes print g in bold.",
        "true/false", "02", "02-tf-vector",
    ),
]

# ---------------------------------------------------------------------------------------------
# Chapter 03: the average of averages.

_CH03 = [
    Card(
        "In the Step 3 derivation, where does b cancel, and what remains?",
        "Each group's sum of per-example gradients equals b·g_i. Summing over the k groups and "
        "dividing by the total count b·k, the b of every term meets the b below the line, leaving "
        "(1/k)·Σ g_i: the plain mean of the group means.",
        "why", "03", "03-b-cancels",
    ),
    Card(
        "What changes when the k groups hold different numbers of examples?",
        "The plain mean of the group means is then wrong: a small group's mean counts as much as "
        "a large one's. Weight each group's mean by its size, Σ b_i·g_i / Σ b_i, to get back the "
        "big-batch mean (mean=\"weighted\" in TrainConfig).",
        "edge case", "03", "03-unequal-groups",
    ),
    Card(
        "True or false: on a computer, the mean of the group means equals the big-batch mean to "
        "the last bit.",
        "False in general. The two are equal as real numbers, but floating-point addition is not "
        "associative: adding in another order rounds differently. They agree to within rounding "
        "(a relative error near 1e-7 in float32), which is what dpviz checks.",
        "true/false", "03", "03-tf-last-bit",
    ),
    Card(
        "Why is this identity what makes data parallelism train like one large batch?",
        "If splitting the batch changed the gradient, a split run would take a different path from "
        "the single-device run. Since the mean of equal-size group means is the big-batch mean, "
        "splitting changes where the arithmetic happens, not its result.",
        "why", "03", "03-why-it-matters",
    ),
]

# ---------------------------------------------------------------------------------------------
# Chapter 04: one group per device.

_CH04 = [
    Card(
        "In Step 4, what does each device hold, and what does it compute?",
        "A full copy of θ, the same on every device, and one group B_i of the big batch. From "
        "these it computes its own group gradient g_i. Nobody communicates yet.",
        "self-check", "04", "04-holds",
    ),
    Card(
        "The copies of the model are identical, so why do the devices' arrows point different ways?",
        "A gradient depends on the data as well as on θ, and each device sees other examples. The "
        "same θ with different data gives different arrows.",
        "why", "04", "04-different-arrows",
    ),
    Card(
        "Suppose every device skipped the sync and stepped along its own g_i. What happens over a "
        "few steps?",
        "The copies part after the first step, since each moves along a different arrow, and they "
        "keep drifting further apart: k different models, each trained on only its own share of "
        "the data. The sync of Step 5 is what prevents this.",
        "edge case", "04", "04-no-sync",
    ),
    Card(
        "True or false: in Step 4 the devices must take turns.",
        "False. The groups do not depend on one another (Step 3), so all k gradients are computed "
        "at the same time; that is where the compute share T_compute/k comes from.",
        "true/false", "04", "04-tf-turns",
    ),
]

# ---------------------------------------------------------------------------------------------
# Chapter 05: all-reduce.

_CH05 = [
    Card(
        "Why prefer an all-reduce to sending every gradient to one device that averages and sends "
        "the result back?",
        "With a single collector all the traffic goes through that one device's link, and the "
        "others sit idle while it works. In a ring all-reduce every device sends and receives at "
        "the same time, so the traffic is spread evenly and no one link is the bottleneck. The "
        "mean that comes out is the same.",
        "why", "05", "05-why-not-one-boss",
    ),
    Card(
        "What are the two phases of a ring all-reduce?",
        "First a reduce-scatter: k−1 steps after which each device holds the complete sum of one "
        "1/k slice of the gradient. Then an all-gather: k−1 further steps that pass the finished "
        "slices along until every device holds the whole sum.",
        "self-check", "05", "05-two-phases",
    ),
    Card(
        "Spot the error: “An all-reduce over k devices costs α·log2(k) + (k−1)/k·M/β.”",
        "That formula, the one in the notes, prices a reduce-scatter only: half of the job, after "
        "which each device still holds just its own slice of the sum. A ring all-reduce also does "
        "the all-gather and costs 2(k−1)·α + 2(k−1)/k·M/β, twice the notes' bandwidth term. "
        "Chapter 06 sets both beside times measured on this machine.",
        "spot the error", "05", "05-spot-formula",
    ),
    Card(
        "True or false: after each sync, the replicas' parameters are bit-for-bit equal to one "
        "another and to those of a single device trained on the big batch.",
        "Half true. The replicas match each other exactly: they start equal and apply the very same "
        "averaged gradient with the same η. A single device on the big batch adds the per-example "
        "gradients in another order, and since floating-point addition is not associative, its "
        "parameters differ from the replicas' in the last bits.",
        "true/false", "05", "05-tf-bit-identical",
    ),
    Card(
        "What goes wrong if one replica's momentum buffer starts from a different value?",
        "That replica adds the shared gradient to a different velocity, so its step differs and it "
        "drifts away from the others. Equal optimizer state at the start, plus the same averaged "
        "gradient at every step, keeps the replicas in lockstep.",
        "edge case", "05", "05-momentum-start",
    ),
    Card(
        "Which flaw of Step 4 does the sync of Step 5 remove?",
        "Without a sync, each device would step along its own g_i and the copies would drift apart. "
        "After the all-reduce, every device steps along the same mean gradient.",
        "why", "05", "05-what-is-cured",
    ),
    Card(
        "An all-reduce of {m:,.0f} bytes across k = {k} devices runs over {link}. How long does it "
        "take by the notes' formula, and by the ring formula?",
        "With the preset α = {alpha_us:g} µs and β = {beta_gbs:g} GB/s: the notes' formula gives "
        "{t_notes_ms:.3g} ms and the ring formula {t_ring_ms:.3g} ms, {ratio:.2f} times as long. "
        "The gap is the all-gather half, which the notes' formula (a reduce-scatter alone) leaves out.",
        "numeric", "05", "05-num-notes-vs-ring",
        compute=notes_against_ring, params={"k": 4, "m": 400_000_000, "link": "NVLink"},
    ),
]

# ---------------------------------------------------------------------------------------------
# Chapter 06: sync costs time.

_CH06 = [
    Card(
        "Why does a faster link, NVLink or InfiniBand, raise the speedup?",
        "A larger β shrinks the M/β part of T_comm and a smaller α its 2(k−1)·α part: the coral bar of the "
        "timelines gets shorter, so more of the k-fold saving in compute shows up in the step time. A link "
        "is only faster if it wins on both, since a small gradient's sync is mostly latency.",
        "why", "06", "06-faster-link",
    ),
    Card(
        "What are the two limits of S = T_compute / (T_compute/k + T_comm)?",
        "Free sync (T_comm → 0): S → k, perfect scaling. Sync far longer than the compute share "
        "(T_comm ≫ T_compute/k): S → T_compute/T_comm, a constant that extra devices do not change.",
        "edge case", "06", "06-limits",
    ),
    Card(
        "In the s01 timelines, which bar shrinks as k doubles, and which does not?",
        "The lavender compute bar, T_compute/k, halves with each doubling. The coral sync bar keeps "
        "its length (or grows), so no row can get shorter than it.",
        "self-check", "06", "06-s01",
    ),
    Card(
        "In figure s02, what tells the mint, butter and coral curves apart?",
        "Only the T_comm put into the speedup formula: a fast, a medium and a slow link. The larger "
        "T_comm, the sooner and more sharply a curve bends away from the dashed ideal S = k. These "
        "curves are modeled, not measured.",
        "self-check", "06", "06-s02",
    ),
    Card(
        "T_compute = {t_compute:g} s per step, a gradient of {m:,.0f} bytes, ring all-reduce over "
        "{link}. Which k from 1 to {k_max} gives the largest speedup?",
        "k = {best_k} gives the largest S, {s_best:.3g}. At k = {k_max} the model gives only "
        "{s_last:.3g}: past the best k, each extra device adds more sync latency (2(k−1)·α) than it "
        "saves in compute, and steps get slower.",
        "numeric", "06", "06-num-best-k",
        compute=best_device_count,
        params={"t_compute": 0.01, "m": 1_000_000, "link": "10 Gb Ethernet", "k_max": 128},
    ),
    Card(
        "T_compute = {t_compute:g} s and k = {k}. What is S for T_comm = {t_comms[0]:g}, "
        "{t_comms[1]:g}, {t_comms[2]:g} and {t_comms[3]:g} s?",
        "S = {s[0]:.3g}, {s[1]:.3g}, {s[2]:.3g} and {s[3]:.3g}. Free sync gives S = k. Once T_comm "
        "outgrows T_compute/k, S stays under T_compute/T_comm; in the last case that bound is "
        "{ceiling_last:.3g}, and S below 1 means a step slower than on one device.",
        "numeric", "06", "06-num-limits",
        compute=sync_limits, params={"t_compute": 1.0, "k": 16, "t_comms": (0.0, 0.001, 0.1, 1.0)},
    ),
    Card(
        "A preset once gave NVLink α = 3 µs and β = 300 GB/s, and InfiniBand α = 1.5 µs and β = 12.5 GB/s. "
        "For a 21 kB gradient, why did the NVLink speedup curve peak below the InfiniBand one?",
        "A 21 kB gradient is latency-bound: the ring's 2(k−1)·α is far larger than its 2(k−1)/k·M/β on "
        "either link, so the link with the larger α syncs more slowly whatever its β. A faster link must be "
        "faster in α as well as β; chapter 06 takes both from cited sources and checks its title on the curves.",
        "why", "06", "06-latency-bound",
    ),
    Card(
        "A fit to all-reduce times of 4 KiB to 4 MiB gives β = 23 GB/s, but the 4 MiB message took no longer "
        "than the 4 KiB one. What is wrong with reading 23 GB/s as the link's bandwidth?",
        "Times that do not rise with M never showed the bandwidth term, so β is whatever the noise gives. "
        "Trust β only when the times rise with M over the fitted range, the largest message's transfer "
        "term is at least half its time, and the model follows the points (a median error within 20 %); "
        "chapter 06 checks all three and draws the residuals under the fit.",
        "spot the error", "06", "06-trust-fit",
    ),
]

# ---------------------------------------------------------------------------------------------
# Chapter 07: the walkthrough's quick self-check.

_CH07 = [
    Card(
        "Why should every device get a sub-batch of the same size?",
        "Then b cancels in the Step 3 derivation, and the plain mean of the device gradients is the "
        "big-batch gradient. With unequal sizes the plain mean gives small sub-batches too much "
        "say; a mean weighted by size would be needed.",
        "self-check", "07", "07-same-size",
    ),
    Card(
        "Why should the data be dealt out at random?",
        "What matters is that the combined batch is a fair sample of the data set. If the batch as "
        "a whole is skewed (one kind of example only, say), its exact mean is the mean of a skewed "
        "sample and points the wrong way. This corrects the notes, which blame a biased shard (one "
        "class per device): given one fair batch, how its examples are spread over equal-size "
        "shards does not change the mean, even when every shard holds one kind only. Chapter 07 "
        "shows both on real runs.",
        "self-check", "07", "07-random",
    ),
    Card(
        "Which operation hands the averaged gradient to every device?",
        "An all-reduce: the local gradients are summed, the sum is divided by k, and the result is "
        "delivered to all devices.",
        "self-check", "07", "07-which-operation",
    ),
    Card(
        "Why do the copies of the model not drift apart?",
        "They start from the same weights and the same optimizer state, and at every step each one "
        "applies the same averaged gradient with the same η, so their updates are identical.",
        "self-check", "07", "07-no-drift",
    ),
    Card(
        "With momentum or Adam, is averaging the gradients enough to keep the replicas together?",
        "Yes, as long as the optimizer state (momentum buffer, Adam's first and second moments) "
        "starts equal on every device: the same gradient then updates equal state in the same way. "
        "If the states start different, the replicas part.",
        "self-check", "07", "07-optimizers",
    ),
    Card(
        "When do more GPUs stop speeding up training?",
        "When T_comm outgrows the shrinking compute share T_compute/k; S then levels off near "
        "T_compute/T_comm.",
        "self-check", "07", "07-when-stop",
    ),
    Card(
        "Tell the whole story of data-parallel training in a few sentences, as if to a friend.",
        "Every device gets a full copy of the model and its own random, equal-sized share of the "
        "batch, and works out the gradient of that slice. An all-reduce adds the gradients up and "
        "divides by k, so all devices hold the same mean, which equals the big-batch gradient. Each "
        "copy takes the same step and stays identical to the others. The catch is the time the sync "
        "takes: when it is small next to T_compute/k the speedup approaches k, when it is large "
        "extra devices buy little.",
        "self-check", "07", "07-retell",
    ),
    Card(
        "The network has a batch-normalisation layer. Does the all-reduce of the gradients still "
        "give the gradient of the one big batch?",
        "Not by itself. Batch norm normalises each example by the mean and variance of the batch it "
        "sits in, so an example's gradient depends on its batch-mates; each replica sees only its "
        "own shard and normalises with that shard's statistics. All-reducing the statistics first "
        "(what SyncBatchNorm does) gives every replica the whole batch's mean and variance, and the "
        "all-reduced gradient is again the big batch's, to rounding. Chapter 07 shows both on real runs.",
        "why", "07", "07-batch-norm",
    ),
]

# ---------------------------------------------------------------------------------------------
# Chapter 08: the question bank.

_CH08_RECALL = [
    Card(
        "Data parallelism: what does it copy and what does it split?",
        "Each device holds the whole model and works on its own slice of the data; the gradients "
        "are all-reduced every step so that all copies stay identical.",
        "self-check", "13", "13-recall-data-parallel",
    ),
    Card(
        "Model parallelism: what is it, and what are its two common kinds?",
        "The model itself is cut up so that no device holds all the weights. Splitting inside a "
        "layer is tensor parallelism; giving each device a group of whole layers is pipeline "
        "parallelism.",
        "self-check", "13", "13-recall-model-parallel",
    ),
    Card(
        "All-reduce: what comes out, and who gets it?",
        "The sum (or, divided by k, the mean) of one tensor from every device, and every device "
        "receives the same copy.",
        "self-check", "13", "13-recall-all-reduce",
    ),
]

_CH08_TRUE_FALSE = [
    Card(
        "True or false: each GPU you add to a data-parallel job shortens the time to train.",
        "False. The compute share per device falls like T_compute/k, but T_comm does not fall: its "
        "bandwidth part levels off and its latency part keeps growing with k (log2 k rounds by the "
        "notes' count, 2(k−1) hops in a ring). Beyond some k a new device adds more sync time than "
        "it saves, and steps get slower; chapter 06 has a numeric example.",
        "true/false", "13", "13-tf-more-gpus",
    ),
    Card(
        "True or false: k devices with local batch b train exactly like one device with batch b·k.",
        "True in exact arithmetic, given equal local batches, the same starting θ and optimizer "
        "state, and the η the big-batch run would use: by linearity the averaged gradient is the "
        "big-batch gradient. Two caveats. Against a run at batch b the batch is k times larger, so "
        "η usually has to change (linear rule ×k, or square-root rule ×√k). And in floating point "
        "the match holds to rounding, not to the last bit.",
        "true/false", "13", "13-tf-equivalent",
    ),
    Card(
        "True or false: with enough GPUs, plain data parallelism can train a model too big for one "
        "GPU's memory.",
        "False. Every device holds the whole model, so if one copy does not fit, more copies do not "
        "help. Dividing the weights themselves takes model parallelism (tensor or pipeline), or "
        "sharding parameters and optimizer state. Chapter 12 counts the bytes one rank holds on a real run.",
        "true/false", "13", "13-tf-too-big",
    ),
    Card(
        "True or false: gradient accumulation reaches the large-batch update while holding only one "
        "micro-batch in memory at a time.",
        "True. Run k equal micro-batches one after another, add their gradients, divide by k, then "
        "step: that is the big-batch mean gradient. Memory per pass is one micro-batch's; the price "
        "is k forward and backward passes, in sequence, per update. Chapter 10 shows this on real runs "
        "(it calls the number of micro-batches m, since k counts ranks there).",
        "true/false", "13", "13-tf-accumulation",
    ),
    Card(
        "True or false: synchronous SGD ends with a different model from single-device SGD on the "
        "same combined batch.",
        "False in exact arithmetic: from the same start, applying the averaged gradient follows the "
        "big-batch path, which is the main point of synchronous SGD. In floating point, though, the "
        "sums run in another order, and floating-point addition is not associative, so the weights "
        "differ in the last bits from the single device's (the replicas stay bit-identical to one "
        "another).",
        "true/false", "13", "13-tf-sync-sgd",
    ),
    Card(
        "True or false: asynchronous SGD traces the same path as synchronous SGD, only sooner.",
        "False. A worker may compute its gradient at θ_t and see it applied once the weights have "
        "already moved on, to θ_{t+5} say. Such stale gradients change the optimisation path and "
        "can change the final accuracy. Chapter 11 shows this on real runs: a parameter server's "
        "asynchronous path beside the synchronous one.",
        "true/false", "13", "13-tf-async",
    ),
    Card(
        "True or false: tensor parallelism and pipeline parallelism are one technique under two names.",
        "False. Tensor parallelism cuts one layer's matrices into blocks held by different devices; "
        "pipeline parallelism gives each device a run of whole layers, like stations along a "
        "production line. The two can be used together. Chapter 12 shows both on real runs.",
        "true/false", "13", "13-tf-tensor-pipeline",
    ),
    Card(
        "True or false: a scaling efficiency above 1 always means the measurement is wrong.",
        "False. Super-linear speedup can be genuine: each device now handles a smaller share, which "
        "may fit into a faster cache or memory, so every device runs faster than the lone device "
        "did. Ruling out a measuring mistake first is still wise.",
        "true/false", "13", "13-tf-superlinear",
    ),
    Card(
        "True or false: a link with twice the bandwidth doubles the speedup.",
        "False. Bandwidth shrinks only the M/β part of T_comm; the compute share T_compute/k and "
        "the latency part stay as they were, so S = T_compute/(T_compute/k + T_comm) rises by less, "
        "hardly at all when compute already dominates. A numeric card in this chapter puts numbers "
        "on it.",
        "true/false", "13", "13-tf-double-bandwidth",
    ),
]

_CH08_SPOT = [
    Card(
        "Spot the error: “Four GPUs, data parallel, 32 examples each, so we keep the learning rate "
        "of our one-GPU runs at batch 32.”",
        "Each update now averages over 4 × 32 = 128 examples, not 32: a less noisy gradient and four "
        "times fewer updates per epoch, so the old η usually learns too slowly. Scale η up, by the "
        "linear rule (×4) or the more cautious square-root rule (×2), with a warm-up. Chapter 09 shows "
        "this on real runs.",
        "spot the error", "13", "13-spot-lr",
    ),
    Card(
        "Spot the error: “The model does not fit on one GPU, so we moved to data parallelism on 8 "
        "GPUs.”",
        "Data parallelism copies the model onto each device; it divides the data, not the weights. "
        "Each of the 8 copies is as large as before and still does not fit. Tensor or pipeline "
        "parallelism, or sharding parameters and optimizer state, is what splits the model. Chapter 12 "
        "shows this on real runs, with the memory each rank holds.",
        "spot the error", "13", "13-spot-too-big",
    ),
    Card(
        "Spot the error: “Asynchronous SGD always wins, because no worker ever waits.”",
        "The waiting is traded for stale gradients. The hardware is kept busier, but updates "
        "computed on old weights can slow convergence or unsettle it; which approach wins depends "
        "on the workload. Chapter 11 shows this on real runs, with the staleness of every update.",
        "spot the error", "13", "13-spot-async",
    ),
    Card(
        "Spot the error: “Our 4 GPUs gave a 4× speedup, so our efficiency is over 100%.”",
        "Efficiency is S/k. A speedup equal to the number of devices is exactly 100%, the ideal; "
        "to go above it the speedup on 4 GPUs would have to exceed 4.",
        "spot the error", "13", "13-spot-efficiency",
    ),
    Card(
        "Spot the error: “Pipeline parallelism is a production line, so every GPU in it works all the "
        "time.”",
        "Pipelines have bubbles. While a batch enters, later stages wait for their first input; "
        "while it drains, earlier stages have nothing left to do. Unless the batch is cut into "
        "micro-batches, these idle stretches take a large share of the time. Chapter 12 shows this on "
        "real runs: Gantt charts of real stages beside the formula (p−1)/(m+p−1).",
        "spot the error", "13", "13-spot-bubbles",
    ),
    Card(
        "Spot the error: “All-reduce is a bottleneck because all the gradients go through one "
        "central server.”",
        "That describes a parameter server. An all-reduce such as the ring has no centre: each "
        "device exchanges chunks with its neighbours. Its cost comes from the bytes each device "
        "must move and the number of latency hops, which depend on M and k.",
        "spot the error", "13", "13-spot-central-server",
    ),
    Card(
        "Spot the error: “Gradient accumulation gives the same update as the big batch, so our "
        "training will finish just as quickly.”",
        "The update is the same; the clock is not. The k micro-batches pass forward and backward "
        "one after another, so an update takes about k times as long as one micro-batch pass, "
        "roughly k times slower than k devices doing those passes at once. Memory was traded for "
        "time. Chapter 10 shows this on real runs, timelines side by side.",
        "spot the error", "13", "13-spot-accumulation-speed",
    ),
]

_CH08_WHY = [
    Card(
        "Why average the devices' gradients instead of adding them up?",
        "The big-batch gradient is a mean over all its examples. Each device already returns the "
        "mean of its own sub-batch, and with equal sub-batch sizes the mean of those means is the "
        "mean over everything (Step 3). A sum would be k times too large, as if η had been "
        "multiplied by k.",
        "why", "13", "13-why-average",
    ),
    Card(
        "Why does scaling efficiency fall as devices are added?",
        "The compute share T_compute/k keeps shrinking while T_comm stays the same or grows (more "
        "latency hops, and a bandwidth part that approaches a constant), so syncing fills an ever "
        "larger part of each step and S/k drops.",
        "why", "13", "13-why-efficiency-drops",
    ),
    Card(
        "Why sync the gradients at every step rather than once in a while?",
        "So that every copy of the model stays identical. Copies that skip syncs each follow their "
        "own gradients and turn into different models, and averaging such diverged copies later is "
        "no longer the big-batch update. (Methods that sync only now and then, such as local SGD, "
        "exist; they give up that exactness to communicate less.)",
        "why", "13", "13-why-every-step",
    ),
    Card(
        "Why is a fast interconnect (NVLink, InfiniBand) worth its price for large models?",
        "A large model has a large gradient, so M is large and the part of T_comm proportional to "
        "M/β dominates on a slow link. Raising β cuts that part and recovers much of the speedup "
        "that was lost. The notes quote a BERT-Large speedup comparison at this point, but we could find "
        "no source for it, so it is not used here; chapter 06 shows the effect with modeled curves "
        "and with α, β measured on this machine.",
        "why", "13", "13-why-fast-link",
    ),
    Card(
        "Why does model parallelism move data between devices inside every forward and backward "
        "pass, when data parallelism talks only once per step?",
        "With layers on different devices, activations have to cross from one device to the next "
        "on the way forward, and their gradients on the way back, at every boundary between "
        "devices. Data parallelism keeps all layers on every device and only exchanges gradients, "
        "in one all-reduce per step. Chapter 12 shows this on real runs and counts the bytes.",
        "why", "13", "13-why-model-parallel-traffic",
    ),
    Card(
        "Why can a single slow device hold back synchronous SGD but not asynchronous SGD?",
        "Synchronous SGD moves in lockstep: no one updates until the all-reduce finishes, and it "
        "finishes only when the slowest device has its gradient ready. Asynchronous workers send "
        "their updates when they are done and never wait for one another. Chapter 11 shows this on "
        "real runs: an injected straggler, then a parameter server with one slow worker.",
        "why", "13", "13-why-straggler",
    ),
    Card(
        "Why does the linear scaling rule multiply η by k, and not by √k?",
        "Take k small steps at rate η, each on its own small batch: if θ hardly moves between them, "
        "they add up to −η·Σ g_i. One step on the merged batch uses the mean Σ g_i / k, so to go as "
        "far it needs the rate k·η; the k comes from the averaging. √k measures something else: how "
        "much the standard deviation of the gradient noise falls when the batch grows k-fold. The "
        "square-root rule (×√k) scales η by that, the gentler choice. Either is usually paired with "
        "a warm-up that ramps η up over the first steps. Chapter 09 shows this on real runs.",
        "why", "13", "13-why-linear-rule",
    ),
]

_CH08_EDGE = [
    Card(
        "The claim “the effective batch is b·k” assumes equal local batches. What if they differ?",
        "The plain mean over devices is then slightly off: a device with few examples counts as "
        "much as one with many. Weight each device's gradient by its number of examples b_i: "
        "Σ b_i·g_i divided by Σ b_i. Chapter 03 shows this on real runs.",
        "edge case", "13", "13-edge-unequal",
    ),
    Card(
        "What speedup does the formula give when T_comm equals the compute share T_compute/k?",
        "The denominator becomes 2·T_compute/k, so S = k/2: an efficiency of 50%, with half of what "
        "the devices could give spent on syncing.",
        "edge case", "13", "13-edge-half",
    ),
    Card(
        "For a single device, k = 1, what does S = T_compute / (T_compute/k + T_comm) give?",
        "There is nobody to sync with, so T_comm = 0: log2 1 and (k−1)/k vanish in the notes' "
        "count, and so do the 2(k−1) terms of the ring. Then S = T_compute/T_compute = 1, the "
        "single-device baseline.",
        "edge case", "13", "13-edge-k1",
    ),
    Card(
        "What happens to the bandwidth factor (k−1)/k as k becomes very large?",
        "It rises steadily from 0 at k = 1 (and 1/2 at k = 2) toward 1, never reaching it. So the "
        "bandwidth part of T_comm levels off near M/β by the notes' formula, which counts only the "
        "reduce-scatter half, and near 2M/β for a full ring all-reduce. What keeps growing is the "
        "latency part: α·log2 k by the notes' count, 2(k−1)·α for a ring.",
        "edge case", "13", "13-edge-fraction",
    ),
    Card(
        "Gradient accumulation over k micro-batches with k = 1: what is left?",
        "Ordinary training on one batch. Adding up one gradient and dividing by 1 changes nothing: "
        "no memory saved, no time lost. Chapter 10 shows this on real runs: with one micro-batch the "
        "update is the plain gradient bit for bit.",
        "edge case", "13", "13-edge-accumulate-one",
    ),
    Card(
        "A model only just fits on one GPU. Is a two-GPU pipeline sure to train it faster?",
        "No. The second device adds compute, but the activations now travel between the two and "
        "each stage idles in bubbles while waiting for the other. For a small model these costs can "
        "cancel the gain or even make it slower. Chapter 12 shows this on real runs.",
        "edge case", "13", "13-edge-pipeline-two",
    ),
    Card(
        "Tensor parallelism splits W by columns, [W1 W2], over two devices. What must happen before "
        "a next layer that needs the whole output?",
        "Each device holds only its part of the output, Y1 or Y2. The parts must be combined across "
        "the devices (concatenated by an all-gather for a column split, summed by an all-reduce for "
        "a row split): a communication step between the layers. Chapter 12 shows this on real runs.",
        "edge case", "13", "13-edge-tensor-gather",
    ),
    Card(
        "For a fixed data set, what caps the useful number of data-parallel replicas?",
        "As replicas are added, each device's local batch shrinks toward a single example (or the "
        "global batch grows so large that it hurts generalisation). Beyond that, new replicas bring "
        "no more work to share, and communication takes over.",
        "edge case", "13", "13-edge-max-replicas",
    ),
]

_CH08_NUMERIC = [
    Card(
        "T_compute = {t_compute:g} s, k = {k} devices, and T_comm set equal to T_compute/k. What "
        "are S and the efficiency?",
        "T_comm = {t_comm:g} s, so S = {s:.3g} and S/k = {eff:.0%}. That is k/2 = {half_k:g}, as "
        "the algebra says.",
        "numeric", "13", "13-num-half",
        compute=equal_sync_and_compute, params={"t_compute": 0.8, "k": 8},
    ),
    Card(
        "One device, k = 1: T_compute = {t_compute:g} s and a gradient of {m:,.0f} bytes on {link}. "
        "What are T_comm and S?",
        "T_comm = {t_notes:g} s by the notes' formula and {t_ring:g} s by the ring formula: there "
        "is nothing to send. S = {s:g}.",
        "numeric", "13", "13-num-k1",
        compute=single_device, params={"t_compute": 0.5, "m": 100_000_000, "link": "10 Gb Ethernet"},
    ),
    Card(
        "What is the bandwidth factor (k−1)/k for k = {ks[0]}, {ks[1]}, {ks[2]}, {ks[3]}, {ks[4]} "
        "and {ks[5]}?",
        "{f[0]:.5g}, {f[1]:.5g}, {f[2]:.5g}, {f[3]:.5g}, {f[4]:.5g} and {f[5]:.5g}: rising toward 1 "
        "but never reaching it.",
        "numeric", "13", "13-num-fraction",
        compute=bandwidth_fractions, params={"ks": (1, 2, 4, 8, 64, 1024)},
    ),
    Card(
        "A job runs {s_measured:g}× faster on k = {k} GPUs. What is its efficiency, and when does "
        "the cost model reach it?",
        "S/k = {eff:.0%}: exactly the ideal, not above it. The model reaches it only with free "
        "sync: T_comm = 0 gives S = {s_model:g} and efficiency {eff_model:.0%}.",
        "numeric", "13", "13-num-efficiency",
        compute=efficiency_of, params={"s_measured": 4.0, "k": 4, "t_compute": 1.0},
    ),
    Card(
        "A base learning rate of {lr_base:g} was tuned at batch b; now the global batch is k = {k} "
        "times larger. What do the linear and the square-root rules give?",
        "Linear: {lr_lin:.3g} (×{k}). Square root: {lr_sq:.3g} (×√{k} = ×{root:g}). Chapter 09 trains "
        "with both on real runs.",
        "numeric", "13", "13-num-lr",
        compute=lr_rules, params={"lr_base": 0.1, "k": 4},
    ),
    Card(
        "A {m:,.0f}-byte gradient is all-reduced across k = {k} devices over {link}. How long does "
        "that take by the notes' formula and by the ring formula?",
        "With the preset α = {alpha_us:g} µs and β = {beta_gbs:g} GB/s: {t_notes_ms:.3g} ms by the "
        "notes' formula, which counts the reduce-scatter half only, and {t_ring_ms:.3g} ms for the "
        "whole ring all-reduce, {ratio:.2f} times as long.",
        "numeric", "13", "13-num-ring",
        compute=notes_against_ring, params={"k": 8, "m": 100_000_000, "link": "10 Gb Ethernet"},
    ),
    Card(
        "T_compute = {t_compute:g} s and T_comm = {t_comm:g} s, whatever k is. What is the ceiling "
        "on S, and how close do k = {ks[0]}, {ks[1]} and {ks[2]} come?",
        "The ceiling is T_compute/T_comm = {ceiling:g}. S = {s[0]:.3g}, {s[1]:.3g} and {s[2]:.3g}: "
        "creeping up to the ceiling and never passing it.",
        "numeric", "13", "13-num-ceiling",
        compute=speedup_ceiling, params={"t_compute": 1.0, "t_comm": 0.05, "ks": (8, 64, 1024)},
    ),
    Card(
        "T_compute = {t_compute:g} s, k = {k}, a {m:,.0f}-byte gradient, ring all-reduce. What does "
        "doubling β do to S on {links[0]}, and on {links[1]}?",
        "{links[0]}: S goes from {s_a[0]:.3g} to {s_a[1]:.3g}, ×{gain_a:.2f}. {links[1]}: from "
        "{s_b[0]:.3g} to {s_b[1]:.3g}, ×{gain_b:.2f}. Neither doubles, and where compute already "
        "dominates the gain is small.",
        "numeric", "13", "13-num-double-bandwidth",
        compute=doubled_bandwidth,
        params={"t_compute": 1.0, "k": 8, "m": 100_000_000, "links": ("10 Gb Ethernet", "100 Gb InfiniBand")},
    ),
]

_CH08 = _CH08_RECALL + _CH08_TRUE_FALSE + _CH08_SPOT + _CH08_WHY + _CH08_EDGE + _CH08_NUMERIC

ALL_CARDS: tuple[Card, ...] = tuple(_CH00 + _CH01 + _CH02 + _CH03 + _CH04 + _CH05 + _CH06 + _CH07 + _CH08)

# ---------------------------------------------------------------------------------------------
# Chapter 10: gradient accumulation. There k counts ranks, so the micro-batches are m.


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


_CH10 = [
    Card(
        "True or false: one process that runs m micro-batches one after another, adds up their "
        "gradients and divides by m steps exactly as if it had run the whole batch in one pass.",
        "True, up to rounding. With micro-batches of equal size, the mean of their mean gradients is "
        "the mean over all the examples: the average-of-averages argument of chapter 03, spread over "
        "time instead of over devices. In floating point the additions happen in another order, and "
        "addition is not associative, so the last bits may differ; chapter 10 checks the difference "
        "stays within float32 rounding on real runs.",
        "true/false", "10", "10-tf-same-gradient",
    ),
    Card(
        "True or false: the gradient one process accumulates over m micro-batches is the gradient that "
        "k = m ranks, one micro-batch each, get from the all-reduce.",
        "True, to rounding. Both add the same m micro-batch gradients and divide by m; one process adds "
        "them one after another, the all-reduce adds them across ranks. Only the order of the sums "
        "differs.",
        "true/false", "10", "10-tf-equals-all-reduce",
    ),
    Card(
        "Spot the error: “Accumulating m micro-batches gives the big-batch update, so a step ends as "
        "soon as it would on m devices.”",
        "The update matches; the clock does not. One process runs the m forward and backward passes "
        "in a row, so an update costs about m times one micro-batch's compute, where m devices run "
        "those passes side by side and then pay one all-reduce. Accumulation buys memory with time.",
        "spot the error", "10", "10-spot-just-as-fast",
    ),
    Card(
        "Edge case: gradient accumulation with m = 1 micro-batch. What changes?",
        "Nothing. The one gradient is added to zero and divided by 1, which leaves its bits as they "
        "were: the update is the plain one-batch update, with the same memory and the same time.",
        "edge case", "10", "10-edge-m-one",
    ),
    Card(
        "k ranks each accumulate m micro-batches. Why is all-reducing once, after the last "
        "micro-batch, the same update as all-reducing after every one?",
        "Sums can be regrouped: adding each rank's m gradients first and then summing over ranks "
        "gives the total that summing over ranks m times and then adding does. One all-reduce of the "
        "accumulated gradient replaces m of them, each as large; this is what DDP's no_sync() "
        "does. Only rounding can tell the two apart.",
        "why", "10", "10-why-one-all-reduce",
    ),
    Card(
        "Shrinking micro-batches lowers the memory a training step needs. Which memory, and which "
        "not?",
        "Only what the forward pass keeps for the backward pass: the activations, which grow with "
        "the number of examples in a pass. The parameters, the summed gradient (as large as the "
        "parameters) and the optimizer's state stay as they were, whatever m is.",
        "self-check", "10", "10-what-memory",
    ),
    Card(
        "k = {k} ranks each run m = {m} micro-batches per update, each taking t_micro = {t_micro:g} s; "
        "one all-reduce of the gradient takes t_comm = {t_comm:g} s. How long is an update when each "
        "micro-batch is all-reduced, and when the micro-batches are accumulated first?",
        "After every micro-batch: {calls_every:g} all-reduces and m·(t_micro + t_comm) = "
        "{t_every:.3g} s. Accumulated first: {calls_once:g} all-reduce and m·t_micro + t_comm = "
        "{t_once:.3g} s, which saves {calls_saved:g} calls and {t_saved:.3g} s per update. One "
        "process running all k·m micro-batches alone would need {t_alone:.3g} s.",
        "numeric", "10", "10-num-all-reduces",
        compute=accumulation_costs, params={"k": 4, "m": 8, "t_micro": 0.05, "t_comm": 0.02},
    ),
]

ALL_CARDS = ALL_CARDS + tuple(_CH10)

# ---------------------------------------------------------------------------------------------
# Chapter 09: a bigger batch wants a bigger step. Numbers from dpviz.theory.lr_rules and from the
# grids of real runs shipped with dpviz (dpviz.records.lr_grid).


def lr_three_rules(lr_base, k):
    """The rate each rule gives k ranks, from the rate ``lr_base`` tuned for one."""
    return {rule: lr_theory.scaled_lr(lr_base, rule, k) for rule in lr_theory.RULES} | {"root": float(np.sqrt(k))}


def lr_warmup_rates(lr, steps, warmup):
    """The first rates of a linear warm-up of ``warmup`` steps to ``lr``."""
    return {"rates": [float(v) for v in lr_theory.warmup_schedule(lr, steps, warmup)]}


def lr_bowl_gaps(k, multipliers):
    """The line model's curvatures, its limit 2/λ_max, and the one-step gap modeled and measured at each multiplier."""
    from dpviz.records.lr_grid import LrGrid  # the shipped grid is read only when the card is shown

    x, _ = line_data()
    lam = lr_theory.line_curvatures(x)
    grid = LrGrid.shipped("line")
    rows = [grid.index(k=k, multiplier=m) for m in multipliers]
    etas = [grid.small_step_rate(r) for r in rows]
    return {
        "lam": [float(v) for v in lam],
        "limit": lr_theory.stability_limit(x),
        "etas": etas,
        "modeled": [float(lr_theory.bowl_step_gap(eta, k, lam[0])) for eta in etas],
        "measured": [grid.median_relative_gap(r) for r in rows],
        "big": [k * eta for eta in etas],
    }


def lr_examples_needed(model, k):
    """How many times k = 1's examples each rule needed on k ranks to reach the same loss, in the shipped grid."""
    from dpviz.records.lr_grid import LrGrid

    grid = LrGrid.shipped(model)
    return {rule: grid.examples_ratio(k=k, rule=rule) for rule in lr_theory.RULES} | {"root": float(np.sqrt(k))}


def lr_divergence_steps(model, k, multiplier):
    """The step at which each warm-up's run diverged in the shipped grid (-1: it did not), and the rate."""
    from dpviz.records.lr_grid import LrGrid

    grid = LrGrid.shipped(model)
    warmups = grid.meta["warmups"]
    steps = [int(grid.diverged_at[grid.index(k=k, multiplier=multiplier, warmup=w)]) for w in warmups]
    return {"warmups": warmups, "steps": steps, "lr": grid.meta["base_lr"] * multiplier,
            "total": int(grid.steps[grid.index(k=k, multiplier=multiplier)])}


_CH09 = [
    Card(
        "Why does the linear rule multiply η by k, and where does the k come from?",
        "Picture one rank taking k steps of η on k batches in a row, and k ranks taking one step on the "
        "mean of the same k batches. If θ barely moves during the k small steps, each small step uses "
        "about the same gradient it would have at the start, so together they move −η·Σ g_i. The big "
        "step moves −η′·(Σ g_i)/k, because the all-reduce averages. Equal moves need η′ = k·η: the k "
        "undoes the averaging. Chapter 09 measures how far apart the two land on every run.",
        "why", "09", "09-why-linear",
    ),
    Card(
        "The notes' derivation asks “why exactly k, not √k?”. What is √k about, then?",
        "Noise. The mean of k·b example gradients scatters around the true gradient with a standard "
        "deviation √k times smaller than the mean of b. The square-root rule scales η by √k, which keeps "
        "η²/B, the spread each step adds, the same as before. It is the gentler choice; the linear rule "
        "(×k) is the one that keeps pace with one rank example for example, as long as η·λ stays small.",
        "why", "09", "09-why-sqrt",
    ),
    Card(
        "A rate η = {lr_base:g} was tuned for one rank at batch b. Now k = {k} ranks take b each. What "
        "rate does each rule give?",
        "×1 keeps {x1:.3g}; the square-root rule gives {sqrt:.3g} (×√{k} = ×{root:g}); the linear rule "
        "gives {linear:.3g} (×{k}).",
        "numeric", "09", "09-num-rules",
        compute=lr_three_rules, params={"lr_base": 0.01, "k": 4},
    ),
    Card(
        "In the shipped {model} grid, k = {k} ranks train on the same examples as one rank. "
        "How many times one rank's examples does each rule need to reach the same loss?",
        "×{k} (linear): {linear:.2f}×, about 1, as the rule promises. ×√{k}: {sqrt:.2f}×, about "
        "{k}/√{k} = {root:g}. ×1: {x1:.2f}×, about {k}: the same rate with {k} times fewer steps.",
        "numeric", "09", "09-num-examples",
        compute=lr_examples_needed, params={"model": "mlp", "k": 4},
    ),
    Card(
        "On the line model's bowl (curvatures λ from the data), how far apart do {k} steps of η and one "
        "step of {k}η land, from the same θ, as a fraction of the step, for the shipped runs at ×{multipliers[0]:g} "
        "and ×{multipliers[1]:g}?",
        "λ = {lam[0]:.2f} and {lam[1]:.2f}. At η = {etas[0]:.3g}: modeled {modeled[0]:.0%} (for λ_max), "
        "measured {measured[0]:.0%} (median over the run). At η = {etas[1]:.3g}: modeled {modeled[1]:.0%}, "
        "measured {measured[1]:.0%}. For small η·λ the gap is about (k−1)·η·λ/2: the rule holds while η·λ "
        "is small. For scale: the big rate there is {big[1]:.3g}, and the bowl diverges past 2/λ_max = {limit:.3g}.",
        "numeric", "09", "09-num-gap",
        compute=lr_bowl_gaps, params={"k": 4, "multipliers": (4.0, 64.0)},
    ),
    Card(
        "A linear warm-up of {warmup} steps to η = {lr:g}: which rates do the first {steps} steps use?",
        "{rates[0]:.3g}, {rates[1]:.3g}, {rates[2]:.3g}, then {rates[3]:.3g} and {rates[4]:.3g}: step t "
        "uses η·(t + 1)/{warmup} until the full rate.",
        "numeric", "09", "09-num-warmup",
        compute=lr_warmup_rates, params={"lr": 0.64, "steps": 5, "warmup": 3},
    ),
    Card(
        "True or false: with a long enough warm-up, any learning rate becomes safe.",
        "False. Warm-up only shortens the first steps, while the gradients are large and a big step "
        "overshoots. Once the ramp ends, the full rate is used, and a rate past the loss's curvature "
        "limit (2/λ_max on a bowl) diverges then. Chapter 09's runs show the blow-up arriving later "
        "with a longer warm-up, never not at all.",
        "true/false", "09", "09-tf-warmup-any",
    ),
    Card(
        "In the shipped {model} grid, k = {k} ranks at ×{multiplier:g}: at which step did the run with "
        "each warm-up diverge?",
        "At η = {lr:.3g}, in runs of {total} steps: warm-up {warmups[0]}, step {steps[0]}; {warmups[1]}, "
        "step {steps[1]}; {warmups[2]}, step {steps[2]}; {warmups[3]}, step {steps[3]}. The warm-up "
        "decided when, not whether.",
        "numeric", "09", "09-num-diverge",
        compute=lr_divergence_steps, params={"model": "mlp", "k": 4, "multiplier": 64.0},
    ),
    Card(
        "Spot the error: “k small steps and one step of k·η on their mean are the same thing, so with "
        "the linear rule a k-rank run retraces the one-rank run exactly.”",
        "They agree only while the gradient hardly changes over the k small steps. Each small step "
        "changes it by about η·λ of itself, so the two land (k−1)·η·λ/2 of a step apart for small η·λ, "
        "and far apart when η·λ is large: the big step then overshoots where the small ones would "
        "have turned. Chapter 09 measures the gap on every run.",
        "spot the error", "09", "09-spot-exact",
    ),
    Card(
        "Why does a warm-up help most at the start of training?",
        "At the start θ is far from any minimum, so gradients are large and every step is long. The "
        "linear rule's error is a fraction of the step, so long steps make a large error: the big step "
        "lands far from where k small steps would have gone. Ramping η up keeps those first steps "
        "short; by the time the full rate arrives the steps are short anyway.",
        "why", "09", "09-why-warmup-early",
    ),
    Card(
        "Edge case: k = 1. What do ×1, ×√k and ×k give?",
        "All three give η itself: with one rank the batch is what it was, and 1 = √1 = 1.",
        "edge case", "09", "09-edge-k1",
    ),
]

ALL_CARDS = ALL_CARDS + tuple(_CH09)


# ---------------------------------------------------------------------------------------------
# Chapter 12: splitting the model (pipeline stages, tensor-parallel layers, sharded optimizer state).

from dpviz.theory import memory, tensor_parallel  # noqa: E402
from dpviz.theory import pipeline as pipeline_theory  # noqa: E402


def pipeline_bubbles(p, ms):
    """The idle share (p-1)/(m+p-1) of a p-stage pipeline for each m."""
    return {"bubble": [pipeline_theory.bubble_fraction(p, m) for m in ms]}


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


_CH12 = [
    Card(
        "True or false: tensor parallelism and pipeline parallelism split the model the same way.",
        "False. A tensor-parallel layer has its weight matrix cut into blocks, so every rank holds a piece of "
        "every split layer; a pipeline hands each rank a run of whole layers, and the ranks work one after "
        "the other on each micro-batch. This chapter runs both: a linear layer split by columns and by rows, "
        "and an MLP cut into stages.",
        "true/false", "12", "12-tf-tensor-pipeline",
    ),
    Card(
        "Spot the error: “With a pipeline, no GPU ever waits: while one stage computes, the others do too.”",
        "At the start of a step the later stages have nothing to work on until the first micro-batch "
        "reaches them, and at the end the early stages run out of work while the last backward passes "
        "drain. With p stages and m micro-batches each stage idles for the share (p−1)/(m+p−1) of the "
        "step. The Gantt charts of this chapter show the grey gaps on real stages.",
        "spot the error", "12", "12-spot-bubbles",
    ),
    Card(
        "Why does a pipeline cut the batch into micro-batches?",
        "So that stages can work at once on different pieces: while stage 1 runs micro-batch 0, stage 0 "
        "already runs micro-batch 1. With one micro-batch only one stage works at any moment; with m of "
        "them the idle share falls to (p−1)/(m+p−1).",
        "why", "12", "12-why-micro-batches",
    ),
    Card(
        "All-forwards-then-all-backwards and one-forward-one-backward leave the same bubble. What does "
        "the second one buy?",
        "Memory. A stage must keep a micro-batch's activations from its forward pass until its backward "
        "pass. Running all m forwards first keeps m sets at once; alternating keeps at most p − s on stage "
        "s, whatever m is. The shipped runs record this as max_in_flight.",
        "self-check", "12", "12-one-f-one-b",
    ),
    Card(
        "A pipeline with a single stage, p = 1, or a single micro-batch, m = 1: what does the bubble "
        "formula give, and why?",
        "p = 1: (1−1)/(m+0) = 0; one stage never waits for a neighbour (and nothing is split). m = 1: "
        "(p−1)/p; the one micro-batch visits the stages one at a time, so each stage works 1/p of the "
        "step and waits the rest.",
        "edge case", "12", "12-edge-bubble-limits",
    ),
    Card(
        "Why do the ranks of a split model send each other data inside every forward and backward pass, "
        "when data-parallel ranks talk once per step?",
        "A split model's computation crosses ranks: a stage needs the previous stage's activations before "
        "it can start, and the gradient of its output from the next stage before it can run backward; a "
        "tensor-parallel layer needs the other ranks' blocks of its output. Data-parallel ranks hold whole "
        "models, so they only need to agree on the gradient, in one all-reduce per step.",
        "why", "12", "12-why-activations-move",
    ),
    Card(
        "A linear layer Y = X W is split over two ranks. With W cut by columns the ranks finish with an "
        "all-gather; with W cut by rows, with an all-reduce. Why the difference?",
        "By columns, each rank computes a different block of Y's columns, complete as it stands: putting "
        "the blocks side by side (gathering) gives Y. By rows, each rank multiplies its slice of X's columns "
        "by its rows of W and gets a full-size Y that is only one term of a sum: the terms must be added "
        "(reduced). The backward pass swaps them: column split sums the pieces of dX, row split gathers them.",
        "why", "12", "12-why-gather-or-reduce",
    ),
    Card(
        "True or false: with ZeRO stage 1 each rank holds only 1/k of the model's parameters.",
        "False. Stage 1 shards only the optimizer state (Adam's two running means): each rank updates its "
        "own 1/k of the parameters, then an all-gather hands everyone the whole updated vector, so every "
        "rank still holds all parameters and all gradients. Sharding the gradients too is stage 2, and the "
        "parameters as well stage 3.",
        "true/false", "12", "12-tf-zero-params",
    ),
    Card(
        "Why does training with sharded Adam state give the same parameters as plain data parallelism?",
        "Adam works coordinate by coordinate: the update of one parameter depends on its own gradient and "
        "its own two running means only. Splitting the coordinates among ranks changes who computes each "
        "update, not the update. The reduce-scatter may add the ranks' gradients in another order than the "
        "all-reduce, so the match is to rounding (floating-point addition is not associative).",
        "why", "12", "12-why-zero-same",
    ),
    Card(
        "How many bytes does each rank send in ZeRO-1's reduce-scatter of an M-byte gradient over a ring "
        "of k ranks, and which formula of the notes is that?",
        "(k−1)/k · M: k−1 steps, each passing one chunk of M/k bytes. That is the bandwidth term of the "
        "notes' all-reduce formula, which therefore prices a reduce-scatter, half an all-reduce. This "
        "chapter counts it on a real run.",
        "self-check", "12", "12-reduce-scatter-bytes",
    ),
    Card(
        "A pipeline has p = {p} equal stages and transfers are free. What share of the step does each stage "
        "sit idle with m = {ms[0]}, {ms[1]}, {ms[2]} and {ms[3]} micro-batches?",
        "(p−1)/(m+p−1): {bubble[0]:.0%}, {bubble[1]:.0%}, {bubble[2]:.0%} and {bubble[3]:.0%}. The bubble "
        "shrinks as micro-batches are added, but each micro-batch is then smaller and its transfers relatively "
        "dearer.",
        "numeric", "12", "12-num-bubble",
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
        "numeric", "12", "12-num-too-big",
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
        "numeric", "12", "12-num-tensor-bytes",
        compute=tensor_against_data, params={"batch": 16384, "width": 4096, "layers": 32, "k": 2},
    ),
]

ALL_CARDS = ALL_CARDS + tuple(_CH12)


# ---------------------------------------------------------------------------------------------
# Chapter 11: waiting. A straggler, the all-reduce overlapped with backward, asynchronous SGD.

from dpviz.theory import waiting as waiting_theory  # noqa: E402


def straggler_costs(k, t_compute, delay, t_comm):
    """One synchronous step of k ranks when one of them is ``delay`` seconds late."""
    step = waiting_theory.straggler_step(t_compute, [delay] + [0.0] * (k - 1), t_comm)
    return {
        "t_step_ms": step.t_step * 1e3,
        "t_base_ms": (t_compute + t_comm) * 1e3,
        "wait_ms": float(step.wait[1]) * 1e3,
        "others": k - 1,
        "idle": step.idle_fraction,
        "slowdown": waiting_theory.straggler_slowdown(t_compute, delay, t_comm),
    }


def overlap_costs(t_forward, t_backward, t_comm):
    """A step with no overlap (s01) against the shortest any overlap of the all-reduce with backward allows."""
    bounds = waiting_theory.overlap_bounds(t_forward, t_backward, t_comm)
    return {"serial_ms": bounds.serial * 1e3, "best_ms": bounds.best * 1e3, "saving_ms": bounds.saving * 1e3,
            "saving": bounds.saving_fraction}


def async_costs(t_grad):
    """Each worker's steady-state staleness, and updates per second synchronously and asynchronously."""
    sync, asynchronous = waiting_theory.update_rates(t_grad)
    return {"tau": waiting_theory.async_staleness(t_grad).tolist(), "sync_rate": sync, "async_rate": asynchronous,
            "sync_grads": sync * len(t_grad)}


_CH11 = [
    Card(
        "True or false: in synchronous data parallelism a rank whose gradient is ready early may go "
        "ahead and start its next step.",
        "False. It has to wait inside the all-reduce: the averaged gradient does not exist until the "
        "last rank has sent its share, and every rank steps with that average. Chapter 11 delays one "
        "rank on purpose and records the others sitting in the all-reduce for as long as the delay.",
        "true/false", "11", "11-tf-go-ahead",
    ),
    Card(
        "k = {k} ranks each compute for {t_compute:g} s, but one of them is {delay:g} s late; the "
        "all-reduce itself takes {t_comm:g} s. How long is the step, and how long do the others wait?",
        "The all-reduce finishes only after the late rank joins it, so the step takes "
        "{t_step_ms:.0f} ms instead of {t_base_ms:.0f} ms ({slowdown:.2f}× as long). Each of the "
        "{others} punctual ranks waits {wait_ms:.0f} ms, and {idle:.0%} of all the ranks' time in the "
        "step is spent waiting.",
        "numeric", "11", "11-num-straggler",
        compute=straggler_costs, params={"k": 8, "t_compute": 0.1, "delay": 0.05, "t_comm": 0.02},
    ),
    Card(
        "Why can one slow machine slow down every machine of a synchronous job, however many there are?",
        "Each step ends with an all-reduce that needs everyone's gradient. The others get there "
        "first and wait, so the step lasts as long as the slowest rank's compute plus the "
        "all-reduce. Adding machines does not help; removing the slow one, or not waiting for it, does.",
        "why", "11", "11-why-pace",
    ),
    Card(
        "A step has a {t_forward:g} s forward pass, a {t_backward:g} s backward pass and a {t_comm:g} s "
        "all-reduce. How long is it without overlap, and how short could overlap make it?",
        "Without overlap (what s01 assumes): {serial_ms:.0f} ms. The all-reduce can at best run "
        "while backward runs, since no gradient exists before it, so the step cannot be shorter "
        "than forward + the longer of the two: {best_ms:.0f} ms, {saving_ms:.0f} ms or {saving:.0%} "
        "saved. Real buckets fall short of that: the last one is ready only when backward ends.",
        "numeric", "11", "11-num-overlap",
        compute=overlap_costs, params={"t_forward": 0.01, "t_backward": 0.02, "t_comm": 0.015},
    ),
    Card(
        "Spot the error: “DDP overlaps the all-reduce with the backward pass, so communication costs "
        "us nothing any more.”",
        "Overlap only hides communication behind backward work that is still left to do. The last "
        "bucket is sent when backward is over, an all-reduce longer than the backward pass cannot "
        "hide, and the communication competes with the computation for cores and memory bandwidth. "
        "Chapter 11 measures how much it hides on your machine; it can be little.",
        "spot the error", "11", "11-spot-overlap-free",
    ),
    Card(
        "True or false: sending the gradients in buckets from backward hooks changes the averaged "
        "gradient compared with one all-reduce of the whole flat gradient.",
        "False for the values: each element is still the sum of the same k numbers divided by k. "
        "With k = 2 the result is identical in every bit, since a + b = b + a exactly; with more "
        "ranks the ring may add the k numbers in another order, and as floating-point addition is "
        "not associative the last bits can differ by rounding. Chapter 11 checks both, and DDP too.",
        "true/false", "11", "11-tf-buckets-change",
    ),
    Card(
        "Why does DDP group gradients into buckets instead of sending each parameter's gradient on "
        "its own, or all of them at once?",
        "All at once means waiting for the whole backward pass: no overlap. One call per parameter "
        "overlaps the most but pays the all-reduce's fixed latency α once per tensor, and tiny "
        "tensors such as biases waste it. Buckets of a few MiB start early enough to overlap and "
        "are large enough for the bandwidth term to dominate.",
        "why", "11", "11-why-buckets",
    ),
    Card(
        "What is the staleness τ of an asynchronous update?",
        "The number of updates the server applied between the moment a worker pulled θ and the "
        "moment its gradient arrived: the gradient was computed at θ_(t−τ) and is applied at θ_t. "
        "τ = 0 means it is fresh.",
        "self-check", "11", "11-what-staleness",
    ),
    Card(
        "Three asynchronous workers take {t_grad[0]:g} s, {t_grad[1]:g} s and {t_grad[2]:g} s per "
        "gradient. How stale are their gradients, and how many updates per second does the server "
        "make, asynchronously and synchronously?",
        "In steady state τ ≈ {tau[0]:.1f}, {tau[1]:.1f} and {tau[2]:.1f}: while the slow worker "
        "computes one gradient the fast ones deliver many. Asynchronously the server applies "
        "{async_rate:.0f} updates per second, each from one gradient; synchronously {sync_rate:.0f} "
        "per second, each averaging 3 gradients ({sync_grads:.0f} gradients per second), because "
        "every round waits for the slowest.",
        "numeric", "11", "11-num-async",
        compute=async_costs, params={"t_grad": (0.01, 0.01, 0.05)},
    ),
    Card(
        "True or false: with a single worker, asynchronous SGD through a parameter server is plain SGD.",
        "True, exactly. Nobody else updates θ between the worker's pull and its push, so every "
        "gradient is fresh (τ = 0) and each update is the ordinary θ − η·g. Chapter 11 runs it and "
        "finds θ equal to a one-process SGD loop's in every bit at every update, with no rounding "
        "difference at all, because the same operations run in the same order.",
        "true/false", "11", "11-tf-async-one-worker",
    ),
    Card(
        "Edge case: an asynchronous server drops every gradient staler than a bound. What does a bound "
        "of 0 do?",
        "Only fresh gradients count: one computed at the θ the server still holds. Whenever another "
        "worker's update lands first, the work is thrown away and the worker starts again from the "
        "new θ. The path becomes plain SGD again, but slow workers may rarely or never contribute, "
        "and their time is wasted.",
        "edge case", "11", "11-edge-bound-zero",
    ),
]

ALL_CARDS = ALL_CARDS + tuple(_CH11)


def cards_for(chapter: str) -> list[Card]:
    """The cards of one chapter, "00" to "13", in teaching order."""
    check_choice("chapter", chapter, tuple(CHAPTERS))
    return [card for card in ALL_CARDS if card.chapter == chapter]
