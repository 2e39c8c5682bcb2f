"""Checkers for the exercises that are collectives: the reader's function runs on k real ranks.

    print(check_average_gradients(average_gradients))      # one group per device
    print(check_reduce_scatter_step(reduce_scatter_step))  # all-reduce
    print(check_gather_columns(gather_columns))            # splitting the model

How "against the real thing" stays honest from a notebook: a function defined in a notebook cell
cannot be unpickled by a rank (another process), so the checker sends its *source* (``inspect.getsource``,
which works for notebook cells because IPython keeps their text) and each of k real gloo ranks
compiles it, with ``torch``, ``dist``, ``math`` and ``np`` in scope, and calls it on real data: the
MLP's real gradients, a tensor cut into k chunks, a column block of a real layer's output. The real
collective (``dist.all_reduce``, the library's ring, ``dist.all_gather``) runs on the same data in
*other* ranks, a launch of :func:`~dpviz.exercises.rank_exercises.reference_worker` that runs no
reader's code (once per kernel and k, then kept here): a rank that runs the reader's function holds
no answer to find and no helper whose change could alter one. Both send numpy arrays back; this
module compares them and words the answer. The ranks' ``dist`` passes every call to
``torch.distributed`` and notes each send and receive, so a wrong ring step can be named by the
neighbour or chunk it used.

A stub (its body only raises NotImplementedError) is recognised from its source without starting
any rank, so a chapter with its stubs in place runs in no time and prints the same line every time.
This module imports torch only inside the checkers, when ranks are about to start.

Whatever the reader's function does, a checker answers with a verdict, never an exception, within
the launch's limits: on each rank one call may run :data:`CALL_LIMIT` seconds (a loop is stopped
there and named), a rank with no progress for ``stall_timeout`` seconds (:data:`STALL_TIMEOUT`,
a deadlock in a collective) ends the launch, and starting the ranks may take the launcher's
``START_TIMEOUT``. An exit (``os._exit``, ``sys.exit``), any ``BaseException``, a
``dist.destroy_process_group()``, a fork, a thread left running, megabytes printed or returned: each
comes back from the ranks as an outcome (see :class:`dpviz.exercises.rank_exercises.RankGuard`) and is
worded here, and no process it started is left running.
"""

from __future__ import annotations

import ast

import numpy as np

from dpviz.engine.checks import check_int, check_real
import dpviz.engine.sandbox as guard
import dpviz.engine.verdict as v

K = 3  # ranks: with 3, an off-by-one chunk index or a divide by k - 1 cannot pass by coincidence
STALL_TIMEOUT = 15.0  # seconds a rank may sit in a send or receive that never completes
CALL_LIMIT = 10.0  # seconds one call of the reader's function may run on a rank (at most 2/3 of the stall timeout)
NAMES_IN_SCOPE = "torch, dist (torch.distributed), math and np"


def check_average_gradients(average_gradients, *, k: int = K, stall_timeout: float = STALL_TIMEOUT) -> v.Verdict:
    """One group per device: ``average_gradients(model_grads, world_size)`` on k real ranks,
    against dist.all_reduce / k.

    Each rank's call may run CALL_LIMIT seconds (10, at most 2/3 of ``stall_timeout``); the launch ends after
    ``stall_timeout`` seconds (15) without progress. The gradient tensors must change in place.
    """
    return _check_one("average_gradients", "check_average_gradients", average_gradients, k, stall_timeout)


def check_reduce_scatter_step(reduce_scatter_step, *, k: int = K, stall_timeout: float = STALL_TIMEOUT) -> v.Verdict:
    """All-reduce: ``reduce_scatter_step(chunks, rank, world_size, step)``, k-1 steps on k real ranks, against the ring.

    Each call (one step on one rank) may run CALL_LIMIT seconds (10, at most 2/3 of ``stall_timeout``); the
    launch ends after ``stall_timeout`` seconds (15) without progress, which is how a deadlocked step is named.
    """
    return _check_one("reduce_scatter_step", "check_reduce_scatter_step", reduce_scatter_step, k, stall_timeout)


def check_gather_columns(gather_columns, *, k: int = K, stall_timeout: float = STALL_TIMEOUT) -> v.Verdict:
    """Splitting the model: ``gather_columns(y_block, world_size)`` on k real ranks, against dist.all_gather and X W.

    Each rank's call may run CALL_LIMIT seconds (10, at most 2/3 of ``stall_timeout``); the launch ends after
    ``stall_timeout`` seconds (15) without progress.
    """
    return _check_one("gather_columns", "check_gather_columns", gather_columns, k, stall_timeout)


def check_many(candidates, *, k: int = K, stall_timeout: float = STALL_TIMEOUT) -> list[v.Verdict]:
    """Check several ``(exercise, function)`` pairs in one launch of k ranks (one verdict each, in order).

    The public checkers call this with one pair. Several share one start of the ranks (seconds),
    which the tests use; every function must then finish on every rank, since one that hangs
    stalls the rest, and what one rebinds in the ranks (``dist.all_reduce``) stays there for the next.
    """
    k = check_int("k", k, low=2, high=8)
    stall_timeout = check_real("stall_timeout", stall_timeout, low=0, low_open=True)
    verdicts, tasks, slots = [None] * len(candidates), [], []
    for i, (exercise, fn) in enumerate(candidates):
        name = fn.name if isinstance(fn, v.Submitted) else getattr(fn, "__name__", exercise)
        if v.is_stub(fn):
            verdicts[i] = v.not_attempted(name)
            continue
        source = v.source_of(fn)
        if source is None:
            verdicts[i] = v.failed(name, "its source text could not be read, and the ranks need it to run it",
                                   "Define it with def in a notebook cell or a .py file, then check it again.")
            continue
        tasks.append((exercise, name, source))
        slots.append(i)
    if not tasks:
        return verdicts

    import dpviz.exercises.rank_exercises as ranks  # torch: only now that ranks will run
    from dpviz.engine.supervise import RankError, RankTimeout
    from dpviz.engine.launch import launch, sharing_cores_said_elsewhere
    from dpviz.engine.rank import UnreadableResult

    call_limit = min(CALL_LIMIT, stall_timeout * 2 / 3)  # a loop is stopped and named before the launch stalls
    reference = _reference(k)
    try:
        with sharing_cores_said_elsewhere():  # nothing here is timed
            results = launch(ranks.exercise_worker, k, args=(tasks, call_limit), backend="gloo", threads=1,
                             stall_timeout=stall_timeout, untrusted=True)
    except RankTimeout as e:
        stuck_at = None if e.steps is None or len(tasks) > 1 else min(e.steps) + 1
        for (exercise, name, _), i in zip(tasks, slots):
            verdicts[i] = _hang(exercise, name, k, stuck_at, stall_timeout, e.observed)
        return verdicts
    except RankError as e:  # a rank's process died under the reader's function (a signal, a crash in C)
        for (exercise, name, _), i in zip(tasks, slots):
            verdicts[i] = _rank_died(name, e)
        return verdicts
    except UnreadableResult:  # the rank's code wrote something other than data as its result: refused unread
        results = [None] * k
    for j, ((exercise, name, _), i) in enumerate(zip(tasks, slots)):
        if not all(isinstance(results[r], list) and all(isinstance(x, dict) for x in results[r]) for r in range(k)):
            verdicts[i] = v.failed(name, "what the ranks sent back after running it could not be read",
                                   "A function checked on ranks must return, leaving the rank's own code as it was.")
            continue
        if any(len(results[r]) <= j for r in range(k)):
            verdicts[i] = v.failed(name, "it was not run: a function checked before it in the same launch ended the "
                                   "ranks' process group")
            continue
        # the real answers from the reference ranks; nothing the reader's ranks sent can stand in for them
        per_rank = [{**results[r][j], **reference[r][exercise]} for r in range(k)]
        verdict = JUDGES[exercise](name, per_rank, k, source=tasks[j][2])
        printed = max(range(k), key=lambda r: per_rank[r].get("printed", 0))
        if per_rank[printed].get("printed", 0) > ranks.PRINT_LIMIT:
            verdict = v.Verdict(str(verdict) + v.prints_note(per_rank[printed]["printed"], ranks.PRINT_LIMIT,
                                                             f" on rank {printed}"), verdict.status)
        verdicts[i] = verdict
    return verdicts


_REFERENCES: dict[int, list] = {}  # k -> each rank's real answers (reference_worker), computed once per process


def _reference(k: int) -> list:
    """Each rank's real answers for k ranks, from a launch that runs no reader's code (kept after the first)."""
    if k not in _REFERENCES:
        import dpviz.exercises.rank_exercises as ranks
        from dpviz.engine.launch import launch, sharing_cores_said_elsewhere

        with sharing_cores_said_elsewhere():
            _REFERENCES[k] = launch(ranks.reference_worker, k, backend="gloo", threads=1)
    return _REFERENCES[k]


def _check_one(exercise, checker, fn, k, stall_timeout) -> v.Verdict:
    v.require_function(checker, fn)
    return check_many([(exercise, fn)], k=k, stall_timeout=stall_timeout)[0]


def _hang(exercise, name, k, stuck_at, seconds, observed=None) -> v.Verdict:
    """The verdict when the launch saw no progress: worded by what the launcher saw the stuck ranks doing."""
    observed = observed or {}
    stopped = sorted(r for r, state in observed.items() if state == "stopped")
    short = sorted(r for r, state in observed.items() if state == "memory")
    if stopped:
        return v.failed(name, f"rank {', '.join(map(str, stopped))} was stopped by a signal (SIGSTOP or a debugger) "
                        f"while it ran the function, so no rank made progress for {seconds:g} s",
                        "Let the ranks run: continue the stopped process (SIGCONT), or check again.")
    if short:
        return v.failed(name, f"rank {', '.join(map(str, short))} was waiting for memory (the machine is short of it) "
                        f"while it ran the function, so no rank made progress for {seconds:g} s",
                        "Close what else uses memory, or check a function that allocates less.")
    if exercise == "reduce_scatter_step":
        what = "the ranks got stuck" + (f" in step {stuck_at}" if stuck_at is not None else "")
        return v.failed(name, f"{what} (no progress for {seconds:g} s): a send or a receive found no partner",
                        "Each step every rank sends one chunk to right = (rank + 1) % world_size "
                        "and receives one from left = (rank - 1) % world_size.")
    return v.failed(name, f"the ranks got stuck inside {name} (no progress for {seconds:g} s): a collective that not "
                    "every rank made, or a send without its receive", "Every rank must make the same calls, in the same order.")


def _rank_died(name, error) -> v.Verdict:
    """A rank's process ended without a Python exception: a signal, a crash in native code, a broken group."""
    last = str(error).strip().splitlines()[0] if str(error).strip() else "no reason given"
    last = last.removeprefix(f"rank {error.rank} failed: ")
    if len(last) > 200:
        last = last[:200] + "…"
    return v.failed(name, f"rank {error.rank}'s process ended while it ran the function: {last}",
                    "A function checked on ranks must return, leaving its process and the process group alive.")


def _stopped(name, res, rank) -> v.Verdict | None:
    """The verdict when the rank's guard stopped the function or it started processes, else None."""
    on = f" on rank {rank}"
    if "step" in res:
        on += f", in step {res['step']}" + (" (the first)" if res["step"] == 0 else "")
    if res.get("destroyed"):
        return v.failed(name, f"it called dist.destroy_process_group(){on}, which would end the ranks' process "
                        "group while the checker still needs it; the checker stopped it there",
                        "Leave the group to the code that started it.")
    outcome = guard.Outcome(timed_out="timed_out" in res, exit_code=res.get("exited"),
                            forks=res.get("forks", 0), children=res.get("children", 0),
                            threads=res.get("threads", 0))
    limit = f"the {res.get('timed_out', 0):g} s a rank gives one call"
    return v.cut_short(name, outcome, on=on, limit=limit)


def _outcome(name, per_rank, call) -> v.Verdict | None:
    """The verdict when some rank's call did not return normally (NotImplementedError: not attempted), else None."""
    if any(res.get("not_attempted") for res in per_rank):
        return v.not_attempted(name)
    for rank, res in enumerate(per_rank):
        stopped = _stopped(name, res, rank)
        if stopped:
            return stopped
        if res.get("error"):
            context = call(rank, res)
            text = f"{name} raised {res['error']} on rank {rank}" + (f" ({context})" if context else "")
            if res.get("kind") == "SystemExit":
                text += ": sys.exit() or exit() raises it, and a function checked on ranks must return instead"
            elif res.get("kind") == "KeyboardInterrupt":
                text += ": an interrupt, or a raise of it"
            text += "."
            if res["error"].startswith("NameError"):
                text += (f" The ranks receive only the function's own source, with {NAMES_IN_SCOPE} in scope: "
                         "define or import anything else inside it.")
            return v.Verdict(text, v.FAILED)
    return None


def rebinding(source: str | None) -> tuple[str, str] | None:
    """The first statement of ``source`` that rebinds a name to a new value computed from it, e.g. ``g = g / k``.

    That is the mistake of a function meant to change a tensor in place: the name now points at a new
    tensor, and the one it was given is left as it was. Returns (the statement as written, cut to 60
    characters, the name), or None.
    """
    if not source:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.BinOp, ast.Call))):
            target = node.targets[0].id
            if any(isinstance(n, ast.Name) and n.id == target for n in ast.walk(node.value)):
                text = ast.unparse(node)
                return (text if len(text) <= 60 else text[:60] + "…"), target
    return None


# --- one group per device: average_gradients -----------------------------------------------------


def judge_average_gradients(name, per_rank, k, *, source=None) -> v.Verdict:
    known = _outcome(name, per_rank, lambda r, res: "")
    if known:
        return known
    n_tensors = len(per_rank[0]["expected"])
    for rank, res in enumerate(per_rank):
        for t, (got, expected) in enumerate(zip(res["got"], res["expected"])):
            if got.shape != expected.shape:
                return v.failed(name, f"on rank {rank}, gradient tensor {t} came back with shape {v.shape_words(got.shape)}; "
                                f"expected {v.shape_words(expected.shape)}", "Average each tensor as it is, in place.")
            first = v.first_mismatch(got, expected)
            if first is None:
                continue
            hint = _not_in_place(res, k) or _average_hint(res, rank, t, k, rebinding(source))
            return v.failed(name, f"on rank {rank}, element {v.index_words(first)} of gradient tensor {t} (shape "
                            f"{v.shape_words(expected.shape)}) is {v.num(got[first])}, "
                            f"{v.against(got[first], expected[first], f', the mean over the {k} ranks')}", hint)
    big_ok = all(v.close(e, b, rtol=1e-4) for res in per_rank for e, b in zip(res["expected"], res["big"]))
    if not big_ok:
        raise RuntimeError("dist.all_reduce / k differs from the big batch's gradient: the check itself is broken.")
    return v.passed(name, f"on {k} real ranks every one of the {n_tensors} gradient tensors equals dist.all_reduce's sum "
                    f"divided by k on every rank, which is the gradient of all {per_rank[0]['examples']} examples in one batch "
                    "to within float rounding")


def _not_in_place(res, k) -> str:
    """The hint when the function made the right means as new tensors, leaving the ones it was given; else ""."""
    expected = res["expected"]
    returned = res.get("returned")
    state = ("were left unchanged" if all(v.close(g, l) for g, l in zip(res["got"], res["local"]))
             else "do not hold the mean")
    if returned is not None and all(r.shape == e.shape and v.close(r, e) for r, e in zip(returned, expected)):
        return (f"It returned new tensors that hold the mean over the {k} ranks, but the tensors in model_grads "
                f"{state}: the inputs were not changed in place. Use dist.all_reduce(grad), then grad /= world_size.")
    replaced = res.get("replaced") or []
    swapped = res.get("replaced_with") or []
    if replaced and all(a is not None and a.shape == expected[i].shape and v.close(a, expected[i])
                        for i, a in zip(replaced, swapped)):
        return (f"It put new tensors into the list model_grads (position {replaced[0]} first), but the model's own "
                f"gradient tensors {state}: the inputs were not changed in place. Use grad /= world_size.")
    if res.get("returned") is None and "returned_type" in res and state == "were left unchanged":
        return (f"It returned {_returned_words(res)} and left the gradient tensors as they were; it should change "
                "model_grads in place and need not return anything.")
    return ""


def _returned_words(res) -> str:
    """What a rank says its function returned: "a str of 1,000,000 characters", "a value of type R"."""
    kind = res["returned_type"]
    if "returned_len" in res:
        return f"a {kind} of {res['returned_len']:,} characters"
    if kind.startswith("a ") or kind in ("list", "tuple", "dict", "set", "int", "float", "bool", "str", "bytes"):
        return kind if kind.startswith("a ") else f"a {kind}"
    return f"a value of type {kind}"


def _average_hint(res, rank, t, k, rebound=None) -> str:
    got, expected, local = res["got"][t], res["expected"][t], res["local"][t]
    r = v.ratio(got, expected)
    if rebound and (v.close(got, local) or (r is not None and abs(r - k) < 1e-3)):
        held = "the sum over the ranks" if r is not None and abs(r - k) < 1e-3 else "the rank's own gradient"
        statement, g = rebound
        return (f"`{statement}` makes a new tensor and points the name {g} at it, instead of changing the tensor in "
                f"place; the tensor in model_grads still holds {held}. Use {g} /= world_size, or {g}.div_(world_size).")
    if v.close(got, local):
        return ("It is still this rank's own gradient: nothing was exchanged (dist.all_reduce sums the tensor over "
                "the ranks, in place).")
    if v.close(got, local / k):
        return "It is this rank's own gradient divided by k: all-reduce it first, so that it holds the sum over the ranks."
    if r is not None and abs(r - k) < 1e-3:
        return f"It is the sum over the ranks, {k} times the mean: divide by world_size."
    if r is not None and abs(r - k / (k - 1)) < 1e-3:
        return f"It is the sum divided by {k - 1}: divide by world_size, the number of ranks that added in, {k}."
    if r is not None and abs(r - 1 / k) < 1e-3:
        return "It is the mean divided by k once more: divide by world_size only once."
    n = len(res["expected"])
    if n != k and r is not None and abs(r - k / n) < 1e-3:
        return (f"It is the sum divided by {n}, the number of gradient tensors (len(model_grads)): divide by "
                f"world_size, the number of ranks that added in, {k}.")
    return ""


# --- all-reduce: reduce_scatter_step --------------------------------------------------------------


def ring_states(inputs) -> np.ndarray:
    """The ring's reduce-scatter on ``inputs`` (k, n), step by step: (k-1, k, n) states after each step.

    At step s rank r sends chunk (r - s) mod k to its right neighbour, which adds it into the
    same chunk of its own: (r' - s - 1) mod k for r' = r + 1.
    """
    inputs = np.asarray(inputs, dtype=np.float64)
    k, n = inputs.shape
    bounds = _chunk_bounds(n, k)
    state, states = inputs.copy(), []
    for s in range(k - 1):
        new = state.copy()
        for r in range(k):
            right, c = (r + 1) % k, (r - s) % k
            lo, hi = bounds[c]
            new[right, lo:hi] += state[r, lo:hi]
        state = new
        states.append(state.copy())
    return np.array(states)


def _chunk_bounds(n, k):
    """[lo, hi) of each of the k chunks torch.tensor_split makes of n elements."""
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return [(int(starts[i]), int(starts[i + 1])) for i in range(k)]


def judge_reduce_scatter_step(name, per_rank, k, *, source=None) -> v.Verdict:
    known = _outcome(name, per_rank, lambda r, res: f"{name}(chunks, rank={r}, world_size={k}, step={res.get('step', 0)})")
    if known:
        return known
    inputs = np.array([res["input"] for res in per_rank], dtype=np.float64)
    expected = ring_states(inputs)
    n = inputs.shape[1]
    bounds = _chunk_bounds(n, k)
    # the simulation above is the library's ring; both must agree with the real collectives
    ring = np.array([res["ring"] for res in per_rank])
    truth = per_rank[0]["truth"]
    if not np.array_equal(expected[-1], ring) or any(
        not np.array_equal(ring[r, slice(*bounds[(r + 1) % k])], truth[slice(*bounds[(r + 1) % k])]) for r in range(k)
    ):
        raise RuntimeError("the ring's reduce-scatter disagrees with its simulation or with dist.all_reduce.")
    for s in range(k - 1):
        for r in range(k):
            got = np.asarray(per_rank[r]["states"][s], dtype=np.float64)
            if got.shape != expected[s, r].shape:
                return v.failed(name, f"after step {s}, rank {r}'s chunks hold {got.size} numbers in all; "
                                f"expected {n}", "Add what arrives into one chunk; keep every chunk's length.")
            first = v.first_mismatch(got, expected[s, r])
            if first is None:
                continue
            i = first[0]
            c = next(j for j, (lo, hi) in enumerate(bounds) if lo <= i < hi)
            prev = inputs if s == 0 else expected[s - 1]  # every rank's state before this step
            hint = _ring_hint(per_rank[r]["log"][s], got, prev, bounds, r, s, k, rebinding(source))
            return v.failed(name, f"after step {s}, rank {r}'s chunk {c} has {v.num(got[i])} at element "
                            f"{i - bounds[c][0]}, {v.against(got[i], expected[s, r, i])}", hint)
    return v.passed(name, f"on {k} real ranks, {k - 1} steps leave every rank's chunks as the ring's reduce-scatter "
                    "does, step by step, and chunk (rank + 1) % k holds dist.all_reduce's sum")


def _ring_hint(log, got, prev, bounds, r, s, k, rebound=None) -> str:
    """Which part of step ``s`` rank ``r`` got wrong, from what it sent and which chunk it changed; "" if unclear.

    ``rebound`` is a statement of the function that rebinds a name to a new tensor (see :func:`rebinding`).
    """
    left, right = (r - 1) % k, (r + 1) % k
    send_c, recv_c = (r - s) % k, (r - s - 1) % k
    sends = [(peer, c) for op, peer, c in log if op == "send"]
    recvs = [peer for op, peer, c in log if op == "recv"]
    changed = [j for j, (lo, hi) in enumerate(bounds) if not np.array_equal(got[lo:hi], prev[r, lo:hi])]
    if not sends and not recvs and not changed:  # (a function that imports dist itself sends unseen, but changes chunks)
        return f"Rank {r} sent and received nothing in step {s}: each step sends one chunk right and receives one from the left."
    if sends and sends[0][0] != right:
        return f"Rank {r} sent to rank {sends[0][0]}; a ring step sends to the right neighbour, (rank + 1) % k = {right}."
    if recvs and recvs[0] not in (left, -1):
        return f"Rank {r} received from rank {recvs[0]}; a ring step receives from the left neighbour, (rank - 1) % k = {left}."
    if sends and sends[0][1] >= 0 and sends[0][1] != send_c:
        which = "its own chunk" if s == 0 else "the one it added into at the step before"
        return f"Rank {r} sent chunk {sends[0][1]}; at step {s} it sends chunk (rank - step) % k = {send_c}, {which}."
    stray = [j for j in changed if j != recv_c]
    if stray:
        return (f"Rank {r} changed chunk {stray[0]}; what arrives from the left at step {s} belongs in chunk "
                f"(rank - step - 1) % k = {recv_c}.")
    lo, hi = bounds[recv_c]
    if np.array_equal(got[lo:hi], prev[left, lo:hi]):
        return f"Chunk {recv_c} holds what arrived, alone: add it to the rank's own chunk {recv_c} instead of replacing it."
    if not changed and (sends or recvs or rebound):
        how = (f"`{rebound[0]}` makes a new tensor and points the name {rebound[1]} at it, so chunk {recv_c} itself "
               "stays as it was" if rebound else
               f"chunk {recv_c} itself stays as it was: the sum went to a new tensor, not into the chunk")
        return (f"Rank {r}'s chunks did not change in step {s}: {how}. Update it in place: chunks[{recv_c}] += inbox "
                "(or chunks[i].add_(inbox)).")
    return ""


# --- splitting the model: gather_columns ----------------------------------------------------------


def judge_gather_columns(name, per_rank, k, *, source=None) -> v.Verdict:
    known = _outcome(name, per_rank, lambda r, res: "")
    if known:
        return known
    block_sum = np.sum([res["block"] for res in per_rank], axis=0)  # what dist.all_reduce of the blocks gives
    summed = ("Every rank got the sum of the blocks, which is what dist.all_reduce gives, not each rank's block side "
              "by side: gather them with dist.all_gather(blocks, y_block), then torch.cat(blocks, dim=1).")
    for rank, res in enumerate(per_rank):
        got, expected, block = res["got"], res["gathered"], res["block"]
        if got is None:
            what = _returned_words(res) if res.get("returned_type") not in (None, "NoneType") else "None"
            return v.failed(name, f"on rank {rank} it returned {what}; expected a tensor of shape "
                            f"{v.shape_words(expected.shape)}", "Return the whole Y, the k blocks side by side.")
        rows, cols = block.shape
        if got.shape != expected.shape:
            hint = "Return the whole Y, the k blocks side by side."
            if got.shape == (k * rows, cols):
                hint = "The blocks are stacked as rows: they are column blocks, so put them side by side (dim=1)."
            elif got.shape == block.shape and v.close(got, block_sum):
                hint = summed
            elif got.shape == block.shape:
                hint = "That is the rank's own block: gather the other ranks' blocks with dist.all_gather."
            return v.failed(name, f"on rank {rank} it returned shape {v.shape_words(got.shape)}; expected "
                            f"{v.shape_words(expected.shape)}", hint)
        first = v.first_mismatch(got, expected)
        if first is None:
            continue
        if all(v.close(got[:, j * cols:(j + 1) * cols], block_sum) for j in range(k)):
            return v.failed(name, f"on rank {rank}, every column block of Y is the sum of the {k} blocks", summed)
        j = first[1] // cols
        owner = next((q for q in range(k) if v.close(got[:, j * cols:(j + 1) * cols], per_rank[q]["block"])), None)
        hint = (f"Columns {j * cols}–{(j + 1) * cols - 1} hold rank {owner}'s block; block j belongs to rank j, "
                "so keep the blocks in rank order.") if owner is not None and owner != j else ""
        return v.failed(name, f"on rank {rank}, Y[{first[0]}, {first[1]}] is {v.num(got[first])}, "
                        f"{v.against(got[first], expected[first])}", hint)
    if not all(v.close(res["gathered"], res["full"]) for res in per_rank):
        raise RuntimeError("dist.all_gather of the blocks differs from X W: the check itself is broken.")
    return v.passed(name, f"on {k} real ranks every rank's Y equals what dist.all_gather assembles, which is the "
                    "unsplit layer's X W to within float rounding")


JUDGES = {
    "average_gradients": judge_average_gradients,
    "reduce_scatter_step": judge_reduce_scatter_step,
    "gather_columns": judge_gather_columns,
}
