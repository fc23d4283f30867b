"""Why, in words: the page's reasons are made from what the run measured, and say what a student can repeat."""

from dataclasses import replace

from conftest import word_tokenizer
from tabed.engine.events import BlockEvent, Candidate, DraftTest, Position, StopReason, WeightUpdate
from tabed.page.reasons import (
    NEVER_TESTED,
    alone_matches,
    draft_detail,
    fast_or_slow,
    guesses_matched,
    history_matches,
    m_against_t,
    unasked,
    where_they_differed,
    where_weights_sat,
    who_led,
)
from tabed.page.status import Exactness
from tabed.page.texts import TIMING, WEIGHTS_NOTE, notes_for
from tabed.page.words import Words


def block(draft: list[int], accepted: int, target: int, drafts: dict[str, list[int]]) -> BlockEvent:
    """A block whose drafting methods share the weight evenly; a method that rested (M or T without guesses) has
    none, as a run weighs every method in every block."""
    weights = {m: 1 / len(drafts) if m in drafts else 0.0 for m in dict.fromkeys(["M", "T", *drafts])}
    return BlockEvent(index=0, weights=weights, draft=draft, drafts=drafts,
                      accepted=accepted, target_token=target, bonus=accepted == len(draft),
                      emitted=draft[:accepted] + [target], draft_probs=[0.5] * len(draft),
                      target_probs=[0.5] * len(draft), target_token_prob=0.5, method_accepted={},
                      stop=StopReason.FIXED, threshold=None, survival=None, draft_s=0.0, verify_s=0.0,
                      weights_s=0.0, elapsed_s=0.0)


# T guesses the answer 1 2 3 4 5 6; M guesses 9s; the mix followed T and kept its drafts.
T_LED = [block([1, 2], 2, 3, {"M": [9, 9], "T": [1, 2]}), block([4, 5, 6], 1, 7, {"M": [9, 9, 9], "T": [4, 8, 8]})]


def test_each_methods_guesses_are_counted_at_the_positions_the_target_verified():
    """Block 1 verified positions 1-2 and the bonus is no draft; block 2 verified its first draft (kept) and
    its second (rejected: the target said 7); the third was never tested and counts for no one."""
    assert guesses_matched(T_LED) == {"M": (0, 4), "T": (3, 4)}


def test_the_leader_the_margin_and_why_the_other_missed():
    text = who_led(T_LED, shared=[], pictures=True, learned=True)
    assert "T's at 3 of 4 positions, M's at 0 of 4 positions" in text
    assert "T led: its guesses matched at 75% of the positions it guessed at, M's at 0%, and the weights " \
           "followed it." in text
    assert ("Where both M and T guessed (4 positions): both were right at 0 (the words so far gave the next token "
            "away, no picture needed); only M at 0 (there the picture told M what T cannot know); only T at 3 (there "
            "M's reading of the picture led it astray); neither at 1") in text
    static = who_led(T_LED, shared=[], pictures=True, learned=False)
    assert "M's at 0%." in static and "weights followed" not in static
    assert "astray" not in who_led(T_LED, shared=[], pictures=False, learned=True)  # no picture, no such cause


def test_where_neither_led_each_kind_of_position_says_its_cause():
    """M right where T was not (the picture told it), T where M was not, both, neither: counted at the verified
    positions both guessed at, a resting T's blocks left out; the never-tested third draft counts for no one."""
    blocks = [block([1, 2, 3], 1, 4, {"M": [1, 4, 3], "T": [1, 5, 3]}),   # both right; only M right
              block([6, 7], 2, 8, {"M": [6, 9], "T": [5, 7]}),            # only M; only T (the bonus no position)
              block([2, 3], 0, 5, {"M": [2, 3]})]                          # T rested: M alone guessed
    assert m_against_t(blocks) == {"both": [(0, 1, 1)], "M": [(1, 4, 5), (2, 6, 5)], "T": [(3, 9, 7)],
                                   "neither": []}  # (index in the answer, M's guess, T's guess)
    text = who_led(blocks, shared=[], pictures=True, learned=True)
    assert "Neither method led by much, so the matches did not choose the weights: the rule's tie-break did (with " \
           "w-grid: of the weightings whose top-1 matched the target's most often" in text and " led:" not in text
    assert "came closest to the target's wins): on average M 0.67 · T 0.33; its figures are in the stepper" in text
    assert "Neither method led by much." in who_led(blocks, shared=[], pictures=True, learned=False)
    assert "Where both M and T guessed (4 positions): both were right at 1" in text
    assert "only M at 2 (there the picture told M what T cannot know)" in text
    assert "Where both" not in who_led(blocks, shared=[], pictures=False, learned=True)  # no picture, no such cause


def test_a_tie_that_gave_one_method_all_of_the_weight_says_so():
    """The trial's contradiction: "neither led by much" beside a chart at M 1.00 all along. The sentence says
    where the tie-break put the weights, in the chart's terms."""
    tied = [replace(b, weights={"M": 1.0, "T": 0.0}) for b in
            [block([1, 2], 1, 3, {"M": [1, 4], "T": [1, 5]}), block([6, 7], 1, 8, {"M": [6, 4], "T": [6, 5]})]]
    tied.append(block([2, 3], 1, 5, {"M": [2, 4], "T": [2, 6]}))  # equal weights in the last block
    text = who_led(tied, shared=[], pictures=True, learned=True)
    assert "the rule's tie-break did" in text and ": it gave M all of the weight in 2 of 3 blocks, where T had none; " \
           "its figures are in the stepper." in text
    assert "all of the weight" not in who_led(tied, shared=[], pictures=True, learned=False)  # nothing learned


def test_where_they_differed_is_quoted_in_the_answers_own_words():
    """A student reads which words only M got (the picture told it), which M misread and which neither knew: each
    quoted where it stands in the answer, the target's token in bold, the wrong guesses beside it."""
    tokenizer = word_tokenizer(["The", "circle", "is", "purple", "red", "blue", "in", "Brno", "Paris", "<i>"])
    the, circle, is_, purple, red, blue, in_, brno, paris, star = tokenizer.convert_tokens_to_ids(
        ["The", "circle", "is", "purple", "red", "blue", "in", "Brno", "Paris", "<i>"])
    blocks = [block([the, circle, is_], 3, purple, {"M": [the, circle, is_], "T": [the, circle, is_]}),
              block([in_, paris], 1, brno, {"M": [in_, paris], "T": [red, paris]}),  # only M; neither
              block([star], 1, blue, {"M": [red], "T": [star]})]  # only T, at a token that is markup
    text = who_led(blocks, shared=[], pictures=True, learned=True, word=Words(tokenizer, markup=True))
    assert "both were right at 3 (the words so far gave the next token away, no picture needed: “<b>The</b>”, " \
           "“The <b>circle</b>”, and 1 more)" in text  # ... Brno * blue
    assert "only M at 1 (there the picture told M what T cannot know: “The circle is purple <b>in</b>” (T guessed " \
           "'red'))" in text
    assert "only T at 1 (there M's reading of the picture led it astray: “…is purple in Brno <b>&lt;i&gt;</b>” (M " \
           "guessed 'red'))" in text  # markup shown as written
    assert "neither at 1 (the target's own wording, or what the drafter was never taught: “…circle is purple in " \
           "<b>Brno</b>” (M guessed 'Paris', T 'Paris'))" in text
    assert "“" not in who_led(blocks, shared=[], pictures=True, learned=True)  # no tokenizer, no quotes


def test_a_quoted_token_shows_the_rest_of_its_word():
    tokenizer = word_tokenizer(["shapes", "again", "##st", "a", "wall"])
    answer = tokenizer.convert_tokens_to_ids(["shapes", "again", "##st", "a", "wall", "</s>"])
    word = Words(tokenizer)
    assert word.at(answer, 1) == "“shapes <b>again</b>st”"
    assert word.at(answer, 2) == "“shapes again<b>st</b>”"
    assert word.at(answer, 5) == "“…<b>⏎</b>”"  # the end of the answer, as the tables draw it
    comma = word_tokenizer(["Additionally", "##,"])  # bold that Markdown's ** would not make ("Additionally**,**")
    assert Words(comma).at(comma.convert_tokens_to_ids(["Additionally", "##,"]), 1) == "“Additionally<b>,</b>”"


def test_a_quoted_token_after_a_space_of_its_own_keeps_the_space():
    """A tokenizer that makes the space before a digit a token of its own ("is", " ", "3", as the teaching
    pair's does) decodes the words before the digit ending in that space: the quote keeps it ("is 3")."""
    pieces = ["bar", " A", " is", " ", "3", "<b>"]

    class Spaced:
        def decode(self, ids, skip_special_tokens=True):
            return "".join(pieces[i] for i in ids)

    assert Words(Spaced()).at([0, 1, 2, 3, 4], 4) == "“bar A is <b>3</b>”"
    assert Words(Spaced()).at([0, 1, 5], 2) == "“bar A<b>&lt;b&gt;</b>”"  # a token that is markup reads as written


def test_a_method_that_rested_is_not_compared_on_a_few_positions():
    """T guessed at 2 positions (it rested after), M at 12: T is said too few to compare, not said to lead or
    trail, and the positions M and T both guessed at are not broken down on two."""
    blocks = [block([1, 2], 2, 3, {"M": [1, 2], "T": [1, 9]})] + [block([4, 5], 2, 6, {"M": [4, 5]})] * 5
    text = who_led(blocks, shared=[], pictures=True, learned=True)
    assert "M's at 12 of 12 positions, T's at 1 of 2 positions (it rested in the other blocks)" in text
    assert "T drafted at too few positions to compare" in text
    assert " led" not in text and "Where both" not in text
    grid = WeightUpdate("w-grid", 14, [1.0, 0.0], winner=0, most_matches=[0],
                        candidates=[Candidate([1.0, 0.0], 13.0, 0.1), Candidate([0.5, 0.5], 12.0, 0.2),
                                    Candidate([0.0, 1.0], 5.0, 0.9)])
    learned = blocks[:-1] + [replace(blocks[-1], weights={"M": 1.0, "T": 0.0}, weight_update=grid)]
    text = who_led(learned, shared=[], pictures=True, learned=True)  # the history, where T's row caught up
    assert ("Over the weights' history instead (14 positions: those verified until a resting row last caught up, "
            "its top-1 then filled in, as the stepper counts): M's top-1 matched at 13, T's top-1 matched at "
            "5.") in text
    assert "M led: its guesses matched at 93% of the positions it guessed at, T's at 36%" in text


def test_a_drafts_detail_says_its_place_who_proposed_it_and_its_verdict():
    """Draft j of a block: its place (counted from 1), the methods whose own guess it was (a method whose guesses
    stop short proposed none there; none: the mix's own), kept or rejected with the probabilities, the test it
    met where inspected, and never tested after a rejection."""
    tokenizer = word_tokenizer(["a", "b", "c", "d"])
    a, b, c, d = tokenizer.convert_tokens_to_ids(["a", "b", "c", "d"])
    word = Words(tokenizer)
    drafted = replace(block([a, b, c], 1, d, {"M": [a, c, c], "T": [a], "C": [b, b, c]}), index=4,
                      draft_probs=[0.9, 0.6, 0.3], target_probs=[0.8, 0.1, 0.2])
    assert draft_detail(word, drafted, 0) == (
        "block 4 · draft 1 of 3 · proposed by M, T · kept · drafters' mix p=0.90 · target p=0.80")
    assert draft_detail(word, drafted, 1) == (
        "block 4 · draft 2 of 3 · proposed by C · rejected · drafters' mix p=0.60 · target p=0.10")
    assert draft_detail(word, drafted, 2) == f"block 4 · draft 3 of 3 · proposed by M, C · {NEVER_TESTED}"
    assert "proposed by the mix only" in draft_detail(word, replace(drafted, drafts={"M": [b]}), 0)
    inspected = replace(drafted, positions=[Position(a, {}, [[a, 0.8]], [[a, 0.8], [d, 0.1]],
                                                     DraftTest("greedy", True, target_top1=a))])
    assert draft_detail(word, inspected, 0) == (
        f"block 4 · draft 1 of 3 · proposed by M, T · kept: the target's top-1 is {word(a)} (0.80): the draft is "
        f"it, kept · the target's top-3: {word.top([[a, 0.8], [d, 0.1]])} · this draft: target p=0.80, drafters' "
        "mix q=0.90")


def test_a_block_cut_before_its_target_token_verified_only_its_kept_drafts():
    """The answer ended before the target's token (max new tokens): its kept drafts are the positions verified,
    none when none was kept."""
    cut = replace(block([1, 2], 1, 3, {"M": [1, 2]}), target_token=None)
    assert guesses_matched([cut]) == {"M": (1, 1)}
    assert guesses_matched([replace(cut, accepted=0)]) == {"M": (0, 0)}


def test_a_method_is_compared_from_a_quarter_of_the_most_positions_under_five():
    """Under five positions, a method is compared when it guessed at a quarter of the most or more: 3 of 12 is,
    2 of 10 is not (a fifth)."""
    both, m_alone = block([1, 2], 2, 3, {"M": [1, 2], "T": [1, 9]}), block([4, 5], 2, 6, {"M": [4, 5]})
    quarter = [both, block([7], 1, 8, {"M": [7], "T": [7]})] + [m_alone] * 4 + [block([4], 1, 6, {"M": [4]})]
    text = who_led(quarter, shared=[], pictures=False, learned=False)
    assert "M's at 12 of 12 positions, T's at 2 of 3 positions" in text
    assert "too few" not in text and "M led" in text
    fifth = who_led([both] + [m_alone] * 4, shared=[], pictures=False, learned=False)
    assert "M's at 10 of 10 positions" in fifth and "T drafted at too few positions to compare" in fifth


def test_methods_that_rested_are_named_together_and_none_of_three_leading_is_said():
    """Three methods: two that rested are named together; where none led, "no method" (not "neither")."""
    rested = [block([1, 2], 2, 3, {"M": [1, 2], "T": [1, 9], "C": [9, 2]})] + [block([4, 5], 2, 6, {"M": [4, 5]})] * 5
    assert "T and C drafted at too few positions to compare" in who_led(rested, [], False, False)
    even = [block([1, 2], 1, 3, {"M": [1, 9], "T": [1, 8], "C": [1, 7]})]
    assert who_led(even, [], False, False).endswith(" No method led by much.")


def test_a_lead_of_exactly_the_margin_leads_and_a_sole_method_is_compared_with_none():
    """M at 1 of 10, T at 0 of 10: ahead by exactly `LEAD` (0.1) is a lead. A method alone compares with no one:
    the text stops after its agreement."""
    behind = [block([1, 2], 2, 3, {"M": [8, 9], "T": [7, 9]})] * 4
    text = who_led(behind + [block([1, 2], 2, 3, {"M": [1, 9], "T": [7, 9]})], shared=[], pictures=False,
                   learned=False)
    assert "M led: its guesses matched at 10% of the positions it guessed at, T's at 0%." in text
    alone = who_led([block([1, 2], 2, 3, {"M": [1, 2]})], shared=[], pictures=True, learned=True)
    assert alone == "The target agreed with the drafts' own guesses: M's at 2 of 2 positions."


def test_every_method_missed_is_not_said_at_half():
    half = [block([1, 2], 1, 3, {"M": [1, 2], "T": [1, 2]})]  # each right at 1 of 2
    assert "Every method missed" not in who_led(half, shared=[], pictures=True, learned=True)


def test_where_they_differed_without_m_or_t_and_the_quotes_of_exactly_two():
    """A block without M's guesses (it rested) gives no position for M against T, and nothing is said where
    there is none; a kind with exactly two positions quotes both and says no more."""
    tokenizer = word_tokenizer(["a", "b", "c", "d"])
    a, b, c, d = tokenizer.convert_tokens_to_ids(["a", "b", "c", "d"])
    no_m = [block([a, b], 2, c, {"T": [a, b]})]
    assert m_against_t(no_m) == {"both": [], "M": [], "T": [], "neither": []}
    assert where_they_differed(no_m) == ""
    two = [block([a, b], 2, c, {"M": [a, b], "T": [a, b]})]
    said = where_they_differed(two, Words(tokenizer))
    assert "both were right at 2 (the words so far gave the next token away, no picture needed: “<b>a</b>”, " \
           "“a <b>b</b>”)" in said and "more" not in said


def test_the_history_figures_are_the_last_w_grid_choice_of_rows_of_their_own():
    """The last block that chose its weights by w-grid gives the figures, past later blocks without an update
    or by another rule; a choice for methods drafted as one row (no picture) tells them no apart."""
    grid = WeightUpdate("w-grid", 14, [1.0, 0.0], winner=0, most_matches=[0],
                        candidates=[Candidate([1.0, 0.0], 13.0, 0.1), Candidate([0.0, 1.0], 5.0, 0.9)])
    plain = block([1, 2], 2, 3, {"M": [1, 2], "T": [1, 9]})
    chosen = replace(plain, weight_update=grid)
    kld = replace(plain, weight_update=WeightUpdate("kld", 16, [0.5, 0.5], divergence=[1.0, 1.0]))
    assert history_matches([chosen, plain, kld]) == (14, {"M": 13.0, "T": 5.0})
    assert history_matches([replace(plain, weight_update=replace(grid, shared=["M", "T"]))]) is None
    no_t_alone = replace(grid, candidates=grid.candidates[:1] + [Candidate([0.5, 0.5], 9.0, 0.3)])
    assert alone_matches(no_t_alone, ["M", "T"]) is None  # no weighting all on T: nothing to say of T alone
    assert history_matches([replace(plain, weight_update=no_t_alone)]) is None


def test_where_the_weights_sat_needs_two_methods():
    assert where_weights_sat([]) == ""
    assert where_weights_sat([replace(block([1], 1, 2, {"M": [1]}), weights={"M": 1.0})]) == ""  # M alone
    assert where_weights_sat([block([1], 1, 2, {"M": [1], "T": [1]})]) == ": on average M 0.50 · T 0.50"

    def weighed(*weights: dict[str, float]) -> list[BlockEvent]:
        return [replace(block([1], 1, 2, {m: [1] for m in w}), weights=w) for w in weights]

    whole, even = {"M": 0.999, "T": 0.001, "C": 0.0}, {"M": 0.5, "T": 0.25, "C": 0.25}  # 0.999: all, to rounding
    assert where_weights_sat(weighed(whole, whole, even)) == (
        ": it gave M all of the weight in 2 of 3 blocks, where T and C had none")
    assert where_weights_sat(weighed(whole, whole, even, even)).startswith(": on average M 0.75")  # half: not most
    assert where_weights_sat(weighed(whole, whole, even, even, even)).startswith(": on average M 0.70")


def test_the_questions_words_the_answer_lacks():
    """Beside the commonest words and those of two letters, plurals as one word, any case: [] when the answer
    holds one of the question's words or the question has none, else the question's words, sorted."""
    assert unasked("What colour are the Shapes?", "a red shape") == []
    assert unasked("What colour are the shapes?", "It is red.") == ["colour", "shape"]
    assert unasked("Is it ok?", "no") == []  # "ok" is too short, "is" and "it" too common
    assert unasked("Describe the picture in detail, please.", "A cat.") == []
    assert unasked("Zebras' stripes?", "STRIPE") == [] and unasked("Why?", "") == []
    assert unasked("How many cats sat there", "dogs") == ["cat", "sat"]


def test_a_made_up_fact_every_method_misses_and_only_the_target_knows():
    missed = [block([1, 2], 0, 3, {"M": [1, 2], "T": [1, 2]}), block([4], 0, 5, {"M": [4], "T": [4]})]
    text = who_led(missed, shared=[], pictures=True, learned=True)
    assert "M's at 0 of 2 positions" in text and "the drafter does not know" in text and " led:" not in text


def test_every_method_missed_is_said_only_where_every_method_missed():
    """M missed everywhere and T matched at 3 of 4: one method missed, not every one."""
    assert "Every method missed" not in who_led(T_LED, shared=[], pictures=True, learned=True)
    missed = [block([1, 2], 0, 3, {"M": [8, 2], "T": [7, 2]}), block([4], 0, 5, {"M": [4], "T": [4]})]
    assert "Every method missed at most positions" in who_led(missed, shared=[], pictures=True, learned=True)


def test_without_a_picture_the_rows_are_one_and_nothing_tells_them_apart():
    one = [block([1, 2], 2, 3, {"M": [1, 2], "T": [1, 2]})]
    assert "M and T read the same text (no picture): one row" in who_led(one, ["M", "T"], False, True)


def test_fast_or_slow_in_one_sentence():
    assert fast_or_slow(3.2, 2.1, 1.52).startswith("Fast because each target pass produced 3.20 tokens")
    assert fast_or_slow(1.1, 1.6, 0.69).startswith("Slower than plain decoding: each target pass produced only 1.1")
    # slow though the tokens a pass paid for its verify and drafting: the rest of the pass is to blame, not the drafts
    assert fast_or_slow(2.79, 3.3, 0.85, checking=2.2) == (
        "Slower than plain decoding, though each target pass produced 2.79 tokens where its verify and drafting cost "
        "2.20 plain steps: the rest of a pass (1.10 more) made it slow, not the drafts.")
    assert "the drafts missed too often" in fast_or_slow(1.1, 1.6, 0.69, checking=1.5)
    assert "the drafts missed too often" in fast_or_slow(2.2, 3.3, 0.67, checking=2.2)  # at the line: the drafts
    assert fast_or_slow(1.9, 1.85, 1.03) == (  # neither fast nor slow (a trial saw "Fast because" at 1.03×)
        "About as fast as plain decoding (1.03×): each target pass produced 1.90 tokens where a plain step makes one, "
        "but a whole pass (verify, drafting and the rest) cost 1.85 plain steps: nearly all that it gained.")
    assert fast_or_slow(2.6, 2.0, 0.95).endswith("cost 2.00 plain steps; these predict 1.30×, the clock gave 0.95×.")
    assert fast_or_slow(3.2, 2.1, 1.1).startswith("Fast because")
    assert "under one plain step" not in fast_or_slow(3.2, 2.1, 1.52, verify=1.1)
    assert "A verify came out under one plain step (0.83): checking a few tokens costs the target about what " \
           "making one does" in fast_or_slow(3.2, 2.1, 1.52, verify=0.83)
    assert "A verify cost 1.84 plain steps, not one: the target reads every draft of a block in its pass (6.5 on " \
           "average here)" in fast_or_slow(3.2, 2.6, 1.31, verify=1.84, checked=6.5)
    assert "A verify cost" not in fast_or_slow(3.2, 2.1, 1.52, verify=1.1, checked=6.5)


def test_fast_or_slow_at_its_edges():
    """0.90× is slower, not about even; a pass that cost under one step predicts more than its tokens, and one
    that cost nothing (none measured) predicts nothing rather than failing; a verify shown as 1.00 is not under
    one step, and one of exactly `VERIFY_DEAR` (1.25) steps is worth its word."""
    assert fast_or_slow(1.0, 1.2, 0.9).startswith("Slower than plain decoding: each target pass produced only 1.00")
    assert fast_or_slow(1.0, 0.8, 1.0).endswith("cost 0.80 plain steps; these predict 1.25×, the clock gave 1.00×.")
    assert fast_or_slow(1.0, 0.0, 1.0).endswith("cost 0.00 plain steps; these predict 0.00×, the clock gave 1.00×.")
    assert "under one plain step" not in fast_or_slow(3.2, 2.1, 1.52, verify=0.996)
    assert "A verify cost 1.25 plain steps, not one" in fast_or_slow(3.2, 2.1, 1.52, verify=1.25, checked=3.0)


def test_a_method_alone_that_beat_the_ensemble_is_said_and_why():
    from tabed.page.status import alone_reason

    reason = alone_reason("TABED", 1.82, {"M": 0.9, "T": 4.04})
    assert reason.line == "T 4.04×, M 0.90×, against TABED's 1.82×."
    assert reason.detail.startswith("Each method alone (the last rows of the metrics): T 4.04×, M 0.90× plain decoding")
    assert "T alone beat TABED: it drafts one row" in reason.detail
    assert "beat" not in alone_reason("TABED", 2.0, {"M": 1.5, "T": 1.9}).detail


def test_a_question_not_an_examples_is_said_as_the_question():
    """A bundled example's lesson is "The example"; a question of one's own or a later turn is none of the
    examples, so its line is "The question" (once "The example: this is a question of your own.")."""
    from tabed.page.examples import LATER_TURN, OWN_QUESTION
    from tabed.page.status import example_reason

    shown = example_reason("This example was built to show arithmetic worked step by step, a sum at a time.")
    assert (shown.key, shown.line) == ("The example", "arithmetic worked step by step.")
    own, later = example_reason(OWN_QUESTION), example_reason(LATER_TURN)
    assert (own.key, own.line) == ("The question", "this is a question of your own.")
    assert (later.key, later.line) == ("The question", "this is a later turn.")


def test_the_notes_are_worded_for_what_decoded():
    """A single method is no ensemble, a static ensemble learns nothing, and each runs first under its name."""
    timing, weights = notes_for("single", "M alone")
    assert "M alone runs first" in timing and "TABED" not in timing and "no ensemble" in weights
    assert "They do not" in notes_for("static", "static ensemble MT")[1]
    assert "Static ensemble MT runs first" in notes_for("static", "static ensemble MT")[0]  # a sentence's capital
    assert notes_for("tabed", "TABED") == (TIMING, WEIGHTS_NOTE)


def test_a_fact_said_in_several_places_is_worded_in_one(monkeypatch, pair):
    """Methods drafted as one row (no picture) are said in the status's line and detail, the stepper's weights,
    its weight update and why the first block weighs as it does: rewording the one helper rewords them all."""
    from tabed.engine.config import GenerationConfig
    from tabed.engine.loop import collect, speculative_generate
    from tabed.engine.spec import parse_spec
    from tabed.models.chat import Turn
    from tabed.page import reasons, status, stepper, view, words
    from tabed.page.controls import MODES, page_settings
    from tabed.page.render import TokenStream

    result = collect(speculative_generate(pair, [Turn("w1 w2 w3", [])], parse_spec("tabed-MT"),
                                          GenerationConfig(max_new_tokens=24, inspect=True)))
    assert all(module.one_row is words.one_row for module in (reasons, status, stepper, view))  # one helper
    reworded = lambda shared: f"ONE ROW OF {'+'.join(shared)}"  # noqa: E731
    for module in (words, reasons, status, stepper, view):
        monkeypatch.setattr(module, "one_row", reworded, raising=False)
    said = [reasons.who_led(result.blocks, result.shared, False, True), status.led_reason(result.blocks,
            result.shared, "").line, stepper.step_html(pair.tokenizer, result.blocks, 1, shared=result.shared),
            view.RunView(pair, page_settings(["M", "T"], MODES[0]), TokenStream(pair.tokenizer),
                         TokenStream(pair.tokenizer), shared=result.shared).unlearned()]
    assert all("ONE ROW OF M+T" in text and "read the same text" not in text for text in said), said


def test_a_slow_answer_whose_drafts_paid_for_their_checks_blames_the_rest_of_the_pass():
    """2.79 tokens a pass, its verify 1.6 and drafting 0.6 plain steps, 1.1 more elsewhere: 0.85×. The reason
    says the rest of the pass made it slow; the drafts are blamed only where they did not pay for their checks."""
    from tabed.engine.speed import SpeedModel
    from tabed.page.status import speed_reason

    speed = SpeedModel(tokens_per_pass=2.79, verify=1.6, drafting=0.6, draft_token=0.2, drafts_per_kept=1.2,
                       other=1.1, measured=0.85)
    detail = speed_reason(speed, "the weights and bookkeeping", 3.0).detail
    assert "the rest of a pass (1.10 more) made it slow, not the drafts" in detail and "missed" not in detail
    missed = speed_reason(replace(speed, tokens_per_pass=2.1, measured=0.64), "bookkeeping", 3.0).detail
    assert "the drafts missed too often to pay for themselves" in missed


def test_the_verdict_says_identical_only_for_a_greedy_answer_equal_to_plain_decodings():
    """A greedy answer equal to plain decoding's is "identical" with its counts; one that differs says where,
    and a sample is a sample of the same distribution even when it drew plain decoding's very tokens."""
    said = {(sampled, same): Exactness(12, 12, sampled, same, first=0 if same else 5).verdict()
            for sampled in (False, True) for same in (False, True)}
    assert said[False, True] == "identical, 12 of 12 tokens"
    assert said[False, False] == "differs from plain decoding from token 5 on"
    assert said[True, True] == "a sample of the same distribution as plain decoding's, here the same sample"
    assert said[True, False] == "a sample of the same distribution as plain decoding's"
