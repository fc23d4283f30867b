"""What an inspected block records is what the block decided: recomputed here from the recorded tokens and
weights (greedy: the kept drafts are the target's top-1 and the first rejected one is not; sampling: each
test is u·q < p; the ensemble's probabilities are the weighted methods'; the weights are the rule's
choice from the recorded statistics), and inspecting changes no token, draft or draw."""

import math
from dataclasses import replace

import pytest
import torch

from tabed.engine.config import GenerationConfig
from tabed.engine.drafts import ROOT, DraftChain, Verdict
from tabed.engine.events import TreeNode, Tried
from tabed.engine.inspection import _tried_by_depth, block_positions
from tabed.engine.loop import collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.models.chat import Turn

SCENARIOS = {
    "greedy-chain": ("tabed-MT", {}),
    "sampling-chain": ("tabed-MT", {"temperature": 1.0, "seed": 2}),
    "greedy-tree": ("tabed-MT", {"tree_width": 2}),
    "sampling-tree": ("tabed-MT", {"tree_width": 2, "temperature": 1.0, "seed": 2}),
    "fixed-gamma-kld": ("tabed-MT", {"gamma": 4, "adaptive": False, "rule": "kld"}),
    "hedge-rule": ("tabed-MTN", {"rule": "hedge", "may_rest": False}),
    "tvd-rule": ("tabed-MT", {"rule": "tvd", "temperature": 1.0, "seed": 1}),
}


def inspected(pair, image, scenario):
    spec, settings = SCENARIOS[scenario]
    config = GenerationConfig(max_new_tokens=40, **settings)
    turns = [Turn("w1 w2 w3", [image])]
    plain = collect(speculative_generate(pair, turns, parse_spec(spec), config))
    result = collect(speculative_generate(pair, turns, parse_spec(spec), replace(config, inspect=True)))
    return plain, result, config


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_inspecting_changes_no_token_draft_or_draw(pair, image, scenario):
    plain, result, _ = inspected(pair, image, scenario)
    assert result.token_ids == plain.token_ids
    assert [(b.draft, b.accepted, b.weights) for b in result.blocks] == [(b.draft, b.accepted, b.weights)
                                                                        for b in plain.blocks]
    assert all(b.positions == [] and b.weight_update is None for b in plain.blocks)
    assert all(len(b.positions) == min(b.accepted + 1, len(b.draft)) for b in result.blocks)
    assert [p.draft for b in result.blocks for p in b.positions] == [
        t for b in result.blocks for t in b.draft[:min(b.accepted + 1, len(b.draft))]]


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_recorded_test_is_the_one_the_draft_met(pair, image, scenario):
    _, result, config = inspected(pair, image, scenario)
    checked = {"kept": 0, "rejected": 0, "mixed": 0}
    for block in result.blocks:
        for j, position in enumerate(block.positions):
            test, kept = position.test, j < block.accepted
            assert test.kept == kept
            checked["kept" if kept else "rejected"] += 1
            if config.temperature == 0:  # the kept drafts are the target's top-1, the first rejected one is not
                assert (position.draft == test.target_top1 == position.target[0][0]) == kept
            for tried in (test.tried or [test]) if config.temperature else ():  # u·q < p, exactly when kept
                assert (tried.u * tried.q < tried.p) == tried.kept
            if config.temperature and not kept:
                assert test.residual_token == block.target_token
            if test.tried is not None:  # a tree's children: the kept one, if any, is the draft (sampling: last tried)
                assert [t.kept for t in test.tried].count(True) == kept
                kept_ones = [t.token for t in test.tried if t.kept]
                assert kept_ones == ([position.draft] if kept else [])
                assert not kept or not config.temperature or test.tried[-1].kept
                assert config.temperature or all((t.token == test.target_top1) == t.kept
                                                 for t in test.tried)
            weights = {m: w for m, w in block.weights.items() if m in position.methods}
            for token, prob in position.ensemble:  # Σ w·q, where every method's top-k holds the token
                q = [dict(map(tuple, position.methods[m])).get(token) for m in weights]
                if None not in q and "N" not in block.weights:
                    assert close(prob, sum(w * p for w, p in zip(weights.values(), q, strict=True)))
                    checked["mixed"] += 1
            assert close(position.ensemble[0][1], max(p for _, p in position.ensemble))
    assert checked["kept"] and checked["rejected"] and (checked["mixed"] or "N" in result.blocks[0].weights)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_blocks_weights_are_the_rules_choice_from_the_recorded_statistics(pair, image, scenario):
    _, result, config = inspected(pair, image, scenario)
    updates = [b for b in result.blocks if b.weight_update is not None]
    assert result.blocks[0].weight_update is None and len(updates) > 2
    for block in updates:
        update = block.weight_update
        assert update.rule == config.rule
        if config.rule == "w-grid":
            matches = [c.matches for c in update.candidates]
            tied = [i for i, m in enumerate(matches) if m == max(matches)]
            winner = min(tied, key=lambda i: (update.candidates[i].kl, i))
            assert update.most_matches == tied and update.winner == winner
            expected = update.candidates[winner].weights
        elif config.rule in ("kld", "tvd"):
            inverse = [1 / (d + 1e-6) for d in update.divergence]
            expected = [x / sum(inverse) for x in inverse]
        else:
            expected = torch.softmax(-update.rate * torch.tensor(update.loss), 0).tolist()
        assert all(close(a, b) for a, b in zip(update.weights, expected, strict=True))
        assert all(close(a, b) for a, b in zip(block.weights.values(), expected, strict=True))  # the block's own
    if not any(block.resting for block in result.blocks):  # no resting row owes the history anything
        seen = 0
        for before, block in zip(result.blocks, result.blocks[1:], strict=False):
            seen += min(before.accepted + 1, len(before.draft))
            assert (block.weight_update.positions if block.weight_update else 0) == seen  # every one verified before


def test_each_chain_position_records_its_own_uniform_draw():
    """A sampled chain's positions each record the draw their test used, in order: made by hand, so that the
    check does not rest on which draws a seed happens to give (a shifted draw can pass u·q < p by chance)."""
    rows = torch.tensor([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2]])
    mix = rows[0]
    draft = DraftChain([0, 1, 2], [rows] * 3, [mix] * 3)
    target = torch.tensor([[0.6, 0.2, 0.2]] * 4)
    verdict = Verdict(2, 0, target, draws=[0.11, 0.22, 0.93])
    positions = block_positions(("M", "T"), [], draft, verdict, greedy=False)
    assert [position.test.u for position in positions] == [0.11, 0.22, 0.93]
    assert [position.test.kept for position in positions] == [True, True, False]


def test_a_trees_children_are_listed_in_the_order_tried_each_with_its_last_test():
    """A members tree tries the ensemble's draw (node 0), a method's other token (node 1), then another
    method's pick of node 0's token again, which is kept: node 0 is listed after node 1, with its last test."""
    nodes = [TreeNode(7, ROOT, "T", True, 0.5, 0.2), TreeNode(9, ROOT, "M", False, 0.3, 0.1)]
    tried = [{"node": 0, "order": 0, "u": 0.9, "p": 0.2, "q": 0.5, "kept": False},
             {"node": 1, "order": 1, "u": 0.8, "p": 0.1, "q": 0.3, "kept": False},
             {"node": 0, "order": 2, "u": 0.1, "p": 0.2, "q": 0.9, "kept": True}]
    verdict = Verdict(1, 3, torch.full((2, 10), 0.1), nodes=nodes, tried=tried)
    assert _tried_by_depth(verdict, 1) == [[Tried(1, 9, False, 0.8, 0.1, 0.3), Tried(0, 7, True, 0.1, 0.2, 0.9)]]


@pytest.mark.parametrize("scenario", ["greedy-chain", "fixed-gamma-kld", "greedy-tree"])
def test_a_rejections_target_token_and_its_probability_are_the_targets_top_one_where_it_rejected(pair, image,
                                                                                                 scenario):
    _, result, _ = inspected(pair, image, scenario)
    rejected = [b for b in result.blocks if b.accepted < len(b.draft)]
    assert rejected
    for block in rejected:
        token, prob = block.positions[block.accepted].target[0]
        assert block.target_token == token and close(block.target_token_prob, prob)
