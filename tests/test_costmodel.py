"""The cost model's formulas, the notes' claims about them, the fit, and its bad-input errors."""

import subprocess
import sys

import numpy as np
import pytest

from dpviz.topics.ground_floor import costmodel as cm
from dpviz.topics.ground_floor.links import PRESETS, SPEED_ORDER

ALPHA, BETA = 20e-6, 1.25e9  # seconds, bytes/second: roughly 10 Gb Ethernet
K = np.array([2, 3, 4, 8, 16])
M = np.logspace(2, 8, 13)  # bytes, from latency-bound to bandwidth-bound


@pytest.mark.parametrize("formula", cm.FORMULAS)
def test_one_rank_has_nothing_to_sync(formula):
    assert cm.t_comm(1, 1e8, ALPHA, BETA, formula=formula) == 0.0
    assert cm.speedup(2.0, 1, cm.t_comm(1, 1e8, ALPHA, BETA, formula=formula)) == 1.0


def test_named_functions_match_dispatch():
    named = {"notes": cm.t_comm_notes, "ring": cm.t_comm_ring, "halving_doubling": cm.t_comm_halving_doubling}
    for formula, fn in named.items():
        assert fn(8, 1e6, ALPHA, BETA) == cm.t_comm(8, 1e6, ALPHA, BETA, formula=formula)
    assert cm.t_comm(8, 1e6, ALPHA, BETA) == cm.t_comm_ring(8, 1e6, ALPHA, BETA)


def test_formulas_by_hand():
    k, M = 8, 1e6
    bw = 7 / 8 * M / BETA
    assert cm.t_comm_notes(k, M, ALPHA, BETA) == pytest.approx(3 * ALPHA + bw)
    assert cm.t_comm_ring(k, M, ALPHA, BETA) == pytest.approx(14 * ALPHA + 2 * bw)
    assert cm.t_comm_halving_doubling(k, M, ALPHA, BETA) == pytest.approx(6 * ALPHA + 2 * bw)


def test_ring_moves_twice_the_notes_bytes():
    # With no latency only the bandwidth terms are left.
    notes = cm.t_comm_notes(K[:, None], M, 0.0, BETA)
    np.testing.assert_allclose(cm.t_comm_ring(K[:, None], M, 0.0, BETA), 2 * notes, rtol=1e-12)
    np.testing.assert_allclose(cm.t_comm_halving_doubling(K[:, None], M, 0.0, BETA), 2 * notes, rtol=1e-12)


def test_comm_equal_to_split_compute_halves_the_speedup():
    k = np.arange(1, 65)
    t_compute = 3.0
    np.testing.assert_allclose(cm.speedup(t_compute, k, t_compute / k), k / 2, rtol=1e-12)
    np.testing.assert_allclose(cm.efficiency(t_compute, k, t_compute / k), 0.5, rtol=1e-12)


def test_speedup_limits():
    k = np.array([2, 8, 64, 1024])
    assert np.array_equal(cm.speedup(1.0, k, 0.0), k)
    np.testing.assert_allclose(cm.speedup(1.0, k, 1e-15), k, rtol=1e-9)
    # Sync far longer than the split compute: the step is all sync, S ~ t_compute / t_comm.
    np.testing.assert_allclose(cm.speedup(1.0, k, 1e4), 1.0 / 1e4, rtol=1e-4)


def test_bandwidth_fraction_rises_towards_one():
    k = np.arange(1, 10**6 + 1)
    f = cm.bandwidth_fraction(k)
    assert f[0] == 0.0 and f[1] == 0.5
    assert np.all(np.diff(f) > 0)
    assert np.all(f < 1)


def test_learning_rate_rules():
    assert cm.lr_linear(0.1, 4) == pytest.approx(0.4)
    assert cm.lr_sqrt(0.1, 4) == pytest.approx(0.2)
    assert cm.lr_linear(0.1, 1) == cm.lr_sqrt(0.1, 1) == 0.1
    k = np.array([1, 4, 16, 64])
    assert np.all(cm.lr_sqrt(0.1, k) <= cm.lr_linear(0.1, k))


@pytest.mark.parametrize("formula", cm.FORMULAS)
def test_broadcast_matches_scalar_calls(formula):
    grid = cm.t_comm(K[:, None], M[None, :], ALPHA, BETA, formula=formula)
    assert grid.shape == (len(K), len(M))
    for i, k in enumerate(K):
        for j, M_j in enumerate(M):
            assert grid[i, j] == cm.t_comm(int(k), float(M_j), ALPHA, BETA, formula=formula)
    s = cm.speedup(1e-2, K[:, None], grid)
    assert s[1, 2] == cm.speedup(1e-2, int(K[1]), float(grid[1, 2]))


def test_scalars_give_floats():
    for value in (cm.t_comm(4, 1e6, ALPHA, BETA), cm.speedup(1.0, 4, 0.1), cm.efficiency(1.0, 4, 0.1),
                  cm.bandwidth_fraction(4), cm.lr_linear(0.1, 4), cm.lr_sqrt(0.1, 4)):
        assert type(value) is float


def _grid(formula, k=K, alpha=ALPHA, beta=BETA):
    kk, mm = np.meshgrid(k, M, indexing="ij")
    return kk, mm, cm.t_comm(kk, mm, alpha, beta, formula=formula)


@pytest.mark.parametrize("formula", cm.FORMULAS)
def test_fit_recovers_exact_alpha_beta(formula):
    fit = cm.fit_alpha_beta(*_grid(formula), formula=formula)
    assert fit.formula == formula
    assert fit.alpha == pytest.approx(ALPHA, rel=1e-9)
    assert fit.beta == pytest.approx(BETA, rel=1e-9)
    assert fit.median_rel_err < 1e-9


@pytest.mark.parametrize("formula", cm.FORMULAS)
def test_fit_recovers_alpha_beta_through_noise(formula):
    kk, mm, t = _grid(formula)
    noisy = t * (1 + 0.05 * np.random.default_rng(0).standard_normal(t.shape))
    fit = cm.fit_alpha_beta(kk, mm, noisy, formula=formula)
    assert fit.alpha == pytest.approx(ALPHA, rel=0.1)
    assert fit.beta == pytest.approx(BETA, rel=0.1)
    assert fit.median_rel_err < 0.06
    assert fit.predicted.shape == fit.residuals.shape == fit.rel_err.shape == t.shape
    np.testing.assert_allclose(fit.residuals, noisy - fit.predicted)


def test_fit_leaves_out_one_rank():
    kk, mm, t = _grid("ring", k=np.array([1, 2, 4, 8]))
    t[0] = 1e-3  # a one-rank "all-reduce" still costs a call, but the model can say nothing about it
    fit = cm.fit_alpha_beta(kk, mm, t)
    assert fit.alpha == pytest.approx(ALPHA, rel=1e-9)
    assert fit.beta == pytest.approx(BETA, rel=1e-9)
    assert np.all(fit.predicted[0] == 0.0)


def test_fit_keeps_alpha_and_beta_physical():
    kk, mm, _ = _grid("ring")
    rng = np.random.default_rng(1)
    # Pure bandwidth: noise would pull an unconstrained alpha below 0 about half the time.
    no_latency = cm.t_comm(kk, mm, 0.0, BETA) * (1 + 0.05 * rng.standard_normal(kk.shape))
    fit = cm.fit_alpha_beta(kk, mm + 1e4, no_latency)
    assert fit.alpha >= 0 and fit.beta > 0
    # Pure latency: the bandwidth term is pinned at 1/beta = 0.
    no_bandwidth = cm.t_comm(kk, mm, ALPHA, np.inf)
    fit = cm.fit_alpha_beta(kk, mm, no_bandwidth * (1 - 1e-3 * mm / mm.max()))
    assert fit.alpha >= 0 and fit.beta > 0


def test_fit_all_and_repr():
    fits = cm.fit_all(*_grid("ring"))
    assert tuple(fits) == cm.FORMULAS
    best = min(fits.values(), key=lambda f: f.median_rel_err)
    assert best.formula == "ring"
    text = repr(fits["ring"])
    assert "µs" in text and "GB/s" in text and "ring" in text
    assert str(fits["ring"]) == text


def test_notes_fit_reads_beta_half_as_large():
    # The notes' formula has the shape of halving-doubling with alpha and 1/beta halved, so it fits
    # all-reduce times just as well but with alpha and beta each off by a factor of 2.
    fits = cm.fit_all(*_grid("halving_doubling"))
    assert fits["notes"].median_rel_err < 1e-9
    assert fits["notes"].alpha == pytest.approx(2 * ALPHA, rel=1e-9)
    assert fits["notes"].beta == pytest.approx(BETA / 2, rel=1e-9)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: cm.t_comm(0, 1e6, ALPHA, BETA), "k"),
        (lambda: cm.t_comm(np.array([4, 0]), 1e6, ALPHA, BETA), "k"),
        (lambda: cm.t_comm(2.5, 1e6, ALPHA, BETA), "k"),
        (lambda: cm.t_comm(4, -1.0, ALPHA, BETA), "M"),
        (lambda: cm.t_comm(4, 1e6, -1e-6, BETA), "alpha"),
        (lambda: cm.t_comm(4, 1e6, ALPHA, 0.0), "beta"),
        (lambda: cm.t_comm(4, 1e6, ALPHA, np.nan), "beta"),
        (lambda: cm.t_comm(4, 1e6, ALPHA, BETA, formula="tree"), "formula"),
        (lambda: cm.speedup(-1.0, 4, 0.1), "t_compute"),
        (lambda: cm.speedup(1.0, 0, 0.1), "k"),
        (lambda: cm.speedup(1.0, 4, -0.1), "t_comm"),
        (lambda: cm.efficiency(1.0, 0, 0.1), "k"),
        (lambda: cm.bandwidth_fraction(0), "k"),
        (lambda: cm.lr_linear(0.0, 4), "lr_base"),
        (lambda: cm.lr_sqrt(0.1, 0), "k"),
        (lambda: cm.fit_alpha_beta([2, 4], [1e3, 1e6], [1e-3]), "seconds"),
        (lambda: cm.fit_alpha_beta([2, 4], [1e3, 1e6], [1e-3, 0.0]), "seconds"),
        (lambda: cm.fit_alpha_beta([1, 4], [1e3, 1e6], [1e-3, 1e-2]), "k > 1"),
        (lambda: cm.fit_alpha_beta([2, 4], [0.0, 0.0], [1e-3, 2e-3]), "M"),
        (lambda: cm.fit_alpha_beta([2, 4], [1e3, 1e6], [1e-3, 1e-2], formula="x"), "formula"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name) as info:
        call()
    message = str(info.value)
    assert message.endswith(".") and message.count(". ") == 0  # one sentence


def test_link_presets():
    assert set(SPEED_ORDER) == set(PRESETS)
    betas = [PRESETS[name].beta for name in SPEED_ORDER]
    assert betas == sorted(betas, reverse=True)
    for name, link in PRESETS.items():
        assert link.name == name and "α" in link.source and "β" in link.source  # each number with its source
        assert link.alpha > 0 and link.beta > 0
    for fast, slow in zip(SPEED_ORDER, SPEED_ORDER[1:]):  # the faster link is faster in both
        assert PRESETS[fast].alpha < PRESETS[slow].alpha and PRESETS[fast].beta > PRESETS[slow].beta


def test_costmodel_needs_neither_torch_nor_matplotlib():
    code = (
        "import dpviz.topics.ground_floor.costmodel, dpviz.topics.ground_floor.links, sys; "
        "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
