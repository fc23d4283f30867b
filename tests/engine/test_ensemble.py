"""Ensemble weight rules on hand-computed histories."""

import math

import pytest
import torch

from tabed.engine import ensemble as ensemble_module
from tabed.engine.ensemble import (
    WeightHistory,
    ensemble,
    grid_choice,
    grid_stats_chunked,
    grid_stats_dense,
    hedge_losses,
    hedge_rate,
    kl_divergence,
    position_stats,
    simplex_grid,
    tv_distance,
    weights_from,
)
from tabed.engine.weights_graph import GraphedStats, worth_a_graph
from tabed.errors import InputError

P_A = [0.7, 0.2, 0.1]
Q_A = [[0.6, 0.3, 0.1], [0.1, 0.2, 0.7]]  # method 1 is close to p, method 2 far
P_B = [0.1, 0.1, 0.8]
Q_B = [[0.5, 0.1, 0.4], [0.2, 0.1, 0.7]]  # method 2 has p's top-1, method 1 not


def history(rule, positions, window=0):
    h = WeightHistory(2, rule, window)
    for p, q in positions:
        h.add(torch.tensor([p]), torch.tensor([q]))
    return h


def test_grid_sizes():
    assert simplex_grid(2).shape == (11, 2)
    assert simplex_grid(4).shape == (286, 4)
    assert torch.allclose(simplex_grid(4).sum(dim=1), torch.ones(286))


@pytest.mark.parametrize("rule", ["w-grid", "kld", "tvd", "hedge"])
def test_uniform_before_any_history(rule):
    assert WeightHistory(4, rule).weights().tolist() == [0.25] * 4


def test_kld_rule():
    # KL(p‖q1) = .7 ln(.7/.6) + .2 ln(.2/.3) = 0.026812;  KL(p‖q2) = .7 ln 7 + .1 ln(1/7) = 1.167546
    w = history("kld", [(P_A, Q_A)]).weights()
    expected = (1 / 0.026812) / (1 / 0.026812 + 1 / 1.167546)
    assert w[0].item() == pytest.approx(expected, abs=1e-4)
    assert w.sum().item() == pytest.approx(1.0)


def test_the_distances_on_hand_computed_distributions():
    """KL from the probabilities alone (no log-softmax given) and TV, each of its own value, not only up to the
    scale the inverse-distance rules would forgive."""
    p, q = torch.tensor(P_A), torch.tensor(Q_A)
    assert kl_divergence(p, q).tolist() == pytest.approx([0.026812, 1.167546], abs=1e-5)
    assert tv_distance(p, q).tolist() == pytest.approx([0.1, 0.6], abs=1e-6)
    assert tv_distance(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])).item() == 1.0  # disjoint: the most


@pytest.mark.parametrize("rule", ["kld", "tvd"])
def test_a_method_that_is_the_target_takes_all_the_inverse_distance_weight(rule):
    """A distance of exactly 0 (the method drafted the target's own distribution) is no division by zero and no
    negative weight: that method gets all but a millionth of the weight."""
    w = history(rule, [(P_A, [P_A, Q_A[1]])]).weights()
    assert (w >= 0).all() and w.sum().item() == pytest.approx(1.0)
    assert w[0].item() > 0.999


def test_hedges_rate_over_its_horizon_of_at_least_one_position():
    assert hedge_rate(2, 1) == pytest.approx((8 * math.log(2)) ** 0.5)
    assert hedge_rate(2, 0) == hedge_rate(2, 1)
    assert hedge_rate(4, 128) == pytest.approx((8 * math.log(4) / 128) ** 0.5)


@pytest.mark.parametrize("window", [0, 4])
def test_hedge_learns_at_the_rate_of_its_window_or_else_its_horizon(window):
    """Hedge's rate is set for the positions it weighs: a window of h keeps h, so its rate is over h, not over
    the run's horizon (with a window of 4 it learns sqrt(32) times as fast as over 128)."""
    h = WeightHistory(2, "hedge", window, horizon=128)
    h.add(torch.tensor([P_A]), torch.tensor([Q_A]))
    losses = hedge_losses(torch.tensor([P_A]), torch.tensor([Q_A]).log())[0]
    rate = hedge_rate(2, window or 128)
    assert h.weights().tolist() == pytest.approx(torch.softmax(-rate * losses, dim=0).tolist(), rel=1e-5)


def test_kld_uses_the_log_softmax_where_probabilities_underflow():
    """Method 1 puts e^-80 on a token the target gives half its mass: log(clamp(q)) would say -27.6."""
    p = torch.tensor([[0.5, 0.5, 0.0]])
    logits = torch.tensor([[[0.0, -80.0, -80.0], [0.0, 0.0, -0.6931472]]])
    log_q = torch.log_softmax(logits, dim=-1)
    h = WeightHistory(2, "kld")
    h.add(p, log_q.exp(), log_q)
    kl = (p * (p.clamp_min(1e-30).log() - log_q[0])).sum(dim=-1)  # 39.3 and 0.223
    assert kl[0].item() == pytest.approx(39.31, abs=0.01)
    expected = (1 / kl) / (1 / kl).sum()
    assert h.weights().tolist() == pytest.approx(expected.tolist(), rel=1e-5)
    clamped = WeightHistory(2, "kld")
    clamped.add(p, log_q.exp())
    assert clamped.weights()[0].item() > 2 * expected[0].item()  # what the clamp got wrong


def test_a_graphed_history_measures_with_the_log_softmax_it_is_given():
    """The graph's statistics too use the log-softmax where a probability underflowed, not the clamped log (kld:
    Hedge clips both losses alike)."""
    rule = "kld"
    p = torch.tensor([[0.5, 0.5, 0.0]])
    log_q = torch.log_softmax(torch.tensor([[[0.0, -80.0, -80.0], [0.0, 0.0, -0.6931472]]]), dim=-1)
    graphed = WeightHistory(2, rule, summed=GraphedStats(rule, 2, 3, 4, torch.device("cpu")))
    eager, clamped = WeightHistory(2, rule), WeightHistory(2, rule)
    for h in (graphed, eager):
        h.add(p, log_q.exp(), log_q)
    clamped.add(p, log_q.exp())
    assert graphed.weights().tolist() == pytest.approx(eager.weights().tolist(), abs=1e-6)
    assert graphed.weights().tolist() != pytest.approx(clamped.weights().tolist(), abs=1e-3)


def test_hedge_weights_are_exponential_in_the_summed_log_loss():
    """Hedge: w_k ∝ exp(-η Σ loss_k), with the loss the cross-entropy against p in [0, 10] nats / 10 and
    η = sqrt(8 ln K / horizon)."""
    p = torch.tensor([[0.7, 0.2, 0.1]] * 3)
    q = torch.tensor([Q_A] * 3)
    h = WeightHistory(2, "hedge", horizon=50)
    h.add(p, q)
    cross_entropy = -(torch.tensor(P_A) * torch.tensor(Q_A).log()).sum(dim=-1)  # 0.829 and 1.970 nats
    rate = (8 * torch.log(torch.tensor(2.0)) / 50).sqrt()
    expected = torch.softmax(-rate * 3 * cross_entropy / 10, dim=0)
    assert h.weights().tolist() == pytest.approx(expected.tolist(), rel=1e-5)
    assert h.weights()[0] > 0.5  # the method closer to the target gains weight, slowly
    far = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]])
    worst = WeightHistory(2, "hedge", horizon=50)
    worst.add(torch.tensor([[0.0, 0.0, 1.0]]), far)  # a zero probability on the target's token: the clipped loss
    assert worst.weights().tolist() == pytest.approx(torch.softmax(-rate * torch.tensor([1.0, 0.0]), 0).tolist())


def test_tvd_rule():
    # TV(p, q1) = 0.1, TV(p, q2) = 0.6  ->  w ∝ (10, 1.667)
    w = history("tvd", [(P_A, Q_A)]).weights()
    assert w.tolist() == pytest.approx([10 / 11.6667, 1.6667 / 11.6667], abs=1e-4)


def test_w_grid_rule_one_position():
    # top-1 of the mix is token 0 (as p's) for w1 >= 0.6; of those, w1 = 1 has the smallest KL.
    assert history("w-grid", [(P_A, Q_A)]).weights().tolist() == pytest.approx([1.0, 0.0])


def test_w_grid_rule_two_positions_tie_broken_by_kl():
    # Position A matches for w1 in {0.6..1}, position B for w1 in {0..0.8}: 0.6, 0.7, 0.8 match both.
    # Summed KL: w1=0.8 -> 0.384, 0.7 -> 0.397, 0.6 -> 0.428: 0.8 wins.
    w = history("w-grid", [(P_A, Q_A), (P_B, Q_B)]).weights()
    assert w.tolist() == pytest.approx([0.8, 0.2], abs=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_the_host_chooses_the_devices_w_grid_candidate(seed):
    """A CPU's history picks w-grid's candidate from the summed statistics on the host (`grid_choice`), a GPU's
    graph with device operations (`weights_from`): the same candidate, ties included, on matches (few distinct
    counts) and on KL (equal values: the first)."""
    generator = torch.Generator().manual_seed(seed)
    grid = simplex_grid(3)
    matches = torch.randint(0, 3, (len(grid),), generator=generator).float()
    kls = torch.randint(0, 4, (len(grid),), generator=generator).float() / 4
    total = torch.stack([matches, kls], dim=-1)
    assert torch.equal(grid[grid_choice(total.tolist())], weights_from("w-grid", total, grid))
    assert grid_choice([[1.0, 0.5], [2.0, 0.7], [2.0, 0.3], [2.0, 0.3]]) == 2


def test_window_keeps_only_recent_positions():
    # With h = 1 only position B counts: every w1 <= 0.8 matches and w1 = 0 has the smallest KL.
    w = history("w-grid", [(P_A, Q_A), (P_B, Q_B)], window=1).weights()
    assert w.tolist() == pytest.approx([0.0, 1.0], abs=1e-6)
    assert len(history("kld", [(P_A, Q_A)] * 5, window=3)) == 3
    assert len(history("kld", [(P_A, Q_A)] * 5, window=0)) == 5


@pytest.mark.parametrize("window", [0, 5])
@pytest.mark.parametrize("rule", ["w-grid", "kld", "tvd", "hedge"])
def test_blocks_added_at_once_sum_as_blocks_added_one_by_one(rule, window):
    """A catch-up adds the blocks it owed in one pass: the very sums (and weights) of adding them in turn, an
    empty block included, each block's log-softmax kept."""
    generator = torch.Generator().manual_seed(3)
    blocks = []
    for count in (3, 0, 1, 4, 2):
        p = torch.softmax(3 * torch.randn(count, 9, generator=generator), dim=-1)
        logits = 3 * torch.randn(count, 2, 9, generator=generator)
        logits[:, 0, 0] = -80.0  # an underflowing probability: the log-softmax, not the clamped log, must reach kld
        q = torch.softmax(logits, dim=-1)
        blocks.append((p, q, torch.log_softmax(logits, dim=-1) if rule in ("kld", "hedge") else None))
    at_once, in_turn = WeightHistory(2, rule, window), WeightHistory(2, rule, window)
    at_once.add(*blocks[0])
    at_once.add_blocks(blocks[1:])
    for block in blocks:
        in_turn.add(*block)
    assert len(at_once) == len(in_turn) == (5 if window else 10)
    assert torch.equal(at_once.total(), in_turn.total())
    p, q, log_q = (torch.cat([block[i] for block in blocks])[-len(in_turn):] if blocks[0][i] is not None else None
                   for i in range(3))  # the positions the window holds: the last five, or all
    assert torch.allclose(in_turn.total(), position_stats(rule, p, q, log_q, in_turn.grid).sum(0), atol=1e-5)
    assert torch.equal(at_once.weights(), in_turn.weights())


def test_the_weights_follow_every_addition():
    """Weights are computed once per state of the history, and again after each addition."""
    h = history("w-grid", [(P_A, Q_A)])
    assert h.weights().tolist() == [1.0, 0.0]
    h.weights()[0] = 0.5  # a caller's change to its copy changes nothing
    assert h.weights().tolist() == [1.0, 0.0]
    h.add(torch.tensor([P_B, P_B]), torch.tensor([Q_B, Q_B]))
    fresh = history("w-grid", [(P_A, Q_A), (P_B, Q_B), (P_B, Q_B)]).weights().tolist()
    assert h.weights().tolist() == fresh != [1.0, 0.0]


def test_ensemble_is_the_weighted_average():
    q = torch.tensor(Q_A)
    assert ensemble(q, torch.tensor([0.25, 0.75])).tolist() == pytest.approx([0.225, 0.225, 0.55])


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_the_ensemble_is_in_the_dtype_of_the_distributions_whatever_the_weights(dtype):
    """The weights (float32, from the history) follow q's dtype, as a model's own distributions may have."""
    mixed = ensemble(torch.tensor(Q_A, dtype=dtype), torch.tensor([0.25, 0.75]))
    assert mixed.dtype == dtype and mixed.float().tolist() == pytest.approx([0.225, 0.225, 0.55], abs=1e-2)


def test_bad_rule_and_window():
    """Each error says what was wrong and what is allowed, whole."""
    with pytest.raises(InputError) as error:
        WeightHistory(2, "median")
    assert str(error.value) == "unknown weight rule 'median': choose one of w-grid, kld, tvd, hedge"
    with pytest.raises(InputError) as error:
        WeightHistory(2, "kld", window=-1)
    assert str(error.value) == "history window must be >= 0 (0 keeps all), got -1"


def test_a_history_made_with_no_rule_is_the_papers_w_grid_keeping_every_position():
    history = WeightHistory(3)
    assert (history.rule, history.window, history.grid.shape) == ("w-grid", 0, (66, 3))
    assert WeightHistory(3, "hedge").rate == hedge_rate(3, 128)  # Hedge's horizon: 128 positions unless told


def _official_choice(grid, p, q):
    """Brute force, as the official code: every candidate's mixture on the full vocabulary, the most
    top-1 matches, ties broken by the smallest summed KL (the first of equal minima)."""
    mixed = torch.einsum("gk,nkv->ngv", grid, q)
    matches = (mixed.argmax(dim=-1) == p.argmax(dim=-1, keepdim=True)).sum(dim=0).float()
    kl = (torch.xlogy(p, p)[:, None] - p[:, None] * torch.log(mixed.clamp_min(1e-12))).sum(dim=-1).sum(dim=0)
    kl[matches < matches.max()] = float("inf")
    return grid[kl.argmin()]


@pytest.mark.parametrize("seed, sharpness", [(0, 4.0), (0, 0.5), (2, 0.5), (11, 0.5)])
def test_w_grid_on_a_large_vocabulary_chooses_the_official_weights(seed, sharpness):
    """K = 4 methods (286 candidates) on 3000 tokens, past the dense limit: the statistics are still
    exact, so near-flat histories (sharpness 0.5), where many candidates tie on matches and the KL
    decides, give the official code's choice (a bucketed lower bound of the KL chose differently in 13 of
    20 such histories)."""
    generator = torch.Generator().manual_seed(seed)
    vocab, positions = 3000, 12
    p = torch.softmax(torch.randn(positions, vocab, generator=generator) * sharpness, dim=-1)
    q = torch.softmax(torch.randn(positions, 4, vocab, generator=generator) * sharpness, dim=-1)
    q[:6, 0] = p[:6]  # method 1 is right on half the positions
    grid = simplex_grid(4)
    h = WeightHistory(4, "w-grid")
    assert torch.allclose(position_stats("w-grid", p, q, grid=grid), grid_stats_dense(grid, p, q), atol=1e-5)
    h.add(p[:5], q[:5])
    h.add(p[5:], q[5:])  # in two blocks, as the loop adds them
    assert torch.equal(h.weights(), _official_choice(grid, p, q))


def test_w_grids_statistics_in_chunks_of_every_size_are_the_dense_ones():
    """Seven positions over a vocabulary of three (more positions than tokens), a chunk at a time of every size
    from one to past all: every position counted once, in order."""
    generator = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(7, 3, generator=generator), -1)
    q = torch.softmax(torch.randn(7, 2, 3, generator=generator), -1)
    grid = simplex_grid(2)
    dense = grid_stats_dense(grid, p, q)
    for positions in range(1, 9):
        assert torch.allclose(grid_stats_chunked(grid, p, q, positions), dense), positions


@pytest.mark.parametrize("vocab, chunk", [(50, 1), (50, 3), (3, 5)])
def test_w_grids_mixtures_at_once_stay_under_the_devices_limit(monkeypatch, vocab, chunk):
    """Candidates x tokens x positions at once stay under `DENSE_LIMITS` (a CPU's memory is spared), one
    position at a time at the least, and the chunks hold as many positions as fit, also where a chunk holds more
    positions than there are tokens."""
    grid = simplex_grid(2)
    monkeypatch.setitem(ensemble_module.DENSE_LIMITS, "cpu", chunk * grid.shape[0] * vocab + 1)
    sizes = []
    dense = ensemble_module.grid_stats_dense
    monkeypatch.setattr(ensemble_module, "grid_stats_dense", lambda g, p, q: sizes.append(p.shape[0]) or dense(g, p, q))
    generator = torch.Generator().manual_seed(1)
    p = torch.softmax(torch.randn(7, vocab, generator=generator), -1)
    q = torch.softmax(torch.randn(7, 2, vocab, generator=generator), -1)
    position_stats("w-grid", p, q, grid=grid)
    assert sizes == [chunk] * (7 // chunk) + [7 % chunk] * (7 % chunk > 0)


@pytest.mark.parametrize("rule, methods", [("w-grid", 2), ("w-grid", 3), ("kld", 2), ("tvd", 3), ("hedge", 2)])
def test_padded_block_statistics_give_the_eager_history(rule, methods):
    """The padded computation a GPU replays as one graph (here eager, on the CPU) sums exactly the
    verified rows: blocks of every length, padding rows left over from a longer earlier block (stale,
    with -inf log-probabilities of suppressed tokens) or never written, and a block over its size (then
    the history sums eagerly), after an earlier answer's history used it."""
    generator = torch.Generator().manual_seed(methods)
    vocab, positions = 50, 6
    summed = GraphedStats(rule, methods, vocab, positions, torch.device("cpu"))
    assert summed.graph is None
    WeightHistory(methods, rule, summed=summed).add(torch.full((2, vocab), 1 / vocab), torch.ones(2, methods, vocab))
    padded = WeightHistory(methods, rule, horizon=40, summed=summed)  # the next answer starts from nothing
    eager = WeightHistory(methods, rule, horizon=40)
    total = 0.0  # every verified row's statistics, summed here
    for n in (6, 1, 3, 9, 2):
        logits = torch.randn(n, methods, vocab, generator=generator) * 3
        logits[..., -2:] = float("-inf")  # suppressed tokens: probability 0, log-probability -inf
        q, log_q = torch.softmax(logits, -1), torch.log_softmax(logits, -1)
        p = torch.softmax(torch.randn(n, vocab, generator=generator) * 3, -1)
        p[:, -2:] = 0.0
        p[: n // 2] = q[: n // 2, 0]  # method 1 right on some positions
        for h in (padded, eager):
            h.add(p, q, log_q)
        total = total + position_stats(rule, p, q, log_q, eager.grid).sum(0)
        assert len(padded) == len(eager)
        assert torch.allclose(summed.total, total, rtol=1e-5, atol=1e-5)
        assert padded.total() is summed.total  # what the reasons read is the graph's sum
        assert torch.isfinite(summed.total).all()
        assert torch.allclose(padded.weights(), eager.weights(), atol=1e-6)


def test_graphs_only_where_the_padding_is_cheap():
    assert worth_a_graph("w-grid", 2, 32064, 21)  # tabed-MT on the paper's vocabulary: 11 candidates
    assert not worth_a_graph("w-grid", 3, 32064, 21)  # 66 candidates: eager
    assert worth_a_graph("kld", 4, 32064, 21)
