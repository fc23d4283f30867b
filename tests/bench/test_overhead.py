"""`python -m tabed overhead`'s measurements: each asks for the step it names, feeds and forgets what a timed
step adds, and reports milliseconds as ratios and sums of what it timed. The timers are replaced by fakes
that record what they were asked, except where the tiny pair's own steps are spied on."""

import itertools

import pytest

from tabed.bench import overhead
from tabed.engine.drafter import BatchedDrafter
from tabed.engine.session import Clock, TargetSession
from tabed.engine.tree import NODE_BUDGET
from tabed.models.chat import Turn

DRAFT_S = {("M",): 0.010, ("T",): 0.008, ("M", "T"): 0.019, ("T", "T"): 0.015, ("M", "T", "C", "P"): 0.035}


def draft_fake(asked: list):
    """A drafter step's seconds: its rows' (`DRAFT_S`), plus a tenth of a millisecond a tree node and a
    hundredth a fed token, each way a path of its own."""
    paths = {"lean": 0.0, "unfused": 0.001, "library": 0.002, "whole": 0.003}

    def draft(pair, turns, methods, steps=16, nodes=1, fed=1, path="lean"):
        asked.append((methods, steps, nodes, fed, path))
        return DRAFT_S[methods] + 1e-4 * nodes + 1e-5 * fed + paths[path]
    return draft


def target_fake(asked: list):
    """A target forward's seconds: a millisecond a token (a tree's with the committed one), 0.5 ms more
    through transformers' model."""
    def target(pair, turns, count, steps=16, tree=None, path="lean"):
        asked.append((count, steps, None if tree is None else len(tree.tokens), path))
        tokens = count if tree is None else len(tree.tokens) + 1
        return 1e-3 * tokens + (5e-4 if path == "library" else 0.0)
    return target


def test_batching_times_one_two_and_four_rows_and_gives_each_against_one(monkeypatch):
    asked = []
    monkeypatch.setattr(overhead, "draft_step_seconds", draft_fake(asked))
    ratios = overhead.batching_overhead(None, [], steps=5, rounds=2)
    assert [a[0] for a in asked] == [("M",), ("M", "T"), ("M", "T", "C", "P")] * 2  # rounds interleaved
    assert {a[1:] for a in asked} == {(5, 1, 1, "lean")}
    assert ratios[1] == 1.0 and ratios[2] == pytest.approx(0.01911 / 0.01011)
    assert ratios[4] == pytest.approx(0.03511 / 0.01011) and ratios["seconds_k4"] == pytest.approx(0.03511)


def test_each_row_cost_is_timed_its_own_way_and_given_in_milliseconds(monkeypatch):
    asked = []
    monkeypatch.setattr(overhead, "draft_step_seconds", draft_fake(asked))
    row_ms = overhead.row_costs(None, [], steps=4, rounds=1)
    assert [a[0] for a in asked] == [methods for methods, _ in overhead.ROW_COSTS.values()]
    ways = {name: (fed, path) for name, (_, _, _, fed, path) in zip(overhead.ROW_COSTS, asked, strict=True)}
    assert ways["M,T whole"] == (1, "whole") and ways["T library"] == (1, "library")
    assert ways["M,T unfused"] == (1, "unfused") and ways["M,T fed 2"] == (2, "lean") and ways["T"] == (1, "lean")
    assert row_ms["M,T"] == pytest.approx(19.11) and row_ms["M,T whole"] == pytest.approx(22.11)


def test_step_costs_time_each_step_as_named_and_the_bounds_add_them_up(monkeypatch):
    """γ = 3: a verify of four tokens, a bushy tree of 3 × NODE_BUDGET nodes, the members' three chains of 3; a
    plain step both ways; two-row drafting over one, two and three nodes; the bounds from those figures."""
    drafts, targets = [], []
    monkeypatch.setattr(overhead, "draft_step_seconds", draft_fake(drafts))
    monkeypatch.setattr(overhead, "target_step_seconds", target_fake(targets))
    costs = overhead.step_costs(None, [], gamma=3, steps=7)
    assert sorted(targets, key=str) == sorted([(1, 7, None, "lean"), (1, 7, None, "library"), (4, 7, None, "lean"),
                                               (0, 7, 3 * NODE_BUDGET, "lean"), (0, 7, 9, "lean")], key=str)
    assert (("M", "T"), 7, 2, 1, "lean") in drafts and (("M", "T"), 7, 3, 1, "lean") in drafts
    assert costs["target_ms"] == pytest.approx(1.0) and costs["target_library_ms"] == pytest.approx(1.5)
    assert costs["verify_ms"] == pytest.approx(4.0) and costs["verify_members_ms"] == pytest.approx(10.0)
    assert costs["draft_k2_ms"] == pytest.approx(19.11) and costs["draft_tree3_ms"] == pytest.approx(19.31)
    assert costs["speedup_bound_per_tau"] == pytest.approx(1.0 / (4.0 + 3 * 19.11))
    assert costs["draft_members_ms"] == pytest.approx(19.11 + 2 * 19.31)
    assert costs["members_bound_per_tau"] == pytest.approx(1.0 / (10.0 + 19.11 + 2 * 19.31))


def spied(monkeypatch, cls, name: str, seen: list) -> None:
    """`cls.name` as it is, each call's token count (or rolled-back count) recorded in `seen`."""
    original = getattr(cls, name)

    def spy(self, tokens, *args):
        seen.append((name, tokens if isinstance(tokens, int) else len(tokens)))
        return original(self, tokens, *args)
    monkeypatch.setattr(cls, name, spy)


@pytest.mark.parametrize("nodes, fed, step", [(1, 1, [("step", 1)]), (1, 2, [("step", 2), ("rollback", 2)]),
                                              (2, 1, [("step_tree", 2), ("rollback", 2)]),
                                              (3, 1, [("step_tree", 3), ("rollback", 3)])])
def test_a_timed_draft_step_feeds_what_it_names_and_forgets_what_it_added(pair, image, monkeypatch, nodes, fed,
                                                                            step):
    """Two fed tokens or a tree's frontier are taken back after each step, so each step sees the prompt alone
    (a plain step goes on from the last, as decoding does); a frontier of two nodes is a tree step."""
    seen = []
    for name in ("step", "step_tree", "rollback"):
        spied(monkeypatch, BatchedDrafter, name, seen)
    assert overhead.draft_step_seconds(pair, [Turn("w1 w2", [image])], ("M", "T"), 4, nodes, fed) > 0
    assert seen[-4 * len(step):] == step * 4 and len(seen) == 4 * len(step)


@pytest.mark.parametrize("count, tree, tokens", [(1, None, 1), (6, None, 6), (0, overhead.member_chains(3), 10)])
def test_a_timed_verify_scores_its_tokens_and_takes_them_back(pair, image, monkeypatch, count, tree, tokens):
    """A tree's verify is the committed token and the tree's nodes; every forward is rolled back whole."""
    seen = []
    for name in ("forward", "rollback"):
        spied(monkeypatch, TargetSession, name, seen)
    assert overhead.target_step_seconds(pair, [Turn("w1 w2", [image])], count, 4, tree) > 0
    assert seen == [("forward", tokens), ("rollback", tokens)] * 4


def test_a_timing_is_the_median_of_the_steps_after_the_warm_up(pair, image, monkeypatch):
    """Five steps of 50, 50, 1, 100 and 1 s: the first two warm up, one slow step among the rest is left out."""
    ticks = itertools.chain([0, 0, 50, 50, 100, 100, 101, 101, 201, 201, 202], itertools.repeat(999))  # the first:
    # the clock's own start
    monkeypatch.setattr(Clock, "now", lambda self: next(ticks))
    assert overhead.target_step_seconds(pair, [Turn("w1 w2", [image])], 1, 5) == 1.0
