"""`N`, the model-free method: n-gram lookup in the prompt and the answer, as one more distribution."""

import pytest
import torch

from tabed.engine.config import GenerationConfig
from tabed.engine.drafts import DraftDistributions
from tabed.engine.lookup import NgramLookup, ngram_continuation
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.errors import InputError
from tabed.models.chat import Turn


def test_the_longest_suffix_that_occurred_before_gives_the_guess():
    assert ngram_continuation([5, 6, 7, 9, 6, 7]) == 9  # "6 7" was followed by 9
    assert ngram_continuation([1, 2, 3, 1, 2, 4, 8, 1, 2]) == 4  # the latest "1 2" wins
    assert ngram_continuation([4, 5, 6, 5, 6, 4, 5]) == 6  # "6 4 5" never occurred, "4 5" did
    assert ngram_continuation([1, 2, 3]) is None and ngram_continuation([]) is None


def test_n_is_a_smoothed_point_mass_or_the_others_mixture():
    others = torch.tensor([0.1, 0.2, 0.3, 0.4])
    lookup = NgramLookup([1, 2, 0, 3], [1], smoothing=0.2)
    guess = lookup.distribution([2], others)  # "1 2" was followed by 0
    assert guess.tolist() == pytest.approx([0.85, 0.05, 0.05, 0.05]) and guess.sum().item() == pytest.approx(1.0)
    assert lookup.distribution([3], others).argmax() == 1  # "1 3" never occurred; "3" did, followed by 1
    assert torch.equal(NgramLookup([0, 1, 2], []).distribution([3], others), others)  # nothing to look up: no opinion


def test_n_needs_a_model_method_beside_it():
    assert parse_spec("tabed-MTN").methods == ("M", "T", "N")
    assert parse_spec("tabed-MTN").model_methods == ("M", "T")
    with pytest.raises(InputError, match="beside a model method"):
        parse_spec("N")


@pytest.mark.parametrize("spec", ["tabed-MTN", "MTN", "TN", "tabed-MTCPN"])
def test_with_n_the_answer_is_the_targets_own(pair, image, spec):
    turns = [Turn("w1 w2 w1 w2 w3", [image], answer="w4 w5 w4 w5"), Turn("w4 w5")]  # repeats to look up
    config = GenerationConfig(max_new_tokens=32, gamma=5, adaptive=False)
    result = collect(speculative_generate(pair, turns, parse_spec(spec), config))
    assert result.token_ids == collect(autoregressive_generate(pair, turns, config)).token_ids
    assert all(set(block.weights) == set(parse_spec(spec).methods) for block in result.blocks)
    assert all(len(block.drafts["N"]) == len(block.draft) for block in result.blocks)


def test_where_n_has_no_match_the_ensemble_is_the_renormalised_model_mixture_and_sums_to_1():
    """N without a match takes the model methods' mixture with their weights renormalised to sum to 1; the
    ensemble is then that mixture (N neither helps nor hurts) and a proper distribution, which exact
    sampling needs: for hand-made weights, where N has them all (the models then count evenly), and for
    random ones."""
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5], [-1.0, 1.0, 0.0, 0.0]])  # the rows of M and T
    no_match = NgramLookup([0, 1, 2], [])  # the last token never occurred before
    for temperature in (0.0, 1.0):
        config = GenerationConfig(temperature=temperature)
        q_models = torch.softmax(logits, dim=-1)
        weights = torch.tensor([0.3, 0.2, 0.5])  # M, T, N
        q_rows, q, _ = DraftDistributions(3, weights, config, False, no_match)(logits, [])
        mixture = 0.6 * q_models[0] + 0.4 * q_models[1]
        torch.testing.assert_close(q_rows[2], mixture)
        torch.testing.assert_close(q, mixture)
        assert float(q.sum()) == pytest.approx(1.0)
        _, q, _ = DraftDistributions(3, torch.tensor([0.0, 0.0, 1.0]), config, False, no_match)(logits, [])
        torch.testing.assert_close(q, q_models.mean(dim=0))  # N has all the weight: the models count evenly
        generator = torch.Generator().manual_seed(0)
        for _ in range(10):
            weights = torch.rand(3, generator=generator)
            weights = weights / weights.sum()
            _, q, _ = DraftDistributions(3, weights, config, False, no_match)(logits, [])
            assert float(q.sum()) == pytest.approx(1.0) and float(q.min()) >= 0.0


def test_ns_log_distribution_is_the_log_of_its_distribution_for_the_log_loss_rules():
    """kld and hedge weigh N by the log of what it drafts from: its guess's point mass, smoothed, or the
    models' mixture where it has none (clamped above 0 where that has none)."""
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5], [-1.0, 1.0, 0.0, 0.0]])
    for lookup in (NgramLookup([0, 1, 2, 0], []), NgramLookup([0, 1, 2], [])):  # a guess (1), none
        q_rows, _, log_q = DraftDistributions(3, torch.tensor([0.3, 0.2, 0.5]), GenerationConfig(), True,
                                              lookup)(logits, [])
        torch.testing.assert_close(log_q[2], q_rows[2].clamp_min(1e-12).log())
        torch.testing.assert_close(log_q[:2], torch.log_softmax(logits, dim=-1))


def test_a_suffix_is_found_wherever_it_occurred_the_contexts_first_token_included():
    assert ngram_continuation([1, 2, 9, 1, 2]) == 9  # "1 2" occurred only at the very start
    assert ngram_continuation([7, 8, 5, 7]) == 8  # one token, at the start
    assert ngram_continuation([3, 3]) == 3


def test_n_looks_its_guess_up_in_the_blocks_own_drafts_too():
    others = torch.full((10,), 0.1)
    lookup = NgramLookup([1, 2], [3])
    assert int(lookup.distribution([4, 5, 6, 4, 5], others).argmax()) == 6  # "4 5" occurred among the drafts only
    assert torch.equal(lookup.distribution([4], others), others)  # 4 never occurred before: no opinion


def test_each_draft_positions_n_guess_follows_the_prompt_the_answer_and_the_drafts_before_it(pair, image,
                                                                                         monkeypatch):
    """In a real run, N's guess at every position is what followed the latest occurrence of the context's
    suffix, the context being the prompt, the answer so far and the block's drafts before that position."""
    import tabed.engine.loop as loop

    made = []

    class Recorded(NgramLookup):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(loop, "NgramLookup", Recorded)
    turns = [Turn("w1 w2 w1 w2 w3", [image], answer="w4 w5 w4 w5"), Turn("w4 w5")]
    config = GenerationConfig(max_new_tokens=40, gamma=5, adaptive=False)
    result = collect(speculative_generate(pair, turns, parse_spec("tabed-MTN"), config))
    (lookup,) = made
    answered = len(result.token_ids) - sum(len(b.emitted) for b in result.blocks)  # the prompt pass's token
    from_drafts = 0
    for block in result.blocks:
        before = lookup.prompt_ids + result.token_ids[:answered]
        for i, guess in enumerate(block.drafts["N"]):
            expected = ngram_continuation(before + block.draft[:i])
            if expected is not None:
                assert guess == expected
                from_drafts += expected != ngram_continuation(before)
        answered += len(block.emitted)
    assert from_drafts > 0  # the run had guesses that only the drafts gave


def test_every_suffix_length_is_tried_longest_first():
    """'3 1 2' never occurred; '1 2' did (followed by 7) and wins over the later '2' (followed by 3)."""
    assert ngram_continuation([1, 2, 7, 9, 2, 3, 1, 2]) == 7
    assert ngram_continuation([1, 2, 7, 9, 2, 3, 1, 2], max_n=1) == 3


def test_n_looks_up_suffixes_only_as_long_as_its_own_longest():
    others = torch.full((10,), 0.1)
    context = [1, 2, 7, 9, 2, 3, 1]
    assert int(NgramLookup(context, [], max_n=2).distribution([2], others).argmax()) == 7
    assert int(NgramLookup(context, [], max_n=1).distribution([2], others).argmax()) == 3


def test_a_guess_outside_the_drafters_vocabulary_is_no_opinion():
    """A looked-up token the distribution has no entry for (an id at or past its size) is no guess."""
    others = torch.full((4,), 0.25)
    for token in (4, 5):
        assert torch.equal(NgramLookup([1, token, 1], []).distribution([], others), others)
    assert int(NgramLookup([1, 3, 1], []).distribution([], others).argmax()) == 3
