"""The tree walks checked exactly on hand-made trees: sampling's recursive rejection by enumerating every
draw and every choice of the walk (the emitted tokens follow the target's distribution to 1e-6), and the
greedy walk down a path that is right for several positions."""

import itertools
from collections import defaultdict

import pytest
import torch

from tabed.engine.tree import ROOT, Context, DraftTree, RandomChoices, _walk_greedy, _walk_sampling

VOCAB = 4
# the target's distributions: after the last committed token, after a first token y, after (y, z)
P0 = torch.tensor([0.40, 0.30, 0.20, 0.10])
P1 = torch.tensor([[0.10, 0.20, 0.30, 0.40], [0.25, 0.25, 0.25, 0.25], [0.70, 0.10, 0.10, 0.10],
                   [0.05, 0.15, 0.50, 0.30]])
P2 = torch.softmax(torch.arange(VOCAB ** 3, dtype=torch.float32).reshape(VOCAB, VOCAB, VOCAB).sin() * 2, -1)
# three root draws, each from its own proposal, all far from P0 (the "methods" policy draws so)
ROOT_PROPOSALS = [torch.tensor([0.05, 0.05, 0.10, 0.80]), torch.tensor([0.10, 0.10, 0.70, 0.10]),
                  torch.tensor([0.60, 0.05, 0.05, 0.30])]


class NeedsChoice(Exception):
    def __init__(self, options):
        self.options = options


class Scripted:
    """The walk's choices read from a script, each multiplying `probability` by its chance; past the end of
    the script it asks for the options of the next choice (`NeedsChoice`)."""

    def __init__(self, script):
        self.script, self.at, self.probability = script, 0, 1.0

    def _next(self, options):
        if self.at == len(self.script):
            raise NeedsChoice(options)
        self.at += 1
        return self.script[self.at - 1]

    def accepts(self, p_x, q_x, node=-1):
        chance = min(1.0, float(p_x) / float(q_x))
        accepted = self._next((True, False))
        self.probability *= chance if accepted else 1.0 - chance
        return accepted

    def sample(self, p):
        token = self._next([t for t in range(VOCAB) if p[t] > 0])
        self.probability *= float(p[token] / p.sum())  # as torch.multinomial reads weights
        return token


def walk_distribution(tree, probs):
    """Every emitted sequence of the sampling walk over `tree` and its exact probability."""
    outcomes, scripts = defaultdict(float), [()]
    while scripts:
        script = scripts.pop()
        choices = Scripted(script)
        try:
            path, token = _walk_sampling(tree, probs, choices)
        except NeedsChoice as branch:
            scripts += [script + (option,) for option in branch.options]
            continue
        outcomes[tuple(tree.tokens[node] for node in path) + (token,)] += choices.probability
    return outcomes


def point_mass(token):
    return torch.nn.functional.one_hot(torch.tensor(token), VOCAB).float()


def tree_of(root_tokens):
    """Three root draws (`root_tokens`, from ROOT_PROPOSALS), and under every distinct child two drafted
    tokens (point-mass proposals: a greedy-like draft is a draw too), with the target's distribution after
    every node (rows 1 + n)."""
    tree = DraftTree()
    uniform = torch.full((VOCAB,), 1 / VOCAB)
    tree.contexts[ROOT] = Context(uniform[None], uniform, None)
    for token, proposal in zip(root_tokens, ROOT_PROPOSALS, strict=True):
        node, _ = tree.add(ROOT, token, 0.5, 0.5)
        tree.contexts[ROOT].draws.append((node, proposal))
    for child in [n for n in range(len(tree.tokens))]:
        y = tree.tokens[child]
        tree.contexts[child] = Context(uniform[None], uniform, None)
        for z in ((y + 1) % VOCAB, (y + 2) % VOCAB):
            leaf, _ = tree.add(child, z, 0.5, 0.5)
            tree.contexts[child].draws.append((leaf, point_mass(z)))
    rows = [P0] + [P1[tree.tokens[n]] if tree.parents[n] == ROOT else P2[tree.tokens[tree.parents[n]], tree.tokens[n]]
                   for n in range(len(tree.tokens))]
    return tree, torch.stack(rows)


def completed(sequence, probability):
    """The walk's emitted tokens, continued to three tokens by the target itself: {sequence: probability}."""
    out = {}
    for rest in itertools.product(range(VOCAB), repeat=3 - len(sequence)):
        full, chance = sequence + rest, probability
        for position in range(len(sequence), 3):
            law = (P0, P1[full[0]], P2[full[0], full[1]] if position == 2 else None)[position]
            chance *= float(law[full[position]])
        out[full] = chance
    return out


def test_recursive_rejection_over_several_siblings_emits_the_targets_distribution_exactly():
    """Every tuple of root draws (weighted by its proposals), every accept / reject and every residual
    sample: the tokens the walk emits, continued by the target, have the target's joint law to 1e-6. With
    a residual left unnormalised, or drafts tried against p rather than against what is left of it, the
    second and third siblings are accepted too often."""
    joint = defaultdict(float)
    for draws in itertools.product(range(VOCAB), repeat=len(ROOT_PROPOSALS)):
        weight = 1.0
        for token, proposal in zip(draws, ROOT_PROPOSALS, strict=True):
            weight *= float(proposal[token])
        tree, probs = tree_of(draws)
        for sequence, probability in walk_distribution(tree, probs).items():
            for full, chance in completed(sequence, weight * probability).items():
                joint[full] += chance
    expected = {full: float(P0[full[0]] * P1[full[0], full[1]] * P2[full]) for full in
                itertools.product(range(VOCAB), repeat=3)}
    assert sum(joint.values()) == pytest.approx(1.0, abs=1e-6)
    assert max(abs(joint[full] - expected[full]) for full in expected) < 1e-6
    # the test has power: the drafts alone are far from the target, and rejections leave mass on several tokens
    assert (ROOT_PROPOSALS[0] - P0).abs().max() > 0.5
    assert ((P0 - ROOT_PROPOSALS[0]).clamp_min(0) > 0).sum() >= 3


def test_the_random_choices_accept_with_chance_min_1_p_over_q():
    choices = RandomChoices(torch.Generator().manual_seed(0))
    trials = 20000
    for p_x, q_x in ((0.2, 0.8), (0.6, 0.3), (0.45, 0.5)):
        rate = sum(choices.accepts(torch.tensor(p_x), torch.tensor(q_x)) for _ in range(trials)) / trials
        assert rate == pytest.approx(min(1.0, p_x / q_x), abs=0.015)  # ~4 standard errors at 20k trials
    choices.sample(torch.tensor([0.5, 0.5]))
    assert choices.tried == [] and choices.residual is None  # not asked to record: 60k tests kept nothing


def test_a_draw_of_exactly_zero_never_accepts_a_token_the_target_cannot_emit(monkeypatch):
    """`torch.rand` draws from [0, 1), 0 included: u·q < p, never u·q <= p, keeps a token of p = 0 out."""
    monkeypatch.setattr(torch, "rand", lambda size, generator=None, device=None: torch.zeros(size, device=device))
    choices = RandomChoices(torch.Generator().manual_seed(0))
    assert not choices.accepts(torch.tensor(0.0), torch.tensor(0.5))
    assert choices.accepts(torch.tensor(0.1), torch.tensor(0.5))


def test_the_greedy_walk_follows_the_targets_choices_down_a_second_branch_several_deep():
    """The first branch is wrong at once; the second is right for three positions: the walk keeps all
    three, and the target's token after them."""
    tree = DraftTree()
    for at, token in ((ROOT, 1), (ROOT, 2), (0, 3), (1, 0), (3, 1), (2, 0)):
        tree.contexts.setdefault(at, Context(torch.zeros(1, VOCAB), torch.zeros(VOCAB), None))
        node, _ = tree.add(at, token, 0.5, 0.5)
        tree.contexts[at].draws.append((node, None))
    # nodes numbered in that order: 0 and 1 under the root, 2 under 0, 3 under 1, 4 under 3, 5 under 2
    choices = [2, 3, 0, 3, 1, 2, 1]  # the target's argmax after the root and after each node
    path, token = _walk_greedy(tree, choices)
    assert path == [1, 3, 4] and [tree.tokens[n] for n in path] == [2, 0, 1]
    assert token == choices[1 + 4]


def test_the_chain_shown_below_a_node_follows_its_likeliest_child_at_each_depth():
    """A block's `draft` continues its accepted path by the drafts likeliest to be accepted: at each depth
    the child with the higher estimated chance, whichever was drawn first."""
    tree = DraftTree()
    for at, token, chance in ((ROOT, 1, 0.3), (ROOT, 2, 0.6), (1, 3, 0.9), (1, 0, 0.2), (1, 1, 0.7)):
        tree.contexts.setdefault(at, Context(torch.zeros(1, VOCAB), torch.zeros(VOCAB), None))
        node, _ = tree.add(at, token, chance, chance)
        tree.contexts[at].draws.append((node, None))
    # nodes 0 (token 1, 0.3) and 1 (token 2, 0.6) under the root; under 1: 2 (3, 0.54), 3 (0, 0.12), 4 (1, 0.42)
    assert tree.best_below(ROOT) == [1, 2]
    assert tree.best_below(0) == [] and tree.best_below(2) == []
