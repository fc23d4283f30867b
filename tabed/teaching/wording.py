"""Words the teaching world's answers may say either way: "image" or "picture", "four" or "4", "is left of"
or "is to the left of". Each occurrence is drawn anew and uniformly, so that an answer has a near-tie every
few tokens, not only where a sentence starts: a real model pair disagrees every two to four tokens, and a
drafter that learned the same sentences still guesses these words wrong about half the time.
No alternative names a fact or changes one (the checker of `facts.py` reads them all alike)."""

from __future__ import annotations

import random
import re

_COUNTED = "two|three|four|five|six|seven|eight|nine"
_DIGITS = {word: str(i) for i, word in enumerate(_COUNTED.split("|"), start=2)}

# (pattern, alternatives): a match is replaced by one alternative (`\1`... name the pattern's groups).
SYNONYMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (r"\bThe image\b", ("The image", "The picture")),
    (r"\bthe image\b", ("the image", "the picture")),
    (r"\bThis picture\b", ("This picture", "This image")),
    (r"\bshows\b", ("shows", "has", "contains")),
    (r"\bI can see\b", ("I can see", "I see")),
    (r"\b([Tt]here) is\b", (r"\1 is", r"\1's")),
    (r"\bIt is\b", ("It is", "It's")),
    (r"\bthe (top|bottom) (left|right) corner\b", (r"the \1 \2 corner", r"the \1 \2")),
    (r" is to the (left|right) of ", (r" is to the \1 of ", r" is \1 of ", r" sits to the \1 of ")),
    (r" is above ", (" is above ", " sits above ", " is over ")),
    (r" is below ", (" is below ", " sits below ", " is under ")),
    (r"\bon a (\w+) background\b", (r"on a \1 background", r"against a \1 background")),
    (rf"\b({_COUNTED}) (shapes|bars|legs|letters|corners)\b", (r"\1 \2", r"<digits>\1 \2")),
    (r"\b([Aa])bout (?=\d)", (r"\1bout ", "<upper>around ", "<upper>roughly ")),
    (r"(^|\. )So ", (r"\1So ", r"\1That means ", r"\1This means ")),
    (r"(\d+ plus \d+) is (\d+)", (r"\1 is \2", r"\1 makes \2", r"\1 gives \2")),
    (r"\breaches\b", ("reaches", "goes up to", "rises to")),
    (r"\ba value of\b", ("a value of", "the value")),
    (r"\bthe (\w+) one\b", (r"the \1 one", r"the \1 bar")),
    (r"\bthe highest\b", ("the highest", "the tallest")),
    (r"\bthe lowest\b", ("the lowest", "the shortest")),
    (r"\bin all\b", ("in all", "in total", "altogether")),
    (r"\bIt eats\b", ("It eats", "It feeds on")),
    (r"\bIt lives\b", ("It lives", "It makes its home")),
    (r"\bcovered with\b", ("covered with", "covered in")),
    (r"\bis a country in\b", ("is a country in", "is a nation in")),
    # what an odd picture is (only answers about odd pictures say these)
    (r"\b([Tt]he (?:first|second|third|fourth)) picture\b", (r"\1 picture", r"\1 image")),
    (r"\bnone of them\b", ("none of them", "not one of them")),
    (r"\ba clear scene\b", ("a clear scene", "a real scene")),
    (r"\brandom noise\b", ("random noise", "pure noise")),
    (r"\bblurry texture\b", ("blurry texture", "fuzzy texture", "blurred texture")),
    (r"\bhas its colours inverted\b", ("has its colours inverted", "has inverted colours")),
    (r"\blooks like\b", ("looks like", "seems to be", "appears to be")),
    (r"\bI cannot\b", ("I cannot", "I can't")),
)
_RULES = tuple((re.compile(pattern), alternatives) for pattern, alternatives in SYNONYMS)


def _alternative(rng: random.Random, alternatives: tuple[str, ...], match: re.Match) -> str:
    chosen = rng.choice(alternatives)
    if chosen.startswith("<digits>"):
        return re.sub(_COUNTED, lambda word: _DIGITS[word.group()], match.expand(chosen[len("<digits>"):]), count=1)
    if chosen.startswith("<upper>"):
        word = chosen[len("<upper>"):]
        return word.capitalize() if match.group(1).isupper() else word
    return match.expand(chosen)


def vary(rng: random.Random, text: str) -> str:
    """`text` with every interchangeable phrase drawn anew, each occurrence on its own."""
    for pattern, alternatives in _RULES:
        text = pattern.sub(lambda match, alternatives=alternatives: _alternative(rng, alternatives, match), text)
    return text


CONNECTIVES = ("", "Also, ", "Additionally, ")  # drawn before each later sentence opening with these words:
_LINKABLE = {"The", "It", "It's", "Its", "In", "At", "There", "There's", "You", "People", "Bar", "Roughly", "Around",
             "About", "This", "A", "An"}
CLOSINGS = ("", "I hope this helps.", "Just ask if you want to know more.")


def _linked(rng: random.Random, sentence: str) -> str:
    first = sentence.split(" ", 1)[0]
    if first not in _LINKABLE:
        return sentence
    connective = rng.choice(CONNECTIVES)
    if not connective:
        return sentence
    return connective + sentence[:1].lower() + sentence[1:]


def link(rng: random.Random, text: str) -> str:
    """`text` with a connective drawn for each later sentence that can take one, and a closing drawn at
    its end (each may be nothing)."""
    sentences = re.split(r"(?<=\.) (?=[A-Z])", text)
    sentences = sentences[:1] + [_linked(rng, sentence) for sentence in sentences[1:]]
    closing = rng.choice(CLOSINGS)
    return " ".join([*sentences, closing] if closing else sentences)


_CONNECTIVE = re.compile(r"(?<=\. )(?:" + "|".join(re.escape(c) for c in CONNECTIVES if c) + r")(\w)")
_CLOSING = re.compile(r" (?:" + "|".join(re.escape(c) for c in CLOSINGS if c) + r")$")
_CONTRACTIONS = ((re.compile(r"\b([Tt]here|[Ii]t)'s\b"), r"\1 is"), (re.compile(r"\bcan't\b"), "cannot"))


def plain(text: str) -> str:
    """`text` without the connectives and the closing that `link` may have drawn and without contractions:
    the same facts, said in the plainer manner of a model taught on other instruction data than its
    target's."""
    text = _CLOSING.sub("", _CONNECTIVE.sub(lambda match: match.group(1).upper(), text))
    for pattern, full in _CONTRACTIONS:
        text = pattern.sub(full, text)
    return text
