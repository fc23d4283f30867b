"""What speculative decoding reports: events, weights, metrics, notes, stopping."""

import itertools
import threading
import time

import pytest
import torch

from conftest import SIZE, conversations, ending_on_a_draft, make_pair
from tabed.engine.config import GenerationConfig
from tabed.engine.drafter import BatchedDrafter
from tabed.engine.drafts import DraftChain
from tabed.engine.ensemble import WeightHistory
from tabed.engine.events import BlockEvent, Finished, Started, StopReason, TokenEvent
from tabed.engine.loop import autoregressive_generate, collect, compare, speculative_generate
from tabed.engine.session import Clock, TargetSession
from tabed.engine.spec import parse_spec
from tabed.errors import InputError
from tabed.models.chat import Turn, encode
from tabed.models.factory import LlavaSize, llava_processor, random_llava

CPU = torch.device("cpu")


def test_event_stream_and_metrics(pair, image):
    config = GenerationConfig(max_new_tokens=20, gamma=4)
    events = list(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MTCP"), config))
    assert isinstance(events[0], Started) and events[0].methods == ["M", "T", "C", "P"]
    assert len(events[0].captions) == 1  # the drafter captioned the image for C
    assert isinstance(events[-1], Finished)
    assert not any(isinstance(e, TokenEvent) for e in events)  # the first block rides on the prompt's pass
    blocks = [e for e in events if isinstance(e, BlockEvent)]
    result = events[-1].result
    assert result.blocks == blocks and len(result.token_ids) == 20
    assert [t for b in blocks for t in b.emitted] == result.token_ids
    for block in blocks:
        assert sum(block.weights.values()) == pytest.approx(1.0)
        assert set(block.drafts) | set(block.resting) == {"M", "T", "C", "P"}  # a resting method guesses nothing
        assert not set(block.drafts) & set(block.resting) and all(block.weights[m] == 0 for m in block.resting)
        assert all(len(guesses) == len(block.draft) for guesses in block.drafts.values())
        assert 0 <= block.accepted <= len(block.draft)
        assert block.bonus == (block.accepted == len(block.draft) and len(block.emitted) > block.accepted)
        assert all(0 <= v <= block.accepted + 1 for v in block.method_accepted.values())
        assert len(block.draft_probs) == len(block.target_probs) == len(block.draft)
    m = result.metrics
    assert m.target_forwards == len(blocks)
    assert m.block_efficiency == pytest.approx(20 / len(blocks))  # tokens per target forward, prefill included
    assert m.prefill_s == blocks[0].verify_s and m.verify_s == pytest.approx(sum(b.verify_s for b in blocks[1:]))
    accepted = sum(b.accepted for b in blocks)
    assert m.acceptance_rate == pytest.approx(accepted / sum(len(b.draft) for b in blocks))
    assert set(m.method_block_efficiency) == {"M", "T", "C", "P"}
    assert m.weights_s == pytest.approx(sum(b.weights_s for b in blocks)) and m.weights_s > 0
    assert m.draft_s + m.verify_s + m.weights_s <= m.decode_s  # parts of the decode, each counted once
    assert m.walltime_s >= m.prefill_s + m.decode_s


def test_counterfactual_of_a_single_method_is_its_real_acceptance(pair, image):
    config = GenerationConfig(max_new_tokens=20, gamma=4)
    result = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("M"), config))
    for block in result.blocks:
        assert 1 + block.method_accepted["M"] == len(block.emitted)  # the tokens it gave, no more
        assert block.drafts["M"] == block.draft
    assert result.metrics.method_block_efficiency["M"] == pytest.approx(result.metrics.block_efficiency)


def test_tabed_weights_move_to_the_method_that_is_right(twin_pair, image):
    """With a drafter identical to the target, M is always right and T (image-blind) is not."""
    config = GenerationConfig(max_new_tokens=24, gamma=3)
    result = collect(speculative_generate(twin_pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MT"), config))
    assert result.blocks[0].weights == {"M": 0.5, "T": 0.5}
    assert result.blocks[-1].weights["M"] >= 0.9
    static = collect(speculative_generate(twin_pair, [Turn("w1 w2 w3", [image])], parse_spec("MT"), config))
    assert all(b.weights == {"M": 0.5, "T": 0.5} for b in static.blocks)
    assert result.metrics.block_efficiency > static.metrics.block_efficiency
    assert result.metrics.method_block_efficiency["M"] > result.metrics.method_block_efficiency["T"]


def test_only_blocks_that_others_follow_are_learned_from(pair, image, monkeypatch):
    """Learning a verification costs a statistics pass (a graph replay on a GPU); after the answer's last
    block nothing would use it."""
    learned, add = [], WeightHistory.add
    monkeypatch.setattr(WeightHistory, "add", lambda self, p, *rest: (learned.append(len(p)), add(self, p, *rest))[1])
    config = GenerationConfig(max_new_tokens=20, gamma=4, may_rest=False)
    result = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MT"), config))
    assert len(result.blocks) > 2
    assert learned == [min(b.accepted + 1, len(b.draft)) for b in result.blocks[:-1] if b.draft]


def test_blocks_without_learned_weights_spend_no_time_on_them(pair, image):
    """Uniform weights cost nothing, and timing them would wait for a GPU twice a block."""
    config = GenerationConfig(max_new_tokens=20, gamma=4)
    static = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("MT"), config))
    assert len(static.blocks) > 1 and all(b.weights_s == 0 for b in static.blocks)
    dynamic = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MT"), config))
    assert all(b.weights_s > 0 for b in dynamic.blocks[1:])  # learned weights (and learning) are timed


@pytest.mark.parametrize("rule, window, least", [("kld", 8, 0.6), ("tvd", 8, 0.6), ("hedge", 0, 0.55)])
def test_other_rules_also_prefer_the_right_method(twin_pair, image, rule, window, least):
    """Hedge moves slowly by design (its rate is set for the whole answer), but the same way."""
    config = GenerationConfig(max_new_tokens=24, gamma=3, rule=rule, window=window)
    result = collect(speculative_generate(twin_pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MT"), config))
    weights = [block.weights["M"] for block in result.blocks]
    assert weights[-1] > least and weights[-1] + 1e-3 >= weights[len(weights) // 2] >= weights[0]


def test_no_image_is_reported_not_refused(pair):
    result = collect(speculative_generate(pair, [Turn("w7")], parse_spec("tabed-MTCP"), GenerationConfig(8)))
    assert any("no picture" in note for note in result.notes)
    assert result.captions == [] and result.shared == ["M", "T", "C", "P"]


@pytest.mark.parametrize("rule", ["w-grid", "kld", "tvd", "hedge"])
def test_methods_that_read_the_same_text_share_one_weight_equally(pair, image, rule):
    """With no picture M and T are one row: every block weighs them equally (a rule's split of identical rows
    is a tie broken by order, which the chart drew as learning); beside N they share what the rule gives
    the row, N's weight still learned; with a picture each method has its own row and weight."""
    config = GenerationConfig(40, rule=rule, inspect=True)
    alone = collect(speculative_generate(pair, [Turn("w7 w8")], parse_spec("tabed-MT"), config))
    assert alone.shared == ["M", "T"] and len(alone.blocks) > 3
    assert all(block.weights == {"M": 0.5, "T": 0.5} and block.weight_update is None for block in alone.blocks)
    with_n = collect(speculative_generate(pair, [Turn("w1 w1 w1 w1 w1")], parse_spec("tabed-MTN"), config))
    learned = [block for block in with_n.blocks if block.weight_update is not None]
    assert learned and all(block.weight_update.shared == ["M", "T"] for block in learned)
    assert all(block.weights["M"] == pytest.approx(block.weights["T"]) for block in with_n.blocks)
    assert len({round(block.weights["N"], 6) for block in with_n.blocks}) > 1  # N's is still learned
    pictured = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MT"), config))
    assert pictured.shared == [] and any(block.weight_update for block in pictured.blocks)


def test_without_an_image_the_shared_text_only_row_is_drafted_once(pair):
    batch_rows = []
    hook = pair.drafter.model.language_model.layers[0].input_layernorm.register_forward_pre_hook(
        lambda _, args: batch_rows.append(args[0].shape[0]))  # every forward, whichever path it takes
    try:
        turns = [Turn("w7 w8")]
        result = collect(speculative_generate(pair, turns, parse_spec("tabed-MTCP"), GenerationConfig(24)))
    finally:
        hook.remove()
    assert batch_rows and set(batch_rows) == {1}
    assert result.token_ids == collect(autoregressive_generate(pair, turns, GenerationConfig(24))).token_ids
    assert all(block.weights.keys() == {"M", "T", "C", "P"} for block in result.blocks)
    assert all(len(set(map(tuple, block.drafts.values()))) == 1 for block in result.blocks)


def test_stop_flag_ends_between_blocks(pair, image):
    stop = threading.Event()
    events = speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("MT"),
                                  GenerationConfig(max_new_tokens=60, gamma=2), cancel=stop)
    seen = []
    for event in events:
        seen.append(event)
        if isinstance(event, BlockEvent) and event.index == 1:
            stop.set()
    result = seen[-1].result
    assert result.stopped and len(result.blocks) == 2 and len(result.token_ids) < 60
    ar_stop = threading.Event()
    ar_stop.set()
    ar = collect(autoregressive_generate(pair, [Turn("w7")], GenerationConfig(60), cancel=ar_stop))
    assert ar.stopped and len(ar.token_ids) == 1


def test_closing_the_generator_stops_it(pair, image):
    events = speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("MT"), GenerationConfig(60))
    next(events)
    next(events)
    events.close()
    with pytest.raises(StopIteration):
        next(events)


def test_compare_records_speedup(pair, image):
    turns = [Turn("w1 w2 w3", [image])]
    ar = collect(autoregressive_generate(pair, turns, GenerationConfig(16)))
    sd = collect(speculative_generate(pair, turns, parse_spec("M"), GenerationConfig(16)))
    speedup = compare(sd, ar)
    assert sd.metrics.speedup == speedup == pytest.approx(ar.metrics.decode_s / sd.metrics.decode_s)
    assert ar.metrics.target_forwards == 16 and ar.metrics.block_efficiency == 1.0  # the prefill included


def test_tokens_per_second_count_the_whole_walltime_for_both_kinds_of_decoding(pair, image):
    """Tokens a second are the new tokens over the walltime (the prefill included), for plain decoding as for
    speculative decoding: the two rates are compared side by side on the page."""
    turns = [Turn("w1 w2 w3", [image])]
    ar = collect(autoregressive_generate(pair, turns, GenerationConfig(16)))
    sd = collect(speculative_generate(pair, turns, parse_spec("M"), GenerationConfig(16)))
    for metrics in (ar.metrics, sd.metrics):
        assert metrics.prefill_s > 0 and metrics.decode_s < metrics.walltime_s  # the two times differ
        assert metrics.tokens_per_s == pytest.approx(metrics.new_tokens / metrics.walltime_s, rel=1e-9)


def test_the_drafters_prefill_is_the_first_blocks_drafting(pair, image, monkeypatch):
    """The first block drafts from the drafter's prefill: its drafting time includes it, so that the speed
    model's drafting per pass counts it and the time no phase accounts for stays the weights and bookkeeping.
    A prefill made a quarter of a second slower shows in the first block's drafting, and nowhere else."""
    slow = 0.25
    prefill = BatchedDrafter.prefill

    def slowed(self):
        time.sleep(slow)
        return prefill(self)

    monkeypatch.setattr(BatchedDrafter, "prefill", slowed)
    result = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MT"),
                                          GenerationConfig(24)))
    first, *rest = result.blocks
    metrics = result.metrics
    assert first.draft_s >= slow and all(block.draft_s < slow for block in rest)
    assert metrics.draft_s >= slow and metrics.decode_s - metrics.draft_s - metrics.verify_s < slow


@pytest.mark.parametrize("kwargs, message", [
    ({"max_new_tokens": 0}, "max new tokens"),
    ({"max_new_tokens": 100000}, "max new tokens"),
    ({"gamma": 0}, "gamma"),
    ({"temperature": -1}, "temperature"),
    ({"top_p": 0}, "top-p"),
    ({"rule": "mean"}, "rule"),
    ({"window": -2}, "window"),
])
def test_bad_settings(kwargs, message):
    with pytest.raises(InputError, match=message):
        GenerationConfig(**kwargs)


def test_bad_conversations(pair):
    spec, config = parse_spec("MT"), GenerationConfig(8)
    with pytest.raises(InputError, match="empty"):
        collect(speculative_generate(pair, [Turn("   ")], spec, config))
    with pytest.raises(InputError, match="empty"):
        collect(speculative_generate(pair, [], spec, config))
    with pytest.raises(InputError, match="no answer"):
        collect(speculative_generate(pair, [Turn("w1"), Turn("w2")], spec, config))
    with pytest.raises(InputError, match="context"):
        collect(speculative_generate(pair, [Turn(" ".join(["w1"] * 600))], spec, config))
    with pytest.raises(InputError, match="context"):
        collect(autoregressive_generate(pair, [Turn(" ".join(["w1"] * 600))], config))


def test_a_drafted_image_placeholder_ends_the_first_block_before_the_prompts_pass(pair, image):
    """The target counts image placeholders against its image features in the prompt's pass: a draft of
    `<image>` (which only a random drafter writes) is cut off there, and the drafter forgets what it was fed."""
    from tabed.engine.chain import end_before
    from tabed.engine.drafter import BatchedDrafter, build_rows
    from tabed.engine.drafts import DraftChain

    placeholder = pair.target.config.image_token_id
    prompt = encode(pair.drafter_processor, [Turn("w1 w2", [image])], pair.device, pair.dtype)
    rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, ("M", "T"))
    drafter = BatchedDrafter(pair.drafter, rows, pair.backend("drafter", 2))
    drafter.prefill()
    before = drafter.backend.lengths.clone()
    drafter.step([7])
    drafter.step([placeholder])  # drafts 7, <image>, 9: the drafter was fed the first two
    probs = [torch.full((2, 5), 0.2)] * 3
    draft = DraftChain([7, placeholder, 9], probs, [p[0] for p in probs])
    end_before(drafter, draft, placeholder)
    assert (draft.tokens, draft.stop, len(draft.row_probs), len(draft.mixed_probs)) == ([7], StopReason.IMAGE, 1, 1)
    assert torch.equal(drafter.backend.lengths, before)  # 7 came from the prefill's logits: nothing was fed
    drafter.step([placeholder])  # drafts <image>, 3
    first = DraftChain([placeholder, 3], probs[:2], [p[0] for p in probs[:2]])
    end_before(drafter, first, placeholder)
    assert first.tokens == [] and torch.equal(drafter.backend.lengths, before)


@pytest.mark.parametrize("spec", ["M", "tabed-MT"])
def test_an_answer_that_ends_on_a_draft_has_no_bonus_token_and_no_phantom_efficiency(twin_pair, image, spec):
    """After an accepted end token nothing follows: the target's token after it is in no answer, so the block
    has no bonus, and no method's counterfactual counts it (it once read 20 tokens per forward for a
    19-token answer)."""
    result = ending_on_a_draft(twin_pair, image, spec)
    last, tokens = result.blocks[-1], len(result.token_ids)
    assert last.accepted == len(last.draft) == len(last.emitted) and not last.bonus  # ended on its last draft
    assert all(1 + run <= len(last.emitted) for run in last.method_accepted.values())
    assert all(value <= tokens for value in result.metrics.method_block_efficiency.values())
    if spec == "M":
        assert result.metrics.method_block_efficiency["M"] == pytest.approx(result.metrics.block_efficiency)


def _drafter_pair(target, processor, tokenizer, patch_size: int, context: int):
    """The target beside a random drafter of its own vocabulary whose pictures take (32 / patch)² tokens and
    whose context is `context`, each model with its own processor."""
    drafter = random_llava(LlavaSize(patch_size=patch_size, context=context), tokenizer, seed=3)
    return make_pair(target, drafter, processor, "mixed", llava_processor(tokenizer, SIZE.image_size, patch_size))


def test_each_model_prompt_is_held_against_its_own_context(target, processor, tokenizer, image):
    """A drafter that sees a picture as 64 tokens (the target: 16) and has twice the target's context drafts
    a prompt longer than the target's context: it runs, nothing is lowered, and the answer is the target's."""
    pair = _drafter_pair(target, processor, tokenizer, patch_size=4, context=2 * SIZE.context)
    turns = [Turn("w1 w2", [image] * 9)]
    config = GenerationConfig(max_new_tokens=24, gamma=4)
    target_length = encode(pair.target_processor, turns, pair.device, pair.dtype).length
    drafter_length = encode(pair.drafter_processor, turns, pair.device, pair.dtype).length
    assert target_length < SIZE.context < drafter_length  # one context for both would refuse the drafter's
    plain = collect(autoregressive_generate(pair, turns, config))
    events = list(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
    assert not [note for note in events[0].notes if "lowered" in note]
    assert events[-1].result.token_ids == plain.token_ids


def test_a_drafter_with_a_shorter_context_lowers_max_new_tokens_for_plain_decoding_too(target, processor,
                                                                                          tokenizer, image):
    pair = _drafter_pair(target, processor, tokenizer, patch_size=8, context=64)
    turns = [Turn("w1 w2", [image])]
    room = 64 - encode(pair.drafter_processor, turns, pair.device, pair.dtype).length
    config = GenerationConfig(max_new_tokens=200, gamma=4)
    plain = list(autoregressive_generate(pair, turns, config))
    speculative = list(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
    for events in (plain, speculative):
        assert f"max new tokens lowered from 200 to {room}: the prompt is {64 - room} tokens and the drafter's " \
               "context 64" in events[0].notes
    assert speculative[-1].result.token_ids == plain[-1].result.token_ids
    with pytest.raises(InputError, match="fills the drafter's context of 64 tokens.*fewer pictures"):
        collect(speculative_generate(pair, [Turn("w1", [image] * 4)], parse_spec("MT"), config))


def _leading(guesses, truth):
    """How many of `guesses` match `truth` before the first miss (written apart from the engine's)."""
    return next((i for i, (g, t) in enumerate(zip(guesses, truth, strict=False)) if g != t), min(len(guesses),
                                                                                                 len(truth)))


@pytest.mark.parametrize("spec, settings", [("tabed-MTCP", {"min_survival": 0.5}),  # blocks long enough to miss
                                            ("MTC", {"gamma": 5, "adaptive": False}),  # and match again after
                                            ("tabed-MT", {"tree_width": 2})])
def test_each_methods_counterfactual_is_its_run_of_guesses_before_its_first_miss(pair, image, spec, settings):
    """Recomputed from the block's own guesses and what the target kept: a method's count stops at its first
    miss, however many of its later guesses match, and the metric is 1 + their mean over its blocks."""
    config = GenerationConfig(**{"max_new_tokens": 40, "gamma": 4} | settings)
    result = collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec(spec), config))
    later_matches = 0
    for number, block in enumerate(result.blocks):
        truth = block.draft[:block.accepted] + [block.target_token]
        last = number == len(result.blocks) - 1
        room = len(block.emitted) - 1 if last else len(truth)
        assert set(block.method_accepted) == set(block.drafts)
        for method, guesses in block.drafts.items():
            first_miss = _leading(guesses, truth)
            assert block.method_accepted[method] == min(first_miss, room)
            later_matches += any(g == t for g, t in zip(guesses[first_miss + 1:], truth[first_miss + 1:],
                                                         strict=False))
    assert later_matches  # some method was right again after a miss: counting on would change the figure
    for method, efficiency in result.metrics.method_block_efficiency.items():
        counts = [b.method_accepted[method] for b in result.blocks if method in b.method_accepted]
        assert efficiency == pytest.approx(1 + sum(counts) / len(counts))


def test_the_weight_history_learns_the_targets_own_distributions_at_the_verified_positions(pair, image, monkeypatch):
    """What enters the history is the target's distribution after the prompt and the answer's tokens up to
    each verified position (one forward of the target over the whole answer says what it is), and w-grid's
    weights for the next block are recomputed from that history: the most top-1 matches, then the least
    KL(p ‖ mixture), then the first in the grid's order."""
    added, add = [], WeightHistory.add
    monkeypatch.setattr(WeightHistory, "add",
                        lambda self, p, q, *rest: (added.append((p, q)), add(self, p, q, *rest))[1])
    turns = [Turn("w1 w2 w3", [image])]
    config = GenerationConfig(max_new_tokens=30, gamma=4, may_rest=False)
    result = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
    session = TargetSession(pair.backend("target"))
    with torch.inference_mode():
        truth = torch.softmax(session.prefill(encode(pair.target_processor, turns, CPU, torch.float32),
                                              result.token_ids).float(), -1)  # row t: after t answer tokens
    learned = [b for b in result.blocks[:-1] if b.draft]
    assert len(added) == len(learned) > 2
    for block, (p, _) in zip(learned, added, strict=True):
        start = sum(len(b.emitted) for b in result.blocks[:block.index])
        assert torch.allclose(p, truth[start:start + len(p)], atol=1e-5)
    grid = torch.tensor([w for w in itertools.product(range(11), repeat=2) if sum(w) == 10]) / 10
    for seen, block in enumerate(result.blocks[1:], 1):
        pairs = added[:len([b for b in learned if b.index < seen])]
        p = torch.cat([p for p, _ in pairs])
        q = torch.cat([q for _, q in pairs])  # (n, K, V)
        mixed = torch.einsum("gk,nkv->gnv", grid, q)
        matches = (mixed.argmax(-1) == p.argmax(-1)).sum(-1)
        kl = (torch.xlogy(p, p) - p * torch.log(mixed.clamp_min(1e-12))).sum(-1).sum(-1)
        best = min(range(len(grid)), key=lambda g: (-int(matches[g]), round(float(kl[g]), 4), g))
        assert [block.weights["M"], block.weights["T"]] == pytest.approx(grid[best].tolist(), abs=1e-6)
    assert len({b.weights["M"] for b in result.blocks}) > 1  # the weights moved: the check has power


SETTINGS_BY_STOP = [{}, {"gamma": 3, "adaptive": False}, {"gamma": 2}, {"tree_width": 2}, {"max_new_tokens": 1},
                    {"tree_width": 3, "tree_policy": "methods", "gamma": 2}, {"temperature": 1.0},
                    {"tree_width": 4, "gamma": 3, "adaptive": False}]


def test_every_block_says_why_its_drafting_stopped_with_a_stop_reason(pair, twin_pair, image):
    """A `StopReason`, never a bare string or the chain's internal FORK, whatever stopped the drafting, and
    the one of its kind of drafting: adaptive drafting never says it drafted a fixed length, nor fixed drafting
    that it reached a cap."""
    seen = set()
    for settings in SETTINGS_BY_STOP:
        for chosen in (pair, twin_pair):
            for turns in conversations(image).values():
                config = GenerationConfig(**{"max_new_tokens": 24} | settings)
                for block in collect(speculative_generate(chosen, turns, parse_spec("tabed-MT"), config)).blocks:
                    assert type(block.stop) is StopReason and block.stop != StopReason.FORK
                    # a cap and doubt are adaptive drafting's; a fixed length, a fixed draft's
                    assert block.stop not in ({StopReason.FIXED} if config.adaptive else
                                              {StopReason.CAP, StopReason.UNSURE})
                    seen.add(block.stop)
    for block in ending_on_a_draft(twin_pair, image, "M").blocks:
        assert type(block.stop) is StopReason
        seen.add(block.stop)
    assert seen >= {StopReason.FIXED, StopReason.CAP, StopReason.UNSURE, StopReason.BUDGET, StopReason.EOS,
                    StopReason.NODES}  # the runs reach every way a block ends but a drafted image placeholder


@pytest.mark.parametrize("share, busy", [(0.1, True), (0.59, True), (0.6, False), (1.9, False)])
def test_a_run_that_got_too_little_of_the_cpu_says_its_timings_are_unreliable(pair, image, monkeypatch, share, busy):
    """The engine flags a starved run in its metrics, so the CLI, the bench and the page all read it the same
    way; on a GPU the CPU share says nothing and nothing is flagged."""
    monkeypatch.setattr(Clock, "cpu_share", lambda self: share)
    config = GenerationConfig(max_new_tokens=6)
    for events in (speculative_generate(pair, [Turn("w1", [image])], parse_spec("tabed-MT"), config),
                   autoregressive_generate(pair, [Turn("w1", [image])], config)):
        metrics = collect(events).metrics
        assert (metrics.cpu_share, metrics.busy) == (share, busy)
    assert not Clock(torch.device("meta")).busy(0.1)


def test_a_cut_chain_keeps_its_first_drafts_in_every_list_the_log_softmax_too():
    """A chain cut at an end token or an image placeholder keeps, for its kept drafts, what each was drafted
    from: the kld and hedge rules learn from their log-softmax."""
    lists = [[torch.full((2, 3), float(j)) for j in range(3)] for _ in range(3)]
    chain = DraftChain([5, 6, 7], *lists, stop=StopReason.CAP)
    chain.truncate(2, StopReason.EOS)
    assert (chain.tokens, chain.stop) == ([5, 6], StopReason.EOS)
    for kept, drafted in zip((chain.row_probs, chain.mixed_probs, chain.row_log_probs), lists, strict=True):
        assert kept == drafted[:2]


def test_a_fixed_chain_whose_last_draft_is_the_end_token_stopped_at_its_length_not_at_the_end_token(twin_pair,
                                                                                                image):
    """A fixed-length chain is cut after an end token drafted before its last position; one drafted last
    was drafted because the length was reached (`fixed`), the answer ending with it all the same."""
    turns = [Turn("w1 w2 w3", [image])]
    for gamma in range(3, 9):  # the first length at which some block's last draft is a token's first occurrence
        config = GenerationConfig(max_new_tokens=24, gamma=gamma, adaptive=False)
        first = collect(speculative_generate(twin_pair, turns, parse_spec("M"), config))
        start, end = len(first.token_ids) - sum(len(b.emitted) for b in first.blocks), None
        for block in first.blocks:
            if len(block.draft) == gamma and block.draft[-1] not in first.token_ids[:start + gamma - 1]:
                end = block.draft[-1]
                break
            start += len(block.emitted)
        if end is not None:
            break
    assert end is not None
    saved = twin_pair.target.generation_config.eos_token_id
    twin_pair.target.generation_config.eos_token_id = end
    try:
        result = collect(speculative_generate(twin_pair, turns, parse_spec("M"), config))
    finally:
        twin_pair.target.generation_config.eos_token_id = saved
    last = result.blocks[-1]
    assert last.draft[-1] == end == result.token_ids[-1] and len(last.draft) == gamma
    assert last.stop == StopReason.FIXED and not last.bonus
