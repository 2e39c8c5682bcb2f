"""Self-check cards for waiting: a straggler, the all-reduce overlapped with backward, and asynchronous SGD."""

from __future__ import annotations

from dpviz import course
from dpviz.engine.cards import Card
from dpviz.topics.waiting import theory as waiting

HERE = course.number_of(__name__)  # this chapter's number, from its place in dpviz.course
TOPIC = course.topic_of(__name__)  # the first word of its cards' keys, the same whatever the number


def straggler_costs(k, t_compute, delay, t_comm):
    """One synchronous step of k ranks when one of them is ``delay`` seconds late."""
    step = waiting.straggler_step(t_compute, [delay] + [0.0] * (k - 1), t_comm)
    return {
        "t_step_ms": step.t_step * 1e3,
        "t_base_ms": (t_compute + t_comm) * 1e3,
        "wait_ms": float(step.wait[1]) * 1e3,
        "others": k - 1,
        "idle": step.idle_fraction,
        "slowdown": waiting.straggler_slowdown(t_compute, delay, t_comm),
    }


def overlap_costs(t_forward, t_backward, t_comm):
    """A step with no overlap (s01) against the shortest any overlap of the all-reduce with backward allows."""
    bounds = waiting.overlap_bounds(t_forward, t_backward, t_comm)
    return {"serial_ms": bounds.serial * 1e3, "best_ms": bounds.best * 1e3, "saving_ms": bounds.saving * 1e3,
            "saving": bounds.saving_fraction}


def async_costs(t_grad):
    """Each worker's steady-state staleness, and updates per second synchronously and asynchronously."""
    sync, asynchronous = waiting.update_rates(t_grad)
    return {"tau": waiting.async_staleness(t_grad).tolist(), "sync_rate": sync, "async_rate": asynchronous,
            "sync_grads": sync * len(t_grad)}


CARDS = (
    Card(
        "True or false: in synchronous data parallelism a rank whose gradient is ready early may go "
        "ahead and start its next step.",
        "False. It has to wait inside the all-reduce: the averaged gradient does not exist until the "
        f"last rank has sent its share, and every rank steps with that average. {course.Ref('waiting')} delays one "
        "rank on purpose and measures how long the others sit in the all-reduce.",
        "true/false", HERE, f"{TOPIC}-tf-go-ahead",
    ),
    Card(
        "k = {k} ranks each compute for {t_compute:g} s, but one of them is {delay:g} s late; the "
        "all-reduce itself takes {t_comm:g} s. How long is the step, and how long do the others wait?",
        "The all-reduce finishes only after the late rank joins it, so the step takes "
        "{t_step_ms:.0f} ms instead of {t_base_ms:.0f} ms ({slowdown:.2f}× as long). Each of the "
        "{others} punctual ranks waits {wait_ms:.0f} ms, and {idle:.0%} of all the ranks' time in the "
        "step is spent waiting.",
        "numeric", HERE, f"{TOPIC}-num-straggler",
        compute=straggler_costs, params={"k": 8, "t_compute": 0.1, "delay": 0.05, "t_comm": 0.02},
    ),
    Card(
        "Why can one slow machine slow down every machine of a synchronous job, however many there are?",
        "Each step ends with an all-reduce that needs everyone's gradient. The others get there "
        "first and wait, so the step lasts as long as the slowest rank's compute plus the "
        "all-reduce. Adding machines does not help; removing the slow one, or not waiting for it, does.",
        "why", HERE, f"{TOPIC}-why-pace",
    ),
    Card(
        "A step has a {t_forward:g} s forward pass, a {t_backward:g} s backward pass and a {t_comm:g} s "
        "all-reduce. How long is it without overlap, and how short could overlap make it?",
        "Without overlap (what s01 assumes): {serial_ms:.0f} ms. The all-reduce can at best run "
        "while backward runs, since no gradient exists before it, so the step cannot be shorter "
        "than forward + the longer of the two: {best_ms:.0f} ms, {saving_ms:.0f} ms or {saving:.0%} "
        "saved. Real buckets fall short of that: the last one is ready only when backward ends.",
        "numeric", HERE, f"{TOPIC}-num-overlap",
        compute=overlap_costs, params={"t_forward": 0.01, "t_backward": 0.02, "t_comm": 0.015},
    ),
    Card(
        "Spot the error: “DDP overlaps the all-reduce with the backward pass, so communication costs "
        "us nothing any more.”",
        "Overlap only hides communication behind backward work that is still left to do. The last "
        "bucket is sent when backward is over, an all-reduce longer than the backward pass cannot "
        "hide, and the communication competes with the computation for cores and memory bandwidth. "
        f"{course.Ref('waiting')} measures how much it hides on your machine; it can be little, or nothing.",
        "spot the error", HERE, f"{TOPIC}-spot-overlap-free",
    ),
    Card(
        "True or false: sending the gradients in buckets from backward hooks changes the averaged "
        "gradient compared with one all-reduce of the whole flat gradient.",
        "False for the values: each element is still the sum of the same k numbers divided by k. "
        "With k = 2 the result is identical in every bit, since a + b = b + a exactly; with more "
        "ranks the ring may add the k numbers in another order, and as floating-point addition is "
        f"not associative the last bits can differ by rounding. {course.Ref('waiting')} checks both, and DDP too.",
        "true/false", HERE, f"{TOPIC}-tf-buckets-change",
    ),
    Card(
        "Why does DDP group gradients into buckets instead of sending each parameter's gradient on "
        "its own, or all of them at once?",
        "All at once means waiting for the whole backward pass: no overlap. One call per parameter "
        "overlaps the most but pays the all-reduce's fixed latency α once per tensor, and tiny "
        "tensors such as biases waste it. Buckets of a few MiB start early enough to overlap and "
        "are large enough for the bandwidth term to dominate.",
        "why", HERE, f"{TOPIC}-why-buckets",
    ),
    Card(
        "What is the staleness τ of an asynchronous update?",
        "The number of updates the server applied between the moment a worker pulled θ and the "
        "moment its gradient arrived: the gradient was computed at θ_(t−τ) and is applied at θ_t. "
        "τ = 0 means it is fresh.",
        "self-check", HERE, f"{TOPIC}-what-staleness",
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
        "numeric", HERE, f"{TOPIC}-num-async",
        compute=async_costs, params={"t_grad": (0.01, 0.01, 0.05)},
    ),
    Card(
        "True or false: with a single worker, asynchronous SGD through a parameter server is plain SGD.",
        "True, exactly. Nobody else updates θ between the worker's pull and its push, so every "
        f"gradient is fresh (τ = 0) and each update is the ordinary θ − η·g. {course.Ref('waiting')} runs it and "
        "finds θ equal to a one-process SGD loop's in every bit at every update, with no rounding "
        "difference at all, because the same operations run in the same order.",
        "true/false", HERE, f"{TOPIC}-tf-async-one-worker",
    ),
    Card(
        "Edge case: an asynchronous server drops every gradient staler than a bound. What does a bound "
        "of 0 do?",
        "Only fresh gradients count: one computed at the θ the server still holds. Whenever another "
        "worker's update lands first, the work is thrown away and the worker starts again from the "
        "new θ. The path becomes plain SGD again, but slow workers may rarely or never contribute, "
        "and their time is wasted.",
        "edge case", HERE, f"{TOPIC}-edge-bound-zero",
    ),
)
