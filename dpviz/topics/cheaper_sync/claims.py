"""A cheaper sync: what the chapter prints about compression, local SGD and a two-level all-reduce (numpy only).

* :func:`compression_claims` (a :class:`~dpviz.topics.cheaper_sync.records_compression.CompressionRecord`): replicas identical
  under every hook; the bytes each hook sent, counted, equal to what its rule sends (fp16 half of M,
  PowerSGD its P and Q factors and the tensors it leaves uncompressed); the plain hook's gradient is the
  exact average, fp16's within fp16 rounding of it, PowerSGD's off by a measured amount; error feedback
  kept something at every compressed step. The loss beside the plain all-reduce's and the step times are
  described.
* :func:`local_sgd_claims` (a :class:`~dpviz.topics.cheaper_sync.records_local_sgd.LocalSgdRecord`): H = 1 is plain data
  parallelism to float32 rounding; the drift is zero right after every average and not between them; the
  hand-written loop equals torch's ``PeriodicModelAverager``; loss against examples and against all-reduces
  described.
* :func:`hierarchical_claims` (a :class:`~dpviz.topics.cheaper_sync.records_hierarchical.HierarchicalRecord`): the two-level
  all-reduce equals ``dist.all_reduce`` (bit for bit on integer-valued inputs, within rounding on others);
  the bytes on every link are the rings' chunks; fewer bytes cross between groups than in a flat ring.
  Times described.
* :func:`priced_claims`: each method's modeled T_comm and S beside the ring's for the link presets.
* :func:`measured_speedup_claims` (the k-rank compression and local-SGD records and local SGD's k = 1 run):
  each method's S = k · T_step(1) / T_step(k) measured here, beside the speedup model's formula fed the measured
  T_step(1) and T_comm; the records are checked to be one workload at two k, their timings whole; S described.

Each function returns the sentences in order, or raises ``AssertionError`` naming the first number that
contradicts a claim (``ValueError`` where records that must describe one workload do not).
"""

from __future__ import annotations

import numpy as np

from dpviz import course
from dpviz.topics.cheaper_sync.records_compression import FP16_TOLERANCE, PRICED_M, WARMUP_STEPS, CompressionRecord
from dpviz.topics.cheaper_sync.records_hierarchical import METHODS, HierarchicalRecord
from dpviz.topics.cheaper_sync.records_local_sgd import LocalSgdRecord, drift_of
from dpviz.topics.ground_floor.records import rel_err
from dpviz.engine.tolerance import GRAD_TOLERANCE, tolerance_words
from dpviz.topics.cheaper_sync import theory
from dpviz.topics.ground_floor import costmodel
from dpviz.topics.ground_floor.links import PRESETS, SPEED_ORDER

SAME = 0.05  # times within 5 % of each other are "about as long"


def _require(record, cls, name: str):
    if not isinstance(record, cls):
        raise TypeError(f"{name} must be a {cls.__name__}; got {type(record).__name__}.")
    return record


def _bytes(n) -> str:
    return f"{int(n):,} bytes"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def _cores_note(record) -> str:
    if record.oversubscribed:
        return (f" ({record.k} ranks shared {record.meta['cores']} cores, so they also waited for a core: these "
                "times are not a fair race)")
    return ""


def _than(ratio: float) -> str:
    if abs(ratio - 1) <= SAME:
        return "about as long as"
    return f"{ratio:.2f}× as long as"


# --- send fewer bytes ------------------------------------------------------------------------------------


def compression_claims(rec: CompressionRecord) -> list[str]:
    """What the compression run shows, asserted where it is correctness, described where it is time or loss."""
    rec = _require(rec, CompressionRecord, "rec")
    lines = []
    start = rec.param_digest[:, 0]
    if not (start == start[:1, :1]).all():
        raise AssertionError("every hook's training must start from the same θ0 on every rank: the first parameter "
                             "digests differ")
    same = rec.param_digest == rec.param_digest[:, :, :1]
    if not same.all():
        m, s, r = np.argwhere(~same)[0]
        raise AssertionError(f"the replicas are bit-identical under every hook: under {rec.mode[m]} rank {r}'s "
                             f"parameters before step {s} differ from rank 0's")
    lines.append(f"Under every hook ({', '.join(rec.mode)}) the {rec.k} replicas held bit-identical parameters "
                 f"at all {rec.steps + 1} recorded points: every rank decompressed the same averaged gradient.")

    M = int(rec.meta["message_bytes"])
    table = []
    for i, mode in enumerate(rec.mode):
        want, calls = rec.expected_bytes(mode)
        bad = np.argwhere(rec.sent_bytes[i] != want[:, None])
        if bad.size:
            s, r = bad[0]
            raise AssertionError(f"bytes counted: {mode} sent {rec.sent_bytes[i, s, r]:,} bytes at step {s} on rank "
                                 f"{r}; its hook's rule sends {int(want[s]):,}")
        bad = np.argwhere(rec.sent_calls[i] != calls[:, None])
        if bad.size:
            s, r = bad[0]
            raise AssertionError(f"bytes counted: {mode} made {rec.sent_calls[i, s, r]} all-reduce calls at step {s} "
                                 f"on rank {r}; its hook makes {int(calls[s])}")
        on = rec.compressed_steps(mode)
        per_step = int(want[on][0]) if on.any() else M
        table.append(f"{mode} {_bytes(per_step)} ({M / per_step:.1f}× fewer)" if per_step != M else f"{mode} {_bytes(M)}")
    start_iter = int(rec.meta["start_powersgd_iter"])
    lines.append(f"Bytes each rank handed to dist.all_reduce per step, counted as the hooks sent them and equal at "
                 f"every step to what each hook's rule sends for these {len(rec.param_shape)} parameter tensors: "
                 + "; ".join(table) + f" (PowerSGD sends plain all-reduces for its first {start_iter} steps, "
                 f"then P and Q in three all-reduces).")

    err = rec.grad_rel_err
    exact = err[rec.index("allreduce")].max()
    if exact > GRAD_TOLERANCE:
        raise AssertionError(f"the plain hook's gradient is the exact average: it is {exact:.1e} (relative) away, "
                             f"more than {tolerance_words()}")
    fp16 = err[rec.index("fp16")]
    if not 0 < fp16.max() <= FP16_TOLERANCE:
        raise AssertionError(f"fp16's gradient is within fp16 rounding of the exact average: its relative error "
                             f"reached {fp16.max():.1e} (expected above 0 and at most {FP16_TOLERANCE:g})")
    words = [f"the plain hook's is the exact average ({exact:.0e})",
             f"fp16's is off by rounding alone, median {np.median(fp16):.1e}"]
    for i, mode in enumerate(rec.mode):
        if not mode.startswith("powersgd"):
            continue
        on = rec.compressed_steps(mode)
        before = err[i][~on]
        if before.size and before.max() > GRAD_TOLERANCE:
            raise AssertionError(f"{mode} runs a plain all-reduce before step {start_iter}: its gradient is "
                                 f"{before.max():.1e} away from the exact average there")
        after = err[i][on]
        if after.size and rec.powersgd_rank[i] == 1 and not (after > 0).all():
            raise AssertionError(f"{mode} compresses every matrix to rank 1: its gradient error must be positive at "
                                 f"every compressed step; it is {after.min():.1e} at one")
        if after.size:
            words.append(f"{mode}'s median {np.median(after):.3f}")
    lines.append("Relative error ‖g − ḡ‖/‖ḡ‖ of the averaged gradient against the exact average of the ranks' "
                 "gradients, per compressed step: " + "; ".join(words) + ".")

    if rec.meta["error_feedback"]:
        kept = []
        for i, mode in enumerate(rec.mode):
            if not mode.startswith("powersgd"):
                continue
            on = rec.compressed_steps(mode)
            norms = rec.error_norm[i][on]
            if norms.size and not (norms > 0).all():
                raise AssertionError(f"error feedback keeps what compression lost: under {mode} it kept ‖e‖ = "
                                     f"{norms.min():.1e} at a compressed step")
            if (rec.error_norm[i][~on] != 0).any():
                raise AssertionError(f"error feedback keeps nothing before PowerSGD starts: under {mode} it kept "
                                     f"‖e‖ = {rec.error_norm[i][~on].max():.1e} at a plain step")
            if norms.size:
                kept.append(f"{mode} median ‖e‖ = {np.median(norms):.3f}")
        if kept:
            lines.append("Error feedback kept, after every compressed step, what compression had left out, to add to "
                         "the next step's gradient: " + "; ".join(kept) + ".")

    ref = rec.mean_loss("allreduce")
    gaps = [f"{mode} {rec.mean_loss(mode)[-1] - ref[-1]:+.2e}" for mode in rec.mode if mode != "allreduce"]
    lines.append(f"After {rec.steps} steps the loss on the global batch was {ref[-1]:.4f} with the plain all-reduce; "
                 "beside it, from the same θ0 on the same batches: " + ", ".join(gaps) + ".")

    t = np.median(rec.t_step, axis=(1, 2))
    base = t[rec.index("allreduce")]
    lines.append(f"Median step (forward, backward and sync) took {_ms(base)} with the plain all-reduce; "
                 + ", ".join(f"{mode} {_than(t[i] / base)} it" for i, mode in enumerate(rec.mode) if mode != "allreduce")
                 + f" on this {M / 1024:.1f} KiB gradient, where compressing costs compute the wire may not win back"
                 + _cores_note(rec) + ".")
    return lines


# --- sync less often -------------------------------------------------------------------------------------


def local_sgd_claims(rec: LocalSgdRecord) -> list[str]:
    """What the local-SGD run shows: H = 1 is data parallelism, drift zero after each average, torch agrees."""
    rec = _require(rec, LocalSgdRecord, "rec")
    lines = []
    dp_drift = drift_of(rec.params_dp)
    if (dp_drift != 0).any():
        raise AssertionError(f"plain data parallelism keeps the replicas identical: they drifted {dp_drift.max():.1e} apart")
    if 1 in rec.period:
        i = rec.index(1)
        err = rel_err(rec.params_local[i], rec.params_dp)
        if err > GRAD_TOLERANCE:
            raise AssertionError(f"local SGD with H = 1 is plain data parallelism: its parameters are {err:.1e} "
                                 f"(relative) from it, more than {tolerance_words()}")
        same = float((rec.params_local[i] == rec.params_dp).mean())
        lines.append(f"Local SGD with H = 1 (step alone, then average θ) followed plain data parallelism (average g, "
                     f"then step) to {err:.1e} of the largest parameter at every one of {rec.steps} steps ({same:.0%} "
                     f"of values bit for bit): the mean of θ − η g_r is θ − η ḡ, up to rounding.")

    peaks = []
    for i, H in enumerate(rec.period.tolist()):
        drift, synced = rec.drift(H), rec.synced(H)
        after = drift[1:][synced]
        if (after != 0).any():
            s = int(np.flatnonzero(synced)[np.argmax(after != 0)])
            raise AssertionError(f"the drift is zero right after each average: with H = {H} it is {drift[s + 1]:.1e} "
                                 f"after step {s}")
        between = drift[1:][~synced]
        if rec.k > 1 and between.size and not (between > 0).all():
            raise AssertionError(f"between averages the replicas drift apart: with H = {H} the drift is "
                                 f"{between.min():.1e} after a local step")
        peaks.append(f"H = {H}: {rec.drift_before_average(H).max():.4f}")
    lines.append("Drift max_r ‖θ_r − mean θ‖ was exactly 0 right after every average and above 0 after every local "
                 "step between them; its largest value, just before an average: " + ", ".join(peaks) + ".")

    if rec.params_torch is not None:
        worst = max(rel_err(rec.params_torch[i], rec.params_local[i]) for i in range(len(rec.period)))
        if worst > GRAD_TOLERANCE:
            raise AssertionError(f"the hand-written local SGD equals torch's PeriodicModelAverager: they are {worst:.1e} "
                                 f"(relative) apart, more than {tolerance_words()}")
        same = float((rec.params_torch == rec.params_local).mean())
        lines.append(f"torch's PeriodicModelAverager(period=H, warmup_steps=H−1) gave the same parameters as the "
                     f"hand-written loop at every H and step, to {worst:.1e} ({same:.0%} of values bit for bit; it "
                     f"divides by k before its all-reduce, the loop after).")

    dp = rec.mean_loss()
    words = []
    for H in rec.period.tolist():
        n = rec.all_reduces(H)[-1]
        words.append(f"H = {H}: {rec.mean_loss(H)[-1]:.4f} after {n} all-reduce{'s' if n != 1 else ''}")
    lines.append(f"After {rec.examples()[-1]:,} examples ({rec.steps} steps) the mean loss was {dp[-1]:.4f} for plain "
                 f"data parallelism after {rec.steps} all-reduces; " + "; ".join(words) + ".")
    H = int(rec.period.max())
    n = int(rec.all_reduces(H)[-1])
    if H > 1 and n >= 1:
        lines.append(f"At the same {n} all-reduce{'s' if n != 1 else ''}, plain data parallelism had reached "
                     f"{dp[n - 1]:.4f} (after {n} step{'s' if n != 1 else ''}) and local SGD with H = {H} "
                     f"{rec.mean_loss(H)[n * H - 1]:.4f} (after {n * H} steps): counted in syncs, not in examples.")
    return lines


# --- sync in two levels ----------------------------------------------------------------------------------


def hierarchical_claims(rec: HierarchicalRecord) -> list[str]:
    """What the two-level all-reduce shows: dist.all_reduce's sum, the bytes per link, and the times."""
    rec = _require(rec, HierarchicalRecord, "rec")
    k, g = rec.k, int(rec.meta["group_size"])
    expected = rec.input.astype(np.float64).sum(axis=0)
    worst = 0.0
    for s, span in enumerate(rec.spans()):
        n, kind = int(rec.size[s]), str(rec.input_kind[s])
        for name in ("two_level", "flat_ring", "all_reduce"):
            got = getattr(rec, name)[:, span]
            if not (got == got[:1]).all():
                raise AssertionError(f"every rank receives the same sum: {name} gave ranks different bits on the "
                                     f"{kind} input of {n:,} values")
        two, ref = rec.two_level[:, span], rec.all_reduce[:, span]
        if kind == "int":
            if not (two == ref).all() or not (ref == expected[span]).all():
                raise AssertionError(f"the two-level all-reduce equals dist.all_reduce bit for bit on integer-valued "
                                     f"inputs: they differ on the input of {n:,} values")
        else:
            err = rel_err(two, ref)
            worst = max(worst, err)
            if err > GRAD_TOLERANCE:
                raise AssertionError(f"the two-level all-reduce equals dist.all_reduce within float rounding: on the "
                                     f"input of {n:,} normal values it is {err:.1e} away, more than {tolerance_words()}")
    lines = [f"k = {k} in {k // g} groups of {g}: the two-level all-reduce gave every rank dist.all_reduce's sum, bit "
             f"for bit on integer-valued inputs and within {worst:.1e} (relative) on normal ones, at "
             f"{', '.join(f'{n:,}' for n in sorted(set(rec.size.tolist())))} values."]

    two = rec.link_bytes_inner + rec.link_bytes_outer
    inside = rec.same_group()
    for s, n in enumerate(rec.size.tolist()):
        want = theory.link_bytes_two_level(k, g, n, element_bytes=int(rec.meta["element_bytes"]))
        if not (two[s] == want).all():
            src, dst = np.argwhere(two[s] != want)[0]
            raise AssertionError(f"bytes per link: in the two-level all-reduce of {n:,} values rank {src} sent "
                                 f"{two[s, src, dst]:,} bytes to rank {dst}; the rings' chunks make {want[src, dst]:,}")
        if (rec.link_bytes_inner[s] * ~inside).any() or (rec.link_bytes_outer[s] * inside).any():
            raise AssertionError("bytes per link: the steps inside a group sent across groups, or the step across "
                                 "groups sent inside one")
        flat = theory.link_bytes_ring(range(k), n, element_bytes=int(rec.meta["element_bytes"]))
        if not (rec.link_bytes_flat[s] == flat).all():
            raise AssertionError(f"bytes per link: the flat ring of {n:,} values did not send the ring's chunks")
    s = int(np.argmax(rec.size))
    n = int(rec.size[s])
    M = n * int(rec.meta["element_bytes"])
    between_two, between_flat = rec.between_groups(two)[s], rec.between_groups(rec.link_bytes_flat)[s]
    if k // g > 1 and g > 1 and not between_two < between_flat:
        raise AssertionError(f"two levels send fewer bytes between groups than a flat ring: {between_two:,} against "
                             f"{between_flat:,}")
    lines.append(f"Bytes per link, counted, for M = {_bytes(M)}: each rank sent {_bytes(two[s][inside].sum() // k)} "
                 f"inside its group and {_bytes(rec.max_between(two)[s])} to another group; in all "
                 f"{_bytes(between_two)} crossed between groups, against {_bytes(between_flat)} in the flat ring, "
                 f"whose ranks at a group's edge each sent {_bytes(rec.max_between(rec.link_bytes_flat)[s])} across.")

    t = np.median(rec.seconds, axis=0)
    names = dict(zip(METHODS, t))
    lines.append(f"Timed on {rec.meta['timed_size']:,} values (median of {rec.meta['repeats']}): dist.all_reduce "
                 f"{_ms(names['all_reduce'])}, two levels {_ms(names['two_level'])}, the flat hand ring "
                 f"{_ms(names['flat_ring'])}; here every link is the same shared memory, so two levels save time only "
                 f"where the links between groups are slower" + _cores_note(rec) + ".")
    return lines


# --- priced in the cost model ----------------------------------------------------------------------------


def priced_claims(t_compute: float, k: int, M: float, *, shapes=None, ranks=(1, 2, 4), periods=(1, 2, 4, 8),
                  group_size: int = 2, links=SPEED_ORDER, inner: str = theory.INNER) -> list[str]:
    """One line per link preset: the ring's modeled T_comm and S, and each method's at its knob (modeled)."""
    lines = []
    for name in links:
        link = PRESETS[name]
        rows = theory.priced(t_compute, k, M, link=link, shapes=shapes, ranks=ranks, periods=periods,
                             group_sizes=[group_size], inner=PRESETS[inner])
        words = []
        for row in rows:
            label = {"ring": "ring", "fp16": "fp16", "powersgd": f"PowerSGD r = {row['knob']}",
                     "local_sgd": f"local SGD H = {row['knob']}",
                     "two_level": f"two levels of {row['knob']} ({inner} inside)"}[row["method"]]
            words.append(f"{label} S = {row['speedup']:.2f} (T_comm {row['t_comm'] * 1e3:.3g} ms)")
        lines.append(f"Modeled, {name}, k = {k}, M = {_bytes(M)}, T_compute = {t_compute * 1e3:.3g} ms: "
                     + "; ".join(words) + ".")
    return lines


# --- measured here: S from the step times ---------------------------------------------------------------

# What the one-rank run must share with the k-rank runs for k · T_step(1) / T_step(k) to compare one workload at
# two k, on one machine.
WORKLOAD = ("b", "width", "depth", "d_in", "n_params", "seed", "dataset_size", "lr", "backend", "threads_per_rank",
            "torch_version", "host", "cores")


def _hook_words(mode: str) -> str:
    if mode.startswith("powersgd_r"):
        return f"PowerSGD r = {mode[len('powersgd_r'):]}"
    return {"allreduce": "plain all-reduce"}.get(mode, mode)


def _same_workload(one, many, one_name: str, many_name: str) -> None:
    """Raise ValueError unless ``one`` is a one-rank run of ``many``'s workload on the same machine."""
    for field in WORKLOAD:
        if one.meta.get(field) != many.meta.get(field):
            raise ValueError(f"{one_name} must record the same workload as {many_name} (same b, model, seed, threads "
                             f"and machine): its {field} is {one.meta.get(field)!r}, {many_name}'s "
                             f"{many.meta.get(field)!r}; got records of two workloads.")


def _one_workload(comp, local, local_k1) -> None:
    """The three records are one workload: ``local_k1`` on one rank, ``comp`` and ``local`` on as many ranks."""
    _require(comp, CompressionRecord, "comp")
    _require(local, LocalSgdRecord, "local")
    _require(local_k1, LocalSgdRecord, "local_k1")
    if local_k1.k != 1:
        raise ValueError(f"local_k1 must be a run on one rank (k = 1); got k = {local_k1.k}.")
    if comp.k < 2:
        raise ValueError(f"comp must be a run on k >= 2 ranks; got k = {comp.k}.")
    if local.k != comp.k:
        raise ValueError(f"local must run on as many ranks as comp (k = {comp.k}); got k = {local.k}.")
    _same_workload(local_k1, comp, "local_k1", "comp")
    _same_workload(local_k1, local, "local_k1", "local")


def _check_compression_timings(comp: CompressionRecord) -> None:
    for name, t in (("t_step", comp.t_step), ("t_exact", comp.t_exact)):
        if not (np.isfinite(t).all() and (t > 0).all()):
            raise AssertionError(f"every timed step took a positive, finite time: {name} holds {t.min():.3g} s")


def _check_local_timings(local: LocalSgdRecord) -> None:
    """Every step took some time, its all-reduce is part of it, and it averaged exactly after every H-th step."""
    for name, t in (("t_step_dp", local.t_step_dp), ("t_step_local", local.t_step_local)):
        if not (np.isfinite(t).all() and (t > 0).all()):
            raise AssertionError(f"every timed step took a positive, finite time: {name} holds {t.min():.3g} s")
    for name, step, sync in (("plain data parallelism", local.t_step_dp, local.t_sync_dp),
                             ("local SGD", local.t_step_local, local.t_sync_local)):
        outside = (sync > step) | (sync < 0)
        if outside.any():
            at = tuple(np.argwhere(outside)[0])
            raise AssertionError(f"a step's all-reduce is part of the step: under {name} an all-reduce was timed "
                                 f"at {sync[at]:.3g} s inside a step of {step[at]:.3g} s")
    if not (local.t_sync_dp > 0).all():
        raise AssertionError("plain data parallelism all-reduces at every step: a step recorded no all-reduce time")
    for i, H in enumerate(local.period.tolist()):
        averaged, synced = local.averaged[i], local.synced(H)[:, None]
        if (averaged != synced).any():
            s, r = np.argwhere(averaged != synced)[0]
            raise AssertionError(f"local SGD averages after every H-th step: with H = {H} rank {r} "
                                 f"{'averaged' if averaged[s, r] else 'did not average'} after step {s}")
        if ((local.t_sync_local[i] > 0) != averaged).any():
            raise AssertionError(f"local SGD's all-reduce time is recorded exactly on the steps that averaged: with "
                                 f"H = {H} it is not")


def measured_rows(comp: CompressionRecord, local: LocalSgdRecord, local_k1: LocalSgdRecord) -> list[dict]:
    """One row per way of syncing timed here: ``{"family", "label", "mode", "H", "k", "t_one", "t_step", "speedup",
    "t_comm", "formula"}``, times in seconds (``mode``: the hook, or None; ``H``: local SGD's, or None).

    ``t_one`` is T_step(1), the one-rank run's local step, forward and backward with no sync
    (:meth:`LocalSgdRecord.local_step_seconds`), the same for every row; ``speedup`` = k · t_one / t_step,
    measured; ``formula`` is the speedup model's S for T_compute = k · t_one and the measured T_comm per step (local
    SGD: one all-reduce's median over H), or None where the run did not time the method's sync alone (the
    compressing hooks).
    """
    _one_workload(comp, local, local_k1)
    t_one, k = local_k1.local_step_seconds(), comp.k
    rows = [dict(family="DDP comm hook", label=_hook_words(mode), mode=mode, H=None, t_step=comp.step_seconds(mode),
                 t_comm=comp.sync_seconds() if mode == "allreduce" else None) for mode in comp.mode.tolist()]
    for H in [None] + local.period.tolist():
        t_comm = local.sync_seconds(H)
        rows.append(dict(family="hand-written loop", label="plain data parallelism" if H is None else
                         f"local SGD H = {H}", mode=None, H=H, t_step=local.step_seconds(H),
                         t_comm=t_comm if H is None else t_comm / H))
    for row in rows:
        row.update(k=k, t_one=t_one, speedup=k * t_one / row["t_step"])
        row["formula"] = None if row["t_comm"] is None else float(costmodel.speedup(k * t_one, k, row["t_comm"]))
    return rows


def measured_speedup_claims(comp: CompressionRecord, local: LocalSgdRecord, local_k1: LocalSgdRecord) -> list[str]:
    """Each method's S measured here, beside the speedup model's formula on the measured parts; described, not asserted.

    Asserted: ``local_k1`` is the k-rank runs' workload on one rank of the same machine (``ValueError``
    otherwise), every timed step took a positive time, every all-reduce timed inside a step is part of it,
    local SGD averaged after exactly every H-th step, and every S is positive.
    """
    _one_workload(comp, local, local_k1)
    _check_compression_timings(comp)
    for record in (local, local_k1):
        _check_local_timings(record)
    rows = measured_rows(comp, local, local_k1)
    bad = [row for row in rows if not (np.isfinite(row["speedup"]) and row["speedup"] > 0)]
    if bad:
        raise AssertionError(f"a measured speedup is positive: {bad[0]['label']} has S = {bad[0]['speedup']:.3g}")
    hooks = [row for row in rows if row["family"] == "DDP comm hook"]
    loop = [row for row in rows if row["family"] == "hand-written loop"]
    k, m, t_one = comp.k, comp.meta, rows[0]["t_one"]
    threads = int(m["threads_per_rank"])
    warmup = "step" if WARMUP_STEPS == 1 else f"{WARMUP_STEPS} steps"
    lines = [f"Measured S = k · T_step(1) / T_step(k) at the same b = {m['b']} examples per rank (one device would "
             f"take k steps of b for the k·b examples k ranks take at once), from medians over steps and ranks with "
             f"each training's first {warmup} left out as warm-up (PowerSGD's first compressed step too): k = {k} "
             f"ranks of {threads} thread{'s' if threads != 1 else ''} each, on this machine's {m['cores']} cores. "
             f"Every S below divides by T_step(1) = {_ms(t_one)}, one rank's forward and backward of the same MLP on "
             "b examples with no sync (the local steps of a one-rank local-SGD run), as "
             f"{course.ref('speedup_model')} leaves the "
             f"all-reduce out at k = 1; on that rank an all-reduce with nothing to exchange took "
             f"{_ms(local_k1.sync_seconds(None))} (median)."]
    lines.append(f"DDP's comm hooks, a step being forward, backward and the hook's sync: "
                 + "; ".join(f"{row['label']} {_ms(row['t_step'])}, S = {row['speedup']:.2f}" for row in hooks)
                 + f"; ideal S = k = {k}.")
    lines.append("The hand-written loop, local SGD's step being its period's cost shared over its H steps ((H − 1) "
                 "local steps and one that averages): "
                 + "; ".join(f"{row['label']} {_ms(row['t_step'])}, S = {row['speedup']:.2f}" for row in loop) + ".")

    plain = hooks[0]["t_step"]
    others = [(row, row["t_step"] / plain) for row in hooks[1:]]
    slower = [(row, r) for row, r in others if r > 1 + SAME]
    faster = [(row, r) for row, r in others if r < 1 - SAME]
    same = [row["label"] for row, r in others if abs(r - 1) <= SAME]
    M = int(m["message_bytes"])
    work = [w for w, hit in (("the casts to and from fp16", any(row["mode"] == "fp16" for row, _ in slower)),
                             ("PowerSGD's matrix products and orthogonalisation, and its three all-reduces in place of "
                              "one", any(row["mode"].startswith("powersgd") for row, _ in slower))) if hit]
    why = (f" on a {M / 1024:.1f} KiB gradient over shared memory, " + " and ".join(work)
           + " cost more time than the bytes they save")
    if others and len(slower) == len(others):
        lines.append("Every compressing hook took longer per step than the plain all-reduce here ("
                     + ", ".join(f"{row['label']} {r:.2f}×" for row, r in slower) + f"):{why}.")
    elif others:
        took = ", ".join(f"{row['label']} took {r:.2f}×" for row, r in slower)
        words = [f"{took} as long as the plain all-reduce per step:{why}"] if slower else []
        for row, r in faster:
            saved = M - int(comp.expected_bytes(row["mode"])[0][-1])
            words.append(f"{row['label']} took {r:.2f}× as long as the plain all-reduce, with {_bytes(saved)} fewer "
                         "to send per step")
        if same:
            words.append("about as long as the plain all-reduce (within 5 %): " + ", ".join(same))
        lines.append("Of the compressing hooks, " + "; ".join(words) + ".")

    dp, by_H = loop[0], loop[1:]
    top = max(by_H, key=lambda row: row["speedup"])
    H = top["H"]
    line = (f"Local SGD's highest S was {top['speedup']:.2f}, at H = {H}, "
            f"{'above' if top['speedup'] > dp['speedup'] else 'not above'} plain data parallelism's "
            f"{dp['speedup']:.2f} in the same loop")
    if H > 1:
        line += (f": its median local step took {_ms(local.median_step(H, averaged=False))} against T_step(1) = "
                 f"{_ms(t_one)}, and one step in {H} paid for an all-reduce ({_ms(local.sync_seconds(H))} median)")
    lines.append(line + ".")

    modeled = [row for row in rows if row["formula"] is not None]
    below = [row["label"] for row in modeled if row["speedup"] < row["formula"]]
    line = (f"{course.Ref('speedup_model')}'s formula fed the measured parts, "
            "S = k · T_step(1) / (T_step(1) + T_comm) with T_comm the "
            f"median all-reduce of the M = {_bytes(M)} timed in the same runs ({_ms(comp.sync_seconds())} beside DDP's "
            f"steps, {_ms(local.sync_seconds(None))} in the loop, whose steps start without DDP's barrier; over H "
            "for local SGD), gives: "
            + "; ".join(f"{row['label']} {row['formula']:.2f} (measured {row['speedup']:.2f})" for row in modeled))
    if below:
        where = "every measured S is below it" if len(below) == len(modeled) else \
            "where the measured S is below it (" + ", ".join(below) + ")"
        line += f"; {where}, a step less its share of all-reduce took longer at k = {k} than on one rank"
    lines.append(line + (_cores_note(comp) or _cores_note(local)) + ".")
    room = (k - 1) * t_one  # S > 1 in the formula exactly while T_comm per step is below this
    ddp_comm, loop_comm = comp.sync_seconds(), local.sync_seconds(None)
    H_min = loop_comm / room
    lines.append(f"By that formula S passes 1 only while T_comm per step is under (k − 1) · T_step(1) = {_ms(room)}: one "
                 f"all-reduce took {_ms(ddp_comm)} beside DDP's steps, so syncing every step "
                 f"{'can' if ddp_comm < room else 'cannot'} beat one device here, and local SGD "
                 + (f"has to share one all-reduce ({_ms(loop_comm)} in the loop) over H > {H_min:.1f} steps."
                    if H_min > 1 else f"passes it at every H (one all-reduce in the loop took {_ms(loop_comm)})."))
    lines.append(f"These points are a {int(m['n_params']):,}-parameter MLP whose gradient crosses shared memory between "
                 f"processes, not part 4's modeled {PRICED_M / 1e9:.2f} GB gradient on real links: they show how this "
                 "machine's steps scale, not how the presets would.")
    return lines


def measured_title(comp: CompressionRecord, local: LocalSgdRecord, local_k1: LocalSgdRecord) -> str:
    """The measured S of the plain all-reduce, the best compressing hook and the best H, checked by
    :func:`measured_speedup_claims` first."""
    measured_speedup_claims(comp, local, local_k1)
    rows = measured_rows(comp, local, local_k1)
    hooks = [row for row in rows if row["family"] == "DDP comm hook"]
    words = [f"Measured here, k = {comp.k}: S = {hooks[0]['speedup']:.2f} with DDP's plain all-reduce"]
    if len(hooks) > 1:
        best = max(hooks[1:], key=lambda row: row["speedup"])
        words.append(f"at best {best['speedup']:.2f} with a compressing hook ({best['label']})")
    top = max((row for row in rows if row["H"] is not None), key=lambda row: row["speedup"])
    words.append(f"up to {top['speedup']:.2f} with local SGD (H = {top['H']})")
    return ", ".join(words) + f"; ideal S = {comp.k}"


# --- the figures' titles ---------------------------------------------------------------------------------


def priced_rows(link: str, *, k: int, group_size: int, rank: int, period: int, t_compute: float, M: float,
                shapes, inner: str = theory.INNER) -> list[dict]:
    """The five bars of one link in the chapter's modeled figure and slider: ring, fp16, PowerSGD at ``rank``,
    local SGD at ``period``, two levels of ``group_size`` (``inner`` inside a group, ``link`` between)."""
    return theory.priced(t_compute, k, M, link=PRESETS[link], shapes=shapes, ranks=(rank,), periods=(period,),
                         group_sizes=[group_size], inner=PRESETS[inner])


def compression_title(rec: CompressionRecord) -> str:
    """The bytes and the error of the most compressed hook against fp16's, checked by :func:`compression_claims`."""
    compression_claims(rec)  # asserts the bytes, the errors and the replicas before a title says anything
    M = int(rec.meta["message_bytes"])
    powersgd = [m for m in rec.mode if m.startswith("powersgd")]
    fewest = min(powersgd, key=lambda m: rec.expected_bytes(m)[0][-1]) if powersgd else "fp16"
    i = rec.index(fewest)
    sent = int(rec.expected_bytes(fewest)[0][-1])
    err = float(np.median(rec.grad_rel_err[i][rec.compressed_steps(fewest)]))
    fp16 = float(np.median(rec.grad_rel_err[rec.index("fp16")][rec.compressed_steps("fp16")]))
    name = fewest.replace("powersgd_r", "PowerSGD at r = ")
    return (f"{name} sent {M / sent:.1f}× fewer bytes than the plain all-reduce, with a gradient off by "
            f"{err:.0%}; fp16 sent half, off by rounding ({fp16:.0e})")


def compression_loss_title(rec: CompressionRecord) -> str:
    """Whether the loss curves part, in numbers: the largest final gap to the plain all-reduce's loss."""
    rec = _require(rec, CompressionRecord, "rec")
    ref = rec.mean_loss("allreduce")
    gaps = {m: float(rec.mean_loss(m)[-1] - ref[-1]) for m in rec.mode if m != "allreduce"}
    worst = max(gaps, key=lambda m: abs(gaps[m]))
    share = abs(gaps[worst]) / ref[-1]
    name = worst.replace("powersgd_r", "PowerSGD r = ")
    if share < 0.05:
        return (f"After {rec.steps} steps every hook's loss is within {share:.1%} of the plain all-reduce's "
                f"(largest gap: {name}, {gaps[worst]:+.1e})")
    return (f"After {rec.steps} steps {name}'s loss is {share:.0%} {'above' if gaps[worst] > 0 else 'below'} "
            "the plain all-reduce's")


def local_sgd_title(rec: LocalSgdRecord) -> str:
    """Loss counted in all-reduces: local SGD at the largest H against plain data parallelism at as many."""
    local_sgd_claims(rec)  # asserts H = 1 equals DP, drift 0 at every average, and the oracle
    dp = rec.mean_loss()
    H = int(rec.period.max())
    n = int(rec.all_reduces(H)[-1])
    if H == 1 or n < 1:
        return f"Local SGD with H = {H} is plain data parallelism: one all-reduce per step"
    local, plain = float(rec.mean_loss(H)[n * H - 1]), float(dp[n - 1])
    ahead = "lower" if local < plain else "higher"
    return (f"After {n} all-reduces local SGD with H = {H} had a {ahead} loss ({local:.3f}) than plain data "
            f"parallelism ({plain:.3f}); after the same examples, {float(rec.mean_loss(H)[-1]):.3f} against "
            f"{float(dp[-1]):.3f}")


def drift_title(rec: LocalSgdRecord) -> str:
    """The drift: zero at every average (asserted by :func:`local_sgd_claims`), its peak per H."""
    local_sgd_claims(rec)
    peaks = {int(H): float(rec.drift_before_average(int(H)).max()) for H in rec.period if H != 1}
    if not peaks:
        return "With H = 1 the replicas are averaged after every step: no drift"
    H = max(peaks, key=peaks.get)
    return (f"The replicas drift apart between averages and meet again at each: drift 0 after every average, "
            f"at most {peaks[H]:.3f} (H = {H})")


def two_levels_title(rec: HierarchicalRecord) -> str:
    """Bytes over the slow link: two levels against the flat ring, for the largest input (asserted first)."""
    hierarchical_claims(rec)
    s = int(np.argmax(rec.size))
    two = rec.between_groups(rec.link_bytes_inner + rec.link_bytes_outer)[s]
    flat = rec.between_groups(rec.link_bytes_flat)[s]
    return (f"Equal to dist.all_reduce, two levels sent {flat / two:.1f}× fewer bytes between groups than the flat "
            f"ring ({int(two):,} against {int(flat):,})")


def priced_title(rows_by_link: dict, *, k: int) -> str:
    """Where a cheaper sync pays, modeled: the ring's S and the best method's on the fastest and the slowest link."""
    names = list(rows_by_link)
    words = []
    for name in (names[0], names[-1]):
        rows = rows_by_link[name]
        ring = rows[0]["speedup"]
        best = max(rows[1:], key=lambda row: row["speedup"])
        words.append((name, ring, best))
    (fast, ring_fast, best_fast), (slow, ring_slow, best_slow) = words
    if not best_slow["speedup"] / ring_slow >= best_fast["speedup"] / ring_fast:
        raise AssertionError(f"a cheaper sync buys more on a slower link: on {slow} it multiplies S by "
                             f"{best_slow['speedup'] / ring_slow:.2f}, on {fast} by {best_fast['speedup'] / ring_fast:.2f}")
    return (f"Modeled, k = {k}: on {slow} the ring reaches S = {ring_slow:.2f} and a cheaper sync up to "
            f"{best_slow['speedup']:.2f}; on {fast}, {ring_fast:.2f} and {best_fast['speedup']:.2f}")


def figure_claims(records: dict) -> str:
    """What ``./run`` prints for the chapter's figure records: every claim of the three runs, checked."""
    lines = (compression_claims(records["cheaper_sync_compression"])
             + local_sgd_claims(records["cheaper_sync_local_sgd"])
             + hierarchical_claims(records["cheaper_sync_hierarchical"])
             + measured_speedup_claims(records["cheaper_sync_compression"], records["cheaper_sync_local_sgd"],
                                       records["cheaper_sync_local_sgd_k1"]))
    return "\n".join(lines)


# --- the answer to the chapter's prediction (dpviz.engine.predict) ---------------------------------------------


def powersgd_bytes_answer(rec: CompressionRecord, mode: str = "powersgd_r2") -> dict:
    """What the compression run answers to "how many times fewer bytes than the float32 all-reduce will PowerSGD
    send?": ``{"measured", "said", "why"}`` for :meth:`dpviz.engine.predict.Prediction.answer`, the ratio counted at
    the run's compressed steps (asserted equal to the hook's rule by :func:`compression_claims`), and why, from the
    record's parameter shapes: the factors of the matrices it compresses, the tensors it leaves whole."""
    rec = _require(rec, CompressionRecord, "rec")
    compression_claims(rec)
    i, on = rec.index(mode), rec.compressed_steps(mode)
    r = int(rec.powersgd_rank[i])
    if r < 1 or not on.any():
        raise ValueError(f"mode must be a PowerSGD hook of the record that compressed at least one step; got {mode!r}.")
    M, sent = int(rec.meta["message_bytes"]), int(rec.sent_bytes[i][on][0, 0])
    shapes = [tuple(int(n) for n in shape) for shape in rec.param_shape]
    squeezed = [(a, b) for a, b in shapes if (a + b) * min(a, b, r) * 2 < a * b]
    whole = [(a, b) for a, b in shapes if (a, b) not in squeezed]
    counts = theory.powersgd_elements(shapes, r)
    return {"measured": M / sent,
            "said": f"{M / sent:.1f}× fewer, counted in the recorded run: {sent:,} bytes per step against {M:,}",
            "why": f"PowerSGD at r = {r} sends P and Q, (n₁ + n₂)·r values, for the "
                   f"{_and_words([f'{a}×{b}' for a, b in squeezed])} matrices ({counts['p'] + counts['q']:,} values "
                   f"in place of {sum(a * b for a, b in squeezed):,}), but leaves whole the tensors too small to gain, "
                   f"{_and_words([f'{a}×{b}' for a, b in whole])} ({counts['uncompressed']:,} values): "
                   f"{counts['total']:,} values of 4 bytes"}


def _and_words(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
