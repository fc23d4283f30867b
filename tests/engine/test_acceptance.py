"""How a run's drafts fared: the counts on hand-made blocks, and on the tiny pairs recomputed from plain
decoding's own answer (a greedy draft at a position is kept exactly when it and every draft before it are
the target's tokens there)."""

import pytest

from tabed.engine.acceptance import Acceptance
from tabed.engine.config import GenerationConfig
from tabed.engine.events import BlockEvent, StopReason
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.models.chat import Turn


def block(draft, accepted, emitted, drafts=None) -> BlockEvent:
    return BlockEvent(index=0, weights={}, draft=draft, drafts=drafts or {}, accepted=accepted, target_token=0,
                      bonus=False, emitted=emitted, draft_probs=[], target_probs=[], target_token_prob=0.0,
                      method_accepted={}, stop=StopReason.FIXED, threshold=None, survival=None, draft_s=0.0,
                      verify_s=0.0, weights_s=0.0, elapsed_s=0.0)


def test_the_counts_on_hand_made_blocks():
    blocks = [block([1, 2, 3], 3, [1, 2, 3, 4], {"M": [1, 2, 3], "T": [1, 5, 3]}),  # all kept, and a bonus
              block([1, 2, 3], 1, [1, 7], {"M": [1, 7, 9], "T": [6, 2, 3]}),  # kept 1; the target's 7 at 2
              block([4], 0, [8], {"M": [4]}),  # T rested
              block([], 0, [9])]  # nothing drafted (the last token allowed)
    summary = Acceptance.count(blocks).summary()
    assert summary["accepted_histogram"] == [2, 1, 0, 1]
    assert summary["acceptance_by_position"] == [{"rate": 2 / 3, "blocks": 3}, {"rate": 0.5, "blocks": 2},
                                                 {"rate": 0.5, "blocks": 2}]
    # M: position 1 right in blocks 1 and 2, wrong in block 3; position 2 right twice (7 is the target's)
    assert summary["method_match_by_position"]["M"] == [{"rate": 2 / 3, "blocks": 3}, {"rate": 1.0, "blocks": 2},
                                                        {"rate": 1.0, "blocks": 1}]
    assert summary["method_match_by_position"]["T"] == [{"rate": 0.5, "blocks": 2}, {"rate": 0.0, "blocks": 2},
                                                        {"rate": 1.0, "blocks": 1}]
    assert summary["mean_accepted"] == 1.0


def test_a_run_with_no_blocks_has_empty_counts():
    assert Acceptance.count([]).summary() == {"accepted_histogram": [], "acceptance_by_position": [],
                                              "method_match_by_position": {}, "mean_accepted": 0.0}


def leading(a: list[int], b: list[int]) -> int:
    count = 0
    while count < min(len(a), len(b)) and a[count] == b[count]:
        count += 1
    return count


@pytest.mark.parametrize("spec, settings", [("tabed-MT", {}), ("MT", {"gamma": 4, "adaptive": False}),
                                            ("tabed-MT", {"tree_width": 2})])
def test_each_positions_rate_is_recomputed_from_plain_decodings_answer(pair, image, spec, settings):
    config = GenerationConfig(max_new_tokens=40, **settings)
    turns = [Turn("w1 w2 w3", [image])]
    plain = collect(autoregressive_generate(pair, turns, config)).token_ids
    result = collect(speculative_generate(pair, turns, parse_spec(spec), config))
    assert result.token_ids == plain
    drafted, kept, matched, guessed, offset = {}, {}, {}, {}, 0
    for b in result.blocks:
        truth = plain[offset:]
        run = leading(b.draft, truth)  # the drafts the target kept: a prefix of its own answer
        for j in range(len(b.draft)):
            drafted[j] = drafted.get(j, 0) + 1
            kept[j] = kept.get(j, 0) + (j < run)
        for method, guesses in b.drafts.items():
            for j in range(min(run + 1, len(b.draft), len(truth))):  # the verified positions
                guessed[method, j] = guessed.get((method, j), 0) + 1
                matched[method, j] = matched.get((method, j), 0) + (guesses[j] == truth[j])
        offset += len(b.emitted)
    metrics = result.metrics
    assert sum(metrics.accepted_histogram) == len(result.blocks) and len(result.blocks) > 3
    assert metrics.mean_accepted == pytest.approx(sum(b.accepted for b in result.blocks) / len(result.blocks))
    assert metrics.acceptance_by_position == [{"rate": pytest.approx(kept[j] / drafted[j]), "blocks": drafted[j]}
                                              for j in sorted(drafted)]
    for method, rows in metrics.method_match_by_position.items():
        assert rows == [{"rate": pytest.approx(matched[method, j] / guessed[method, j]), "blocks": guessed[method, j]}
                        for j in range(len(rows))]
    assert set(metrics.method_match_by_position) == {"M", "T"}
    assert any(0 < row["rate"] < 1 for row in metrics.acceptance_by_position)  # kept and rejected drafts both
