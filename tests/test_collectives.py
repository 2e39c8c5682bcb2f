"""The hand-written ring and parameter server against dist.all_reduce, on real gloo process groups."""

import warnings

import numpy as np
import pytest

from dpviz.topics.all_reduce.rank_collectives import PIECE, compare_with_all_reduce, owned_chunk
from dpviz.engine.launch import launch

# 1 and 3 are smaller than some k (empty chunks); 12 splits evenly for every k; 1001 for none but k = 1.
SIZES = (1, 3, 12, 1001, 400_003)
F32 = 4  # bytes per element


@pytest.fixture(scope="module", params=[1, 2, 3, 4], ids=lambda k: f"k={k}")
def runs(request):
    """One launch per k; every test below reads from it. Returns (k, results of each rank).

    k = 1 runs through the same tests: no bytes, an empty schedule, the input back unchanged.
    """
    k = request.param
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ranks share")  # correctness, not timing, is tested here
        return k, launch(compare_with_all_reduce, k, args=(SIZES, 7), backend="gloo", stall_timeout=180)


def chunk_sizes(n, k):
    return [len(c) for c in np.array_split(np.arange(n), k)]


def test_integer_valued_inputs_give_bit_identical_sums(runs):
    k, results = runs
    for n in SIZES:
        total = np.sum([results[r][("int", n)]["input"] for r in range(k)], axis=0)  # exact: small integers
        for r in range(k):
            got = results[r][("int", n)]
            np.testing.assert_array_equal(got["all_reduce"], total)
            np.testing.assert_array_equal(got["ring"], got["all_reduce"])
            np.testing.assert_array_equal(got["parameter_server"], got["all_reduce"])


def test_random_inputs_agree_within_rounding_and_ranks_agree_bitwise(runs):
    k, results = runs
    for n in SIZES:
        reference = results[0][("rand", n)]
        for r in range(k):
            got = results[r][("rand", n)]
            np.testing.assert_allclose(got["ring"], got["all_reduce"], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got["parameter_server"], got["all_reduce"], rtol=1e-5, atol=1e-6)
            # The ring's all-gather and the server's pull hand out copies of one sum, so replicas match exactly.
            np.testing.assert_array_equal(got["ring"], reference["ring"])
            np.testing.assert_array_equal(got["parameter_server"], reference["parameter_server"])


def test_the_one_pass_all_reduce_is_its_two_phases_one_after_the_other(runs):
    """ring_all_reduce overlaps the all-gather with the reduce-scatter; the bits, bytes and schedule are those of
    ring_reduce_scatter followed by ring_all_gather, tiny tensors (empty chunks on some ranks) included."""
    k, results = runs
    for n in SIZES:
        for kind in ("int", "rand"):
            for r in range(k):
                got = results[r][(kind, n)]
                np.testing.assert_array_equal(got["ring"], got["phases"])
                assert got["ring_bytes"] == got["phases_bytes"] and got["ring_schedule"] == got["phases_schedule"]


def test_ring_sends_2_k_minus_1_over_k_of_the_message(runs):
    k, results = runs
    for n in SIZES:
        sizes = chunk_sizes(n, k)
        sent = [results[r][("int", n)]["ring_bytes"] for r in range(k)]
        # Each phase, every chunk but one leaves each rank: (k-1) of k chunks, twice.
        assert sum(sent) == 2 * (k - 1) * n * F32
        for r in range(k):
            schedule = results[r][("int", n)]["ring_schedule"]
            assert sum(t["bytes"] for t in schedule) == sent[r]
            assert all(t["bytes"] == sizes[t["chunk"]] * F32 for t in schedule)
            assert 2 * (k - 1) * min(sizes) * F32 <= sent[r] <= 2 * (k - 1) * max(sizes) * F32
            if n % k == 0:
                assert sent[r] == 2 * (k - 1) * (n // k) * F32


def test_parameter_server_loads_rank_0(runs):
    k, results = runs
    for n in SIZES:
        sent = [results[r][("int", n)]["server_bytes"] for r in range(k)]
        assert sent == [(k - 1) * n * F32] + [n * F32] * (k - 1)
        pushes = [t for r in range(k) for t in results[r][("int", n)]["server_schedule"] if t["phase"] == "push"]
        pulls = [t for r in range(k) for t in results[r][("int", n)]["server_schedule"] if t["phase"] == "pull"]
        assert sorted(t["src"] for t in pushes) == list(range(1, k)) and all(t["dst"] == 0 for t in pushes)
        assert sorted(t["dst"] for t in pulls) == list(range(1, k)) and all(t["src"] == 0 for t in pulls)


def test_ring_schedule_moves_every_chunk_to_every_rank(runs):
    """Replay the recorded schedule on sets of contributors: who has added into which chunk."""
    k, results = runs
    n = 1001
    schedules = [results[r][("int", n)]["ring_schedule"] for r in range(k)]
    for r, schedule in enumerate(schedules):
        assert len(schedule) == 2 * (k - 1)
        assert [(t["phase"], t["step"]) for t in schedule] == [
            (phase, s) for phase in ("reduce-scatter", "all-gather") for s in range(k - 1)
        ]
        assert all(t["src"] == r and t["dst"] == (r + 1) % k for t in schedule)

    holds = [[{r} for _ in range(k)] for r in range(k)]  # holds[rank][chunk]: ranks summed in so far
    for phase in ("reduce-scatter", "all-gather"):
        for s in range(k - 1):
            moves = [t for sched in schedules for t in sched if t["phase"] == phase and t["step"] == s]
            assert len(moves) == k and len({t["chunk"] for t in moves}) == k  # every chunk moves once per step
            before = [[set(c) for c in row] for row in holds]  # all transfers of a step happen together
            for t in moves:
                if phase == "reduce-scatter":
                    holds[t["dst"]][t["chunk"]] |= before[t["src"]][t["chunk"]]
                else:
                    assert before[t["src"]][t["chunk"]] == set(range(k)), "all-gather passed on a partial sum"
                    holds[t["dst"]][t["chunk"]] = before[t["src"]][t["chunk"]]
        if phase == "reduce-scatter":
            for r in range(k):
                full = [c for c in range(k) if holds[r][c] == set(range(k))]
                assert full == [owned_chunk(r, k)]
    assert all(c == set(range(k)) for row in holds for c in row)


def test_after_reduce_scatter_each_rank_owns_the_full_sum_of_one_chunk(runs):
    k, results = runs
    for n in SIZES:
        total = results[0][("int", n)]["all_reduce"]
        bounds = np.cumsum([0] + chunk_sizes(n, k))
        for r in range(k):
            c = owned_chunk(r, k)
            part = results[r][("int", n)]["after_reduce_scatter"][bounds[c] : bounds[c + 1]]
            np.testing.assert_array_equal(part, total[bounds[c] : bounds[c + 1]])



# (k, n, piece): chunks of 2001, 2001 and 2000 elements go as 3, 3 and 2 pieces, so what a rank passes on
# is cut differently from what it receives next; 400_003 at k = 4 gives pieces that do not divide the
# chunks; a piece of 10 elements would make 201 pieces of a chunk, more than MAX_PIECES.
PIECE_CASES = [(3, 3 * 2000 + 2, 1000), (4, 400_003, 30_000), (2, 3 * 2000 + 2, 10)]


@pytest.mark.parametrize("k, n, piece", PIECE_CASES, ids=lambda v: str(v))
def test_piece_size_changes_nothing_but_the_timing(k, n, piece):
    """The same inputs through the ring cut into small pieces and into PIECE-sized ones: the same bits, bytes
    and schedule, so records made with either agree."""
    assert -(-(n // k) // piece) > 1 and piece < PIECE
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ranks share")
        small = launch(compare_with_all_reduce, k, args=((n,), 3, piece), backend="gloo", stall_timeout=180)
        whole = launch(compare_with_all_reduce, k, args=((n,), 3), backend="gloo", stall_timeout=180)
    for r in range(k):
        for kind in ("int", "rand"):
            got, ref = small[r][(kind, n)], whole[r][(kind, n)]
            np.testing.assert_array_equal(got["input"], ref["input"])
            np.testing.assert_array_equal(got["ring"], ref["ring"])
            np.testing.assert_array_equal(got["after_reduce_scatter"], ref["after_reduce_scatter"])
            np.testing.assert_array_equal(got["phases"], ref["ring"])
            assert got["ring_bytes"] == ref["ring_bytes"] and got["ring_schedule"] == ref["ring_schedule"]
        np.testing.assert_array_equal(small[r][("int", n)]["ring"], small[r][("int", n)]["all_reduce"])
        np.testing.assert_allclose(small[r][("rand", n)]["ring"], small[r][("rand", n)]["all_reduce"], rtol=1e-5, atol=1e-6)


def test_piece_must_be_positive():
    with pytest.raises(Exception, match="piece must be at least 1"):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*ranks share")
            launch(compare_with_all_reduce, 2, args=((12,), 0, 0), backend="gloo", stall_timeout=60)


def test_the_rings_spare_buffers_are_kept_between_calls_grown_when_needed_and_per_thread():
    """Fresh spares for every call cost page faults; kept ones must still be big enough, and never shared by two threads."""
    import threading

    import torch

    from dpviz.topics.all_reduce.rank_collectives import _spares

    like = torch.zeros(1)
    first = _spares(like, 100)
    assert len(first) == 2 and all(s.numel() == 100 and s.dtype == torch.float32 for s in first)
    assert first[0].data_ptr() != first[1].data_ptr()
    assert _spares(like, 50) is first  # smaller: the same pair
    grown = _spares(like, 200)
    assert grown is not first and all(s.numel() == 200 for s in grown)
    assert _spares(like.double(), 10)[0].dtype == torch.float64 and _spares(like, 200) is grown  # by dtype
    other = []
    thread = threading.Thread(target=lambda: other.append(_spares(like, 200)))
    thread.start()
    thread.join()
    assert other[0] is not grown and all(a.data_ptr() != b.data_ptr() for a in other[0] for b in grown)
