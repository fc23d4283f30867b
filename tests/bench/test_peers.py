"""The peers: transformers' assisted generation run as its users run it (`peer-default`) and in the paper's
setting (`peer-gamma5`), on the tiny pair, with the drafter's own settings given back after each run."""

import pytest
import torch

from tabed.bench.peers import PEER_SETTINGS, peer_generate
from tabed.engine.config import GenerationConfig
from tabed.models.chat import Turn


def settings_of(pair) -> tuple:
    return tuple(getattr(pair.drafter.generation_config, name) for name in PEER_SETTINGS)


@pytest.fixture
def during(pair, monkeypatch) -> list:
    """The drafter's settings as each `target.generate` call saw them."""
    seen, generate = [], pair.target.generate

    def spy(*args, **kwargs):
        seen.append(settings_of(pair))
        return generate(*args, **kwargs)
    monkeypatch.setattr(pair.target, "generate", spy)
    return seen


def test_the_papers_setting_drafts_five_with_no_confidence_stop_and_gives_the_drafter_back(pair, image, during):
    """`peer-gamma5`: 5 draft tokens, a constant schedule, no confidence stop; after it, the drafter's settings
    are as they were, so a `peer-default` after it runs as transformers comes."""
    before = settings_of(pair)  # as the checkpoint has them (unset: transformers' defaults, a 0.4 confidence stop)
    turns, config = [Turn("w1 w2", [image])], GenerationConfig(max_new_tokens=8)
    peer_generate(pair, turns, config, "peer-gamma5")
    assert settings_of(pair) == before
    peer_generate(pair, turns, config, "peer-default")
    assert during == [(5, "constant", 0.0), before]


def test_a_peers_forwards_are_the_targets_own_count_prefill_included(pair, image):
    forwards = []
    hook = pair.target.register_forward_pre_hook(lambda *_: forwards.append(1))
    try:
        tokens, seconds, counted = peer_generate(pair, [Turn("w1 w2", [image])], GenerationConfig(max_new_tokens=8),
                                                 "peer-gamma5")
    finally:
        hook.remove()
    assert counted == len(forwards) >= 2 and 1 <= len(tokens) <= 8 and seconds > 0


def test_a_sampled_peer_draws_from_the_runs_seed_whatever_came_before(pair, image):
    config, turns = GenerationConfig(max_new_tokens=12, temperature=1.0, seed=3), [Turn("w1 w2", [image])]
    answers = []
    for noise in (11, 12):
        torch.manual_seed(noise)
        answers.append(peer_generate(pair, turns, config, "peer-default")[0])
    assert answers[0] == answers[1]
    other = peer_generate(pair, turns, GenerationConfig(max_new_tokens=12, temperature=1.0, seed=4), "peer-default")
    assert other[0] != answers[0]  # the seed is what made them alike
