"""The world's own checker: answers judged on the facts they state, whatever their wording."""

import pytest

from tabed.teaching import facts, world
from tabed.teaching.facts import Score, check

TRUTH = ("The image shows two shapes on a white background: a red star at the top left and a blue circle at the "
         "bottom right.")


@pytest.mark.parametrize("scenario", world.SCENARIOS)
def test_every_answer_of_the_world_states_facts_and_agrees_with_itself(scenario):
    for dialogue in world.split(scenario, 1, 200):
        truth = dialogue.exchanges[-1].answer
        if truth is not None:
            score = check(truth, truth)
            assert score.stated > 0 and score == Score(score.stated, score.stated, 0), truth


def test_wording_and_order_are_free():
    reworded = "On a white background I can see a blue circle at the bottom right and a red star at the top left."
    assert check(reworded, TRUTH) == Score(right=7, stated=7, missed=1)  # the count left out: missed, not wrong


def test_a_wrong_or_extra_fact_counts_against_the_answer():
    wrong = TRUTH.replace("blue circle", "green circle").replace("white", "grey")
    assert check(wrong, TRUTH) == Score(right=6, stated=8, missed=2)
    extra = TRUTH.removesuffix(".") + " and a yellow square at the top right."
    assert check(extra, TRUTH).wrong == 3


def test_numbers_letters_and_spellings_are_facts_but_articles_and_pronouns_are_not():
    assert facts.facts("The highest bar is bar B, the orange one, with a value of eight.") == {
        "bar b": 1, "orange": 1, "8": 1}
    assert facts.facts("In short, the image shows one shape.") == {"1": 1}
    assert facts.facts("The list continues with i, j and k.") == {"letter i": 1, "letter j": 1, "letter k": 1}
    assert facts.facts("The word tiger is spelled t - i - g - e - r.") == {"spelled tiger": 1, "tiger": 1}
    assert facts.facts("Peru is a country in South America, and its capital is Lima.") == {
        "peru": 1, "south america": 1, "lima": 1}


def test_the_share_of_true_facts_pools_over_answers():
    assert facts.share_true([Score(3, 4, 0), Score(1, 1, 2)]) == 0.8
    assert facts.share_true([Score(0, 0, 3)]) != facts.share_true([Score(0, 0, 3)])  # NaN: nothing stated
