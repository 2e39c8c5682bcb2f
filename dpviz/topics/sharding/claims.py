"""Shard everything: what the chapter prints of ZeRO stages 0 to 3 (FSDP), from their records (numpy only).

Asserted, each with a message naming the numbers: every stage's parameters equal plain data parallelism's
after every step (:func:`same_parameters`), the ranks held what the digests say (:func:`replicas_hold_their_share`),
stage 3 equals torch's FSDP2 ``fully_shard`` (:func:`matches_fully_shard`), every rank held exactly the
bytes :func:`dpviz.topics.sharding.theory.bytes_held` counts (:func:`memory_claims`), sent exactly what
:func:`dpviz.topics.sharding.theory.bytes_sent` counts, 1.5 times plain data parallelism's at stage 3
(:func:`bytes_claims`), and the ZeRO paper's Figure 1 (:func:`zero_paper_claim`); in the traced step of ZeRO-3
every layer was gathered twice, freed after each use, and the bytes held rose to the model's peak and fell back
to the at-rest level between layers (:func:`timeline_claims`). Described, never asserted:
the measured step times (:func:`step_time_claims`) and the cost model's (:func:`modeled_time_claims`).
:func:`sharding_claims` gathers the lines for records over k.
"""

from __future__ import annotations

import numpy as np

from dpviz.engine.tolerance import GRAD_TOLERANCE, tolerance_words
from dpviz.topics.splitting import theory_memory as memory
from dpviz.topics.sharding import theory
from dpviz.topics.ground_floor.links import SPEED_ORDER

FSDP_TOLERANCE = GRAD_TOLERANCE  # stage 3 against torch's fully_shard: the same arithmetic, sums in another order
PAPER_GB = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}  # the ZeRO paper's Figure 1: Ψ = 7.5 B, N_d = 64, as printed
PAPER_DIGITS = {0: 0, 1: 1, 2: 1, 3: 1}


def same_parameters(run, tol: float = GRAD_TOLERANCE) -> str:
    """Every stage's full parameters equal plain data parallelism's after every step, within ``tol`` of the
    largest parameter (float32 rounding: the ring sums in another order than one all-reduce)."""
    scale = float(np.abs(run.params[run.index(0)]).max())
    worst = {}
    for stage in run.stage.tolist():
        diff = run.max_param_diff(stage)
        step = int(diff.argmax())
        assert diff[step] <= tol * scale, (
            f"after step {step}, ZeRO stage {stage}'s parameters differ from plain data parallelism's by "
            f"{diff[step]:.2e}, more than {tolerance_words(tol)} of the largest parameter ({scale:.3g})")
        worst[stage] = float(diff.max())
    return (f"k = {run.k}: ZeRO-1, ZeRO-2 and ZeRO-3 trained the same parameters as plain data parallelism after "
            f"each of {run.steps} steps, within {max(worst.values()) / scale:.0e} of the largest parameter "
            f"(float32 rounding; the bound is {tolerance_words(tol)}).")


def replicas_hold_their_share(run) -> str:
    """At stages 0 to 2 every rank held the same parameters, bit for bit; at stage 3 each held its own chunk of
    every layer: each rank's digest equals the digest of what the recorded parameters say it held."""
    k, units = run.k, run.unit_size
    for row, stage in enumerate(run.stage.tolist()):
        for step in range(run.steps + 1):
            padded = theory.pad(run.params[row, step], units, k)
            for rank in range(k):
                held = padded if stage < 3 else theory.shard_of(padded, units, k, rank)
                assert run.param_digest[row, step, rank] == theory.digest(held), (
                    f"ZeRO stage {stage}, after step {step}: rank {rank} held parameters whose digest "
                    f"{run.param_digest[row, step, rank].decode()[:12]}… is not that of the recorded "
                    f"{'parameters' if stage < 3 else 'shard'} ({theory.digest(held).decode()[:12]}…)")
    return (f"k = {run.k}: at stages 0 to 2 every rank held the same {run.n_params:,} parameters bit for bit after "
            f"every step; at stage 3 each rank held only its own 1/{k} of every layer.")


def matches_fully_shard(run, tol: float = FSDP_TOLERANCE) -> str:
    """ZeRO-3 as written here against torch's FSDP2 (``fully_shard`` per layer, torch.optim.Adam) on the same
    model, data and learning rate: the same parameters after every step, within ``tol`` of the largest one."""
    assert run.params_fsdp is not None, "this record has no FSDP2 run: record it with fsdp=True"
    ours = run.params[run.index(3)].astype(np.float64)
    scale = float(np.abs(run.params_fsdp).max())
    diff = np.abs(ours - run.params_fsdp).max(axis=1)
    step = int(diff.argmax())
    assert diff[step] <= tol * scale, (
        f"after step {step}, ZeRO-3's parameters differ from torch's fully_shard by {diff[step]:.2e}, more than "
        f"{tolerance_words(tol)} of the largest parameter ({scale:.3g})")
    return (f"k = {run.k}: ZeRO-3 written with dpviz's ring matches torch's fully_shard (FSDP2) after each of "
            f"{run.steps} steps, within {diff.max() / scale:.0e} of the largest parameter (bound {tolerance_words(tol)}).")


def memory_claims(run) -> list[str]:
    """Each rank held, at the peak of each phase, exactly the bytes the model counts for its stage, category by
    category; the lines compare what one rank keeps at rest with plain data parallelism's 16P bytes."""
    P, k = int(theory.padded_sizes(run.unit_size, run.k).sum()), run.k
    for row, stage in enumerate(run.stage.tolist()):
        model = run.modeled_memory(stage)
        for rank in range(k):
            measured = run.memory[row, rank]
            if not (measured == model).all():
                phase, category = np.argwhere(measured != model)[0]
                raise AssertionError(
                    f"ZeRO stage {stage}, rank {rank}, {theory.PHASES[phase]}: held {measured[phase, category]:,} bytes "
                    f"of {theory.CATEGORIES[category]}, where the model counts {model[phase, category]:,}")
    rest = {stage: int(run.memory[row, 0, 2, :3].sum()) for row, stage in enumerate(run.stage.tolist())}
    formulas = {0: "16P", 1: f"8P + 8P/{k}", 2: f"4P + 12P/{k}", 3: f"16P/{k}"}
    peak3 = int(run.memory[run.index(3), 0, 1, 3])
    padding = "" if P == run.n_params else f" ({run.n_params:,} padded so that every layer splits into {k})"
    return [
        f"k = {k}, P = {P:,} parameters{padding}, float32 Adam: every rank held exactly the bytes the model counts, in every "
        f"phase, for parameters, gradients, Adam's state and the layer being gathered;",
        "at rest one rank holds " + ", ".join(f"{STAGE_WORDS[s]} {rest[s]:,} B ({formulas[s]})" for s in sorted(rest)) + ";",
        f"ZeRO-3 adds, in the backward pass, one layer gathered with its full gradient: {peak3:,} B for the largest "
        f"layer ({int(theory.padded_sizes(run.unit_size, k).max()):,} parameters).",
    ]


STAGE_WORDS = {0: "plain", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


def bytes_claims(run) -> str:
    """Every rank sent exactly what the ring sends per step at each stage, counted by the ring itself: stages
    0 to 2 one all-reduce's 2(k−1)/k · M, stage 3 half as much again, 3(k−1)/k · M."""
    for row, stage in enumerate(run.stage.tolist()):
        model = run.modeled_bytes(stage)
        for name, key in (("rs_bytes", "reduce_scatter"), ("ag_bytes", "all_gather")):
            sent = getattr(run, name)[row]
            assert (sent == model[key]).all(), (
                f"ZeRO stage {stage}: ranks sent {np.unique(sent).tolist()} bytes per step in {key.replace('_', '-')}s, "
                f"where the ring sends {model[key]:,}")
    total = run.sent().sum(axis=(1, 2))
    ratio = total[run.index(3)] / total[run.index(0)]
    assert np.isclose(ratio, 1.5) or run.k == 1, (
        f"ZeRO-3 sent {ratio:.3f} times plain data parallelism's bytes, not 1.5")
    per_step = {stage: int(run.sent()[row, 0, 0]) for row, stage in enumerate(run.stage.tolist())}
    return (f"k = {run.k}, M = {run.message_bytes:,} B: each rank sent, per step, "
            + ", ".join(f"{STAGE_WORDS[s]} {per_step[s]:,} B" for s in sorted(per_step))
            + f": ZeRO-1 and ZeRO-2 send what the all-reduce sends, ZeRO-3 {ratio:g} times as much "
              f"(it gathers every layer twice).")


def step_time_claims(run) -> str:
    """The median measured step time at each stage, described beside the bytes and the ring collectives each stage
    calls per step (:func:`dpviz.topics.sharding.theory.rings_per_step`); oversubscribed runs say so.

    The bytes cannot explain the order: ZeRO-1 and ZeRO-2 send plain data parallelism's bytes and may still be
    slower; what grows with the stage on this small model is the number of collectives, each paying the ring's
    latency and Python's work whatever its size. The sentence compares the ratios of time with those of bytes, as
    measured, and says what the 1.5× of ZeRO-3's bytes can explain: at most 1.5× of its communication."""
    medians = {stage: float(np.median(run.step_seconds[row])) for row, stage in enumerate(run.stage.tolist())}
    assert all(m > 0 for m in medians.values()), "a step took no time: the clock did not run"
    layers = len(run.unit_size)
    sent = {stage: int(run.sent()[row, 0, 0]) for row, stage in enumerate(run.stage.tolist())}
    rings = {stage: theory.rings_per_step(stage, layers) for stage in medians}
    plain = medians[0]
    line = (f"k = {run.k}, measured median step: "
            + ", ".join(f"{STAGE_WORDS[s]} {medians[s] * 1e3:.1f} ms" + ("" if s == 0 else f" ({medians[s] / plain:.2f}×)")
                        for s in sorted(medians)))
    if run.oversubscribed:
        return line + (f"; {run.k} ranks shared {run.cores} cores, so these times include ranks waiting for a core, "
                       "and compare stages only roughly.")
    same_bytes = [s for s in (1, 2) if s in sent and sent[s] == sent[0]]
    slower = [s for s in same_bytes if medians[s] > plain]
    parts = [line + "."]
    if slower:
        parts.append(f"{_and_words([STAGE_WORDS[s] for s in slower])} sent exactly plain data parallelism's "
                     f"{sent[0]:,} B per step and still took "
                     + _and_words([f"{medians[s] / plain:.2f}×" for s in slower]) + " as long: the bytes do not "
                     "explain these times.")
    parts.append("Ring collectives per step, by stage: " + ", ".join(f"{STAGE_WORDS[s]} {rings[s]}" for s in sorted(rings))
                 + f" ({layers} layers): each pays the ring's latency and Python's work per call, whatever its size, "
                 f"and with {run.n_params:,} parameters a call carries only a few KiB.")
    if 3 in medians and run.traced:
        spent = sum(end - start for _, _, start, end in run.rings(3, 0))
        step = float(run.timeline(3, 0)["seconds"][-1])
        parts.append(f"In the traced ZeRO-3 step rank 0 spent {spent * 1e3:.1f} ms of {step * 1e3:.1f} ms inside its "
                     f"{len(run.rings(3, 0))} collectives.")
    if 3 in medians:
        parts.append(f"ZeRO-3's {sent[3] / sent[0]:g}× the bytes explains at most {sent[3] / sent[0]:g}× of its "
                     f"communication, not its {medians[3] / plain:.2f}× of the step: bytes decide the time only where "
                     "the model is large and the link slow, as priced above.")
    return " ".join(parts)


def _and_words(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def peaks_over_stages(runs) -> list[str]:
    """One rank's peak (what it keeps at rest plus the layer it holds whole) at each stage and k, and whether it
    fell from each stage to the next; where it rose, why: the gathered layer against the whole model. Asserted:
    the peaks are the model's (:func:`memory_claims`)."""
    runs = sorted(runs, key=lambda r: r.k)
    lines = []
    for run in runs:
        memory_claims(run)
        peak = {int(s): int(peak_by_category(run.memory[row, 0]).sum()) for row, s in enumerate(run.stage)}
        rose = [s for s in (2, 3) if s in peak and peak[s] > peak[s - 1]]
        head = (f"k = {run.k}, one rank's peak: " + ", ".join(f"{STAGE_WORDS[s]} {peak[s]:,} B" for s in sorted(peak)))
        if not rose:
            lines.append(head + ": lower at every stage than at the one before.")
            continue
        largest = int(theory.padded_sizes(run.unit_size, run.k).max())
        total = int(theory.padded_sizes(run.unit_size, run.k).sum())
        layer3 = int(run.memory[run.index(3), 0, :, 3].max())
        rest = {s: int(run.memory[run.index(s), 0, 2, :3].sum()) for s in (1, 3)}
        lines.append(head + f": it rises from {STAGE_WORDS[rose[0] - 1]} to "
                     f"{_and_words([STAGE_WORDS[s] for s in rose])}. The largest layer holds {largest:,} of the "
                     f"model's {total:,} parameters ({largest / total:.0%}). ZeRO-3 keeps {rest[3]:,} B at rest, "
                     f"{rest[1] - rest[3]:,} B less than ZeRO-1, but in that layer's backward it holds {layer3:,} B more: "
                     "the layer gathered with its full gradient. With many layers, each a small share of the model, "
                     "that term would be a sliver.")
    return lines


def modeled_time_claims(run, *, n_params: int | None = None) -> str:
    """The cost model's communication time per step at each stage on each preset link, for ``n_params``
    float32 parameters (default this record's) over the record's k and layers; modeled, so described."""
    n = run.n_params if n_params is None else int(n_params)
    M, layers = 4 * n, len(run.unit_size)
    plain = theory.t_comm_zero_on_links(run.k, M, zero_stage=0, layers=layers)
    full = theory.t_comm_zero_on_links(run.k, M, zero_stage=3, layers=layers)
    parts = [f"{name} {_time(plain[name])} → {_time(full[name])}" for name in SPEED_ORDER]
    return (f"Modeled (α-β, k = {run.k}, M = {M:,} B, {layers} layers), communication per step, plain data "
            f"parallelism → ZeRO-3: " + "; ".join(parts) + ".")


def _time(seconds: float) -> str:
    return f"{seconds:.3g} s" if seconds >= 1 else f"{seconds * 1e3:.3g} ms"


def zero_paper_claim() -> str:
    """The ZeRO paper's Figure 1 from :func:`dpviz.topics.splitting.theory_memory.zero_paper_gb`: 7.5 B parameters on 64 GPUs
    under mixed-precision Adam (2 + 2 + 12 bytes per parameter) hold 120, 31.4, 16.6 and 1.9 GB per device."""
    gb = memory.zero_paper_gb(7.5e9, 64)
    for stage, printed in PAPER_GB.items():
        assert round(gb[stage], PAPER_DIGITS[stage]) == printed, (
            f"stage {stage}: the model gives {gb[stage]:.4g} GB per device, which does not round to the paper's {printed}")
    return ("7.5 B parameters on 64 GPUs with mixed-precision Adam (2 + 2 + 12 bytes per parameter): "
            + ", ".join(f"{STAGE_WORDS[s]} {gb[s]:.{PAPER_DIGITS[s]}f} GB" for s in sorted(gb))
            + " per device, the ZeRO paper's Figure 1.")


def memory_over_k(runs) -> str:
    """At rest, one rank's bytes under plain data parallelism are the same for every k; under ZeRO-3 they fall
    as 1/k; ZeRO-1 and ZeRO-2 fall towards their floors of 8P and 4P. ``runs``: records of one model over k."""
    runs = sorted(runs, key=lambda r: r.k)
    assert len({int(r.n_params) for r in runs}) == 1, "the records are of different models"
    rest = {r.k: {int(s): int(r.memory[row, 0, 2, :3].sum()) for row, s in enumerate(r.stage)} for r in runs}
    ks = sorted(rest)
    assert len({rest[k][0] for k in ks}) == 1, f"plain data parallelism held {[rest[k][0] for k in ks]} bytes over k = {ks}"
    for stage in (1, 2, 3):
        held = [rest[k][stage] for k in ks]
        assert all(a > b for a, b in zip(held, held[1:])), f"ZeRO-{stage} held {held} bytes over k = {ks}: not falling"
    return ("One rank's training state at rest over k = " + ", ".join(map(str, ks)) + ": "
            + "; ".join(f"{STAGE_WORDS[s]} " + " → ".join(f"{rest[k][s]:,}" for k in ks) + " B" for s in (0, 1, 2, 3))
            + ".")


def _trace_fails(run, rank: int, message: str):
    raise AssertionError(f"k = {run.k}, ZeRO-3, rank {rank}, traced step: {message}")


def _event(e: int, action, layer) -> str:
    """Event ``e`` in words, its layer counted from 1 as the chapter counts them: ``event 7 (free of layer 2)``."""
    return f"event {e} ({action}{f' of layer {int(layer) + 1}' if layer >= 0 else ''})"


def check_stage3_trace(run, rank: int) -> dict:
    """Assert what the chapter says of one rank's traced ZeRO-3 step; return the numbers its sentences print.

    Each layer gathered exactly twice, once before the backward pass starts and once after; every gather
    freed before the next one starts; each layer's gradient made, reduce-scattered and let go once, after
    its backward gather; the bytes held never above the model's peak (the shards at rest, one layer gathered,
    its full gradient) and reaching it; back at the at-rest level after every use of a layer and at the
    step's two ends; and the whole sequence of events and bytes is the one :func:`dpviz.topics.sharding.theory.step_trace`
    gives. Layers are counted from 1 in the messages, as in the chapter's words and figure.
    """
    line = run.timeline(3, rank)
    t, held, layer, action = line["seconds"], line["bytes"], line["layer"], line["action"]
    layers = len(run.unit_size)
    model = run.modeled_memory(3)
    rest, peak = int(model[-1].sum()), int(model.sum(axis=1).max())
    if not (np.diff(t) >= 0).all() or t[0] < 0:
        _trace_fails(run, rank, f"the event times run backwards ({np.round(t * 1e3, 3).tolist()} ms)")
    step_time = float(run.step_seconds[run.index(3), int(run.trace_step), rank])
    if t[-1] > step_time:
        _trace_fails(run, rank, f"the last event came at {t[-1] * 1e3:.3f} ms, after the step's measured end, "
                                f"{step_time * 1e3:.3f} ms")
    turn = np.flatnonzero(action == "backward")
    if turn.size != 1:
        _trace_fails(run, rank, f"the backward pass started {turn.size} times")
    turn = int(turn[0])
    for i in range(layers):
        gathers = np.flatnonzero((action == "gather") & (layer == i))
        if gathers.size != 2 or not gathers[0] < turn < gathers[1]:
            _trace_fails(run, rank, f"layer {i + 1} was gathered {gathers.size} time{'s' if gathers.size != 1 else ''} "
                                    f"(at events {gathers.tolist()}, the backward starting at event {turn}), not once "
                                    "for its forward and once for its backward")
        for kind in ("grad", "reduce-scatter", "reduced"):
            at = np.flatnonzero((action == kind) & (layer == i))
            if at.size != 1 or not at[0] > gathers[1]:
                _trace_fails(run, rank, f"layer {i + 1}'s gradient had {at.size} '{kind}' event{'s' if at.size != 1 else ''} "
                                        f"(at {at.tolist()}), where one comes after its backward gather (event {gathers[1]})")
    gathered = None
    for e, (what, which) in enumerate(zip(action.tolist(), layer.tolist())):
        if what == "gather":
            if gathered is not None:
                _trace_fails(run, rank, f"layer {which + 1} was gathered at event {e} while layer {gathered + 1} was still "
                                        "gathered: it was not freed after its use")
            gathered = which
        elif what == "free":
            if gathered != which:
                _trace_fails(run, rank, f"event {e} freed layer {which + 1}, which was not gathered")
            gathered = None
    if gathered is not None:
        _trace_fails(run, rank, f"layer {gathered + 1} was still gathered when the step ended: it was never freed")
    top = int(held.max())
    if top > peak:
        e = int(held.argmax())
        _trace_fails(run, rank, f"the rank held {top:,} B after {_event(e, action[e], layer[e])}, more than "
                                f"the model's peak of {peak:,} B (shards at rest plus one layer and its gradient)")
    if top != peak:
        _trace_fails(run, rank, f"the rank held at most {top:,} B, never the model's peak of {peak:,} B")
    between = np.flatnonzero(np.isin(action, ["begin", "end", "reduced"]) | ((action == "free") & (np.arange(len(t)) < turn)))
    off = [int(e) for e in between if held[e] != rest]
    if off:
        e = off[0]
        _trace_fails(run, rank, f"after {_event(e, action[e], layer[e])} the rank held {held[e]:,} B, not "
                                f"the {rest:,} B it keeps at rest")
    want_layers, want_actions, want_bytes = run.modeled_trace(3)
    got = np.array([theory.TRACE_ACTIONS.index(a) if a in theory.TRACE_ACTIONS else -1 for a in action.tolist()])
    if len(t) != len(want_actions) or (layer != want_layers).any() or (got != want_actions).any() or (held != want_bytes).any():
        n = min(len(t), len(want_actions))
        e = next((e for e in range(n) if (layer[e], got[e], held[e]) != (want_layers[e], want_actions[e], want_bytes[e])), n)
        said = _event(e, action[e], layer[e]) if e < len(t) else f"event {e} (none traced)"
        wanted = (_event(e, theory.TRACE_ACTIONS[want_actions[e]], want_layers[e]) + f", {want_bytes[e]:,} B"
                  if e < len(want_actions) else "none")
        _trace_fails(run, rank, f"{said}{f', {held[e]:,} B,' if e < len(t) else ''} is not the model's {wanted} "
                                f"(the model has {len(want_actions)} events, the trace {len(t)})")
    biggest = int(layer[held.argmax()])
    uses = run.uses(3, rank)
    gather_time = sum(t[e + 1] - t[e] for e in np.flatnonzero(action == "gather"))
    return {"rest": rest, "peak": peak, "layer_bytes": int(theory.padded_sizes(run.unit_size, run.k)[biggest])
            * int(run.meta["element_bytes"]), "biggest": biggest, "uses": len(uses), "events": len(t),
            "step": float(t[-1]), "held_whole": float(sum(end - start for _, _, start, end in uses)),
            "gathering": float(gather_time)}


def timeline_claims(run) -> list[str]:
    """The traced step of ZeRO-3 on every rank, against the model (:func:`check_stage3_trace`), and beside it
    plain data parallelism's traced step, whose bytes held never moved from its at-rest level; the lines."""
    assert run.traced, f"k = {run.k}: this record has no step traces; record it again with this dpviz"
    k = run.k
    found = [check_stage3_trace(run, rank) for rank in range(k)]
    plain = int(run.modeled_memory(0)[-1].sum())
    for rank in range(k):
        held = run.timeline(0, rank)["bytes"]
        assert (held == plain).all(), (
            f"k = {k}, plain data parallelism, rank {rank}: the bytes held moved during the traced step, "
            f"{np.unique(held).tolist()}, where the model keeps {plain:,} B throughout")
    first = found[0]
    rest, peak, layer_bytes = first["rest"], first["peak"], first["layer_bytes"]
    share = "" if k <= int(run.meta["cores"]) else f", {k} ranks taking turns on {run.meta['cores']} cores"
    padded = int(theory.padded_sizes(run.unit_size, k).sum())
    formula = f"16P/{k}" if padded == run.n_params else f"16n/{k}, n = {padded:,} parameters padded"
    return [
        f"k = {k}, ZeRO-3, step {int(run.trace_step) + 1} of {run.steps} traced on all {k} ranks: each of the "
        f"{len(run.unit_size)} layers was all-gathered twice, just before its forward and again just before its "
        f"backward, and freed after each use; each layer's gradient was reduce-scattered once, right after its "
        f"backward; all {first['events']} events, and the bytes held after each, are the model's.",
        f"The bytes held peaked at {peak:,} B in layer {first['biggest'] + 1}'s backward: {rest:,} B of shards at rest "
        f"({formula}), plus {layer_bytes:,} B for the gathered layer and {layer_bytes:,} B for its full gradient; "
        f"after each of the {first['uses']} uses of a layer they fell back to exactly {rest:,} B.",
        f"Plain data parallelism held a flat {plain:,} B through its traced step: ZeRO-3's peak is "
        f"{peak / plain:.0%} of that, its level at rest {rest / plain:.0%}.",
        f"Measured on rank 0{share}: the traced ZeRO-3 step took {first['step'] * 1e3:.1f} ms; for "
        f"{first['held_whole'] * 1e3:.1f} ms of it the rank held a layer whole (gathered, or its full gradient), and "
        f"the all-gathers alone took {first['gathering'] * 1e3:.1f} ms (times are described, never asserted).",
    ]


def sharding_claims(runs) -> list[str]:
    """Every claim of the chapter on records of one model over k (a list, or ``{k: record}``): the lines it prints."""
    runs = list(runs.values()) if isinstance(runs, dict) else list(runs)
    lines = []
    for run in sorted(runs, key=lambda r: r.k):
        lines.append(same_parameters(run))
        lines.append(replicas_hold_their_share(run))
        if run.params_fsdp is not None:
            lines.append(matches_fully_shard(run))
        lines += memory_claims(run)
        lines.append(bytes_claims(run))
        lines.append(step_time_claims(run))
        if run.traced:
            lines += timeline_claims(run)
    if len(runs) > 1:
        lines.append(memory_over_k(runs))
    lines += peaks_over_stages(runs)
    lines.append(zero_paper_claim())
    return lines


# --- the figures' titles and ./run's line (dpviz.topics.sharding.figures) ------------------------------------------


def peak_by_category(table) -> np.ndarray:
    """(4,): from a (phases, categories) table of bytes, the parameters, gradients and Adam state a rank keeps
    (the same in every phase) and the layer it holds whole at that layer's peak: what its peak of a step stacks."""
    table = np.asarray(table)
    return np.concatenate([table[-1, :3], [table[:, 3].max()]])


def memory_title(runs) -> str:
    """The memory figure's title, after :func:`memory_claims` (each k) and :func:`memory_over_k` asserted it."""
    runs = sorted(runs, key=lambda r: r.k)
    for run in runs:
        memory_claims(run)
        for row in range(len(run.stage)):
            held = run.memory[row].reshape(run.k, -1)
            assert (held == held[0]).all(), (
                f"k = {run.k}, ZeRO stage {run.stage[row]}: the ranks held different bytes, {held.sum(axis=1).tolist()}")
    if len(runs) > 1:
        memory_over_k(runs)
    last = runs[-1]
    peak = {int(s): int(peak_by_category(last.memory[row, 0]).sum()) for row, s in enumerate(last.stage)}
    title = (f"Measured bytes per rank equal the model's at every stage and k: on k = {last.k} ranks one rank's peak "
             f"falls from {peak[0]:,} B (plain) to {peak[3]:,} B (ZeRO-3), the gathered layer included")
    for run in runs[:-1]:
        at = {int(s): int(peak_by_category(run.memory[row, 0]).sum()) for row, s in enumerate(run.stage)}
        if at[3] > at[1]:
            title += (f"; on k = {run.k} it rises from {at[1]:,} B (ZeRO-1) to {at[3]:,} B (ZeRO-3): the layer held "
                      "whole outweighs what sharding saved")
    return title


def bytes_title(runs) -> str:
    """The bytes figure's title, after :func:`bytes_claims` asserted it on each run."""
    runs = sorted(runs, key=lambda r: r.k)
    for run in runs:
        bytes_claims(run)
    ratios = {run.k: float(run.sent()[run.index(3)].sum() / run.sent()[run.index(0)].sum()) for run in runs}
    assert len({round(r, 9) for r in ratios.values()}) == 1, f"ZeRO-3 over plain differs with k: {ratios}"
    return (f"Bytes each rank sent per step, counted by the ring: ZeRO-1 and ZeRO-2 send exactly plain data "
            f"parallelism's all-reduce, ZeRO-3 {next(iter(ratios.values())):g} times as much at every k "
            f"(k = {', '.join(map(str, ratios))})")


def timeline_title(runs) -> str:
    """The timeline figure's title, after :func:`timeline_claims` asserted it on every rank of each run."""
    runs = sorted(runs, key=lambda r: r.k)
    peaks = []
    for run in runs:
        timeline_claims(run)
        model = run.modeled_memory(3)
        peaks.append(f"{int(model.sum(axis=1).max()):,} B at k = {run.k}")
    return ("ZeRO-3, one traced step: every layer all-gathered for its forward and again for its backward, and freed "
            f"after each use; the bytes held rose only to the model's peak ({', '.join(peaks)}) and fell back to the "
            "level at rest between layers")


def figure_claims(records: dict) -> str:
    """The chapter's claims on its figure records (``{stem: ShardingRun}``); one line for ``./run``."""
    runs = sorted(records.values(), key=lambda r: r.k)
    parts = [same_parameters(run) for run in runs]
    parts += [matches_fully_shard(run) for run in runs if run.params_fsdp is not None]
    parts += [memory_title(runs) + ".", bytes_title(runs) + "."]
    if all(run.traced for run in runs):
        parts.append(timeline_title(runs) + ".")
    return "sharding: " + " ".join(parts)


# --- the answers to the chapter's predictions (dpviz.engine.predict) ---------------------------------------------


def adam_state_answer(run) -> dict:
    """What a run answers to "what share of plain data parallelism's Adam state does one rank hold under ZeRO-3?":
    ``{"measured", "said", "why"}`` for :meth:`dpviz.engine.predict.Prediction.answer`, in per cent, from the bytes
    rank 0 held (asserted equal to the model's by :func:`memory_claims`)."""
    memory_claims(run)
    plain, zero3 = (int(run.memory[run.index(s), 0, 2, 2]) for s in (0, 3))
    n = int(theory.padded_sizes(run.unit_size, run.k).sum())
    return {"measured": 100 * zero3 / plain,
            "said": f"{zero3:,} B of Adam's state under ZeRO-3 against {plain:,} B under plain data parallelism, "
                    f"{zero3 / plain:.0%}",
            "why": f"Adam keeps two running means, 8 B per parameter, and under ZeRO-3 each rank keeps them only for "
                   f"its own 1/{run.k} of every layer: 8 × {n:,} / {run.k} = {zero3:,} B"}


def lowest_peak_answer(run) -> dict:
    """What a run answers to "at which stage is one rank's peak lowest?": ``{"measured", "said", "why"}``, the
    stage's name as :data:`STAGE_WORDS` writes it, and why, from :func:`peaks_over_stages`."""
    memory_claims(run)
    peak = {int(s): int(peak_by_category(run.memory[row, 0]).sum()) for row, s in enumerate(run.stage)}
    lowest = min(peak, key=peak.get)
    rest3, layer3 = int(run.memory[run.index(3), 0, 2, :3].sum()), int(run.memory[run.index(3), 0, :, 3].max())
    padded = theory.padded_sizes(run.unit_size, run.k)
    share = f"{int(padded.max()) / int(padded.sum()):.0%}"
    why = (f"ZeRO-3 keeps the least at rest, {rest3:,} B, but holds its largest layer ({share} of this model's "
           f"parameters) whole with its full gradient on top, {layer3:,} B more, for a peak of {peak[3]:,} B")
    if lowest != 3:
        why += f", above {STAGE_WORDS[lowest]}'s {peak[lowest]:,} B"
    return {"measured": STAGE_WORDS[lowest], "said": f"{STAGE_WORDS[lowest]} ({peak[lowest]:,} B at its peak)",
            "why": why}
