"""Self-check cards for the whole picture: the walkthrough's quick self-check, and batch norm."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number

CARDS = (
    Card(
        "Why should every device get a sub-batch of the same size?",
        "Then b cancels in the Step 3 derivation, and the plain mean of the device gradients is the "
        "big-batch gradient. With unequal sizes the plain mean gives small sub-batches too much "
        "say; a mean weighted by size would be needed.",
        "self-check", HERE, f"{TOPIC}-same-size",
    ),
    Card(
        "Why should the data be dealt out at random?",
        "What matters is that the combined batch is a fair sample of the data set. If the batch as "
        "a whole is skewed (one kind of example only, say), its exact mean is the mean of a skewed "
        "sample and points the wrong way. This corrects the notes, which blame a biased shard (one "
        "class per device): given one fair batch, how its examples are spread over equal-size "
        f"shards does not change the mean, even when every shard holds one kind only. {course.Ref('whole_picture')} "
        "shows both on real runs.",
        "self-check", HERE, f"{TOPIC}-random",
    ),
    Card(
        "Which operation hands the averaged gradient to every device?",
        "An all-reduce: the local gradients are summed, the sum is divided by k, and the result is "
        "delivered to all devices.",
        "self-check", HERE, f"{TOPIC}-which-operation",
    ),
    Card(
        "Why do the copies of the model not drift apart?",
        "They start from the same weights and the same optimizer state, and at every step each one "
        "applies the same averaged gradient with the same η, so their updates are identical.",
        "self-check", HERE, f"{TOPIC}-no-drift",
    ),
    Card(
        "With momentum or Adam, is averaging the gradients enough to keep the replicas together?",
        "Yes, as long as the optimizer state (momentum buffer, Adam's first and second moments) "
        "starts equal on every device: the same gradient then updates equal state in the same way. "
        "If the states start different, the replicas part.",
        "self-check", HERE, f"{TOPIC}-optimizers",
    ),
    Card(
        "When do more GPUs stop speeding up training?",
        "When T_comm outgrows the shrinking compute share T_compute/k; S then levels off near "
        "T_compute/T_comm.",
        "self-check", HERE, f"{TOPIC}-when-stop",
    ),
    Card(
        "Tell the whole story of data-parallel training in a few sentences, as if to a friend.",
        "Every device gets a full copy of the model and its own random, equal-sized share of the "
        "batch, and works out the gradient of that slice. An all-reduce adds the gradients up and "
        "divides by k, so all devices hold the same mean, which equals the big-batch gradient. Each "
        "copy takes the same step and stays identical to the others. The catch is the time the sync "
        "takes: when it is small next to T_compute/k the speedup approaches k, when it is large "
        "extra devices buy little.",
        "self-check", HERE, f"{TOPIC}-retell",
    ),
    Card(
        "The network has a batch-normalisation layer. Does the all-reduce of the gradients still "
        "give the gradient of the one big batch?",
        "Not by itself. Batch norm normalises each example by the mean and variance of the batch it "
        "sits in, so an example's gradient depends on its batch-mates; each replica sees only its "
        "own shard and normalises with that shard's statistics. All-reducing the statistics first "
        "(what SyncBatchNorm does) gives every replica the whole batch's mean and variance, and the "
        f"all-reduced gradient is again the big batch's, to rounding. {course.Ref('whole_picture')} shows both on "
        "real runs.",
        "why", HERE, f"{TOPIC}-batch-norm",
    ),
)
