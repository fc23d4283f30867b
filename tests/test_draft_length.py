"""Adaptive draft length: the stopping rule, the learned threshold, and what the blocks report."""

import pytest

from tabed.conversation import Turn
from tabed.decoding import GenerationConfig, autoregressive_generate, collect, speculative_generate
from tabed.draft_length import AUTO_CAP, INITIAL_THRESHOLD, DraftLength, learned_threshold, parse_gamma
from tabed.errors import InputError
from tabed.spec import parse_spec


@pytest.mark.parametrize("text, expected", [("auto", (AUTO_CAP, True)), ("AUTO:8", (8, True)), ("5", (5, False)),
                                            (3, (3, False))])
def test_gamma_is_auto_auto_with_a_cap_or_a_number(text, expected):
    assert parse_gamma(text) == expected


@pytest.mark.parametrize("text", ["fast", "auto:x", "", "5.5"])
def test_a_bad_gamma_says_what_is_allowed(text):
    with pytest.raises(InputError, match="'auto', 'auto:N' or a number"):
        parse_gamma(text)


def test_the_threshold_separates_accepted_from_rejected_drafts():
    examples = [(0.1, False), (0.2, False), (0.3, False), (0.6, True), (0.7, True), (0.9, True)]
    assert learned_threshold(examples, 0.4) == 0.6  # the lowest threshold that stops before no accepted draft


def test_a_missed_continuation_costs_more_than_a_wasted_draft():
    """One rejected draft among confident accepted ones is not worth stopping before all of them."""
    examples = [(0.5, True), (0.55, True), (0.6, False), (0.7, True), (0.8, True), (0.9, True)]
    assert learned_threshold(examples, 0.4) == 0.5


def test_the_threshold_waits_for_both_outcomes():
    assert learned_threshold([(0.9, True)] * 20, 0.4) == 0.4
    assert learned_threshold([(0.1, False)] * 20, 0.4) == 0.4
    assert learned_threshold([(0.1, False), (0.9, True)], 0.4) == 0.4  # too few


def test_only_tokens_the_target_judged_are_learned_from():
    length = DraftLength(8, adaptive=True)
    length.learn([0.9, 0.8, 0.3, 0.95, 0.99], accepted=2)  # the third was rejected; the last two never judged
    assert length.examples == [(0.9, True), (0.8, True), (0.3, False)]
    fixed = DraftLength(5, adaptive=False)
    fixed.learn([0.9, 0.1], accepted=0)
    assert fixed.examples == [] and fixed.keep_drafting(0.0)


@pytest.mark.parametrize("spec", ["M", "tabed-MT"])
def test_adaptive_blocks_stop_when_the_ensemble_is_unsure_and_say_so(pair, image, spec):
    turns = [Turn("w1 w2 w3", [image])]
    config = GenerationConfig(max_new_tokens=60, gamma=8, adaptive=True)
    result = collect(speculative_generate(pair, turns, parse_spec(spec), config))
    assert result.token_ids == collect(autoregressive_generate(pair, turns, config)).token_ids
    stops = [block.stop for block in result.blocks]
    assert "unsure" in stops and ("cap" in stops or "budget" in stops), stops
    assert result.blocks[0].threshold == INITIAL_THRESHOLD
    assert len({block.threshold for block in result.blocks}) > 1  # learned as the answer goes
    for block in result.blocks:
        confident = [p >= block.threshold for p in block.draft_probs]
        assert all(confident[:-1])  # drafting went on exactly while the ensemble was sure
        if block.stop == "unsure":
            assert not confident[-1] and len(block.draft) < 8
        elif block.stop == "cap":
            assert len(block.draft) == 8


def test_a_fixed_gamma_drafts_gamma_tokens_until_the_budget(pair, image):
    config = GenerationConfig(max_new_tokens=23, gamma=5, adaptive=False)
    result = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MT"), config))
    for block in result.blocks:
        assert block.threshold is None
        assert (block.stop, len(block.draft)) == ("fixed", 5) or block.stop == "budget" and len(block.draft) < 5
