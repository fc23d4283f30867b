"""Resting rows: a method at weight 0 leaves the draft steps, catches up later, and nothing else changes."""

from dataclasses import replace

import pytest
import torch

from tabed.bench.suite import case_turns, default_suite, limit_cases, load_suite
from tabed.engine import resting
from tabed.engine.config import GenerationConfig
from tabed.engine.drafter import BatchedDrafter, build_rows
from tabed.engine.ensemble import WeightHistory
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.sampling import logits_to_log_probs, logits_to_probs
from tabed.engine.spec import RULES, parse_spec
from tabed.models.caches import DynamicBackend
from tabed.models.chat import Turn, encode


def _drafter(pair, image, cache=DynamicBackend) -> BatchedDrafter:
    prompt = encode(pair.drafter_processor, [Turn("w1 w2 w3", [image])], pair.device, pair.dtype)
    rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, ("M", "T"))
    return BatchedDrafter(pair.drafter, rows, cache(pair.drafter, pair.vocab_size))


@pytest.mark.parametrize("rests", [0, 1])
def test_a_row_that_rested_and_caught_up_scores_as_if_it_never_left(pair, image, rests):
    """Split off a row (M, the longer, or T, the shorter and left-padded), go on with the other (with a
    roll-back), catch the row up on the committed tokens, join: every row's next logits equal those of a
    drafter that kept both rows all along. Apart, neither keeps the other's padding: a row alone runs
    unpadded, without a mask."""
    steady, resting_one = _drafter(pair, image), _drafter(pair, image)
    stays = 1 - rests
    steady.prefill(), resting_one.prefill()
    steady.step([5, 6]), resting_one.step([5, 6])
    resting_one.rest([rests])
    assert resting_one.batch_rows == [stays]
    for backend, row in ((resting_one.backend, stays), (resting_one.rest_backend, rests)):
        assert not backend.padded and backend.mask.shape[1] == len(resting_one.rows[row].input_ids) + 2
    alone = resting_one.step([7, 8, 9])
    assert alone.shape[0] == 1
    torch.testing.assert_close(alone[0], steady.step([7, 8, 9])[stays], rtol=1e-4, atol=1e-5)
    resting_one.rollback(1), steady.rollback(1)  # the last token was rejected
    caught = resting_one.catch_up([7, 8])  # what the batch kept since the row left
    assert caught.shape[:2] == (1, 2)
    resting_one.wake()
    assert resting_one.batch_rows is None and resting_one.active == [0, 1] and resting_one.backend.padded
    torch.testing.assert_close(resting_one.step([10]), steady.step([10]), rtol=1e-4, atol=1e-5)


def test_rows_of_a_static_cache_never_rest(pair, image):
    assert _drafter(pair, image).can_rest
    assert not BatchedDrafter(pair.drafter, _drafter(pair, image).rows, object()).can_rest


@pytest.fixture(scope="module")
def odd_pictures(teaching_pair):
    """The bundled pair on its suite's odd pictures, where M's weight falls to 0 for blocks on end."""
    suite = default_suite()
    return teaching_pair, [case_turns(case, suite.parent) for case in load_suite(suite) if case.scenario == "odd"][:6]


@pytest.mark.parametrize("width, temperature", [(1, 0.0), (2, 0.0), (1, 1.0)])
@pytest.mark.slow
def test_resting_rows_change_no_draft_and_no_weight_when_they_catch_up_every_block(odd_pictures, monkeypatch, width,
                                                                                   temperature):
    """Catching up before every block, the history is complete whenever weights are computed: every
    block drafts and weighs exactly as without resting (chains and trees), though rows did rest. So
    answers are the target's (greedy), and sampled answers are the very ones drawn without resting,
    whose distribution the sampling tests prove exact."""
    monkeypatch.setattr(resting, "REST_AFTER", 1)
    monkeypatch.setattr(resting, "PROBE_EVERY", 1)
    monkeypatch.setattr(resting, "PROBE_AT_MOST", 1)
    pair, conversations = odd_pictures
    config = GenerationConfig(max_new_tokens=96, tree_width=width, temperature=temperature, seed=5)
    rested = 0
    for turns in conversations:
        result = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
        awake = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), replace(config, may_rest=False)))
        assert result.token_ids == awake.token_ids
        if temperature == 0:
            assert result.token_ids == collect(autoregressive_generate(pair, turns, config)).token_ids
        assert [b.weights for b in result.blocks] == [b.weights for b in awake.blocks]
        assert [b.draft for b in result.blocks] == [b.draft for b in awake.blocks]
        assert [[n.token for n in b.tree] for b in result.blocks] == [[n.token for n in b.tree] for b in awake.blocks]
        for block in result.blocks:
            rested += bool(block.resting)
            assert all(block.weights[m] == 0 for m in block.resting)  # only a method at weight 0 rests
            assert not any(m in node.proposer for node in block.tree for m in block.resting)  # it guessed nothing
            assert set(block.drafts) == set(block.method_accepted) == {"M", "T"} - set(block.resting)
    assert rested >= 3


@pytest.fixture(scope="module")
def every_scenario(teaching_pair):
    """The bundled pair on the first cases of each scenario of its suite: on odd pictures M's weight stays
    at 0 once it falls; on image questions and second turns a method's weight falls to 0 and comes back."""
    suite = default_suite()
    return teaching_pair, [case_turns(case, suite.parent) for case in limit_cases(load_suite(suite), 3)]


@pytest.mark.slow
def test_a_resting_row_catches_up_and_rejoins_when_it_earns_again(every_scenario):
    """With the defaults, a row rests after two blocks at 0 and the weights are recomputed with it after
    three blocks (then six, twelve...): when it wakes they equal the weights of a run without resting, where
    that run made the same blocks so far (it may not: its weights may leave 0 before a catch-up sees it)."""
    pair, conversations = every_scenario
    config = GenerationConfig(max_new_tokens=96)
    woke = 0
    for turns in conversations:
        result = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
        awake = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), replace(config, may_rest=False)))
        assert result.token_ids == awake.token_ids
        blocks = result.blocks
        for i, block in enumerate(blocks[1:], start=1):
            same_so_far = [b.draft for b in blocks[:i]] == [b.draft for b in awake.blocks[:i]]
            if blocks[i - 1].resting and not block.resting and same_so_far:  # it woke: the full history's weights
                woke += 1
                assert block.weights == awake.blocks[i].weights
                rested = next(n for n in range(1, i + 1) if not blocks[i - n].resting) - 1
                assert rested % resting.PROBE_EVERY == 0  # it caught up every PROBE_EVERY blocks
            if block.resting and not blocks[i - 1].resting:  # it began resting after REST_AFTER blocks at 0
                assert all(b.weights[m] == 0 for b in blocks[i - resting.REST_AFTER + 1:i + 1] for m in block.resting)
    assert woke >= 1


def test_a_methods_efficiency_alone_averages_only_the_blocks_it_drafted_in(pair, image, other_image, monkeypatch):
    """A method's "if it alone had drafted" figure is 1 + the mean of its run of right guesses over the blocks
    where its row drafted, not the blocks where it rested (it guessed nothing there). With two pictures, four methods
    and rows that rest after one block at weight 0, a method rests in some blocks and is right in others."""
    monkeypatch.setattr(resting, "REST_AFTER", 1)
    config = GenerationConfig(max_new_tokens=40, gamma=4)
    turns = [Turn("w1 w2 w3", [image, other_image])]
    result = collect(speculative_generate(pair, turns, parse_spec("tabed-MTCP"), config))
    telling = 0  # methods that rested in some block and were right in another
    for method, efficiency in result.metrics.method_block_efficiency.items():
        runs = [b.method_accepted[method] for b in result.blocks if method not in b.resting]
        assert all(method not in b.method_accepted for b in result.blocks if method in b.resting)
        assert efficiency == pytest.approx(1 + sum(runs) / len(runs))
        telling += len(runs) < len(result.blocks) and sum(runs) > 0
    assert telling  # the run tells the two averages apart


def test_rows_that_keep_earning_nothing_catch_up_ever_more_rarely(odd_pictures, monkeypatch):
    """A catch-up that leaves the rows at 0 doubles the wait for the next (a catch-up costs about two drafter
    steps), up to PROBE_AT_MOST blocks; a row that wakes starts again from PROBE_EVERY."""
    monkeypatch.setattr(resting, "PROBE_EVERY", 1)
    monkeypatch.setattr(resting, "PROBE_AT_MOST", 4)
    pair, conversations = odd_pictures
    blocks: list = []
    catch_ups: list[int] = []
    catch_up = BatchedDrafter.catch_up
    monkeypatch.setattr(BatchedDrafter, "catch_up", lambda self, tokens: catch_ups.append(len(blocks))
                        or catch_up(self, tokens))
    checked = 0
    for turns in conversations:
        blocks.clear(), catch_ups.clear()
        for event in speculative_generate(pair, turns, parse_spec("tabed-MT"), GenerationConfig(max_new_tokens=128)):
            blocks.append(event) if hasattr(event, "resting") else None
        woke = [i for i in range(1, len(blocks)) if blocks[i - 1].resting and not blocks[i].resting]
        if woke or len(catch_ups) < 3:
            continue
        checked += 1
        first_rest = next(i for i, block in enumerate(blocks) if block.resting)
        assert catch_ups[0] == first_rest + 1
        gaps = [later - earlier for earlier, later in zip(catch_ups, catch_ups[1:], strict=False)]
        assert gaps == [min(2 ** (i + 1), 4) for i in range(len(gaps))]
    assert checked >= 3


class _Drafter:
    """A drafter's resting side alone: which rows rest, and the tokens each catch-up is fed."""

    def __init__(self) -> None:
        self.rest_backend, self.resting_rows, self.fed = None, [], []

    def rest(self, rows):
        self.rest_backend, self.resting_rows = object(), list(rows)

    def wake(self):
        self.rest_backend, self.resting_rows = None, []

    def catch_up(self, tokens):
        self.fed.append(len(tokens))
        return torch.zeros(len(self.resting_rows), len(tokens), 7)


class _History:
    needs_log_q = False

    def add(self, *_):
        pass

    def add_blocks(self, _):
        pass


def _catch_up_blocks(m_weights: list[float]) -> list[int]:
    """Blocks of three verified tokens each, M's weight given per block (T has the rest): the blocks that
    began with a catch-up."""
    drafter, state, out, blocks = _Drafter(), resting.RestSchedule(_History(), models=2), [1], []
    for index, weight in enumerate(m_weights):
        seen = len(out) - 1  # the drafter has not seen the target's last token
        fed = len(drafter.fed)
        state.before_block(drafter, out, seen, GenerationConfig())
        if len(drafter.fed) > fed:
            blocks.append(index)
        state.choose(drafter, torch.tensor([weight, 1.0 - weight]), seen)
        state.record(drafter, len(out), torch.zeros(3, 7), torch.zeros(3, 2, 7), None)
        out += [5, 5, 5]
    return blocks


def test_the_wait_between_catch_ups_doubles_while_a_row_earns_nothing_and_starts_again_when_it_wakes():
    """M at 0 from the start rests after REST_AFTER blocks and catches up 3, 6, 12, 24, 24... blocks later;
    once it earns again it wakes at the next catch-up, and when it rests again the waits start again
    from PROBE_EVERY."""
    assert (resting.REST_AFTER, resting.PROBE_EVERY, resting.PROBE_AT_MOST) == (2, 3, 24)
    assert _catch_up_blocks([0.0] * 100) == [4, 10, 22, 46, 70, 94]  # it rested after block 1
    # M earns at blocks 46-49: the catch-up at 46 wakes it; at 0 again from 50, it rests after 51
    assert _catch_up_blocks([0.0] * 46 + [0.5] * 4 + [0.0] * 50) == [4, 10, 22, 46, 54, 60, 72, 96]


class _CaughtUp(_Drafter):
    """T's row rests; its catch-up gives fixed logits after each of the answer's first tokens."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = logits
        self.rest([1])

    def catch_up(self, tokens):
        assert len(tokens) == self.logits.shape[1]
        return self.logits


@pytest.mark.parametrize("rule", RULES)
def test_a_catch_up_owes_the_history_the_resting_rows_distributions_at_the_runs_temperature_and_top_p(rule):
    """The catch-up's logits, read at the run's temperature and top-p (and as a log-softmax for the log-loss
    rules) at each waiting position, give the history exactly what rows that never rested would have."""
    config, vocab = GenerationConfig(temperature=0.7, top_p=0.8), 7
    generator = torch.Generator().manual_seed(0)
    logits = 2 * torch.randn(1, 5, vocab, generator=generator)  # T's, after the answer's first 1, 2, ... 5 tokens
    rested, awake = WeightHistory(2, rule), WeightHistory(2, rule)
    schedule, drafter = resting.RestSchedule(rested, models=2), _CaughtUp(logits)
    schedule.probe_every = 2  # from the answer's start, T's row rested for the two blocks below
    for position, n in ((1, 2), (3, 3)):  # each block's first answer position and its verified positions
        p = torch.softmax(torch.randn(n, vocab, generator=generator), dim=-1)
        m_logits = torch.randn(n, vocab, generator=generator)
        t_logits = logits[0, position - 1:position - 1 + n]
        rows = torch.stack([logits_to_probs(m_logits, 0.7, 0.8), logits_to_probs(t_logits, 0.7, 0.8)], dim=1)
        log_rows = torch.stack([logits_to_log_probs(m_logits, 0.7), logits_to_log_probs(t_logits, 0.7)], dim=1)
        awake.add(p, rows, log_rows if awake.needs_log_q else None)
        left, left_log = rows.clone(), log_rows.clone()
        left[:, 1] = left_log[:, 1] = 0  # what the resting row left
        schedule.record(drafter, position, p, left, left_log if rested.needs_log_q else None)
    assert len(rested) == 0 and schedule.waiting_positions() == 5
    schedule.before_block(drafter, [3, 1, 4, 1, 5, 9], 5, config)
    assert schedule.waiting == [] and schedule.seen == 5 and len(rested) == 5
    torch.testing.assert_close(rested.total(), awake.total())
    torch.testing.assert_close(rested.weights(), awake.weights())


def test_the_rows_never_all_rest():
    """Where every drafter row is at weight 0 (N, which has no row, takes it all), none rests: a batch of no rows
    drafts nothing. Where one of them earns, the other rests after REST_AFTER blocks."""
    for weights, rests in (([0.0, 0.0, 1.0], []), ([0.0, 0.5, 0.5], [0])):
        drafter, schedule = _Drafter(), resting.RestSchedule(_History(), models=2)
        for seen in range(resting.REST_AFTER):
            assert drafter.rest_backend is None
            schedule.choose(drafter, torch.tensor(weights), seen)
        assert drafter.resting_rows == rests


def test_a_block_while_no_row_rests_enters_the_history_with_its_log_softmax():
    """At once, and with the log-softmax it was given: under top-p a method's q is 0 where its log-softmax is
    not, and kld measures the log-softmax (the log of q would read the cut tokens at the floor)."""
    generator = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(3, 6, generator=generator), dim=-1)
    logits = torch.randn(3, 2, 6, generator=generator)
    q, log_q = logits_to_probs(logits, 1.0, 0.5), logits_to_log_probs(logits, 1.0)
    history, expected = WeightHistory(2, "kld"), WeightHistory(2, "kld")
    resting.RestSchedule(history, models=2).record(_Drafter(), 4, p, q, log_q)
    expected.add(p, q, log_q)
    torch.testing.assert_close(history.total(), expected.total())
    without_log = WeightHistory(2, "kld")
    without_log.add(p, q)
    assert not torch.allclose(without_log.total(), history.total())  # the test tells the two apart
