"""Speculative output equals the target's own: greedy token for token, sampling in distribution."""

import copy
from collections import Counter

import pytest
import torch

from conftest import SIZE, SPECS, conversations, make_pair, perturbed, random_llava, sharpen
from tabed.engine.chain import ChainVerifier
from tabed.engine.config import GenerationConfig
from tabed.engine.draft_length import parse_gamma
from tabed.engine.drafts import ROOT, AfterToken, DraftChain, DraftDistributions
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.sampling import (
    choose_token,
    logits_to_log_probs,
    logits_to_probs,
    residual,
    verify_greedy,
    verify_sampling,
)
from tabed.engine.spec import parse_spec
from tabed.engine.tree import Context, DraftTree, TreeVerifier
from tabed.models.chat import Turn


@pytest.fixture(scope="module")
def ar_outputs(pair, image):
    config = GenerationConfig(max_new_tokens=24)
    return {name: collect(autoregressive_generate(pair, turns, config)).token_ids
            for name, turns in conversations(image).items()}


@pytest.mark.parametrize("gamma", ["1", "3", "5", "auto:4", "auto"])
@pytest.mark.parametrize("spec", SPECS)
def test_greedy_speculative_equals_autoregressive(pair, image, ar_outputs, spec, gamma):
    length, adaptive = parse_gamma(gamma)
    config = GenerationConfig(max_new_tokens=24, gamma=length, adaptive=adaptive)
    rejected_blocks = 0
    for name, turns in conversations(image).items():
        result = collect(speculative_generate(pair, turns, parse_spec(spec), config))
        assert result.token_ids == ar_outputs[name], (spec, gamma, name)
        assert len(result.token_ids) > 1
        rejected_blocks += sum(not b.bonus for b in result.blocks)
        for block in result.blocks:
            assert block.emitted == (block.draft[: block.accepted] + [block.target_token])[: len(block.emitted)]
    assert rejected_blocks > 0  # the roll-back path was exercised


def test_the_drafter_is_partly_right(pair, image):
    """The fixture pair must make blocks partly accepted, or the tests above prove little."""
    config = GenerationConfig(max_new_tokens=24, gamma=5, adaptive=False)
    result = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("M"), config))
    accepted = [b.accepted for b in result.blocks]
    assert 0 < sum(accepted) < 5 * len(accepted)
    assert any(0 < a < 5 for a in accepted)


def test_stops_at_eos_exactly_as_ar(target, processor, image):
    config = GenerationConfig(max_new_tokens=24, gamma=4)
    turns = [Turn("w1 w2 w3", [image])]
    pair = make_pair(target, perturbed(target, 0.004), processor)
    full = collect(autoregressive_generate(pair, turns, config)).token_ids
    eos = full[9]  # pretend the 10th token is EOS: both must stop at its first occurrence
    old = target.generation_config.eos_token_id
    target.generation_config.eos_token_id = eos
    try:
        ar = collect(autoregressive_generate(pair, turns, config)).token_ids
        sd = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config)).token_ids
    finally:
        target.generation_config.eos_token_id = old
    assert ar == full[: full.index(eos) + 1]
    assert sd == ar


def test_greedy_verification_by_hand():
    logits = torch.full((4, 6), -5.0)
    for position, best in enumerate([2, 4, 1, 5]):
        logits[position, best] = 5.0
    assert verify_greedy(torch.tensor([2, 4, 1]), logits) == (3, 5)  # all accepted + bonus
    assert verify_greedy(torch.tensor([2, 3, 1]), logits) == (1, 4)  # correction at the 2nd
    assert verify_greedy(torch.tensor([0, 4, 1]), logits) == (0, 2)
    assert verify_greedy(torch.tensor([], dtype=torch.long), logits[:1]) == (0, 2)


def _first_token_frequencies(p, q, trials=40000, seed=0):
    generator = torch.Generator().manual_seed(seed)
    counts = torch.zeros(p.shape[-1])
    for _ in range(trials):
        draft = torch.multinomial(q[0], 1, generator=generator)
        accepted, token = verify_sampling(draft, q[:1], p, generator)
        counts[int(draft) if accepted else token] += 1
    return counts / trials


def test_rejection_sampling_reproduces_the_target_distribution():
    p = torch.tensor([[0.5, 0.3, 0.1, 0.1, 0.0], [0.2, 0.2, 0.2, 0.2, 0.2]])
    q = torch.tensor([[0.1, 0.1, 0.2, 0.2, 0.4]])
    frequencies = _first_token_frequencies(p, q)
    # 40k trials: the standard error of each frequency is <= 0.0025; 0.012 is ~5 standard errors.
    assert (frequencies - p[0]).abs().max() < 0.012
    assert (q[0] - p[0]).abs().max() > 0.3  # the drafts alone would be far off: the test has power


def _next_probs(model, shared, prefixes: torch.Tensor, temperature: float) -> torch.Tensor:
    """The next-token distribution after each embedded prefix (n, L, D) of the shared context."""
    cache = copy.deepcopy(shared)
    cache.batch_repeat_interleave(prefixes.shape[0])
    return torch.softmax(model(inputs_embeds=prefixes, cache=cache).logits[:, -1] / temperature, -1)


def _exact_marginals(model, processor, turns, steps, temperature):
    """The target's exact distributions of answer tokens 1..steps+1, by enumerating every prefix."""
    from tabed.models.chat import encode

    prompt = encode(processor, turns, torch.device("cpu"), torch.float32)
    ids = prompt.input_ids[0]
    embed = model.get_input_embeddings()
    vocab = model.get_output_embeddings().weight.shape[0]
    with torch.no_grad():
        features = torch.cat(list(model.get_image_features(**prompt.image_inputs).pooler_output))
        context = embed(ids).clone()
        context[ids == model.config.image_token_id] = features
        out = model(inputs_embeds=context[None], use_cache=True)
        shared = out.cache  # the context's cache, reused by every prefix
        first = torch.softmax(out.logits[0, -1] / temperature, -1)
        prefixes, weights = torch.arange(vocab)[:, None], first
        marginals = [first]
        for _ in range(steps):
            probs = torch.cat([_next_probs(model, shared, embed(chunk), temperature) for chunk in prefixes.split(256)])
            joint = weights[:, None] * probs  # (prefixes, V)
            marginals.append(joint.sum(0))
            grown = torch.arange(vocab).repeat(len(prefixes))[:, None]
            prefixes = torch.cat([prefixes.repeat_interleave(vocab, 0), grown], dim=1)
            weights = joint.reshape(-1)
            keep = weights > 1e-7  # prune negligible prefixes to keep the enumeration small
            prefixes, weights = prefixes[keep], weights[keep]
    return marginals


@pytest.fixture(scope="session")  # the session's: a process may run these tests apart, between others
def sampling_world(tokenizer, processor, image):
    """A drafter unlike its target, a prompt, and the target's exact marginals of 4 answer tokens at temperature 1:
    the same for every sampling test below, enumerated once."""
    target = sharpen(random_llava(SIZE, tokenizer, seed=3), std=0.1, seed=3)
    drafter = sharpen(random_llava(SIZE, tokenizer, seed=4), std=0.4, seed=4)  # unrelated, sure of itself
    target.generation_config.eos_token_id = -1  # no EOS: every run yields all its tokens, as enumerated
    turns = [Turn("w1 w2 w1 w2", [image])]  # a repeat for N to look up
    return make_pair(target, drafter, processor), turns, 1.0, _exact_marginals(target, processor, turns, steps=3,
                                                                               temperature=1.0)


@pytest.mark.parametrize("gamma, new_tokens, spec, tree", [
    ("2", 4, "tabed-MT", (1, "ensemble", "all", False)), ("auto:2", 4, "tabed-MT", (1, "ensemble")),
    ("auto:2", 4, "tabed-MTN", (1, "ensemble")), ("auto:2", 4, "tabed-MT", (2, "ensemble")),
    ("2", 4, "tabed-MT", (3, "methods")), ("auto:2", 4, "tabed-MT", (2, "unsure", "first", False)),
    ("auto:2", 4, "tabed-MTN", (2, "members"))],
    ids=["fixed-chains", "adaptive-hedged", "N-hedged", "tree2", "tree3-methods", "tree2-unsure-first", "members-N"])
@pytest.mark.slow
def test_speculative_sampling_is_lossless_end_to_end(sampling_world, gamma, new_tokens, spec, tree):
    """SD with a drafter unlike the target samples answer tokens with the target's exact marginals; with
    adaptive drafting too, whose draft length depends on the tokens drawn; with token trees too, whose
    nodes have several draws each (from the ensemble, from each method's own distribution, or all on each
    method's top token), in every block,
    or in the first only with chains after it (an "unsure" tree there: its nodes' draw counts depend on the
    ensemble's distribution, never on the draws), as in the default's hedged first block; `tree`: width,
    policy, blocks and whether the first block hedges (default: it does)."""
    pair, turns, temperature, marginals = sampling_world
    assert len(marginals) == new_tokens
    runs = 1500
    vocab = marginals[0].shape[0]
    counts = torch.zeros(new_tokens, vocab)
    draft_counts = torch.zeros(vocab)
    stops = Counter()
    branched = 0  # runs whose first tree drew more than one distinct first token
    chains_after = 0  # runs with trees in the first block only whose later blocks were chains
    first_trees = 0  # runs whose first block was a tree
    for seed in range(runs):
        length, adaptive = parse_gamma(gamma)
        config = GenerationConfig(max_new_tokens=new_tokens, gamma=length, adaptive=adaptive,
                                  temperature=temperature, seed=seed, tree_width=tree[0], tree_policy=tree[1],
                                  tree_blocks=tree[2] if len(tree) > 2 else "all",
                                  hedge_first=tree[3] if len(tree) > 3 else True)
        result = collect(speculative_generate(pair, turns, parse_spec(spec), config))
        assert len(result.token_ids) == new_tokens
        for step, token in enumerate(result.token_ids):  # the first too: drafted, verified by the prefill
            counts[step, token] += 1
        draft_counts[result.blocks[0].draft[:1]] += 1  # the first token's draft (none when it was <image>)
        stops.update(block.stop for block in result.blocks)
        branched += any(node.parent == -1 for node in result.blocks[0].tree[1:])
        chains_after += (len(tree) > 2 or tree[0] == 1) and any(not block.tree for block in result.blocks[1:])
        first_trees += bool(result.blocks[0].tree)
    for step in range(new_tokens):
        empirical = counts[step] / counts[step].sum()
        tv = 0.5 * (empirical - marginals[step]).abs().sum()
        # With 1500 runs over ~45 tokens the expected TV of a correct sampler is ~0.06; 0.11 is the bound.
        assert tv < 0.11, (step, float(tv))
    draft_tv = 0.5 * (draft_counts / draft_counts.sum() - marginals[0]).abs().sum()
    assert draft_tv > 0.3  # accepting drafts blindly would fail the bound above
    if gamma.startswith("auto"):  # both ways of ending a block happened, many times
        assert stops["unsure"] > 100 and stops["cap"] > 100, stops
    if tree[0] > 1:  # the trees really branched
        assert branched > runs // 4, branched
    hedged = tree[0] == 1 and (len(tree) < 4 or tree[3])
    if len(tree) > 2 or hedged:  # and chains verified the blocks after the first, many times
        assert chains_after > runs // 4, chains_after
    assert (first_trees > runs // 4) if tree[0] > 1 or hedged else first_trees == 0, first_trees


def test_top_p_keeps_the_smallest_set_of_tokens_whose_mass_reaches_it():
    """Nucleus sampling keeps the token that crosses the threshold (what came before it is still below
    top-p): of 0.5, 0.3, 0.2, top-p 0.7 keeps two tokens, renormalised; a mass that reaches top-p exactly
    stops there; top-p 1 keeps every token."""
    logits = torch.tensor([0.5, 0.3, 0.2]).log()
    assert logits_to_probs(logits, 1.0, 0.7).tolist() == pytest.approx([0.625, 0.375, 0.0])
    assert logits_to_probs(logits, 1.0, 0.5 - 1e-4).tolist() == pytest.approx([1.0, 0.0, 0.0])
    assert logits_to_probs(logits, 1.0, 0.5 + 1e-4).tolist() == pytest.approx([0.625, 0.375, 0.0])
    assert logits_to_probs(logits, 1.0, 0.8 + 1e-4).tolist() == pytest.approx([0.5, 0.3, 0.2])
    assert logits_to_probs(logits, 1.0, 1.0).tolist() == pytest.approx([0.5, 0.3, 0.2])
    even = torch.zeros(4)  # four tokens of 0.25 each: every partial mass is exact in floating point
    for top_p, kept in ((0.25, 1), (0.5, 2), (0.75, 3), (1.0, 4)):
        probs = logits_to_probs(even, 1.0, top_p)
        assert sorted(probs.tolist(), reverse=True) == pytest.approx([1 / kept] * kept + [0.0] * (4 - kept)), top_p
    # each row on its own, as the target's rows are verified: the first keeps two tokens, the second one
    rows = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.8, 0.1]]).log()
    torch.testing.assert_close(logits_to_probs(rows, 1.0, 0.7), torch.tensor([[0.625, 0.375, 0.0], [0.0, 1.0, 0.0]]))
    # top-p 1 cuts nothing, even where the float sum reaches 1 before the last token: 0.99999999... is 1 in float32
    sure = torch.tensor([30.0, 0.0, 0.0])
    assert float(torch.softmax(sure, dim=-1)[0]) == 1.0
    torch.testing.assert_close(logits_to_probs(sure, 1.0, 1.0), torch.softmax(sure, dim=-1), rtol=0, atol=0)


def test_a_draft_after_a_rejected_one_is_never_counted_and_the_token_comes_from_the_residual():
    """The first draft has target probability 0 (always rejected), the second p >= q (always accepted on
    its own): nothing is accepted, and the target's token is drawn from the first position's residual
    norm(max(p - q, 0)), which holds tokens 1 and 2 only (the second position's holds token 0 only)."""
    drafts = torch.tensor([0, 1])
    q = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])
    p = torch.tensor([[0.0, 0.5, 0.5], [0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]])
    tokens = set()
    for seed in range(20):
        draws = []
        accepted, token = verify_sampling(drafts, q, p, torch.Generator().manual_seed(seed), draws)
        assert accepted == 0 and token in (1, 2) and len(draws) == 2
        tokens.add(token)
    assert tokens == {1, 2}  # both halves of the residual come up


def test_a_draw_of_exactly_zero_never_accepts_a_draft_the_target_cannot_emit(monkeypatch):
    """`torch.rand` draws from [0, 1): a draw of exactly 0 happens (about once in 2^24). A draft the target gives
    probability 0 must be rejected all the same: accepted when u < p/q, never when u <= p/q."""
    monkeypatch.setattr(torch, "rand", lambda n, generator=None, device=None: torch.zeros(n, device=device))
    q = torch.tensor([[0.5, 0.5, 0.0]])
    p = torch.tensor([[0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])
    assert verify_sampling(torch.tensor([0]), q, p, torch.Generator().manual_seed(0)) == (0, 2)
    assert verify_sampling(torch.tensor([1]), q, p, torch.Generator().manual_seed(0)) == (1, 2)


class _FixedTarget:
    """A target session stand-in whose forward gives fixed logits (one row per token fed)."""

    def __init__(self, probs: torch.Tensor) -> None:
        self.logits = probs.log()

    def forward(self, tokens: list[int], layout=None) -> torch.Tensor:
        assert len(tokens) == self.logits.shape[0] and layout is None
        return self.logits


def test_a_chain_is_verified_against_the_mixture_that_drafted_it_not_one_methods_distribution():
    """Drafts alternate tokens 0 and 2; M's distribution puts 0.9 on token 0, T's 0.9 on token 2, and their
    even mixture 0.45 on each, below the target's 0.5: against the mixture every draft is accepted, whatever
    the draws; against either method alone some draft of this seed fails u·q < p (checked on the recorded
    draws, so that the construction has power)."""
    gamma = 12
    drafts = [0, 2] * (gamma // 2)
    rows = torch.tensor([[0.9, 0.1, 0.0], [0.0, 0.1, 0.9]])
    mixture = rows.mean(dim=0)
    target = torch.tensor([0.5, 0.0, 0.5]).expand(gamma + 1, 3)
    draft = DraftChain(drafts, [rows] * gamma, [mixture] * gamma)
    config = GenerationConfig(temperature=1.0, inspect=True)
    verdict = ChainVerifier(AfterToken(4)).verify(_FixedTarget(target), draft, config, torch.Generator().manual_seed(1))
    assert verdict.accepted == gamma and verdict.target_token in (0, 2)  # the bonus token, from p
    assert len(verdict.draws) == gamma
    for row in rows:
        kept = [u * float(row[x]) < float(target[j, x])
                for j, (u, x) in enumerate(zip(verdict.draws, drafts, strict=True))]
        assert not all(kept)  # this method's own distribution would have rejected one


# (temperature, top-p): greedy (its top-p unused), a temperature alone, both, a top-p alone
RUN_SETTINGS = [(0.0, 0.5), (0.5, 1.0), (2.0, 0.6), (1.0, 0.7)]
LOGITS = torch.tensor([[2.0, 0.5, -1.0, 0.0], [0.3, 1.2, -2.0, 0.1], [1.0, 1.0, 0.0, -3.0]])


@pytest.mark.parametrize("temperature, top_p", RUN_SETTINGS)
def test_a_chain_is_verified_against_the_targets_distribution_at_the_runs_temperature_and_top_p(temperature, top_p):
    """What the drafts are accepted against, and the target's token drawn from, is the target at the run's
    own settings (softmax at 1 when greedy: the ensemble's history reads it), not at temperature 1. Its
    draws are read back (a device sync) only for the stepper."""
    draft = DraftChain([0, 1], [torch.full((2, 4), 0.25)] * 2, [torch.full((4,), 0.25)] * 2)
    config = GenerationConfig(temperature=temperature, top_p=top_p)
    target = _FixedTarget(torch.softmax(LOGITS, -1))
    verdict = ChainVerifier(AfterToken(4)).verify(target, draft, config, torch.Generator().manual_seed(0))
    torch.testing.assert_close(verdict.target_probs, logits_to_probs(target.logits, temperature, top_p))
    assert verdict.draws == []  # not inspecting


@pytest.mark.parametrize("temperature, top_p", RUN_SETTINGS)
def test_a_tree_is_verified_against_the_targets_distribution_at_the_runs_temperature_and_top_p(temperature, top_p):
    """The same for a tree (here one path of two nodes, which the target scores as a plain sequence)."""
    tree, even = DraftTree(), torch.full((4,), 0.25)
    for parent, token in ((ROOT, 0), (0, 1)):
        node, _ = tree.add(parent, token, 0.25, 0.25)
        tree.contexts[parent] = Context(torch.full((2, 4), 0.25), even, None, draws=[(node, even)])
    config = GenerationConfig(temperature=temperature, top_p=top_p)
    target = _FixedTarget(torch.softmax(LOGITS, -1))
    verdict = TreeVerifier(("M", "T"), AfterToken(4)).verify(target, tree, config, torch.Generator().manual_seed(0))
    torch.testing.assert_close(verdict.target_probs, logits_to_probs(target.logits, temperature, top_p))


@pytest.mark.parametrize("temperature, top_p", RUN_SETTINGS)
def test_the_drafts_are_drawn_from_each_methods_distribution_at_the_runs_temperature_and_top_p(temperature, top_p):
    """The methods' distributions, and so the ensemble the drafts are drawn from and the verification's q, are
    at the run's own settings (softmax at 1 when greedy), as the target's are."""
    logits = LOGITS[:2]  # the rows of M and T
    weights = torch.tensor([0.25, 0.75])
    config = GenerationConfig(temperature=temperature, top_p=top_p)
    q_rows, q, _ = DraftDistributions(2, weights, config, False, None)(logits, [])
    expected = logits_to_probs(logits, temperature, top_p)
    torch.testing.assert_close(q_rows, expected)
    torch.testing.assert_close(q, weights @ expected)


@pytest.mark.parametrize("temperature", [0.5, 1.0, 2.0])
def test_the_log_probabilities_are_the_logs_of_the_probabilities_at_every_temperature(temperature):
    """The log-loss rules read what the drafter's distributions are at the run's temperature."""
    logits = torch.tensor([[2.0, -1.0, 0.5, 0.0], [0.3, 0.2, -2.0, 1.5]])
    torch.testing.assert_close(logits_to_log_probs(logits, temperature).exp(), logits_to_probs(logits, temperature))


def test_plain_decodings_draws_come_from_the_runs_own_generator():
    """A seed gives the same sample every time, and another seed another one."""
    probs = torch.softmax(torch.arange(32, dtype=torch.float32).sin(), dim=-1)

    def draws(seed):
        generator = torch.Generator().manual_seed(seed)
        return [choose_token(probs.log(), probs, 1.0, generator) for _ in range(20)]

    assert draws(3) == draws(3) != draws(4)


def test_a_residual_with_nothing_left_is_the_target_itself():
    """norm(max(p - q, 0)) where q covers p everywhere has no mass to normalise: the target's own p is drawn from
    instead (never 0/0)."""
    p = torch.tensor([0.5, 0.3, 0.2, 0.0])
    torch.testing.assert_close(residual(p, p), p)
    torch.testing.assert_close(residual(p, torch.tensor([0.6, 0.3, 0.2, 0.1])), p)
    torch.testing.assert_close(residual(p, torch.tensor([0.3, 0.5, 0.2, 0.0])), torch.tensor([1.0, 0.0, 0.0, 0.0]))
