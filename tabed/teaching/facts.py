"""Checking an answer on facts, not on its string: the world's facts it states (shapes bound to their
colours, corners and neighbours, bars to their colours and values, backgrounds, counts, printed words,
labels, spelled words, knowledge, what an odd picture is), against those of the world's own answer.
Wording and order may vary as they like; a fact the true answer does not state (a wrong colour, a wrong
value, a shape too many) counts against the answer, and a fact it leaves out counts for nothing here
(`Score.missed` keeps them)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import astuple, dataclass

from . import world


def _vocabulary() -> list[str]:
    """Every fact word or phrase of the world, lower case, longest first (so "top left" wins over "left")."""
    words = {*world.COLOURS, *world.INK, *world.SHAPES, *world.POSITIONS, *world.BACKGROUNDS, *world.WORDS,
             *(f"bar {label.lower()}" for label in world.LABELS), *world.NUMBER_WORDS, *world.DAYS, *world.MONTHS,
             *world.ODD_FACTS}
    for row in (*world.COUNTRIES, *world.ANIMALS):
        words |= {item for item in astuple(row) if isinstance(item, str)}
    words -= {"one"}  # "the orange one" names no number; a count of one is written with its noun anyway
    return sorted((word.lower() for word in words), key=len, reverse=True)


VOCABULARY = _vocabulary()
NUMBERS = {word: str(value) for value, word in enumerate(world.NUMBER_WORDS)}  # "four" is the fact "4"
SPELLED = re.compile(r"\b[a-z](?: - [a-z])+\b")  # "t - i - g - e - r": one fact, the spelling
LISTED_LETTER = re.compile(r"\b[a-z]\b(?=,| and\b|\.)")  # "with i, j and k.": letters in a list, not articles
ONE = re.compile(r"\bone(?= (?:shape|bar|leg|letter)\b)")  # "one shape" is a count; "the orange one" is not
FACT = re.compile(r"\b(?:" + "|".join(re.escape(word) for word in VOCABULARY) + r")\b|\b\d+\b")


_COLOUR, _KIND = "|".join(world.COLOURS), "|".join(world.SHAPES)
_PLACE = "|".join(world.POSITIONS)
SHAPE = re.compile(rf"\b(?:{_COLOUR}) (?:{_KIND})\b")  # "blue circle": one fact, a shape with its colour
COLOURED = re.compile(rf"\bthe ({_KIND}) is (?:coloured )?({_COLOUR})\b")  # "the circle is blue"
PLACE = re.compile(rf"\b(?:{_PLACE})\b")
RELATION = re.compile(rf"\b((?:{_COLOUR}) (?:{_KIND})) (?:is|sits) (?:to the )?(left of|right of|above|over|below|"
                      rf"under) the ((?:{_COLOUR}) (?:{_KIND}))\b")
BAR = re.compile(r"\bbar [a-d]\b")
BAR_FACT = re.compile(rf"\b(?:{_COLOUR}|{'|'.join(world.NUMBER_WORDS[2:10])})\b|\b\d+\b")
FLIPPED = {"left of": ("left of", False), "right of": ("left of", True), "above": ("above", False),
           "over": ("above", False), "below": ("above", True), "under": ("above", True)}


def _shape_facts(sentence: str) -> tuple[Counter[str], str]:
    """A sentence's shapes with their colours, corners and neighbours, each bound into one fact ("blue circle
    at bottom right", "red star left of blue circle", from either side); and the sentence without them."""
    found = Counter()
    for first, relation, second in RELATION.findall(sentence):
        relation, flip = FLIPPED[relation]
        found[f"{second} {relation} {first}" if flip else f"{first} {relation} {second}"] += 1
    sentence = RELATION.sub(" ", sentence)
    sentence = COLOURED.sub(lambda match: f"{match[2]} {match[1]}", sentence)
    for part in re.split(r",| and ", sentence):  # "a red star at the top left, a blue circle at the ..."
        shapes, places = SHAPE.findall(part), PLACE.findall(part)
        if len(shapes) == 1 and len(places) == 1:
            found[f"{shapes[0]} at {places[0]}"] += 1
            sentence = sentence.replace(part, PLACE.sub(" ", part), 1)
    found.update(SHAPE.findall(sentence))
    return found, SHAPE.sub(" ", sentence)


def _bar_facts(sentence: str) -> tuple[Counter[str], str]:
    """The colour and value a sentence about one bar says of it ("bar b, the orange one, reaches 8": "bar b:
    orange", "bar b: 8"); and the sentence without them. Sums name several bars and bind nothing."""
    bars = BAR.findall(sentence)
    if len(set(bars)) != 1 or " plus " in sentence:
        return Counter(), sentence
    said = [NUMBERS.get(word, word) for word in BAR_FACT.findall(BAR.sub(" ", sentence))]
    return Counter(f"{bars[0]}: {fact}" for fact in said), BAR_FACT.sub(" ", sentence)


def _bound(lowered: str) -> tuple[Counter[str], str]:
    """The facts bound to a shape or a bar, sentence by sentence, so that a colour, a corner, a neighbour
    or a value said of the wrong shape or bar is wrong; and the text without them."""
    found, rest = Counter(), []
    for sentence in re.split(r"(?<=\.)\s+", lowered):
        shapes, sentence = _shape_facts(sentence)
        bars, sentence = _bar_facts(sentence)
        found += shapes + bars
        rest.append(sentence)
    return found, " ".join(rest)


def facts(text: str) -> Counter[str]:
    """The world's facts a text states, each as often as it states it (numbers as digits)."""
    found, lowered = _bound(text.lower())
    found += Counter("spelled " + match.replace(" - ", "") for match in SPELLED.findall(lowered))
    lowered = SPELLED.sub(" ", lowered)
    found.update("1" for _ in ONE.findall(lowered))
    found.update(NUMBERS.get(match, match) for match in FACT.findall(lowered))
    found.update("letter " + match for match in LISTED_LETTER.findall(FACT.sub(" ", lowered)))  # "bar B," is no letter
    return found


@dataclass(frozen=True)
class Score:
    """How many of the facts an answer states are true, and how many true ones it left out."""

    right: int
    stated: int
    missed: int

    @property
    def wrong(self) -> int:
        return self.stated - self.right


def check(answer: str, truth: str) -> Score:
    """An answer's facts against the world's answer to the same question, each distinct fact once: the
    world's wordings of one answer may name its subject once more ("The pig is a mammal" or "It is a
    mammal"), and a fact said twice is no second fact."""
    stated, true = set(facts(answer)), set(facts(truth))
    right = len(stated & true)
    return Score(right, len(stated), len(true) - right)


def share_true(scores: list[Score]) -> float:
    """The facts stated that were true, over a set of answers (NaN when none stated any)."""
    stated = sum(score.stated for score in scores)
    return sum(score.right for score in scores) / stated if stated else float("nan")
