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
    assert check(reworded, TRUTH) == Score(right=5, stated=5, missed=1)  # the count left out: missed, not wrong


def test_a_wrong_or_extra_fact_counts_against_the_answer():
    wrong = TRUTH.replace("blue circle", "green circle").replace("white", "grey")
    assert check(wrong, TRUTH) == Score(right=3, stated=6, missed=3)  # the green circle, its place, the ground
    extra = TRUTH.removesuffix(".") + " and a yellow square at the top right."
    assert check(extra, TRUTH).wrong == 2  # the yellow square and its place


def test_a_shape_is_one_fact_with_its_colour_its_corner_and_its_neighbours():
    """A colour, a corner or a neighbour said of the wrong shape is wrong, though the colour, the corner and
    the shape each appear in the picture; a relation is the same fact told from either side."""
    assert facts.facts(TRUTH) == {"2": 1, "white": 1, "red star": 1, "blue circle": 1, "red star at top left": 1,
                                  "blue circle at bottom right": 1}
    swapped = TRUTH.replace("red star", "blue star").replace("blue circle", "red circle")
    assert check(swapped, TRUTH) == Score(right=2, stated=6, missed=4)
    misplaced = TRUTH.replace("top left", "bottom left")
    assert check(misplaced, TRUTH) == Score(right=5, stated=6, missed=1)
    left = "The red star is to the left of the blue circle."
    assert facts.facts(left) == facts.facts("The blue circle sits to the right of the red star.") == {
        "red star left of blue circle": 1}
    assert facts.facts("The red star is over the blue circle.") == facts.facts("The blue circle is under the red star.")
    assert check("The blue circle is left of the red star.", left).wrong == 1
    assert facts.facts("The circle is coloured blue. It is in the top right corner.") == {"blue circle": 1,
                                                                                         "top right": 1}


def test_a_bar_is_one_fact_with_the_colour_and_value_said_in_its_sentence():
    truth = "Bar A is blue and has a value of 3. The orange bar B goes up to 8. So bar B is 5 higher than bar A."
    swapped = "Bar A is orange and has a value of 8. The blue bar B goes up to 3. So bar B is 5 higher than bar A."
    assert check(swapped, truth) == Score(right=3, stated=7, missed=4)  # the labels and the gap, not the bars
    assert check("Bar B, the orange one, reaches 8.", truth) == Score(right=3, stated=3, missed=4)


def test_numbers_letters_and_spellings_are_facts_but_articles_and_pronouns_are_not():
    assert facts.facts("The highest bar is bar B, the orange one, with a value of eight.") == {
        "bar b": 1, "bar b: orange": 1, "bar b: 8": 1}
    assert facts.facts("In short, the image shows one shape.") == {"1": 1}
    assert facts.facts("The list continues with i, j and k.") == {"letter i": 1, "letter j": 1, "letter k": 1}
    assert facts.facts("The word tiger is spelled t - i - g - e - r.") == {"spelled tiger": 1, "tiger": 1}
    assert facts.facts("Peru is a country in South America, and its capital is Lima.") == {
        "peru": 1, "south america": 1, "lima": 1}


def test_the_share_of_true_facts_pools_over_answers():
    assert facts.share_true([Score(3, 4, 0), Score(1, 1, 2)]) == 0.8
    assert facts.share_true([Score(0, 0, 3)]) != facts.share_true([Score(0, 0, 3)])  # NaN: nothing stated


def test_what_an_odd_picture_is_counts_as_a_fact():
    """On odd pictures the facts are what each picture is: mistaking noise for a texture, or an inverted
    chart for inverted text, is wrong; the count of pictures is a fact too."""
    truth = ("There are two pictures here, and none of them shows a clear scene. The first picture is random "
             "noise. The second picture looks like an inverted bar chart.")
    assert check(truth, truth) == Score(right=3, stated=3, missed=0)
    swapped = truth.replace("random noise", "a blurry texture").replace("bar chart", "printed text")
    assert check(swapped, truth) == Score(right=1, stated=3, missed=2)
    invented = truth + " It shows a red circle at the top left."
    assert check(invented, truth).wrong == 2  # the red circle, and the red circle at the top left
