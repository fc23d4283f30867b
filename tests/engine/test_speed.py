"""The speed model: what a speedup is made of, on hand-made timings and on real runs of the tiny pair."""

from dataclasses import replace

import pytest

from conftest import hand_block
from tabed.engine.config import GenerationConfig
from tabed.engine.events import GenerationResult, Metrics, TokenEvent, TreeNode
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.engine.speed import FAR, Repeats, StepCosts, answer_speed, decode_speedup, run_costs, speed_model
from tabed.models.chat import Turn


def test_the_model_in_numbers_a_student_can_check():
    """41 tokens in 10 passes after the prompt's; plain decoding 40 steps in 4 s (0.1 s a step); our verifies
    took 1.5 s (1.5 steps a pass), drafting 0.5 s over 25 drafts of which 20 were kept, and 0.2 s went
    elsewhere: 4 tokens a pass / (1.5 + 0.5) = 2.00× predicted; 4 s / 2.2 s = 1.82× measured."""
    model = speed_model(40, 10, 25, 20, draft_s=0.5, verify_s=1.5, decode_s=2.2, plain_decode_s=4.0)
    assert model.tokens_per_pass == 4.0 and model.verify == pytest.approx(1.5)
    assert model.drafting == pytest.approx(0.5) and model.draft_token == pytest.approx(0.2)
    assert model.drafts_per_kept == 1.25 and model.other == pytest.approx(0.2)
    assert model.predicted == pytest.approx(2.0) and model.measured == pytest.approx(4 / 2.2)
    assert model.sentence() == ("4.00 tokens per target pass; its verify cost 1.50 plain steps and its drafting "
                                "0.50 more: expected 2.00×; the weights and bookkeeping took 0.20 more a pass: "
                                "measured 1.82×")
    assert model.why_off() is None  # 10% off: within 15%
    slow = speed_model(40, 10, 25, 20, draft_s=0.5, verify_s=1.5, decode_s=3.0, plain_decode_s=4.0)
    assert slow.error == pytest.approx(0.5) and slow.why_off().startswith("33% of the decode time went neither")
    assert speed_model(0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0) is None  # a one-token answer: nothing to time
    assert slow.why_off() == ("33% of the decode time went neither to drafting nor to verifying (the weights, "
                              "bookkeeping)")
    over = speed_model(40, 10, 25, 20, draft_s=0.5, verify_s=1.5, decode_s=1.5, plain_decode_s=4.0)
    assert over.other < 0 and over.why_off() == "the phases' timings add up to more than the decode time"


def test_the_model_of_the_shortest_answers_and_where_there_is_nothing_to_model():
    """One step, one pass, no draft kept or made: still a model; any side without time, none (never a division
    by zero)."""
    one = speed_model(1, 1, 0, 0, draft_s=0.1, verify_s=0.2, decode_s=0.4, plain_decode_s=0.5)
    assert one.tokens_per_pass == 1 and one.draft_token == 0.0 and one.drafts_per_kept == float("inf")
    assert one.measured == pytest.approx(1.25)
    good = dict(steps=4, passes=2, drafted=3, accepted=2, draft_s=0.1, verify_s=0.2, decode_s=0.4, plain_decode_s=0.5)
    for field, none in (("steps", 0), ("passes", 0), ("decode_s", 0.0), ("plain_decode_s", 0.0)):
        assert speed_model(**{**good, field: none}) is None, field
    assert speed_model(**{**good, "draft_s": 0.0, "verify_s": 0.0}) is None
    assert speed_model(**{**good, "draft_s": 0.0}) is not None and speed_model(**{**good, "verify_s": 0.0})


def test_a_two_token_answer_has_one_step_to_time():
    ours = _metrics(new_tokens=2, decode_s=0.1)
    assert decode_speedup(ours, _metrics(new_tokens=2, decode_s=0.2)) == pytest.approx(2.0)
    assert decode_speedup(replace(ours, new_tokens=1), _metrics()) is None
    assert decode_speedup(ours, _metrics(new_tokens=1)) is None
    assert decode_speedup(replace(ours, decode_s=0.0), _metrics()) is None  # no time to divide by


def test_on_a_real_run_the_parts_add_up_to_the_measured_speedup(pair, image):
    """measured = tokens per pass / (verify + drafting + other), whatever the timings: the model's parts are
    the whole decode time, each counted once."""
    turns, config = [Turn("w1 w2 w3", [image])], GenerationConfig(48)
    result = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
    ours = result.metrics
    plain = collect(autoregressive_generate(pair, turns, config)).metrics
    model = answer_speed(ours, plain)
    parts = model.verify + model.drafting + model.other
    assert model.measured == pytest.approx(model.tokens_per_pass / parts)
    assert model.tokens_per_pass == pytest.approx((ours.new_tokens - 1) / (ours.target_forwards - 1))
    assert ours.accepted == sum(b.accepted for b in result.blocks) > 0
    assert ours.drafted == sum(len(b.draft) for b in result.blocks) >= ours.accepted
    longer = replace(plain, new_tokens=2 * ours.new_tokens - 1, decode_s=2 * plain.decode_s)  # a sample, as fast
    assert answer_speed(ours, longer).measured == pytest.approx(model.measured)  # per step: twice the steps, time
    assert decode_speedup(ours, longer) == pytest.approx(plain.decode_s / ours.decode_s)
    assert decode_speedup(ours, replace(plain, new_tokens=1)) is None  # no decode step to time


def test_repeats_show_the_median_runs_figure_and_the_range_of_all():
    """Three runs' speedups in run order: the median is one run's own figure (the second here), the range
    spans all; of an even count, the lower middle run (a figure some run measured, never an average)."""
    three = Repeats((1.8, 1.5, 0.9))
    assert (three.median_run, three.median, three.low, three.high) == (1, 1.5, 0.9, 1.8)
    four = Repeats((1.2, 2.0, 1.1, 1.6))
    assert (four.median_run, four.median) == (0, 1.2)
    assert Repeats((1.3,)).median_run == 0 and Repeats((2.0, 1.0)).median_run == 1
    assert Repeats((1.0, 1.0, 1.0)).median_run == 1  # ties keep their run order


def test_repeats_leave_out_the_runs_a_busy_machine_starved():
    """Runs whose either side got too little CPU (`Metrics.busy`) measure the machine: left out, and the median
    run named by its place among all; when every run was starved, all count (the page then says unreliable)."""
    def sides(ours_s: float, busy: bool = False):
        ours = Metrics(new_tokens=11, prefill_s=0.1, decode_s=ours_s, walltime_s=1.0, tokens_per_s=1.0,
                       target_forwards=4, block_efficiency=2.0, busy=busy)
        return ours, replace(ours, decode_s=1.0, busy=False, target_forwards=11)

    spread = Repeats.of([sides(0.5, busy=True), sides(0.8), sides(0.4), sides(1.0)])
    assert spread.speedups == pytest.approx((1.25, 2.5, 1.0)) and spread.runs == (1, 2, 3)
    assert spread.median_run == 1 and spread.median == pytest.approx(1.25)
    everyone = Repeats.of([sides(0.5, busy=True), sides(0.25, busy=True)])
    assert everyone.runs == (0, 1) and everyone.median_run == 0
    assert Repeats.of([]) is None


def _metrics(**values) -> Metrics:
    return Metrics(**{"new_tokens": 11, "prefill_s": 0.1, "decode_s": 1.0, "walltime_s": 1.0, "tokens_per_s": 1.0,
                      "target_forwards": 4, "block_efficiency": 2.0, **values})


def test_a_runs_costs_are_held_against_the_same_forwards_on_the_quiet_machine():
    """Quiet: a step 10 ms, a check of 6 tokens 20 ms (2 ms a token more, on the line through them). Each kind at
    its median: plain decoding's steps after the prompt's pass 10, 14, 16 and 90 ms: 15 ms, 1.5× the quiet
    one (one stall, the page's streaming, moves no median). Our checks after the prompt's pass, a chain of 2 drafts
    (3 tokens, 14 ms quiet) at 21 ms and a tree of 4 nodes (5 tokens, 18 ms quiet) at 18 ms and 36 ms: 1.5×."""
    quiet = StepCosts(0.010, 0.020, 6)
    assert [quiet.forward_s(count) for count in (1, 4, 6, 11)] == pytest.approx([0.010, 0.016, 0.020, 0.030])
    node = TreeNode(token=5, parent=-1, proposer="M", accepted=False, draft_prob=0.5, target_prob=0.5)
    blocks = [replace(hand_block([1, 2, 3, 4, 5, 6, 7], 7, 8), verify_s=9.0),  # the prompt's pass: left out
              replace(hand_block([1, 2], 1, 3), verify_s=0.021),
              replace(hand_block([1], 1, 3, tree=[node] * 4), verify_s=0.018),
              replace(hand_block([1], 1, 3, tree=[node] * 4), verify_s=0.054)]
    ours = GenerationResult("speculative", "tabed-MT", [], "", _metrics(), blocks=blocks)
    plain = GenerationResult("autoregressive", None, [], "", _metrics(), tokens=[
        TokenEvent(index, 0, step_s, 0.0) for index, step_s in enumerate((9.0, 0.010, 0.014, 0.016, 0.090))])
    costs = run_costs(ours, plain, quiet)
    assert (costs.step_s, costs.steps, costs.checks) == pytest.approx((0.015, 1.5, 1.5))
    assert costs.slower == pytest.approx(1.5) and FAR == 1.5 and not costs.far  # at the line: still quiet
    slower_steps = replace(plain, tokens=[replace(token, step_s=0.0151) for token in plain.tokens])
    assert run_costs(ours, slower_steps, quiet).far and run_costs(ours, slower_steps, quiet).steps == 1.51
    slower_checks = replace(ours, blocks=blocks[:2] + [replace(blocks[2], verify_s=0.045), blocks[3]])
    assert run_costs(slower_checks, plain, quiet).slower == pytest.approx(2.5) == run_costs(slower_checks, plain,
                                                                                             quiet).checks
    assert run_costs(replace(ours, blocks=blocks[:1]), plain, quiet) is None  # no check after the prompt's pass
    assert run_costs(ours, replace(plain, tokens=plain.tokens[:1]), quiet) is None  # no plain step


def test_repeats_leave_out_the_runs_far_off_the_quiet_costs():
    ours = _metrics(decode_s=0.5)
    runs = [(ours, _metrics()), (replace(ours, decode_s=0.25), _metrics()), (replace(ours, decode_s=1.0), _metrics())]
    spread = Repeats.of(runs, disturbed=frozenset({1}))
    assert spread.runs == (0, 2) and spread.speedups == pytest.approx((2.0, 1.0)) and spread.median_run == 2
    assert Repeats.of(runs, disturbed=frozenset({0, 1, 2})).runs == (0, 1, 2)  # all disturbed: all count
