"""Self-check cards for when a replica fails: a killed rank, checkpoint and restart, the Young/Daly interval,
carrying on with fewer ranks, DiLoCo."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.when_a_replica_fails import theory

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def young_daly_numbers(delta_s, mtbf_h):
    """τ* in minutes, and the time lost per hour at τ*, for a save of ``delta_s`` seconds and an MTBF in hours."""
    mtbf = mtbf_h * 3600.0
    tau = theory.young_daly_interval(delta_s, mtbf)
    return {"tau_min": tau / 60.0, "waste_pct": 100.0 * float(theory.waste_fraction(tau, delta_s, mtbf))}


def diloco_bytes(P, H):
    """Bytes one rank all-reduces per inner step: every step in plain DP, once per H steps in DiLoCo (float32)."""
    return {"dp_gb": 4 * P / 1e9, "diloco_mb": 4 * P / H / 1e6}


CARDS = (
    Card(
        "True or false: when one rank of a synchronous data-parallel job dies, the others notice at once, finish "
        "their step and carry on without it.",
        "False. The others are inside an all-reduce that needs the dead rank's part; they cannot finish the step. "
        "Either the connection breaks and they fail, or they wait until a timeout or a supervisor (here the "
        "launcher, watching exit codes) ends the job. Carrying on needs a deliberate new group.",
        "true/false", HERE, f"{TOPIC}-tf-others-carry-on",
    ),
    Card(
        "A checkpoint takes δ = {delta_s} s to save and the job fails on average once every {mtbf_h} hours. "
        "What interval between checkpoints does Young's rule give, and what fraction of the time is lost there?",
        "τ* = √(2·δ·M) = √(2·{delta_s}·{mtbf_h}·3600) s = {tau_min:.1f} min. At τ* the saves cost δ/τ* and the "
        "redone work τ*/(2M), equal halves: together {waste_pct:.2f} % of the time, before restarts.",
        "numeric", HERE, f"{TOPIC}-num-young-daly",
        compute=young_daly_numbers, params={"delta_s": 60, "mtbf_h": 4},
    ),
    Card(
        "Why must a restarted run restore the optimizer's velocity and the data order, not only θ, to equal the "
        "unfailed run?",
        "The next step depends on θ, on the velocity (momentum carries earlier gradients into it) and on which "
        "examples the next batch holds. Restore only θ and the first steps after the restart differ; the runs "
        "then part ways. With all three restored the steps repeat bit for bit.",
        "why", HERE, f"{TOPIC}-why-velocity",
    ),
    Card(
        "Spot the error: “Checkpoint every step: then a failure loses nothing.”",
        "A failure then redoes at most one step, but every step pays a save of δ seconds: the waste is δ/τ, large "
        "for a small τ. The total δ/τ + τ/(2M) is smallest at τ* = √(2δM), not at the smallest τ.",
        "spot the error", HERE, f"{TOPIC}-spot-every-step",
    ),
    Card(
        "Edge case: k − 1 survivors carry on and drop the dead rank's shard. What does the average of averages "
        "now average, and what happens to the learning rate's batch?",
        "The mean of k − 1 shard gradients: an unbiased gradient of a smaller batch, (k − 1)·b examples. By the "
        "linear rule the learning rate follows the batch down by (k − 1)/k; kept as it was, each step is a little "
        "too large for its noisier gradient.",
        "edge case", HERE, f"{TOPIC}-edge-shrunk-mean",
    ),
    Card(
        "A model of P = {P:.0e} parameters trains with DiLoCo at H = {H}. How many bytes does each rank all-reduce "
        "per inner step, against plain data parallelism?",
        "Plain data parallelism all-reduces the float32 gradient every step, 4·P bytes = {dp_gb:.0f} GB. DiLoCo "
        "all-reduces the parameters once per H steps: 4·P/H = {diloco_mb:.0f} MB a step on average.",
        "numeric", HERE, f"{TOPIC}-num-diloco-bytes",
        compute=diloco_bytes, params={"P": 1e9, "H": 500},
    ),
)
