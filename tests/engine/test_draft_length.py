"""Adaptive draft length: the stopping rule, the learned threshold, and what the blocks report."""

import pytest
import torch

from tabed.bench.suite import case_turns, default_suite, load_suite
from tabed.engine.config import GenerationConfig
from tabed.engine.draft_length import (
    AUTO_CAP,
    CPU_MIN_SURVIVAL,
    FIRST_MIN_SURVIVAL,
    MIN_SURVIVAL,
    DraftLength,
    min_survival_on,
    parse_gamma,
)
from tabed.engine.loop import autoregressive_generate, collect, min_survival_of, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.errors import InputError
from tabed.models.chat import Turn
from tabed.page.render import tree_depth


@pytest.mark.parametrize("text, expected", [("auto", (AUTO_CAP, True)), ("AUTO:8", (8, True)), ("5", (5, False)),
                                            (3, (3, False))])
def test_gamma_is_auto_auto_with_a_cap_or_a_number(text, expected):
    assert parse_gamma(text) == expected


@pytest.mark.parametrize("text", ["fast", "auto:x", "", "5.5", ":5"])  # a colon only after "auto"
def test_a_bad_gamma_says_what_is_allowed(text):
    with pytest.raises(InputError, match="'auto', 'auto:N' or a number"):
        parse_gamma(text)


def test_acceptance_starts_at_the_confidence_and_learns_from_verifications():
    length = DraftLength(8, adaptive=True)
    assert length.acceptance(0.95) == pytest.approx(0.95) and length.acceptance(0.3) == pytest.approx(0.3)
    for _ in range(8):  # a drafter sure of itself (0.95) and wrong: its first draft is rejected every time
        length.learn([0.95, 0.95, 0.95], accepted=0)
    assert length.judged[-2] == 8 and length.accepted[-2] == 0  # only the judged token counts
    assert length.acceptance(0.95) == pytest.approx(2 * 0.95 / 10)
    assert length.acceptance(0.3) == pytest.approx(0.3)  # other bins keep their own counts


def test_a_block_goes_on_while_its_chance_of_surviving_whole_is_high_enough():
    length = DraftLength(20, adaptive=True, min_survival=0.5, first_min_survival=0.05)
    length.start_block(length.min_survival)
    assert [length.keep_drafting(0.9) for _ in range(7)] == [True] * 6 + [False]  # 0.9^7 = 0.48
    assert length.survival == pytest.approx(0.9 ** 7)
    length.start_block(length.min_survival)
    assert length.keep_drafting(0.99) and not length.keep_drafting(0.2)
    length.start_block(length.first_min_survival)  # the first block: its own, lower minimum
    assert [length.keep_drafting(0.5) for _ in range(5)] == [True] * 4 + [False]  # 0.5^5 = 0.03 < 0.05
    fixed = DraftLength(5, adaptive=False)
    fixed.learn([0.9, 0.1], accepted=0)
    assert fixed.keep_drafting(0.0)
    length.start_block(0.25)  # a chance exactly at the minimum goes on: drafting stops only under it
    assert length.keep_growing(0.25) and not length.keep_growing(0.2499)


def test_only_tokens_the_target_judged_are_learned_from():
    length = DraftLength(8, adaptive=True)
    length.learn([0.92, 0.85, 0.35, 0.95, 0.99], accepted=2)  # the third was rejected; the last two never judged
    assert sum(length.judged) == 3 and sum(length.accepted) == 2
    assert length.judged[-1] == 0 and length.judged[-3] == 1  # 0.99 (its own bin) was never judged, 0.92 was


@pytest.mark.parametrize("spec", ["M", "tabed-MT"])
def test_adaptive_blocks_stop_when_the_ensemble_is_unsure_and_say_so(pair, image, spec):
    turns = [Turn("w1 w2 w3", [image])]
    config = GenerationConfig(max_new_tokens=60, gamma=8, adaptive=True)
    result = collect(speculative_generate(pair, turns, parse_spec(spec), config))
    assert result.token_ids == collect(autoregressive_generate(pair, turns, config)).token_ids
    stops = [block.stop for block in result.blocks]
    assert "unsure" in stops and ("cap" in stops or "budget" in stops), stops
    assert len({len(block.draft) for block in result.blocks}) > 1  # lengths vary with the confidence
    for block in result.blocks:  # the first block rides on the prompt's pass: it goes on to a lower minimum
        assert block.threshold == (FIRST_MIN_SURVIVAL if block.index == 0 else CPU_MIN_SURVIVAL)  # the CPU's
        if block.stop == "unsure":  # stopped as soon as the block's chance of surviving whole was too low
            assert block.survival < block.threshold and len(block.draft) < 8
        elif block.stop == "cap":
            assert len(block.draft) == 8


def test_the_minimum_is_the_devices_unless_the_config_gives_one():
    """A draft costs a fifth of a plain step on a CPU and a fifteenth on a GPU: the CPU's blocks stop sooner."""
    assert (min_survival_on("cpu"), min_survival_on("cuda"), min_survival_on("mps")) == (0.8, 0.5, 0.5)
    assert CPU_MIN_SURVIVAL > MIN_SURVIVAL > FIRST_MIN_SURVIVAL
    assert GenerationConfig().min_survival is None and GenerationConfig(min_survival=0.3).min_survival == 0.3
    assert min_survival_of(GenerationConfig(), torch.device("cpu")) == CPU_MIN_SURVIVAL
    assert min_survival_of(GenerationConfig(), torch.device("cuda")) == MIN_SURVIVAL
    assert min_survival_of(GenerationConfig(min_survival=0.3), torch.device("cuda")) == 0.3


def test_a_higher_minimum_survival_stops_blocks_sooner_and_changes_no_answer(pair, image):
    turns = [Turn("w1 w2 w3", [image])]
    plain = collect(autoregressive_generate(pair, turns, GenerationConfig(max_new_tokens=60))).token_ids
    drafted = {}
    for minimum in (0.2, 0.8):
        config = GenerationConfig(max_new_tokens=60, gamma=8, min_survival=minimum)
        result = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
        assert result.token_ids == plain
        later = result.blocks[1:]
        assert later and all(block.threshold == minimum for block in later)
        assert all(block.survival < minimum for block in later if block.stop == "unsure")
        drafted[minimum] = sum(len(block.draft) for block in later) / len(later)
    assert drafted[0.8] < drafted[0.2]
    for bad in (0.0, 1.0):
        with pytest.raises(InputError, match="minimum survival"):
            GenerationConfig(min_survival=bad)


@pytest.mark.parametrize("hedge", [False, True])
def test_a_fixed_gamma_drafts_gamma_tokens_until_the_budget(pair, image, hedge):
    """Chains of γ drafts; the hedged first block, a tree, is γ deep (its kept path may end higher up, on a
    node the frontier did not expand)."""
    config = GenerationConfig(max_new_tokens=23, gamma=5, adaptive=False, hedge_first=hedge)
    result = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MT"), config))
    assert bool(result.blocks[0].tree) == hedge
    for block in result.blocks:
        assert block.threshold is None
        if block.tree:
            assert block.stop == "fixed" and tree_depth(block.tree) == 5
        else:
            assert (block.stop, len(block.draft)) == ("fixed", 5) or block.stop == "budget" and len(block.draft) < 5


@pytest.fixture(scope="module")
def teaching_answers(teaching_pair):
    """The bundled pair and a few of its suite's conversations: its answers end with an end token."""
    pair = teaching_pair
    suite = default_suite()
    cases = [case for case in load_suite(suite) if case.scenario in ("text", "image")][::6]
    return pair, [case_turns(case, suite.parent) for case in cases]


@pytest.mark.parametrize("gamma, adaptive, width", [(20, True, 1), (20, False, 1), (20, True, 2)])
@pytest.mark.slow
def test_drafting_ends_at_a_drafted_end_token(teaching_answers, gamma, adaptive, width):
    """Nothing after an end token can be emitted: the chain stops there (a fixed-length one is cut
    there), a tree grows nothing under it; answers are still the target's own."""
    pair, conversations = teaching_answers
    config = GenerationConfig(max_new_tokens=160, gamma=gamma, adaptive=adaptive, tree_width=width)
    ends, stops, tree_ends = pair.eos_token_ids, [], 0
    for turns in conversations:
        result = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
        assert result.token_ids == collect(autoregressive_generate(pair, turns, config)).token_ids
        assert result.token_ids[-1] in ends
        for block in result.blocks:
            stops.append(block.stop)
            drafted_ends = [i for i, token in enumerate(block.draft) if token in ends]
            assert drafted_ends in ([], [len(block.draft) - 1])  # the chain walked ends at its end token
            assert not drafted_ends or block.tree or block.stop in ("eos", "cap", "fixed")  # a chain stops
            # there; a tree (the hedged first block too) may go on deepening its other branches
            below_ends = {i for i, node in enumerate(block.tree) if node.token in ends}
            assert not any(node.parent in below_ends for node in block.tree)
            tree_ends += bool(below_ends)
    # the path is exercised: some chains stop at a drafted end, some trees hold one as a leaf while their
    # other branches grow on (an answer's end is a near-tie between a closing remark and none, so the
    # drafts do not end where the target does in every answer)
    drafted_ends = tree_ends if width > 1 else stops.count("eos")
    assert drafted_ends >= len(conversations) // 4, stops
