"""When a replica fails: what the chapter prints about its runs, asserted on them (numpy only).

Correctness (the rank named is the rank killed, a restart equals the unfailed run bit for bit, a newcomer holds the
survivors' bits, DiLoCo's outer step is what numpy computes) raises AssertionError naming the numbers. Time never
raises: where a busy machine hides the Young/Daly lesson, the sentence says what the runs show.
"""

from __future__ import annotations

import numpy as np

from dpviz.topics.when_a_replica_fails import theory


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.1f} ms"


def restart_claims(run, clean) -> str:
    """Each kill named by the launcher, and the restarted run equal to the unfailed one, bit for bit."""
    if not run.failures:
        raise AssertionError("the run met no failure, so there is no restart to check.")
    for f in run.failures:
        if f.named_rank != f.rank:
            raise AssertionError(f"rank {f.rank} was killed at step {f.step}, but the launcher named rank {f.named_rank}.")
    for name in ("params", "velocity", "loss"):
        a, b = getattr(run, name), getattr(clean, name)
        if a.shape != b.shape or not np.array_equal(a, b):
            diff = np.flatnonzero(a != b) if a.shape == b.shape else [-1]
            raise AssertionError(f"the restarted run's {name} differ from the unfailed run's "
                                 f"({len(diff)} of {b.size} values, the first at index {diff[0]}).")
    parts = []
    for f in run.failures:
        notice = "" if np.isnan(f.notice_seconds) else f", named by the launcher {_ms(f.notice_seconds)} later"
        parts.append(f"rank {f.rank} was SIGKILLed at step {f.step}{notice}; the restart resumed from the checkpoint "
                     f"of step {f.checkpoint_step} and did {f.lost_steps} step{'' if f.lost_steps == 1 else 's'} again ({_ms(f.lost_seconds)} of work "
                     f"lost), its first step {f.restart_seconds:.2f} s after the failure was known")
    sentence = "; ".join(parts) + (f". Through the failures the run's {run.loss.size} losses, its parameters and its "
                                   "velocity equal the unfailed run's bit for bit.")
    return sentence[0].upper() + sentence[1:]


def lost_steps_answer(run) -> dict:
    """The answer to "how many finished steps will the restart do again?", from the run's first failure: the
    keyword arguments of :meth:`dpviz.engine.predict.Prediction.answer`."""
    if not run.failures:
        raise AssertionError("the run met no failure, so no step was lost.")
    f = run.failures[0]
    if f.lost_steps != f.step - f.checkpoint_step:
        raise AssertionError(f"the restart resumed at step {f.checkpoint_step} but counted {f.lost_steps} steps lost "
                             f"for a kill in step {f.step}.")
    s = "" if f.lost_steps == 1 else "s"
    return {"measured": f.lost_steps, "said": f"{f.lost_steps} step{s}", "close": 0.01,
            "why": f"The last checkpoint held the state before step {f.checkpoint_step}, so the {f.lost_steps} "
                   f"step{s} finished after it were done again; step {f.step}, cut short before its all-reduce, had "
                   "not finished, so it was not lost but done once, after the restart"}


def carry_on_claims(run) -> str:
    """The group shrank and grew back, and the newcomer holds the survivors' θ and velocity bit for bit."""
    digests = {tuple(d) for d in run.joined_digests}
    if len(digests) != 1:
        raise AssertionError(f"after the regrow the ranks hold {len(digests)} different states: {run.joined_digests}.")
    sizes = run.world_size
    k, fewer = int(sizes.max()), int(sizes.min())
    shrunk = np.flatnonzero(sizes == fewer)
    f = run.failures[0]
    return (f"Rank {f.rank} was SIGKILLed at step {f.step}; {fewer} survivors carried on from the state they held "
            f"(nothing redone), {_ms(f.notice_seconds)} to name the dead rank and {f.restart_seconds:.2f} s more to "
            f"start the smaller group; they took steps {shrunk[0]} to {shrunk[-1]} on {fewer} of the {k} shards, then "
            f"a newcomer joined with θ and the velocity bit-identical to the survivors'.")


def young_daly_claims(check) -> str:
    """τ* from this machine's measured save and step times, beside the interval whose runs lost least."""
    tau = check.interval_steps()
    best = int(check.every[np.argmin(check.waste)])
    modeled = theory.expected_waste(check.config.steps, check.every, check.step_seconds, check.save_seconds,
                                    check.failures, 0.0)
    nearest = int(check.every[np.argmin(np.abs(np.log(check.every / tau)))])
    where = (f"the runs lost least at C = {best}, the interval nearest τ*" if best == nearest else
             f"the runs lost least at C = {best}, not at C = {nearest}, the interval nearest τ*: with saves of a few "
             f"ms and failures a few steps apart, the differences are milliseconds, about what a busy machine's "
             f"noise moves a save or a step")
    restarts = float(np.mean(check.restart_seconds / np.maximum(check.failures, 1)))
    return (f"Saves took δ = {_ms(check.save_seconds)} and steps {_ms(check.step_seconds)} here, with a failure "
            f"every {check.mtbf_steps:g} steps of work: Young's interval is τ* = √(2·δ·MTBF) = {tau:.1f} steps. "
            f"Measured, checkpoints and redone work cost {', '.join(_ms(w) for w in check.waste)} at C = "
            f"{', '.join(str(int(e)) for e in check.every)} (modeled: {', '.join(_ms(w) for w in modeled)}); "
            f"{where}. Each failure also cost {restarts:.2f} s to notice and restart, whatever C was.")


def diloco_claims(run, *, tolerance: float = 1e-5) -> str:
    """DiLoCo's outer step (and streaming DiLoCo's) equals numpy's; its bytes per step are 1/H of plain data
    parallelism's."""
    error = theory.outer_step_error(run)
    if not error <= tolerance:
        raise AssertionError(f"DiLoCo's outer step differs from numpy's by {error:.2e} of |θ| (tolerance {tolerance:g}).")
    sent = run.bytes_per_step
    H, P = run.config.H, run.n_params
    if sent["dp"] != 4 * P or sent["diloco"] != 4 * P * len(run.after["diloco"]) / run.config.steps:
        raise AssertionError(f"bytes per step {sent} are not 4·P = {4 * P} for plain DP and 4·P per sync for DiLoCo.")
    last = {m: float(run.full_loss[m][-1]) for m in run.full_loss}
    F, biggest = run.config.fragments, run.largest_message
    return (f"DiLoCo's outer Nesterov step, and streaming DiLoCo's fragment by fragment, match numpy's to "
            f"{error:.1e} of |θ|. Per step each rank all-reduced {sent['dp']:,.0f} bytes in plain data parallelism "
            f"and {sent['diloco']:,.1f} in local SGD and DiLoCo (H = {H}); streaming DiLoCo sent "
            f"{sent['streaming']:,.1f}, in messages of at most {biggest['streaming']:,} bytes instead of "
            f"{biggest['diloco']:,} (F = {F}). After {run.config.steps} steps the whole data set's loss was "
            f"{last['dp']:.4f} (plain), {last['local']:.4f} (local SGD), {last['diloco']:.4f} (DiLoCo) and "
            f"{last['streaming']:.4f} (streaming, rank 0's θ).")


# --- the figures' titles, each checked on the record it names -------------------------------------------------


def between_syncs_claims(diloco, restart) -> str:
    """What a failure between two syncs would cost DiLoCo, counted from the DiLoCo run's own sync schedule, beside
    what the synchronous restart run lost. No run here kills a DiLoCo rank, and the sentence says so."""
    H, steps, k = diloco.config.H, diloco.config.steps, diloco.config.k
    syncs = len(diloco.after["diloco"])
    if syncs != steps // H:
        raise AssertionError(f"the DiLoCo run synced {syncs} times in {steps} steps, not once per H = {H} steps.")
    dp_syncs = int(round(diloco.sent["dp"] / (4 * diloco.n_params)))
    if dp_syncs != steps:
        raise AssertionError(f"plain data parallelism all-reduced {dp_syncs} times in {steps} steps, not once a step.")
    if not restart.failures:
        raise AssertionError("the restart run met no failure to compare with.")
    lost = [f.lost_steps for f in restart.failures]
    redone = " and ".join(f"{n} step{'' if n == 1 else 's'}" for n in lost)
    return (f"No run here kills a DiLoCo rank, so this is counted from the schedule, not measured. Plain data "
            f"parallelism all-reduced at each of its {steps} steps, so a death stops the other ranks within a step; "
            f"in the synchronous restart run, its {len(lost)} kill{'' if len(lost) == 1 else 's'} made every one of "
            f"its {restart.config.k} ranks redo {redone}. DiLoCo's {k} ranks met {syncs} times in the same {steps} "
            f"steps: a rank that dies between two syncs holds no one up until the next, at most {H - 1} steps away, "
            f"and loses only its own inner steps since the last one (at most {H - 1} finished), while the others keep "
            "theirs.")


def restart_title(record) -> str:
    """The restart figure's title: where the ranks died, and the losses through the failures equal the unfailed
    run's (raises where one differs)."""
    if not np.array_equal(record.loss_restarted, record.loss_unfailed):
        differ = np.flatnonzero(record.loss_restarted != record.loss_unfailed)
        raise AssertionError(f"the restarted run's losses differ from the unfailed run's at steps {differ.tolist()}.")
    kills = " and ".join(str(int(s)) for s in record.kill_step)
    return (f"Ranks killed at steps {kills}, each restart from the last checkpoint: all {record.loss_restarted.size} "
            f"losses equal the unfailed run's, bit for bit")


def young_daly_best(record) -> tuple:
    """(the C whose run lost least, the recorded C nearest Young/Daly's τ*, τ* in steps)."""
    check = record.young_daly_check()
    tau = check.interval_steps()
    best = int(record.every[np.argmin(record.waste)])
    nearest = int(record.every[np.argmin(np.abs(np.log(record.every / tau)))])
    return best, nearest, tau


def young_daly_title(record) -> str:
    """The Young/Daly figure's title: whether the runs lost least near τ*; where they did not, what they show."""
    best, nearest, tau = young_daly_best(record)
    if best == nearest:
        return f"Least lost at C = {best}, the interval nearest Young/Daly's τ* = {tau:.1f} steps"
    return (f"Least lost at C = {best}, not at C = {nearest} nearest τ* = {tau:.1f} steps: on this machine the "
            f"differences are milliseconds, the size of its noise")


def diloco_title(record) -> str:
    """The DiLoCo figure's title: its bytes per step against plain data parallelism's (raises where they are not
    1/H of them), and where each loss ended."""
    sent = record.bytes_per_step()
    H = record.meta["H"]
    if not np.isclose(sent["diloco"] * H, sent["dp"]):
        raise AssertionError(f"DiLoCo sent {sent['diloco']:,.1f} bytes a step, not 1/{H} of plain DP's {sent['dp']:,.0f}.")
    last = record.full_loss[:, -1]
    return (f"DiLoCo all-reduces 1/{H} of plain data parallelism's bytes; after {record.meta['steps']} steps its loss "
            f"is {last[2]:.4f} against {last[0]:.4f}")


def carry_on_title(record) -> str:
    """The carry-on figure's title: the run equals the unfailed one until the kill, and the newcomer holds the
    survivors' bits (raises where either fails)."""
    m = record.meta
    at = m["kill_step"]
    if not np.array_equal(record.loss_carry_on[:at], record.loss_unfailed[:at]):
        raise AssertionError(f"before the kill at step {at} the run's losses differ from the unfailed run's.")
    if len({tuple(row) for row in record.joined_digests.tolist()}) != 1:
        raise AssertionError(f"after the regrow at step {m['regrow_at']} the ranks hold different θ or velocities: "
                             f"{record.joined_digests.tolist()}.")
    return (f"Rank {m['kill_rank']} killed at step {at}: {m['k'] - 1} ranks carried on from their own state, "
            f"nothing redone; a newcomer joined at step {m['regrow_at']}, bit-identical to them")
