"""Every setting works at both ends of its range, and the one settings object reads the three grammars."""

from dataclasses import replace

import pytest

from conftest import conversations
from tabed.bench.rows import row_settings
from tabed.engine.config import LIMITS, GenerationConfig
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.settings import Settings
from tabed.engine.spec import parse_spec
from tabed.errors import InputError
from tabed.page.controls import page_settings

# What a user is promised (the README, the CLI's help, the page's sliders), written out: a bound changed in
# `LIMITS` by mistake fails here instead of moving every expectation with it.
PROMISED = {"max_new_tokens": (1, 1024), "gamma": (1, 64), "temperature": (0.0, 2.0), "tree_width": (1, 4),
            "window": (0, 100_000), "seed": (0, 2**32 - 1)}
ENDS = [(name, value) for name, bounds in PROMISED.items() for value in bounds]


def test_the_bounds_are_the_promised_ones():
    assert LIMITS == PROMISED


@pytest.mark.parametrize("name, value", ENDS, ids=[f"{name}={value}" for name, value in ENDS])
def test_every_setting_works_at_both_ends_of_its_range(pair, image, name, value):
    """The loop at each bound, on a first and a second turn with a picture: greedy runs give plain
    decoding's tokens, sampling runs stay within the budget (one token once crashed the loop)."""
    settings = {"max_new_tokens": 24, name: value}
    config = GenerationConfig(**settings)
    for turns in (conversations(image)["image-first-turn"], conversations(image)["image-second-turn"]):
        result = collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), config))
        assert 1 <= len(result.token_ids) <= config.max_new_tokens
        assert sum(len(block.emitted) for block in result.blocks) == len(result.token_ids)
        if config.temperature == 0:
            assert result.token_ids == collect(autoregressive_generate(pair, turns, config)).token_ids


@pytest.mark.parametrize("spec", ["M", "MT", "tabed-MT", "tabed-MTN"])
@pytest.mark.parametrize("tree_width", [1, 4])
def test_one_token_is_one_block_with_nothing_drafted(pair, image, spec, tree_width):
    turns = conversations(image)["image-first-turn"]
    config = GenerationConfig(max_new_tokens=1, tree_width=tree_width)
    result = collect(speculative_generate(pair, turns, parse_spec(spec), config))
    assert result.token_ids == collect(autoregressive_generate(pair, turns, config)).token_ids
    assert len(result.blocks) == 1 and result.blocks[0].draft == [] and result.blocks[0].stop == "budget"


@pytest.mark.parametrize("name, value", [(n, v) for n, (low, high) in PROMISED.items()
                                         for v in (low - 1 if isinstance(low, int) else low - 0.5, high + 1)])
def test_values_past_a_bound_are_refused_with_the_bound(name, value):
    low, high = PROMISED[name]
    with pytest.raises(InputError, match=f"between {low} and {high}"):
        GenerationConfig(**{name: value})


def test_the_three_grammars_give_one_settings_object():
    cli = Settings.parse("tabed-MT", "auto:8", max_new_tokens=64)
    page = page_settings(["T", "M"], "tabed", gamma=8.0, adaptive=True, max_new_tokens=64.0, window=None)
    bench = row_settings(Settings(config=GenerationConfig(max_new_tokens=64)), "tabed-MT@auto:8")
    assert cli == bench and page == Settings(cli.spec, replace(cli.config, inspect=True))  # the page inspects
    assert (cli.spec.name, cli.config.gamma, cli.config.adaptive) == ("tabed-MT", 8, True)
    assert Settings() == Settings.parse()  # one set of defaults
