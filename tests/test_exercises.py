"""The chapters' exercises: every checker accepts its reference solution, rejects typical wrong answers
with the sentence that names the mistake, answers a stub with the fixed "not attempted yet", and fails a
function that answers anything at all (a checker that accepted everything fails here).

The three collective checkers run on real gloo ranks; their candidates share one launch (check_many), and
one deadlocking ring step goes through the public checker with a short stall timeout.
"""

import inspect
import linecache
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist

import dpviz.exercises as ex
from dpviz.exercises import catalogue, ranked
from dpviz.engine.verdict import FAILED, NOT_ATTEMPTED, PASSED, Verdict, is_stub, not_attempted
from dpviz.grading import load_solutions

solutions = load_solutions()  # the checkout's instructor/solutions.py: the reference answers are not in dpviz

NUMERIC = {  # checker name -> reference solution
    "check_sgd_step": solutions.sgd_step,
    "check_mean_gradient": solutions.mean_gradient,
    "check_weighted_mean": solutions.weighted_mean,
    "check_t_comm_ring": solutions.t_comm_ring,
    "check_speedup": solutions.speedup,
    "check_bus_bandwidth": solutions.bus_bandwidth,
    "check_data_parallel_step": solutions.data_parallel_step,
    "check_lr_for_k": solutions.lr_for_k,
    "check_warmup_lr": solutions.warmup_lr,
    "check_accumulated_gradient": solutions.accumulated_gradient,
    "check_wait_times": solutions.wait_times,
    "check_staleness": solutions.staleness,
    "check_bubble": solutions.bubble,
    "check_powersgd_bytes": solutions.powersgd_bytes,
    "check_slow_link_bytes": solutions.slow_link_bytes,
}

# Typical wrong answers, written as a student would: (checker, function, fragment the answer must contain).
WRONG = [
    ("check_sgd_step", lambda theta, grad, eta: theta + eta * grad, "a step uphill"),
    ("check_sgd_step", lambda theta, grad, eta: theta - grad, "η is missing"),
    ("check_sgd_step", lambda theta, grad, eta: -eta * grad, "the step alone"),
    ("check_sgd_step", lambda theta, grad, eta: theta - 0.1 * grad, "whatever eta is passed"),
    ("check_mean_gradient", lambda g: g.sum(axis=0), "That is the sum, 16 times the mean"),
    ("check_mean_gradient", lambda g: g.mean(axis=1), "average over the examples (axis 0)"),
    ("check_weighted_mean", lambda g, b: np.mean(g, axis=0), "plain mean of the group means"),
    ("check_weighted_mean", lambda g, b: sum(bi * gi for bi, gi in zip(b, g)) / len(b), "not by the number of groups"),
    ("check_weighted_mean", lambda g, b: sum(bi * gi for bi, gi in zip(b, g)), "divide by Σ b_i"),
    ("check_t_comm_ring", lambda k, M, a, b: a * np.log2(k) + (k - 1) / k * M / b, "the notes' formula"),
    ("check_t_comm_ring", lambda k, M, a, b: 2 * (k - 1) * a + 2 * (k - 1) * M / b, "not all M"),
    ("check_t_comm_ring", lambda k, M, a, b: (k - 1) * a + (k - 1) / k * M / b, "one trip around the ring"),
    ("check_speedup", lambda t, k, c: t / (t + c), "The compute is shared"),
    ("check_speedup", lambda t, k, c: (t / k + c) / t, "upside down"),
    ("check_speedup", lambda t, k, c: k, "leaves out T_comm"),
    ("check_bus_bandwidth", lambda M, t, k: M / t, "That is algbw"),
    ("check_bus_bandwidth", lambda M, t, k: M / t * (k - 1) / k, "counts one phase of the ring"),
    ("check_bus_bandwidth", lambda M, t, k: 2 * M / t, "not 2"),
    ("check_data_parallel_step", lambda th, g, eta: th - eta * g.sum(axis=0), "the sum of the 4 gradients"),
    ("check_data_parallel_step", lambda th, g, eta: th - eta * g[0], "rank 0 stepping on its own gradient"),
    ("check_lr_for_k", lambda lr, k, rule: lr * (k ** 0.5 if rule == "linear" else k), "the other rule's rate"),
    ("check_lr_for_k", lambda lr, k, rule: lr / k, "don't divide it"),
    ("check_lr_for_k", lambda lr, k, rule: lr * k, "multiplies by √k, not k"),
    ("check_warmup_lr", lambda lr, t, w: lr * t / w if t < w else lr, "Step 0 must already move"),
    ("check_warmup_lr", lambda lr, t, w: lr * (t + 1) / w if w else lr, "must stop growing"),
    ("check_accumulated_gradient", lambda g: g.sum(axis=0), "m times too large"),
    ("check_accumulated_gradient", lambda g: g[-1], "the last micro-batch's gradient alone"),
    ("check_wait_times", lambda c: np.array(c) - min(c), "behind the fastest"),
    ("check_wait_times", lambda c: [max(c) - min(c)] * len(c), "Each rank waits a different time"),
    ("check_staleness", lambda t: [len(t) - 1] * len(t), "k − 1 holds only when all workers are equally fast"),
    ("check_staleness", lambda t: np.array(t) * sum(1 / x for x in t), "counts the worker's own update"),
    ("check_bubble", lambda p, m: (p - 1) / m, "idle time over busy time"),
    ("check_bubble", lambda p, m: (p - 1) / (m + p), "not m + p"),
    ("check_bubble", lambda p, m: m / (m + p - 1), "the busy share"),
    ("check_powersgd_bytes", lambda rows, cols, r: (rows + cols) * r, "each float32 value is 4 bytes"),
    ("check_powersgd_bytes", lambda rows, cols, r: 4 * (rows + cols) * r, "compresses only where it pays"),
    ("check_slow_link_bytes", lambda k, g, M: 2 * (k - 1) / k * M, "what a flat ring sends"),
    ("check_slow_link_bytes", lambda k, g, M: M / g, "not all of it"),
]

# Where each failure must point: the step, case or element that first went wrong, with the value expected there.
WHERE = {
    "check_sgd_step": "at step 0 of the line model's descent path with η = ",
    "check_mean_gradient": "on step 0 of a recorded line-model run (k = 1, b = 16)",
    "check_weighted_mean": "with groups of 2, 5, 9 examples from step 0",
    "check_t_comm_ring": "at k = 4, M = 4e+08 bytes",
    "check_speedup": "at T_compute = 1 s, k = 4, T_comm = 0.1 s",
    "check_bus_bandwidth": "for M = 4e+08 bytes in 0.01 s on k = 8",
    "check_data_parallel_step": "at step 0 of a recorded run on k = 4 ranks",
    "check_lr_for_k": "for lr_base = 0.1, k = 4",
    "check_warmup_lr": "at step ",
    "check_accumulated_gradient": "with m = 4 micro-batches of 4 examples from step 0",
    "check_wait_times": "for ranks computing 0.1, 0.1, 0.15, 0.1 s",
    "check_staleness": "for workers taking",
    "check_bubble": "for p = 4 stages and m = 8 micro-batches",
    "check_powersgd_bytes": " matrix at r = 4, it gives ",
    "check_slow_link_bytes": "for k = 8 in groups of g = ",
}


def notebook_function(source: str, name: str):
    """Define ``name`` from ``source`` the way a notebook cell does: IPython keeps the cell's text in linecache."""
    filename = f"<test cell {name} {abs(hash(source))}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


# --- the numeric checkers ---------------------------------------------------------------------------


@pytest.mark.parametrize("checker", sorted(NUMERIC))
def test_numeric_checker_accepts_its_reference_solution(checker):
    verdict = getattr(ex, checker)(NUMERIC[checker])
    assert verdict.passed, verdict
    assert verdict.startswith(f"{NUMERIC[checker].__name__}: correct — ")


@pytest.mark.parametrize("checker, wrong, fragment", WRONG, ids=[f"{c}-{f[:24]}" for c, _, f in WRONG])
def test_numeric_checker_names_a_typical_mistake(checker, wrong, fragment):
    verdict = getattr(ex, checker)(wrong)
    assert verdict.status == FAILED, verdict
    assert fragment in verdict, verdict
    assert WHERE[checker] in verdict and "expected" in verdict, verdict


def test_every_numeric_checker_has_two_typical_mistakes_tested():
    counts = {name: sum(c == name for c, _, _ in WRONG) for name in NUMERIC}
    assert min(counts.values()) >= 2, counts


@pytest.mark.parametrize("checker", sorted(NUMERIC))
@pytest.mark.parametrize("answer", [0.0, 1.0, None, "theta"], ids=["zero", "one", "none", "text"])
def test_numeric_checker_rejects_a_function_that_answers_anything(checker, answer):
    verdict = getattr(ex, checker)(lambda *args: answer)
    assert verdict.status == FAILED, verdict


def test_a_wrong_shape_is_named_with_the_shape_expected():
    verdict = ex.check_sgd_step(lambda theta, grad, eta: np.append(theta - eta * grad, 0.0))
    assert "shape (3,); expected shape (2,)" in verdict, verdict


def test_an_exception_in_the_readers_function_is_one_sentence_naming_the_call():
    def bubble(p, m):
        return (p - 1) / undefined_name  # noqa: F821

    verdict = ex.check_bubble(bubble)
    assert verdict == "bubble raised NameError: name 'undefined_name' is not defined when called as bubble(4, 8)."


def test_a_function_that_changes_its_input_in_place_cannot_spoil_the_next_case():
    def sgd_step(theta, grad, eta):
        theta -= eta * grad
        return theta

    assert ex.check_sgd_step(sgd_step).passed


# --- stubs: not attempted yet, deterministically, without starting ranks -------------------------


@pytest.mark.parametrize("exercise", catalogue.EXERCISES, ids=lambda e: e.name)
def test_a_stub_is_not_attempted_yet_every_time(exercise, monkeypatch):
    import dpviz.engine.launch

    monkeypatch.setattr(dpviz.engine.launch, "launch", lambda *a, **k: pytest.fail("a stub must not start ranks"))
    checker = getattr(ex, exercise.checker)
    stub = notebook_function(exercise.stub(), exercise.name)
    first, second = checker(stub), checker(stub)
    expected = f"{exercise.name}: not attempted yet — write the function above, then run this cell again."
    assert first == second == expected
    assert first.status == NOT_ATTEMPTED and not first.passed
    # without its source (a function made by exec), the compiled body still tells a stub apart
    namespace = {}
    exec(exercise.stub(), namespace)
    assert checker(namespace[exercise.name]) == expected


def test_is_stub_only_for_a_body_that_raises_not_implemented_first():
    assert is_stub(notebook_function("def f(x):\n    '''doc'''\n    raise NotImplementedError('later')\n", "f"))
    assert not is_stub(notebook_function("def f(x):\n    return x\n", "f"))
    assert not is_stub(notebook_function("def f(x):\n    x = x + 1\n    raise NotImplementedError\n", "f"))


# --- the catalogue -------------------------------------------------------------------------------


@pytest.mark.parametrize("exercise", catalogue.EXERCISES, ids=lambda e: e.name)
def test_catalogue_stub_has_the_reference_solutions_signature(exercise):
    reference = getattr(solutions, exercise.name)
    assert list(inspect.signature(reference).parameters) == [p.strip() for p in exercise.params.split(",")]
    assert exercise.checker in ex.__all__
    assert exercise.check_cell().endswith(f"print({exercise.checker}({exercise.name}))")


def test_every_chapter_from_01_has_one_to_three_exercises():
    for chapter in ("01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12"):
        assert 1 <= len(catalogue.for_chapter(chapter)) <= 3, chapter


def test_importing_the_exercises_leaves_torch_unloaded():
    code = "import sys, dpviz.exercises; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_verdict_is_a_string_that_knows_whether_it_passed():
    verdict = Verdict("f: correct — fine.", PASSED)
    assert verdict.passed and repr(verdict) == str(verdict) == "f: correct — fine."
    assert not not_attempted("f").passed


def test_bad_input_is_one_sentence():
    with pytest.raises(TypeError, match=r"check_sgd_step expects your function itself"):
        ex.check_sgd_step(3)
    with pytest.raises(ValueError, match=r"k must be an integer from 2 to 8; got 1"):
        ex.check_average_gradients(solutions.average_gradients, k=1)


def test_ring_states_end_with_each_rank_owning_the_sum_of_its_chunk():
    rng = np.random.default_rng(0)
    inputs = rng.integers(-9, 10, size=(4, 8)).astype(float)
    final = ranked.ring_states(inputs)[-1]
    for r in range(4):
        c = (r + 1) % 4
        assert np.array_equal(final[r, 2 * c:2 * c + 2], inputs.sum(axis=0)[2 * c:2 * c + 2])


# --- the collective checkers, on real ranks ---------------------------------------------------------
# Module-level functions, as a student would write them in a cell; the ranks get their source.


def avg_sum_only(model_grads, world_size):
    for grad in model_grads:
        dist.all_reduce(grad)


def avg_wrong_k(model_grads, world_size):
    for grad in model_grads:
        dist.all_reduce(grad)
        grad /= world_size - 1


def avg_no_exchange(model_grads, world_size):
    for grad in model_grads:
        grad /= world_size


def avg_returns_new_list(model_grads, world_size):
    out = []
    for grad in model_grads:
        total = grad.clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        out.append(total / world_size)
    return out


def avg_uses_a_notebook_helper(model_grads, world_size):
    return helper(model_grads)  # noqa: F821


def avg_does_nothing(model_grads, world_size):
    return None


def rs_same_chunk_both_ways(chunks, rank, world_size, step):  # off by one: adds into the chunk it sent
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    i = (rank - step) % world_size
    inbox = torch.empty_like(chunks[i])
    sending = dist.isend(chunks[i], dst=right)
    dist.recv(inbox, src=left)
    sending.wait()
    chunks[i] += inbox


def rs_sends_the_next_chunk(chunks, rank, world_size, step):  # off by one in the chunk sent
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i, recv_i = (rank - step + 1) % world_size, (rank - step - 1) % world_size
    inbox = torch.empty_like(chunks[recv_i])
    sending = dist.isend(chunks[send_i], dst=right)
    dist.recv(inbox, src=left)
    sending.wait()
    chunks[recv_i] += inbox


def rs_keeps_what_arrives(chunks, rank, world_size, step):
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i, recv_i = (rank - step) % world_size, (rank - step - 1) % world_size
    sending = dist.isend(chunks[send_i].clone(), dst=right)
    dist.recv(chunks[recv_i], src=left)
    sending.wait()


def rs_sends_left(chunks, rank, world_size, step):
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i, recv_i = (rank - step) % world_size, (rank - step - 1) % world_size
    inbox = torch.empty_like(chunks[recv_i])
    sending = dist.isend(chunks[send_i], dst=left)
    dist.recv(inbox, src=right)
    sending.wait()
    chunks[recv_i] += inbox


def rs_with_batched_p2p(chunks, rank, world_size, step):  # right, in another style: P2POp, a new tensor
    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i, recv_i = (rank - step) % world_size, (rank - step - 1) % world_size
    inbox = torch.zeros_like(chunks[recv_i])
    ops = [dist.P2POp(dist.isend, chunks[send_i], right), dist.P2POp(dist.irecv, inbox, left)]
    for request in dist.batch_isend_irecv(ops):
        request.wait()
    chunks[recv_i] = chunks[recv_i] + inbox


def rs_imports_its_own_dist(chunks, rank, world_size, step):  # right; the ranks cannot watch its sends
    import torch.distributed as dist

    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i, recv_i = (rank - step) % world_size, (rank - step - 1) % world_size
    inbox = torch.empty_like(chunks[recv_i])
    sending = dist.isend(chunks[send_i], dst=right)
    dist.recv(inbox, src=left)
    sending.wait()
    chunks[recv_i] += inbox


def rs_imports_its_own_dist_and_replaces(chunks, rank, world_size, step):
    import torch.distributed as dist

    left, right = (rank - 1) % world_size, (rank + 1) % world_size
    send_i, recv_i = (rank - step) % world_size, (rank - step - 1) % world_size
    sending = dist.isend(chunks[send_i].clone(), dst=right)
    dist.recv(chunks[recv_i], src=left)
    sending.wait()


def rs_does_nothing(chunks, rank, world_size, step):
    return chunks


def gc_stacked_as_rows(y_block, world_size):
    blocks = [torch.empty_like(y_block) for _ in range(world_size)]
    dist.all_gather(blocks, y_block)
    return torch.cat(blocks, dim=0)


def gc_own_block(y_block, world_size):
    return y_block


def gc_wrong_order(y_block, world_size):
    blocks = [torch.empty_like(y_block) for _ in range(world_size)]
    dist.all_gather(blocks, y_block)
    return torch.cat(blocks[::-1], dim=1)


def gc_returns_a_list(y_block, world_size):
    blocks = [torch.empty_like(y_block) for _ in range(world_size)]
    dist.all_gather(blocks, y_block)
    return blocks


RANKED = [  # (exercise, function, status, fragment)
    ("average_gradients", solutions.average_gradients, PASSED, "equals dist.all_reduce's sum divided by k"),
    ("average_gradients", avg_returns_new_list, FAILED, "the inputs were not changed in place"),
    ("average_gradients", avg_sum_only, FAILED, "It is the sum over the ranks, 3 times the mean: divide by world_size."),
    ("average_gradients", avg_wrong_k, FAILED, "It is the sum divided by 2: divide by world_size"),
    ("average_gradients", avg_no_exchange, FAILED, "all-reduce it first"),
    ("average_gradients", avg_does_nothing, FAILED, "nothing was exchanged"),
    ("average_gradients", avg_uses_a_notebook_helper, FAILED, "raised NameError: name 'helper' is not defined on rank 0"),
    ("reduce_scatter_step", solutions.reduce_scatter_step, PASSED, "holds dist.all_reduce's sum"),
    ("reduce_scatter_step", rs_with_batched_p2p, PASSED, "step by step"),
    ("reduce_scatter_step", rs_same_chunk_both_ways, FAILED, "belongs in chunk (rank - step - 1) % k = 2"),
    ("reduce_scatter_step", rs_sends_the_next_chunk, FAILED,
     "Rank 0 sent chunk 1; at step 0 it sends chunk (rank - step) % k = 0"),
    ("reduce_scatter_step", rs_keeps_what_arrives, FAILED, "instead of replacing it"),
    ("reduce_scatter_step", rs_sends_left, FAILED, "Rank 0 sent to rank 2; a ring step sends to the right neighbour"),
    ("reduce_scatter_step", rs_does_nothing, FAILED, "Rank 0 sent and received nothing in step 0"),
    ("reduce_scatter_step", rs_imports_its_own_dist, PASSED, "holds dist.all_reduce's sum"),
    ("reduce_scatter_step", rs_imports_its_own_dist_and_replaces, FAILED, "instead of replacing it"),
    ("gather_columns", solutions.gather_columns, PASSED, "the unsplit layer's X W"),
    ("gather_columns", gc_stacked_as_rows, FAILED, "shape (12, 3); expected (4, 9). The blocks are stacked as rows"),
    ("gather_columns", gc_own_block, FAILED, "That is the rank's own block"),
    ("gather_columns", gc_wrong_order, FAILED, "Columns 0–2 hold rank 2's block"),
    ("gather_columns", gc_returns_a_list, FAILED, "on rank 0 it returned a list; expected a tensor of shape (4, 9)"),
]


@pytest.fixture(scope="module")
def ranked_verdicts():
    """Every collective candidate above, checked on 3 real ranks in one launch."""
    return ranked.check_many([(exercise, fn) for exercise, fn, _, _ in RANKED])


@pytest.mark.parametrize("i", range(len(RANKED)), ids=[fn.__name__ for _, fn, _, _ in RANKED])
def test_collective_checker_on_real_ranks(ranked_verdicts, i):
    exercise, fn, status, fragment = RANKED[i]
    verdict = ranked_verdicts[i]
    assert verdict.status == status, verdict
    assert fragment in verdict, verdict
    assert verdict.startswith(fn.__name__), verdict
    if status == FAILED and "raised" not in fragment:  # the first rank / step and what was expected there
        assert "expected" in verdict and "rank 0" in verdict, verdict


def test_every_collective_checker_accepts_its_reference_and_rejects_three_mistakes():
    for exercise in ranked.JUDGES:
        rows = [row for row in RANKED if row[0] == exercise]
        assert any(status == PASSED and fn.__name__ == exercise for _, fn, status, _ in rows), exercise
        assert sum(status == FAILED for _, _, status, _ in rows) >= 3, exercise


def rs_both_ways_to_the_right(chunks, rank, world_size, step):  # deadlock: nobody sends to its left neighbour
    right = (rank + 1) % world_size
    inbox = torch.empty_like(chunks[0])
    sending = dist.isend(chunks[(rank - step) % world_size], dst=right)
    dist.recv(inbox, src=right)
    sending.wait()


def test_a_ring_step_that_deadlocks_is_named_not_left_hanging():
    verdict = ex.check_reduce_scatter_step(rs_both_ways_to_the_right, stall_timeout=4.0)
    assert verdict == ("rs_both_ways_to_the_right: the ranks got stuck in step 0 (no progress for 4 s): a send or a "
                       "receive found no partner. Each step every rank sends one chunk to right = (rank + 1) % world_size and "
                       "receives one from left = (rank - 1) % world_size.")
