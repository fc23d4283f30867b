"""Checking an answer on facts, not on its string: the world's facts it states (colours, shapes, positions,
backgrounds, values and counts, printed words, labels, spelled words, knowledge), against those of the
world's own answer. Wording and order may vary as they like; a fact the true answer does not state (a
wrong colour, a wrong value, a shape too many) counts against the answer, and a fact it leaves out counts
for nothing here (`Score.missed` keeps them)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import astuple, dataclass

from . import world


def _vocabulary() -> list[str]:
    """Every fact word or phrase of the world, lower case, longest first (so "top left" wins over "left")."""
    words = {*world.COLOURS, *world.INK, *world.SHAPES, *world.POSITIONS, *world.BACKGROUNDS, *world.WORDS,
             *(f"bar {label.lower()}" for label in world.LABELS), *world.NUMBER_WORDS, *world.DAYS, *world.MONTHS}
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


def facts(text: str) -> Counter[str]:
    """The world's facts a text states, each as often as it states it (numbers as digits)."""
    lowered = text.lower()
    found = Counter("spelled " + match.replace(" - ", "") for match in SPELLED.findall(lowered))
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
