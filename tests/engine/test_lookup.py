"""`N`, the model-free method: n-gram lookup in the prompt and the answer, as one more distribution."""

import pytest
import torch

from tabed.engine.config import GenerationConfig
from tabed.engine.lookup import NgramLookup, ngram_continuation
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.errors import InputError
from tabed.models.chat import Turn


def test_the_longest_suffix_that_occurred_before_gives_the_guess():
    assert ngram_continuation([5, 6, 7, 9, 6, 7]) == 9  # "6 7" was followed by 9
    assert ngram_continuation([1, 2, 3, 1, 2, 4, 8, 1, 2]) == 4  # the latest "1 2" wins
    assert ngram_continuation([4, 5, 6, 5, 6, 4, 5]) == 6  # "6 4 5" never occurred, "4 5" did
    assert ngram_continuation([1, 2, 3]) is None and ngram_continuation([]) is None


def test_n_is_a_smoothed_point_mass_or_the_others_mixture():
    others = torch.tensor([0.1, 0.2, 0.3, 0.4])
    lookup = NgramLookup([1, 2, 0, 3], [1], smoothing=0.2)
    guess = lookup.distribution([2], others)  # "1 2" was followed by 0
    assert guess.tolist() == pytest.approx([0.85, 0.05, 0.05, 0.05]) and guess.sum().item() == pytest.approx(1.0)
    assert lookup.distribution([3], others).argmax() == 1  # "1 3" never occurred; "3" did, followed by 1
    assert torch.equal(NgramLookup([0, 1, 2], []).distribution([3], others), others)  # nothing to look up: no opinion


def test_n_needs_a_model_method_beside_it():
    assert parse_spec("tabed-MTN").methods == ("M", "T", "N")
    assert parse_spec("tabed-MTN").model_methods == ("M", "T")
    with pytest.raises(InputError, match="beside a model method"):
        parse_spec("N")


@pytest.mark.parametrize("spec", ["tabed-MTN", "MTN", "TN", "tabed-MTCPN"])
def test_with_n_the_answer_is_the_targets_own(pair, image, spec):
    turns = [Turn("w1 w2 w1 w2 w3", [image], answer="w4 w5 w4 w5"), Turn("w4 w5")]  # repeats to look up
    config = GenerationConfig(max_new_tokens=32, gamma=5, adaptive=False)
    result = collect(speculative_generate(pair, turns, parse_spec(spec), config))
    assert result.token_ids == collect(autoregressive_generate(pair, turns, config)).token_ids
    assert all(set(block.weights) == set(parse_spec(spec).methods) for block in result.blocks)
    assert all(len(block.drafts["N"]) == len(block.draft) for block in result.blocks)
