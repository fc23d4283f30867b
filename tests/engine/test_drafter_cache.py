"""After every block the drafter's cache holds its prompt and the committed tokens, all but the last one or
two (the pending ones, fed with the next draft step), and nothing else: checked row by row against a fresh
drafter fed the same tokens, with chains, trees, sampling, and rows that rest and wake. A cache rolled
back one token too many leaves every answer exact but every later draft worse: only this sees it."""

import pytest
import torch

from tabed.engine.config import GenerationConfig
from tabed.engine.drafter import BatchedDrafter
from tabed.engine.drafts import unseen_after
from tabed.engine.events import BlockEvent
from tabed.engine.loop import speculative_generate
from tabed.engine.spec import parse_spec
from tabed.models.chat import Turn


def row_caches(drafter: BatchedDrafter):
    """(row, each layer's keys and values at the row's real columns) for every row, in the batch or resting."""
    parts = [(drafter.backend, drafter.active)]
    if drafter.rest_backend is not None:
        parts.append((drafter.rest_backend, drafter.resting_rows))
    for backend, rows in parts:
        for batch_row, row in enumerate(rows):
            real = backend.mask[batch_row].bool()
            yield row, [(layer.keys[batch_row][:, real], layer.values[batch_row][:, real])
                        for layer in backend.cache.layers]


def fresh_cache(pair, drafter: BatchedDrafter, row: int, tokens: list[int]):
    """The cache of a drafter that holds this row alone, prefilled and fed `tokens`."""
    fresh = BatchedDrafter(pair.drafter, [drafter.rows[row]], pair.backend("drafter", 1))
    fresh.prefill()
    if tokens:
        fresh.step(tokens)
    return [(layer.keys[0], layer.values[0]) for layer in fresh.backend.cache.layers]


def checked_run(pair, turns, spec, config, monkeypatch):
    """Decode, checking every row's cache after every block, and that a row in the batch has seen all but
    the pending one or two committed tokens (after every block but the last, which may end on a token
    nothing follows); returns (blocks, per block and row: whether it rested, its fed count and the
    committed length)."""
    drafters, init = [], BatchedDrafter.__init__
    monkeypatch.setattr(BatchedDrafter, "__init__", lambda self, *a: (drafters.append(self), init(self, *a))[1])
    committed, blocks, seen = [], [], []
    for event in speculative_generate(pair, turns, parse_spec(spec), config):
        if not isinstance(event, BlockEvent):
            continue
        committed += event.emitted
        blocks.append(event)
        rows = []
        for row, layers in row_caches(drafters[0]):
            fed = layers[0][0].shape[1] - len(drafters[0].rows[row].input_ids)
            assert 0 <= fed <= len(committed)
            expected = fresh_cache(pair, drafters[0], row, committed[:fed])
            for (keys, values), (want_keys, want_values) in zip(layers, expected, strict=True):
                assert keys.shape == want_keys.shape
                assert torch.allclose(keys, want_keys, atol=1e-4) and torch.allclose(values, want_values, atol=1e-4)
            rows.append((row in drafters[0].resting_rows, fed, len(committed)))
        seen.append(rows)
    for rows in seen[:-1]:
        assert all(rested or committed - 2 <= fed <= committed - 1 for rested, fed, committed in rows)
    return blocks, seen


SCENARIOS = {
    "chains": ("tabed-MT", {}),
    "one-method-fixed": ("M", {"gamma": 3, "adaptive": False}),
    "trees": ("tabed-MT", {"tree_width": 2}),
    "sampling": ("tabed-MT", {"temperature": 1.0, "seed": 3}),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_drafters_cache_is_the_committed_tokens_after_every_block(pair, image, monkeypatch, scenario):
    spec, settings = SCENARIOS[scenario]
    config = GenerationConfig(max_new_tokens=30, **{"gamma": 4} | settings)
    blocks, _ = checked_run(pair, [Turn("w1 w2 w3", [image])], spec, config, monkeypatch)
    assert len(blocks) > 3 and any(b.accepted < len(b.draft) for b in blocks)  # rejections to roll back


def test_rows_that_rest_catch_up_and_wake_hold_exactly_the_tokens_they_saw(pair, image, other_image, monkeypatch):
    """With two pictures and four methods, rows rest (their caches frozen) and rejoin after catching up."""
    config = GenerationConfig(max_new_tokens=60, gamma=4)
    blocks, seen = checked_run(pair, [Turn("w1 w2 w3", [image, other_image])], "tabed-MTCP", config, monkeypatch)
    resting = [set(b.resting) for b in blocks]
    assert any(resting[i] and not resting[i] <= resting[i + 1] for i in range(len(resting) - 1))  # a row woke
    assert any(rested and fed < committed - 2 for rows in seen for rested, fed, committed in rows)  # one lagged


@pytest.mark.parametrize("pending, drafted, path, fed, unseen", [
    ([5, 6], False, [], 0, [5, 6, 9]),  # nothing drafted: the pending tokens wait on, and the target's joins them
    ([5, 6], True, [], 0, [9]),  # the first draft step fed them; every draft was rejected
    ([5], True, [1, 2], 2, [9]),  # two drafts of three accepted: both were fed
    ([5], True, [1, 2, 3], 2, [3, 9]),  # the whole chain (or a leaf) accepted: its last draft was never fed
])
def test_what_the_drafter_has_not_seen_after_a_block_is_at_most_the_last_draft_and_the_targets_token(
        pending, drafted, path, fed, unseen):
    assert unseen_after(pending, drafted, path, fed, 9) == unseen


def test_a_drafter_that_missed_more_than_the_last_accepted_draft_is_an_error():
    with pytest.raises(RuntimeError, match="all but the last"):
        unseen_after([], True, [1, 2, 3], 1, 9)
