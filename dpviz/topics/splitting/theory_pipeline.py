"""Pipeline parallelism in numbers: the order each stage works in, the modeled timeline, and the bubble.

The model's layers are cut into ``p`` stages, one per rank, and the batch into ``m`` equal
micro-batches. Stage ``s`` can run the forward pass of micro-batch ``j`` only once stage ``s-1``
has handed it that micro-batch's activations, and the backward pass only once stage ``s+1`` has
handed back the gradient of its output. Two orders of work are common:

* ``"gpipe"``: every forward pass, then every backward pass (all-forward-then-all-backward);
* ``"1f1b"``: after a short warm-up of forwards, one forward then one backward in turn, so that a
  stage never holds more than ``p - s`` micro-batches' activations at once.

With every stage taking ``t_f`` per micro-batch forward and ``t_b`` backward, and free transfers,
both orders finish in ``(m + p - 1)(t_f + t_b)`` while each stage works ``m (t_f + t_b)`` of it, so
each stage sits idle for the fraction

    bubble = (p - 1) / (m + p - 1)

of the run: zero for one stage, and shrinking as the micro-batches multiply.

    bubble_fraction(p=4, m=8)                        # 3 / 11
    modeled_timeline(p=4, m=8, schedule="1f1b")      # start and end of every pass, to draw as a Gantt chart
    idle_parts(fwd, bwd)                             # where each stage waits: before, between and after its passes
    replay(fwd, bwd, "gpipe")                        # measured passes, run again as early as free hand-offs allow

numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dpviz.engine.checks import check_choice, check_int, check_real

SCHEDULES = ("gpipe", "1f1b")
SCHEDULE_NAMES = {"gpipe": "all forwards, then all backwards", "1f1b": "one forward, one backward"}


def bubble_fraction(p, m):
    """``(p - 1) / (m + p - 1)``: the share of a pipelined step each of ``p`` stages spends idle with ``m`` micro-batches.

    Broadcasts over arrays like numpy; all-scalar input gives a float.
    """
    p, m = _ints("p", p), _ints("m", m)
    out = np.divide(np.subtract(p, 1), np.add(m, np.subtract(p, 1)), dtype=float)
    return float(out) if np.ndim(out) == 0 else out


def bubble_curves(ps, m_max: int = 16) -> dict:
    """``{p: (m, bubble)}`` for m = 1 .. m_max, one curve per number of stages, to draw."""
    m = np.arange(1, check_int("m_max", m_max, low=1) + 1)
    return {int(p): (m, bubble_fraction(int(p), m)) for p in ps}


def _ints(name, value):
    array = np.asarray(value)
    if array.ndim == 0:
        return check_int(name, array.item() if isinstance(value, np.generic) else value, low=1)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer >= 1 or an array of them; got dtype {array.dtype}.")
    if array.size:
        check_int(name, int(array.min()), low=1)
    return array


def check_stages(p: int, m: int, schedule: str = "gpipe") -> tuple[int, int, str]:
    """Check ``p``, ``m`` and ``schedule`` and return them."""
    p = check_int("p", p, low=1)
    m = check_int("m", m, low=1)
    return p, m, check_choice("schedule", schedule, SCHEDULES)


def stage_order(p: int, m: int, schedule: str, stage: int) -> list[tuple[str, int]]:
    """The passes stage ``stage`` runs, in order: ``("F", j)`` forward of micro-batch j, ``("B", j)`` backward.

    ``"gpipe"``: F0 .. F(m-1), then B0 .. B(m-1). ``"1f1b"``: ``min(p - stage - 1, m)`` forwards to
    fill the pipe, then forward and backward in turn, then the backwards left over.
    """
    p, m, schedule = check_stages(p, m, schedule)
    stage = check_int("stage", stage, low=0, high=p - 1)
    if schedule == "gpipe":
        return [("F", j) for j in range(m)] + [("B", j) for j in range(m)]
    warmup = min(p - stage - 1, m)
    order = [("F", j) for j in range(warmup)]
    for i in range(m - warmup):
        order += [("F", warmup + i), ("B", i)]
    return order + [("B", j) for j in range(m - warmup, m)]


def max_in_flight(p: int, m: int, schedule: str, stage: int) -> int:
    """The most micro-batches whose activations stage ``stage`` holds at once (forward done, backward not yet)."""
    held = peak = 0
    for kind, _ in stage_order(p, m, schedule, stage):
        held += 1 if kind == "F" else -1
        peak = max(peak, held)
    return peak


@dataclass(frozen=True, eq=False)
class Timeline:
    """When every pass of a pipelined step starts and ends, in seconds; the shapes of a pipeline record's arrays."""

    fwd: np.ndarray  # (p, m, 2): start and end of each stage's forward pass of each micro-batch
    bwd: np.ndarray  # (p, m, 2): the same for the backward passes
    schedule: str    # one of SCHEDULES
    source: str = "modeled"  # "modeled" here; a record says "measured"

    @property
    def p(self) -> int:
        return self.fwd.shape[0]

    @property
    def m(self) -> int:
        return self.fwd.shape[1]

    def span(self) -> float:
        """Seconds from the first pass's start to the last pass's end."""
        return span(self.fwd, self.bwd)

    def idle_fraction(self) -> np.ndarray:
        """(p,): the share of the span each stage does no forward or backward work."""
        return idle_fractions(self.fwd, self.bwd)

    def idle_parts(self) -> np.ndarray:
        """(p, 3): seconds each stage waited before, between and after its passes (:func:`idle_parts`)."""
        return idle_parts(self.fwd, self.bwd)


def _durations(name: str, value, p: int, m: int) -> np.ndarray:
    """``value`` (seconds, one number or a (p, m) array, one per stage and micro-batch) as a (p, m) array."""
    if np.ndim(value) == 0:
        return np.full((p, m), check_real(name, value, low=0, low_open=True))
    array = np.asarray(value, dtype=float)
    if array.shape != (p, m):
        raise ValueError(f"{name} must be a number or an array of shape (p, m) = ({p}, {m}); got shape {array.shape}.")
    if not (np.isfinite(array).all() and (array > 0).all()):
        raise ValueError(f"{name} must hold finite durations > 0 only; got a smallest of {np.nanmin(array)!r}.")
    return array


def modeled_timeline(p: int, m: int, schedule: str = "gpipe", *, t_f=1.0, t_b=2.0) -> Timeline:
    """The timeline of one step when each pass takes ``t_f`` (forward) or ``t_b`` (backward) and transfers are free.

    Each stage runs its :func:`stage_order` as early as its inputs allow. A backward pass is
    usually about twice a forward, hence the default ``t_b = 2 t_f``; the bubble does not depend on it.
    ``t_f`` and ``t_b`` may also be (p, m) arrays, one duration per stage and micro-batch (see :func:`replay`).
    """
    p, m, schedule = check_stages(p, m, schedule)
    t_f, t_b = _durations("t_f", t_f, p, m), _durations("t_b", t_b, p, m)
    fwd, bwd = np.full((p, m, 2), np.nan), np.full((p, m, 2), np.nan)
    orders = [stage_order(p, m, schedule, s) for s in range(p)]
    nxt = [0] * p  # index of the next pass each stage runs
    free = [0.0] * p  # when each stage finishes its current pass
    remaining = 2 * p * m
    while remaining:
        progressed = False
        for s in range(p):
            while nxt[s] < len(orders[s]):
                kind, j = orders[s][nxt[s]]
                if kind == "F":
                    ready = 0.0 if s == 0 else fwd[s - 1, j, 1]
                else:
                    ready = fwd[s, j, 1] if s == p - 1 else bwd[s + 1, j, 1]
                if np.isnan(ready):
                    break  # its input is not computed yet: another stage must move first
                start = max(free[s], ready)
                end = start + (t_f if kind == "F" else t_b)[s, j]
                (fwd if kind == "F" else bwd)[s, j] = (start, end)
                free[s], nxt[s], remaining, progressed = end, nxt[s] + 1, remaining - 1, True
        if not progressed:  # cannot happen for the two schedules here; guards a future one
            raise RuntimeError(f"schedule {schedule!r} deadlocks with p={p}, m={m}.")
    return Timeline(fwd, bwd, schedule)


def span(fwd, bwd) -> float:
    """Seconds from the earliest start to the latest end of the passes ``fwd``, ``bwd`` (p, m, 2)."""
    fwd, bwd = np.asarray(fwd, float), np.asarray(bwd, float)
    return float(max(fwd[..., 1].max(), bwd[..., 1].max()) - min(fwd[..., 0].min(), bwd[..., 0].min()))


def busy(fwd, bwd) -> np.ndarray:
    """(p,): seconds each stage spent in forward and backward passes."""
    fwd, bwd = np.asarray(fwd, float), np.asarray(bwd, float)
    return (fwd[..., 1] - fwd[..., 0]).sum(axis=1) + (bwd[..., 1] - bwd[..., 0]).sum(axis=1)


def idle_fractions(fwd, bwd) -> np.ndarray:
    """(p,): ``1 - busy / span`` per stage, the measured counterpart of :func:`bubble_fraction`."""
    return 1.0 - busy(fwd, bwd) / span(fwd, bwd)


def replay(fwd, bwd, schedule: str) -> Timeline:
    """The measured passes ``fwd``, ``bwd`` (p, m, 2) run again in ``schedule``'s order, each as early as free
    hand-offs allow: what the step would have taken with every pass as long as it was, and nothing lost between.
    """
    fwd, bwd = np.asarray(fwd, float), np.asarray(bwd, float)
    p, m = fwd.shape[:2]
    return modeled_timeline(p, m, schedule, t_f=fwd[..., 1] - fwd[..., 0], t_b=bwd[..., 1] - bwd[..., 0])


WAIT_PARTS = ("before its first forward", "between its first forward and its last backward", "after its last backward")


def idle_parts(fwd, bwd) -> np.ndarray:
    """(p, 3): seconds each stage waited before its first pass, in the gaps between its passes, and after its
    last pass until the step ended (the order of :data:`WAIT_PARTS`); each row adds up to the stage's idle time.

    Both schedules start a stage with a forward and end it with a backward, so the parts are also
    before its first forward, between its forwards and backwards, after its last backward.
    """
    fwd, bwd = np.asarray(fwd, float), np.asarray(bwd, float)
    passes = np.concatenate([fwd, bwd], axis=1)                  # (p, 2m, 2)
    passes = np.take_along_axis(passes, np.argsort(passes[..., :1], axis=1), axis=1)  # in time order per stage
    t0, t1 = passes[..., 0].min(), passes[..., 1].max()
    before = passes[:, 0, 0] - t0
    between = (passes[:, 1:, 0] - passes[:, :-1, 1]).clip(min=0).sum(axis=1)
    after = t1 - passes[:, -1, 1]
    return np.stack([before, between, after], axis=1)


def handoff_delays(fwd, bwd, schedule: str) -> np.ndarray:
    """Seconds between a pass's input being ready on the neighbour (its pass ended) and the pass starting, for
    every pass whose input came from another stage, counted from when its own stage was also free.

    Zero in the model; measured, it is the hand-off itself (the send, the receive, the receiving process
    waking up) and any wait for a core.
    """
    fwd, bwd = np.asarray(fwd, float), np.asarray(bwd, float)
    p, m = fwd.shape[:2]
    delays = []
    for s in range(p):
        free = -np.inf
        for kind, j in stage_order(p, m, schedule, s):
            start, end = (fwd if kind == "F" else bwd)[s, j]
            if kind == "F" and s > 0:
                delays.append(start - max(fwd[s - 1, j, 1], free))
            elif kind == "B" and s < p - 1:
                delays.append(start - max(bwd[s + 1, j, 1], free))
            free = end
    return np.array(delays)
