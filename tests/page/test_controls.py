"""The page's controls read as a run's settings: the ticked methods, the ensemble in the page's words, and
the values as sliders and boxes send them."""

import pytest

from tabed.engine.spec import parse_spec
from tabed.errors import InputError
from tabed.page.controls import FIELDS, MODES, methods_for_mode, page_settings, page_spec


@pytest.mark.parametrize("methods, ensemble, expected", [(["M"], "single", "M"), (["M", "T"], "static", "MT"),
                                                         (["C", "M", "T"], "tabed", "tabed-MTC")])
def test_the_page_spec(methods, ensemble, expected):
    assert page_spec(methods, ensemble) == parse_spec(expected)


@pytest.mark.parametrize("methods, ensemble, message", [
    ([], "tabed", "tick at least one"), (["M"], "tabed", "at least two methods"),
    (["M", "T"], "single", "uses one method"), (["N"], "single", "beside a model method"),
    (["M", "T"], "median", "unknown ensemble 'median': choose one of TABED")])
def test_the_page_spec_says_what_is_wrong(methods, ensemble, message):
    with pytest.raises(InputError, match=message):
        page_spec(methods, ensemble)


def test_page_values_are_read_as_the_configs_types_and_an_emptied_box_takes_the_default():
    notes = []
    settings = page_settings(["M", "T"], "tabed", notes, gamma=5.0, temperature=1, adaptive=1, seed=None, rule="kld")
    config = settings.config
    assert (config.gamma, config.temperature, config.adaptive, config.seed, config.rule) == (5, 1.0, True, 0, "kld")
    assert type(config.gamma) is int and type(config.temperature) is float
    assert notes == ["seed was empty: 0 was used"]


# Every value a visitor can type or an API client can send, just past each end of what it takes (and what no
# number box sends), refused in one line naming the field in the page's words and what it accepts.
REFUSED = [
    ("seed", -1, "seed must be a whole number from 0 to 4294967295; got -1"),
    ("seed", 10**20, "seed must be a whole number from 0 to 4294967295; got 100000000000000000000"),
    ("seed", 2**32, "seed must be a whole number from 0 to 4294967295; got 4294967296"),
    ("seed", 1.5, "seed must be a whole number"),
    ("window", -5, "history window must be a whole number from 0 to 100000 (0 keeps every position); got -5"),
    ("window", 100_001, "history window must be a whole number from 0 to 100000"),
    ("gamma", 0, "γ (draft tokens per block) must be a whole number from 1 to 20; got 0"),
    ("gamma", 21, "γ (draft tokens per block) must be a whole number from 1 to 20; got 21"),
    ("gamma", 2.5, "γ (draft tokens per block) must be a whole number"),
    ("max_new_tokens", 0, "max new tokens must be a whole number from 1 to 1024; got 0"),
    ("max_new_tokens", 99999, "max new tokens must be a whole number from 1 to 1024; got 99999"),
    ("temperature", -0.1, "temperature must be a number from 0 to 2 (0 is greedy); got -0.1"),
    ("temperature", 2.01, "temperature must be a number from 0 to 2"),
    ("temperature", float("nan"), "temperature must be a number"),
    ("top_p", 0, "top-p must be a number above 0 and at most 1 (1 keeps every token); got 0"),
    ("top_p", 1.01, "top-p must be a number above 0 and at most 1"),
    ("tree_width", 0, "tree width must be a whole number from 1 to 4 (1 drafts a chain); got 0"),
    ("tree_width", 5, "tree width must be a whole number from 1 to 4"),
    ("gamma", "many", "γ (draft tokens per block) must be a whole number from 1 to 20; got 'many'"),
    ("gamma", True, "γ (draft tokens per block) must be a whole number"),
    ("rule", "median", "TABED weight rule must be one of w-grid, kld, tvd, hedge; got 'median'"),
    ("tree_policy", "widest", "tree branches must be one of ensemble, methods, unsure, members"),
    ("tree_blocks", "last", "trees in must be one of all, first"),
    ("adaptive", "yes", "adaptive draft length must be true or false; got 'yes'"),
]


@pytest.mark.parametrize("name, value, message", REFUSED, ids=[f"{n}={v!r}" for n, v, _ in REFUSED])
def test_a_value_the_app_cannot_use_is_refused_naming_its_field_and_range(name, value, message):
    with pytest.raises(InputError) as refused:
        page_settings(["M", "T"], "tabed", **{name: value})
    assert str(refused.value).startswith(message), str(refused.value)


@pytest.mark.parametrize("name", [name for name, field in FIELDS.items() if field.low is not None])
def test_every_number_is_taken_at_both_ends_of_its_range(name):
    field = FIELDS[name]
    ends = [field.high] if field.above_low else [field.low, field.high]
    for value in ends:
        assert getattr(page_settings(["M", "T"], "tabed", **{name: value}).config, name) == value


@pytest.mark.parametrize("mode, kind", [(MODES[0], "tabed"), (MODES[1], "static"), (MODES[2], "single")])
def test_the_page_names_each_ensemble_in_words_and_an_api_call_may_use_its_kind(mode, kind):
    methods = ["M"] if kind == "single" else ["M", "T"]
    assert page_spec(methods, mode) == page_spec(methods, kind) and page_spec(methods, kind).mode == kind


def test_a_change_of_ensemble_leaves_methods_that_run():
    """Single method keeps the first ticked; an ensemble short of two gets the defaults back; otherwise the
    ticks stay as they are. Each result is accepted by `page_settings` for its mode."""
    defaults = ("M", "T")
    single, tabed = MODES[2], MODES[0]
    assert methods_for_mode(["T", "M"], single, defaults) == ["M"]
    assert methods_for_mode(["C", "P"], single, defaults) == ["C"]
    assert methods_for_mode([], single, defaults) == ["M"]
    assert methods_for_mode(["P"], tabed, defaults) == ["M", "T", "P"]
    assert methods_for_mode(["T", "C"], tabed, defaults) == ["T", "C"]
    for mode, ticked in ((single, ["M", "T", "N"]), (tabed, ["C"]), (MODES[1], None)):
        page_settings(methods_for_mode(ticked, mode, defaults), mode, [])
