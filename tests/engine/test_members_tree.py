"""The "members" tree: the ensemble's own chain and each drafting method's own chain in one tree, verified in
one target forward, so that a block keeps at least what each of them would have kept alone from the same
start (greedy; sampling stays exact, in test_lossless)."""

from types import SimpleNamespace

import pytest
import torch

from conftest import conversations
from tabed.bench import overhead
from tabed.bench.overhead import member_chains
from tabed.engine.config import GenerationConfig
from tabed.engine.draft_length import DraftLength
from tabed.engine.drafter import BatchedDrafter, build_rows, image_token_id
from tabed.engine.drafts import AfterToken, DraftContext, DraftDistributions
from tabed.engine.loop import _leading_matches, collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.engine.tree import ENSEMBLE, ROOT, DraftTree, _MemberChains
from tabed.models.caches import DynamicBackend
from tabed.models.chat import encode

GAMMA = 4
VOCAB = 8


def growth(weights: list[float], temperature: float = 0.0, resting: list[int] = (), adaptive: bool = False,
           ends: frozenset[int] = frozenset()) -> _MemberChains:
    """A members tree's growth over hand-set rows' logits (no drafter: each depth's logits are given)."""
    length = DraftLength(GAMMA, adaptive)
    length.start_block(0.5)
    drafter = SimpleNamespace(batch_rows=None, resting_rows=list(resting))
    drafting = DraftContext(drafter, [], torch.tensor(weights), len(weights), GenerationConfig(temperature=temperature),
                            torch.Generator().manual_seed(0), AfterToken(0), length, ends=ends)
    return _MemberChains(drafting, DraftTree(), GAMMA)


def logits(*tops: tuple[int, float]) -> torch.Tensor:
    """One frontier node's rows' logits (rows, 1, V): each row sure of its token by its margin."""
    rows = torch.zeros(len(tops), 1, VOCAB)
    for row, (token, margin) in enumerate(tops):
        rows[row, 0, token] = margin
    return rows


def test_each_chain_grows_under_its_own_tip_and_agreeing_chains_share_a_node():
    """Greedy, M sure of 3, T of 5 (the ensemble, leaning on M, also 3): the root's children are 3 (the
    ensemble's and M's, tried once) and 5 (T's); the next depth grows under both, each row read at its
    own chain's node, the ensemble's first."""
    grow = growth([0.7, 0.3])
    born = grow.depth([ROOT], logits((3, 4.0), (5, 4.0)))
    tree = grow.tree
    assert tree.tokens == [3, 5] and tree.parents == [ROOT, ROOT] and born == [0, 1]
    mixed = tree.contexts[ROOT].mixed  # each node's probability and chance are the ensemble's, T's too
    assert tree.probs == pytest.approx([float(mixed[3]), float(mixed[5])]) and tree.scores == tree.probs
    assert tree.contexts[ROOT].draws == [(0, None), (1, None)]
    assert grow.tips == {ENSEMBLE: 0, 0: 0, 1: 1}
    frontier = grow.frontier(born)
    assert frontier == [0, 1]
    # under node 0 (the ensemble's and M's) M says 6; under node 1 (T's) T says 2; the other rows'
    # opinions at each node are not followed there
    rows = torch.zeros(2, 2, VOCAB)
    rows[0, 0, 6], rows[1, 0, 7] = 4.0, 1.0
    rows[0, 1, 4], rows[1, 1, 2] = 1.0, 4.0
    born = grow.depth(frontier, rows)
    assert [(tree.parents[n], tree.tokens[n]) for n in born] == [(0, 6), (1, 2)]
    assert grow.tips == {ENSEMBLE: born[0], 0: born[0], 1: born[1]}


def test_a_resting_method_drafts_no_chain_and_an_end_token_ends_one():
    grow = growth([1.0, 0.0], resting=[1], ends=frozenset({5}))
    assert list(grow.tips) == [ENSEMBLE, 0]
    assert grow.budget == 2 * GAMMA
    grow = growth([0.7, 0.3], ends=frozenset({5}))
    born = grow.depth([ROOT], logits((3, 4.0), (5, 4.0)))
    assert grow.frontier(born) == [0]  # T's chain drafted the end token: nothing follows it
    assert list(grow.tips) == [ENSEMBLE, 0]


def test_sampled_chains_try_the_ensembles_draw_then_each_methods_token_all_on_it():
    """Sampling: the ensemble's draw comes first, drawn from the ensemble; each method's top token is a
    draw of its own, from a distribution all on it, even where it is the ensemble's token (the target may
    have some of it left after the ensemble's draw was rejected), but once for methods that agree."""
    grow = growth([0.5, 0.25, 0.25], temperature=1.0)
    grow.depth([ROOT], logits((3, 30.0), (5, 30.0), (5, 30.0)))
    draws = grow.tree.contexts[ROOT].draws
    tokens = [grow.tree.tokens[node] for node, _ in draws]
    assert len(draws) == 3 and tokens[1:] == [3, 5]
    ensemble_draw = draws[0][1]
    assert torch.allclose(ensemble_draw, grow.tree.contexts[ROOT].mixed) and ensemble_draw.max() < 0.6
    for (_, proposal), token in zip(draws[1:], [3, 5], strict=True):
        assert torch.equal(proposal, torch.nn.functional.one_hot(torch.tensor(token), VOCAB).float())


def test_adaptive_chains_stop_where_each_would_alone_and_the_tree_with_the_last():
    """Adaptive: a chain stops once its own member's confidence leaves it under the block's minimum, as it
    would drafting alone; the tree goes on while any chain does, and stops with the last."""
    grow = growth([0.3, 0.7], adaptive=True)
    born = grow.depth([ROOT], logits((3, 9.0), (5, 0.5)))  # M sure of 3, T unsure of 5
    assert grow.tree.tokens == [3, 5] and grow.tips == {ENSEMBLE: 0, 0: 0, 1: 1}
    assert not grow.unsure(born)
    assert grow.tips == {0: 0}  # the ensemble, under half on 3, stops there, and T; M, sure of it, goes on
    assert grow.survival[0] > 0.9 and grow.survival[1] < 0.5 and grow.survival[ENSEMBLE] < 0.5
    assert grow.frontier(born) == [0]
    born = grow.depth([0], logits((4, 0.1), (4, 0.1)))
    assert grow.unsure(born) and not grow.tips


def test_a_nodes_score_is_its_calibrated_chance_and_a_chain_at_the_minimum_goes_on():
    """A node's score is the chance the block's calibration gives its ensemble probability (not the
    probability itself, once verifications have taught it); a chain whose chance is exactly the block's
    minimum goes on, as a chain drafting alone would (`keep_growing`: at least the minimum)."""
    grow = growth([0.7, 0.3], adaptive=True)
    length = grow.drafting.length
    length.judged, length.accepted = [10] * len(length.judged), [9] * len(length.judged)  # 90% kept, whatever q
    born = grow.depth([ROOT], logits((3, 4.0), (5, 4.0)))
    assert grow.tree.scores == pytest.approx([length.acceptance(p) for p in grow.tree.probs])
    assert grow.tree.scores != pytest.approx(grow.tree.probs)
    grow.survival = {ENSEMBLE: 0.1, 0: length.threshold, 1: 0.1}
    assert not grow.unsure(born) and grow.tips == {0: 0}


def member_alone(pair, turns, methods: tuple[str, ...]):
    """A drafter of these rows alone, prefilled on the conversation: a member drafting by itself."""
    prompt = encode(pair.drafter_processor, turns, pair.device, pair.dtype)
    rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, methods)
    drafter = BatchedDrafter(pair.drafter, rows, DynamicBackend(pair.drafter))
    return drafter, drafter.prefill()


def chain_alone(drafter, opening: torch.Tensor, weights: torch.Tensor, count: int, banned: int | None,
                ends: set[int]) -> list[int]:
    """The greedy chain of `count` tokens the rows draft alone from their logits `opening`, every row fed
    the mixture's token (one row: its own), ending at an end token; the drafter is left as it was."""
    mix = DraftDistributions(len(weights), weights, GenerationConfig(), False, None, banned)
    tokens, logits = [], opening
    while len(tokens) < count and (not tokens or tokens[-1] not in ends):
        tokens.append(int(mix(logits, [])[1].argmax()))
        if len(tokens) < count:
            logits = drafter.step([tokens[-1]])
    drafter.rollback(len(tokens) - 1)
    return tokens


def kept_alone(pair, turns, spec: str, result, config: GenerationConfig) -> dict[str, list[int]]:
    """For each block of `result`, what each drafting method's own chain and the ensemble's, drafted alone
    from the block's start (with its weights), would have kept of the answer (the target's own tokens)."""
    methods = parse_spec(spec).model_methods
    members = {m: member_alone(pair, turns, (m,)) for m in methods} | {"mix": member_alone(pair, turns, methods)}
    answer, ends = result.token_ids, set(pair.eos_token_ids)
    kept, start = {name: [] for name in members}, 0
    banned = image_token_id(pair.drafter)
    for block in result.blocks:
        count = min(config.gamma, config.max_new_tokens - start - 1)
        for name, (drafter, opening) in members.items():
            weights = (torch.tensor([block.weights[m] for m in methods]) if name == "mix" else torch.ones(1))
            chain = chain_alone(drafter, opening, weights, count, banned if start == 0 else None, ends)
            usable = name == "mix" or name not in block.resting
            kept[name].append(_leading_matches(chain, answer[start:]) if usable else 0)
        for name, (drafter, _) in members.items():  # each member's drafter takes in the block's tokens
            members[name] = drafter, drafter.step(block.emitted)
        start += len(block.emitted)
    return kept


@pytest.mark.parametrize("spec", ["tabed-MT", "MTP", "tabed-MTP"])
def test_every_block_keeps_at_least_what_each_member_and_the_mix_keep_alone(loose_pair, image, spec):
    """Greedy, a fixed γ: in every block of every conversation the members tree keeps as many of the
    target's tokens as the best of each drafting method's own chain and the ensemble's, each drafted alone
    from the block's start (with the block's weights), would have: at least what each keeps, and no more,
    as its paths are those chains. In some blocks a method alone keeps more than the ensemble: the tree is
    ahead of the chain the ensemble drafts."""
    config = GenerationConfig(max_new_tokens=24, gamma=GAMMA, adaptive=False, tree_width=2, tree_policy="members")
    ahead = 0
    for name, turns in conversations(image).items():
        result = collect(speculative_generate(loose_pair, turns, parse_spec(spec), config))
        kept = kept_alone(loose_pair, turns, spec, result, config)
        for index, block in enumerate(result.blocks):
            alone = {member: counts[index] for member, counts in kept.items()}
            assert block.accepted == max(alone.values()), (name, index, block.accepted, alone)
            ahead += block.accepted > alone["mix"]
    assert ahead > 0


def test_the_overheads_members_tree_is_three_chains_apart_from_the_root():
    """What `python -m tabed overhead` times as the default spec's largest members tree: three chains of γ,
    each node its chain's only child, every node seeing its own chain alone."""
    tree = member_chains(3)
    assert tree.parents == [ROOT, 0, 1, ROOT, 3, 4, ROOT, 6, 7] and tree.depths == [1, 2, 3] * 3
    layout = tree.layout(list(range(9)), list(range(9)), shift=0)
    assert layout.visible[5].tolist() == [False] * 3 + [True] * 3 + [False] * 3


def test_a_sampled_ensemble_chain_stops_on_its_draws_own_chance_as_a_chain_would():
    """Sampling, adaptive: the ensemble's chain goes on by the ensemble's probability of the token it drew (as a
    chain drafting alone does), not of its top token; calibrated by the answer's verifications so far."""
    for seed in range(20):
        grow = growth([0.5, 0.5], temperature=1.0, adaptive=True)
        grow.drafting.generator.manual_seed(seed)
        grow.drafting.length.learn([0.55, 0.55], 0)  # a confidence of 0.55 was rejected: its chance is lower now
        grow.depth([ROOT], logits((3, 0.6), (4, 0.6)))
        drawn = grow.tree.tokens[grow.tree.contexts[ROOT].draws[0][0]]
        chance = grow.drafting.length.acceptance(float(grow.tree.contexts[ROOT].mixed[drawn]))
        assert grow.survival[ENSEMBLE] == pytest.approx(chance)
        if drawn not in (3, 4):
            break
    assert drawn not in (3, 4)  # a draw that was neither method's top token was checked


def test_the_overhead_times_the_members_tree_of_its_gamma(monkeypatch):
    """`step_costs` times the verify of the members tree of the γ it is given (three chains of γ), no other shape."""
    timed = []

    def target_step(pair, turns, count, steps=16, tree=None, path="lean"):
        timed.append(tree)
        return 0.01

    monkeypatch.setattr(overhead, "target_step_seconds", target_step)
    monkeypatch.setattr(overhead, "draft_step_seconds", lambda *args, **kwargs: 0.001)
    costs = overhead.step_costs(None, [], gamma=4)
    expected = member_chains(4)
    assert [(tree.parents, tree.depths) for tree in timed if tree is not None and len(tree.tokens) == 12] == [
        (expected.parents, expected.depths)]
    assert costs["verify_members_ms"] == pytest.approx(10.0)
