"""The page's controls read as a run's settings: the ticked methods, the ensemble in the page's words, and
the values as sliders and boxes send them."""

import pytest

from tabed.engine.spec import parse_spec
from tabed.errors import InputError
from tabed.page.controls import MODES, coerced, page_spec


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


def test_page_values_are_coerced_to_the_configs_types():
    assert coerced({"gamma": 5.0, "temperature": 1, "adaptive": 1, "seed": None, "rule": "kld"}) == {
        "gamma": 5, "temperature": 1.0, "adaptive": True, "rule": "kld"}
    with pytest.raises(InputError, match="gamma must be a number"):
        coerced({"gamma": "many"})


@pytest.mark.parametrize("mode, kind", [(MODES[0], "tabed"), (MODES[1], "static"), (MODES[2], "single")])
def test_the_page_names_each_ensemble_in_words_and_an_api_call_may_use_its_kind(mode, kind):
    methods = ["M"] if kind == "single" else ["M", "T"]
    assert page_spec(methods, mode) == page_spec(methods, kind) and page_spec(methods, kind).mode == kind
