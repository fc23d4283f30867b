"""The block stepper shows what each inspected block decided: a row per verified position whose verdict is
the block's (the answer's colours), the target's own token after them, a reason in one line for each
verdict, and how the weights were chosen, in the words of the rule's own figures."""

import html
import math
import re
from dataclasses import replace
from html.parser import HTMLParser
from itertools import pairwise
from pathlib import Path

import pytest

from conftest import hand_block
from tabed.engine import resting
from tabed.engine.config import GenerationConfig
from tabed.engine.events import Candidate, DraftTest, Position, StopReason, TreeNode, Tried, WeightUpdate
from tabed.engine.loop import collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.models.chat import Turn
from tabed.page.reasons import NEVER_TESTED
from tabed.page.render import TokenStream, counted, token_word
from tabed.page.stepper import Words, chosen_block, drafted, moved_why, refused_html, step_html, weights_why, why


def run(pair, image, **settings):
    config = GenerationConfig(max_new_tokens=40, inspect=True, **settings)
    return collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MT"), config))


def verdicts(page: str) -> list[str]:
    return re.findall(r"<td>(\u2713 kept|\u2717 rejected)</td>", page)


@pytest.mark.parametrize("settings", [{}, {"temperature": 1.0, "seed": 4}, {"tree_width": 2}],
                         ids=["greedy", "sampling", "trees"])
def test_every_block_steps_with_the_verdicts_the_answer_is_coloured_by(pair, image, settings):
    result = run(pair, image, **settings)
    for index, block in enumerate(result.blocks):
        page = step_html(pair.tokenizer, result.blocks, index)
        assert f"Block {index} of blocks 0–{len(result.blocks) - 1}" in page
        stream = TokenStream(pair.tokenizer)
        stream.block(block)  # the answer's colours of this block
        kept = stream.html.count("tk-accepted")
        shown = verdicts(page)
        assert shown.count("\u2713 kept") == block.accepted and kept == min(block.accepted, len(block.emitted))
        assert shown.count("\u2717 rejected") == (block.accepted < len(block.draft))
        discarded = max(0, len(block.draft) - block.accepted - 1)  # after the first rejection: listed, said once
        assert page.count("<td>\u2013 discarded</td>") == discarded
        assert page.count(html.escape(NEVER_TESTED)) == (discarded > 0)
        drafted = [html.unescape(w)[1:-1] for w in re.findall(r"<tr><td>\d+</td><td>(.*?)</td>", page)]
        assert drafted == [token_word(pair.tokenizer, t) for t in block.draft[:len(block.positions)]]
        if len(block.emitted) > block.accepted:
            assert ("+ bonus" if block.bonus else "\u21bb corrected") in page
            assert html.escape(f"'{token_word(pair.tokenizer, block.target_token)}'") in page


def test_the_stepper_clamps_its_block_and_says_what_it_cannot_show(pair, image):
    result = run(pair, image)
    last = len(result.blocks) - 1
    assert f"Block {last} of blocks 0–{last}" in step_html(pair.tokenizer, result.blocks, 99)
    assert f"Block 0 of blocks 0–{last}" in step_html(pair.tokenizer, result.blocks, -3)
    assert "Run a prompt" in step_html(pair.tokenizer, [], 0)
    plain = [replace(block, positions=[]) for block in result.blocks]
    assert "inspect was off" in step_html(pair.tokenizer, plain, 1)


def test_the_block_asked_for_is_a_whole_number_of_the_answers_blocks():
    """The number box's value: emptied (None) shows block 0 and says nothing; what is no whole number (a bool, a
    word, a fraction, infinity, NaN) shows block 0 and says so; one outside the answer's blocks shows the
    nearest, and says which; with no blocks, block 0 and nothing said."""
    assert chosen_block(None, 5) == (0, None)
    assert chosen_block(2, 5) == (2, None) and chosen_block(3.0, 5) == (3, None)
    for wrong in (True, "3", 2.5, math.inf, math.nan):
        assert chosen_block(wrong, 5) == (0, f"block must be a whole number, one of this answer's blocks; got "
                                             f"{wrong!r}")
    assert chosen_block(7, 0) == (0, None)
    assert chosen_block(7, 5) == (4, "block 7 is not one of this answer's blocks (0 to 4): showing block 4")
    assert chosen_block(-1.0, 5) == (0, "block -1 is not one of this answer's blocks (0 to 4): showing block 0")
    assert refused_html("block <7>") == '<p class="tabed-step-refused">\u26a0\ufe0f block &lt;7&gt;</p>'


class _Rows(HTMLParser):
    """The cells of each table row, a cell as wide as its colspan."""

    def __init__(self):
        super().__init__()
        self.rows: list[int] = []

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append(0)
        elif tag in ("td", "th"):
            self.rows[-1] += int(dict(attrs).get("colspan", 1))


@pytest.mark.parametrize("settings", [{"adaptive": False, "gamma": 6}, {"tree_width": 2}], ids=["chain", "tree"])
def test_every_row_of_the_steppers_table_is_as_wide_as_its_header(loose_pair, image, settings):
    """The verified positions, the discarded drafts after a rejection, the reasons under them and the target's
    own token: each row spans the header's columns (#, draft, a column per method, mix, target, verdict)."""
    blocks = run(loose_pair, image, **settings).blocks
    assert any(len(block.draft) > block.accepted + 1 for block in blocks)  # a block with discarded drafts
    for index, block in enumerate(blocks):
        rows = _Rows()
        rows.feed(step_html(loose_pair.tokenizer, blocks, index))
        methods = len(block.positions[0].methods) if block.positions else 0  # none drafted: no method's column
        assert rows.rows == [2 + methods + 3] * len(rows.rows)


def test_the_steppers_empty_page_and_the_first_blocks_reason_as_given(pair, image):
    blocks = run(pair, image).blocks
    assert step_html(pair.tokenizer, [], 0) == (
        '<div class="tabed-step">Run a prompt, then step through its blocks here.</div>')
    assert "Weights M 0.50 · T 0.50: a reason of the caller&#x27;s own." in step_html(
        pair.tokenizer, blocks, 0, unlearned="a reason of the caller's own")


def test_the_methods_a_weight_update_waits_for_are_named_together(pair, image):
    first = run(pair, image).blocks[0]
    update = WeightUpdate("kld", 10, [0.5, 0.5], divergence=[1.0, 2.0], waiting=3)
    waiting = replace(first, weight_update=update, resting=["M", "T"])
    assert "(3 more wait for M and T's row to catch up" in weights_why(waiting)
    assert "(3 more wait for a method's row to catch up" in weights_why(replace(waiting, resting=[]))


def test_a_mix_that_matched_more_than_any_method_alone_is_said_and_so_is_a_shared_row():
    block = hand_block([1, 2], 1, 3)
    grid = WeightUpdate("w-grid", 12, [0.5, 0.5], winner=1, most_matches=[1],
                        candidates=[Candidate([1.0, 0.0], 7.0, 0.4), Candidate([0.5, 0.5], 9.0, 0.3),
                                    Candidate([0.0, 1.0], 6.0, 0.5)])
    mixed = ("How this block's weights were chosen: over the 12 positions the target had verified, M's top-1 matched "
             "the target's 7 times, T's top-1 matched the target's 6 times (w-grid). Of the 3 weightings tried, 1 "
             "matched most often (9, more than any method alone: a mix's top-1 is that of the weighted sum of the "
             "methods' distributions, which can be right where each one's own top-1 is not), and won: M 0.50 · T "
             "0.50")
    assert weights_why(replace(block, weight_update=grid)) == mixed + "."
    assert weights_why(replace(block, weight_update=replace(grid, shared=["M", "T"]))) == mixed + (
        " (M and T read the same text (no picture): one row, its weight shared equally, since no split of it "
        "changes the mix).")


def test_closeness_equal_to_six_decimals_is_a_tie_and_a_method_alone_has_no_reason_to_weigh():
    """KLs that differ only in the seventh decimal are as close as the winner (the first in order won); a single
    method's weight needs no reason."""
    block = replace(hand_block([1, 2], 1, 3), weights={"M": 1.0, "T": 0.0})
    grid = WeightUpdate("w-grid", 12, [1.0, 0.0], winner=0, most_matches=[0, 1],
                        candidates=[Candidate([1.0, 0.0], 9.0, 0.1234561), Candidate([0.5, 0.5], 9.0, 0.1234564),
                                    Candidate([0.0, 1.0], 6.0, 0.5)])
    assert ("M alone 0.12, M and T equally 0.12. As close as the winner to six decimals, the first of them in the "
            "rule's order won: M 1.00 · T 0.00") in weights_why(replace(block, weight_update=grid))
    assert weights_why(replace(block, weights={"M": 1.0})) == "Weights M 1.00."


def test_what_a_block_changed_before_weights_chosen_by_another_rule():
    """A divergence rule has no w-grid figures to quote: the weights' move alone."""
    block = hand_block([1, 2], 1, 3)
    kld = WeightUpdate("kld", 12, [0.75, 0.25], divergence=[1.0, 3.0])
    after = replace(block, index=3, weights={"M": 0.75, "T": 0.25}, weight_update=kld)
    assert moved_why(block, after) == (
        "What this block changed: its 0 verified positions joined the history, which holds 12 positions now, and "
        "the next block's weights go from M 0.50 · T 0.50 to M 0.75 · T 0.25. Block 3 says how they were chosen.")


@pytest.mark.parametrize("update, said", [
    (WeightUpdate("kld", 12, [0.75, 0.25], divergence=[1.0, 3.0]),
     "each method's summed divergence from the target (kld): M 1.00, T 3.00; weights ∝ 1 / divergence: M 0.75 · "
     "T 0.25."),
    (WeightUpdate("tvd", 12, [0.75, 0.25], divergence=[0.5, 1.5]),
     "each method's summed divergence from the target (tvd): M 0.50, T 1.50; weights ∝ 1 / divergence: M 0.75 · "
     "T 0.25."),
    (WeightUpdate("hedge", 12, [0.6, 0.4], loss=[2.0, 3.0], rate=0.405),
     "each method's summed log-loss (hedge): M 2.00, T 3.00; weights ∝ exp(−0.405 × loss): M 0.60 · T 0.40.")],
    ids=["kld", "tvd", "hedge"])
def test_each_rules_weights_are_explained_by_its_own_figures(update, said):
    block = replace(hand_block([1, 2], 1, 3), weights=dict(zip("MT", update.weights, strict=True)),
                    weight_update=update)
    assert weights_why(block) == ("How this block's weights were chosen: over the 12 positions the target had "
                                  f"verified, {said}")


def test_a_block_with_no_room_to_draft_says_the_target_made_its_token_alone(tokenizer):
    """The token limit left no room for drafts: the pass gave the target's token alone, a bonus as the answer
    colours it, not a correction of a draft."""
    page = html.unescape(step_html(tokenizer, [hand_block([], 0, 5, stop="budget")], 0))
    assert f"+ bonus: nothing was drafted, so the target's own next token is {Words(tokenizer)(5)}" in page
    assert "every draft kept" not in page and "rejected" not in page


def test_without_a_picture_the_stepper_says_its_weights_are_the_charts_one_row(pair, image):
    """The chart draws methods drafted as one row as one line (M=T at 1.00); the stepper splits its weight
    equally and says both, in every block; with a picture each method has its own weight and nothing is said."""
    config = GenerationConfig(max_new_tokens=40, inspect=True)
    result = collect(speculative_generate(pair, [Turn("w1 w2 w3", [])], parse_spec("tabed-MT"), config))
    assert len(result.blocks) > 1 and result.shared == ["M", "T"]
    for index in range(len(result.blocks)):
        page = html.unescape(step_html(pair.tokenizer, result.blocks, index, shared=result.shared))
        assert ("Weights M 0.50 · T 0.50 (M and T read the same text (no picture): one row, the chart's line "
                "M=T 1.00, split equally here)") in page
    pictured = run(pair, image)
    assert pictured.shared == [] and "one row" not in step_html(pair.tokenizer, pictured.blocks, 1, shared=[])


def position(kind: str, kept: bool, **test) -> Position:
    return Position(7, {}, [[7, 0.6]], [[9, 0.81], [7, 0.07]], DraftTest(kind, kept, **test))


def test_a_trees_second_draw_is_said_to_meet_what_the_first_left(tokenizer):
    """Sampling down a tree, a draw after a rejected one is tested against the target's residual: its p there
    can be 0.00 for a token the target's own top-3 gives 0.30 (a trial found that unexplained)."""
    word = Words(tokenizer)
    tried = [Tried(1, 7, False, u=0.9, p=0.1, q=0.6), Tried(2, 9, False, u=0.17, p=0.0, q=0.3)]
    said = why(word, position("sampling", False, tried=tried, residual_token=3))
    assert said.startswith(f"{word(7)}: u = 0.90 ≥ p/q = 0.17 rejected; then, with {word(7)} rejected, against what "
                           f"is left of the target's distribution (max(p − q, 0) renormalised: its p here): {word(9)}: "
                           "u = 0.17 ≥ p/q = 0.00 rejected; the target's")


def test_each_verdict_says_why_in_one_line(tokenizer):
    word = Words(tokenizer)
    seven, nine = word(7), word(9)
    assert why(word, position("greedy", False, target_top1=9)) == (
        f"the target's top-1 is {nine} (0.81); the draft {seven} had 0.07 under the target: rejected")
    assert why(word, position("greedy", True, target_top1=9)).endswith("the draft is it, kept")
    unlisted = replace(position("greedy", False, target_top1=9), target=[[9, 0.81], [3, 0.1]])  # not in the top
    assert why(word, unlisted).endswith(f"the draft {seven} is not even among the target's top 2: rejected")
    tie = replace(position("greedy", False, target_top1=9), target=[[9, 0.5012], [7, 0.4988]])  # a near tie
    assert why(word, tie) == (f"the target's top-1 is {nine} (0.501); the draft {seven} had 0.499 under the target: "
                              "rejected")
    kept = why(word, position("sampling", True, u=0.42, p=0.07, q=0.1))
    assert kept == f"{seven}: u = 0.42 < p/q = 0.70 kept"
    rejected = why(word, position("sampling", False, u=0.9, p=0.07, q=0.6, residual_token=9))
    assert rejected == (f"{seven}: u = 0.90 ≥ p/q = 0.12 rejected; the target's {nine} is drawn from what is left "
                        "of its distribution, max(p − q, 0) renormalised")
    past = replace(position("greedy", False, target_top1=9), target=[[3, 0.2], [7, 0.1]])  # 9 tied with 3, unlisted
    assert why(word, past) == (f"the target's top-1 is {nine} (0.20); the draft {seven} had 0.10 under the target: "
                               "rejected")
    assert why(word, position("sampling", True, u=0.93, p=0.18, q=0.1)) == (
        f"{seven}: p/q = 1.80 ≥ 1, so kept whatever u (u = 0.93)")  # the target likes it more than the mix did
    close = why(word, position("sampling", True, u=0.4098, p=0.041, q=0.1))  # a draw a hair under p/q
    assert close == f"{seven}: u = 0.4098 < p/q = 0.4100 kept"
    hair = why(word, position("sampling", False, u=0.4102, p=0.041, q=0.1, residual_token=9))
    assert hair.startswith(f"{seven}: u = 0.4102 ≥ p/q = 0.4100 rejected")
    assert why(word, position("sampling", True, u=0.5, p=0.1, q=0.1)) == (  # p/q of exactly 1: whatever u
        f"{seven}: p/q = 1.00 ≥ 1, so kept whatever u (u = 0.50)")
    assert why(word, position("sampling", True, u=0.5, p=0.1, q=0.0)) == (  # a draw the mix gave no mass
        f"{seven}: p/q = inf ≥ 1, so kept whatever u (u = 0.50)")


def test_the_weights_are_explained_by_the_rules_own_figures(pair, image):
    result = run(pair, image)
    block = next(b for b in result.blocks if b.weight_update is not None)
    update = block.weight_update
    pure = {m: int(next(c.matches for c in update.candidates if c.weights[k] == 1.0))
            for k, m in enumerate(block.weights)}
    text = weights_why(block)
    for method, matches in pure.items():
        assert f"{method}'s top-1 matched the target's {counted(matches, 'time')}" in text
    assert f"over the {counted(update.positions, 'position')} the target" in text
    assert " · ".join(f"{m} {w:.2f}" for m, w in block.weights.items()) in text
    assert "every method weighs the same" in weights_why(result.blocks[0])
    index = result.blocks.index(block) - 1  # the block before: it moved the weights to this block's
    page = html.unescape(step_html(pair.tokenizer, result.blocks, index))
    moved = counted(len(result.blocks[index].positions), "verified position")
    assert f"What this block changed: its {moved} joined the history, which holds " in page
    before, after = (" · ".join(f"{m} {w:.2f}" for m, w in b.weights.items()) for b in (result.blocks[index], block))
    change = f"stay {after}" if before == after else f"go from {before} to {after}"
    assert f"and the next block's weights {change}. Block {index + 1} says how they were chosen." in page
    for rule, figure in (("kld", "summed divergence"), ("hedge", "summed log-loss")):
        other = run(pair, image, rule=rule)
        assert figure in weights_why(next(b for b in other.blocks if b.weight_update is not None))


def test_a_tie_on_matches_is_said_to_tell_nothing_and_the_kl_to_decide(pair, image):
    """A tie between different rows (every weighting matched the target as often) says nothing about which
    method is better: the stepper says so, and that the least KL chose."""
    block = next(b for b in run(pair, image).blocks if b.weight_update is not None)
    update = replace(block.weight_update)
    update.candidates = [replace(candidate, matches=2.0) for candidate in update.candidates]
    update.most_matches = list(range(len(update.candidates)))
    text = weights_why(replace(block, weight_update=update))
    assert (f"All {len(update.candidates)} weightings tried matched as often (2), a tie that says nothing about "
            "which method is better, so the rule went on to how close each weighting's probabilities for every token "
            "came to the target's") in text
    alone = {m: next(c.kl for c in update.candidates if c.weights[k] == 1.0) for k, m in enumerate("MT")}
    said = sorted([(kl, f"{m} alone {kl:.2f}") for m, kl in alone.items()]
                  + [(update.candidates[5].kl, f"M and T equally {update.candidates[5].kl:.2f}")])
    assert ", ".join(words for _, words in said) in text  # each method alone and the even mix, closest first
    assert f"The closest won: {' · '.join(f'{m} {w:.2f}' for m, w in block.weights.items())}" in text
    assert f"(and {len(update.candidates) - 3} more, none closer than the winner)" in text
    mixes = [k for k, c in enumerate(update.candidates) if max(c.weights) < 1.0 and k != 5][:3]
    few = replace(update, most_matches=mixes, winner=min(mixes, key=lambda k: update.candidates[k].kl))
    three = weights_why(replace(block, weight_update=few))  # few tied, none alone or even: each with its figure
    assert "3 matched most often" in three and "more, none closer" not in three
    assert all(f"{update.candidates[k].kl:.2f}" in three.split("The closest won")[0] for k in mixes), three
    update.most_matches = update.most_matches[:2]
    two = weights_why(replace(block, weight_update=update))
    assert "a tie" not in two and "2 matched most often (2); of those, by how close" in two
    update.most_matches = [update.winner]
    assert "1 matched most often (2), and won: " in weights_why(replace(block, weight_update=update))
    mix = next(k for k, c in enumerate(update.candidates) if max(c.weights) < 1.0)  # no method alone
    update.candidates = [replace(c, matches=3.0 if k == mix else 2.0) for k, c in enumerate(update.candidates)]
    update.most_matches, update.winner = [mix], mix
    beyond = weights_why(replace(block, weight_update=update))
    assert "matched most often (3, more than any method alone: a mix's top-1 is that of the weighted sum" in beyond
    assert "all of it to one method" not in beyond  # the mix won: weight to both
    update.winner = next(k for k, c in enumerate(update.candidates) if max(c.weights) == 1.0)
    assert "(all of it to one method: alone, its probabilities sat closer to the target's than any mix's did; a " \
           "method left at 0 rests" in weights_why(replace(block, weight_update=update))


def test_tied_closeness_is_printed_to_the_digits_that_tell_it_apart_and_an_equal_one_said(pair, image):
    """A trial saw "T alone 0.16, M and T equally 0.16, M alone 0.16. The closest won: T alone", which looks
    arbitrary: the figures get the decimals that tell them apart, and figures equal to six decimals are said
    to be equal, the first in the rule's order winning."""
    block = next(b for b in run(pair, image).blocks if b.weight_update is not None)
    update = replace(block.weight_update)
    even = next(k for k, c in enumerate(update.candidates) if max(c.weights) < 0.51)
    alone = [k for k, c in enumerate(update.candidates) if max(c.weights) == 1.0]
    tied = [*alone, even]
    kls = dict(zip(tied, (0.1612, 0.1601, 0.1604), strict=True))
    update.candidates = [replace(c, matches=2.0 if k in tied else 1.0, kl=kls.get(k, 1.0))
                            for k, c in enumerate(update.candidates)]
    update.most_matches, update.winner = tied, alone[1]
    text = weights_why(replace(block, weight_update=update))
    assert "0.1601, M and T equally 0.1604, " in text and "alone 0.1612" in text and "The closest won" in text
    update.candidates = [replace(c, kl=0.16 if k in tied else 1.0) for k, c in enumerate(update.candidates)]
    update.winner = min(tied)
    equal = weights_why(replace(block, weight_update=update))
    assert "As close as the winner to six decimals, the first of them in the rule's order won: " in equal, equal
    assert "The closest won" not in equal and "M and T equally 0.16" in equal


def test_the_stepper_says_what_a_block_drafted_and_why_it_stopped_in_words(pair, image):
    """A trial met "drafted 18 deep, 28 nodes, unsure: 0.198 < 0.200" before anything explained it: the stepper
    says it in words (the block table keeps the short form)."""
    block = replace(run(pair, image).blocks[1], draft=[5, 6, 7], tree=[])
    unsure = replace(block, stop=StopReason.UNSURE, survival=0.198, threshold=0.2)
    assert drafted(unsure) == ("3 tokens, then stopped: the chance that every draft so far would be kept fell to "
                               "0.198, under the 0.200 at which drafting stops")
    assert drafted(replace(block, stop=StopReason.CAP)) == "3 tokens, up to its cap"
    assert drafted(replace(block, stop=StopReason.FIXED)) == "3 tokens"
    nodes = [TreeNode(5, -1, "M", True, 0.5, 0.5), TreeNode(6, -1, "T", False, 0.4, 0.1),
             TreeNode(7, 0, "M", True, 0.5, 0.5)]
    assert drafted(replace(block, tree=nodes, stop=StopReason.NODES)) == (
        "a tree of 3 tokens, 2 deep (more than one guess at some positions: below, the branch the target followed; "
        "the trees chart draws every one), up to the tree's node budget")
    assert "drafted 3 tokens, up to its cap; the target kept" in step_html(
        pair.tokenizer, [replace(block, stop=StopReason.CAP)], 0)


def steps_as_coloured(tokenizer, result, plain: list[int]) -> int:
    """Step through every block of a result: its kept drafts are those coloured kept, and the kept drafts
    with the target's own tokens rebuild plain decoding's answer; returns how many blocks were stepped."""
    rebuilt = []
    for index, block in enumerate(result.blocks):
        kept = verdicts(step_html(tokenizer, result.blocks, index)).count("\u2713 kept")
        stream = TokenStream(tokenizer)
        stream.block(block)
        shown = min(kept, len(block.emitted))
        assert kept == block.accepted and stream.html.count("tk-accepted") == shown
        rebuilt += block.draft[:shown] + block.emitted[shown:]
    assert rebuilt == result.token_ids == plain
    return len(result.blocks)


@pytest.mark.slow
def test_every_block_of_every_app_example_and_follow_up_steps_as_the_answer_is_coloured(teaching_pair):
    """The page's settings on each example and its follow-up (the bundled pair, as the page runs them): every
    block can be stepped through, its kept drafts are the ones coloured kept, and the kept drafts with the
    target's own tokens are plain decoding's answer."""
    import json

    from tabed.engine.loop import autoregressive_generate
    from tabed.models.chat import load_image
    from tabed.page.controls import MODES, page_settings

    examples = Path(__file__).resolve().parents[2] / "assets" / "examples"
    settings = page_settings(["M", "T"], MODES[0])
    stepped = 0
    for row in json.loads((examples / "examples.json").read_text()):
        pictures = [load_image(examples / name) for name in row["images"]]
        first = collect(speculative_generate(teaching_pair, [Turn(row["prompt"], pictures)], settings.spec,
                                             settings.config))
        follow_up = [Turn(row["prompt"], pictures, first.text), Turn(row["follow_up"])]
        for turns, result in (([Turn(row["prompt"], pictures)], first),
                              (follow_up, collect(speculative_generate(teaching_pair, follow_up, settings.spec,
                                                                       settings.config)))):
            plain = collect(autoregressive_generate(teaching_pair, turns, settings.config)).token_ids
            stepped += steps_as_coloured(teaching_pair.tokenizer, result, plain)
    assert stepped > 50


def test_while_a_method_rests_the_stepper_says_its_blocks_positions_wait(pair, image, other_image, monkeypatch):
    """While a method rests, each block's verified positions wait for its row to catch up instead of joining
    the history, and the stepper's counts say so (the history's count holds, the waiting count grows by each
    block's positions) until the catch-up adds them all at once. Rows rest after one block at weight 0 here."""
    monkeypatch.setattr(resting, "REST_AFTER", 1)
    config = GenerationConfig(max_new_tokens=96, inspect=True)
    waited = 0
    for picture in (image, other_image):
        blocks = collect(speculative_generate(pair, [Turn("w1 w2 w3", [picture])], parse_spec("tabed-MT"),
                                              config)).blocks
        for block, after in pairwise(blocks):
            if block.weight_update is None or after.weight_update is None:
                continue
            held = [update.positions + update.waiting for update in (block.weight_update,
                                                                                   after.weight_update)]
            assert held[1] == held[0] + len(block.positions)  # every verified position is counted, in or waiting
            said = moved_why(block, after)
            if after.weight_update.waiting:
                waited += 1
                resting_now = " and ".join(after.resting)
                assert after.weights == block.weights and resting_now
                assert said.startswith("What this block changed: nothing yet.")
                assert (f"while {resting_now} rested, for its row to catch up: until then the history holds "
                        f"{counted(after.weight_update.positions, 'position')} and the next block's weights stay "
                        f"{' · '.join(f'{m} {w:.2f}' for m, w in after.weights.items())}.") in said
                assert (f"({after.weight_update.waiting} more wait for {resting_now}'s row to catch up"
                        in weights_why(after))
            else:
                assert said.startswith("What this block changed: its ")
    assert waited >= 2
