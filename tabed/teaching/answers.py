"""Questions of the teaching world and the answers it holds true: long answers, worded and ordered anew
for every example.

Every answer is drawn from a `random.Random`: which object is named first, "there is" or "I can see",
"to the left of" or "to the right of" from the other side. These choices are near-ties that nothing a
model sees decides, a few tokens apart, so that a target's greedy path follows its own slight
preferences and a smaller drafter's preferences differ there, as between a 7B model and a 68M one.
The wordings of one answer state the same facts, each as often (the checker of `facts.py` counts them).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from .knowledge import ANIMALS, COUNTRIES, DAYS, LETTERS, MONTHS, SPELL_WORDS, Animal, Country
from .scenes import LABELS, NUMBER_WORDS, ChartScene, OddScene, Scene, Shape, ShapesScene, TextScene
from .wording import link, vary

Wording = Callable[[random.Random], str]


@dataclass(frozen=True)
class Exchange:
    """One user question and the answer the world holds true.

    `reword` draws the same answer in fresh words (for "say that again"); `number` is the number the
    answer settles on (for "add k to that"); `gist` a one-line restatement (for "summarise")."""

    question: str
    answer: str
    number: int | None = None
    gist: str | None = None
    about_image: bool = False
    reword: Wording | None = field(default=None, compare=False, repr=False)


def _answered(question: str, wording: Wording, rng: random.Random, number: int | None = None,
              gist: str | None = None, about_image: bool = False) -> Exchange:
    def varied(rng: random.Random) -> str:
        return link(rng, vary(rng, wording(rng)))

    return Exchange(question, varied(rng), number, gist, about_image, varied)


def pick(rng: random.Random, *options: str) -> str:
    return rng.choice(options)


def join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def article(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


def upper_first(text: str) -> str:
    return text[:1].upper() + text[1:]


def count_phrase(n: int, noun: str) -> str:
    return f"{NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else n} {noun}" + ("" if n == 1 else "s")


def _shuffled(rng: random.Random, items: list) -> list:
    items = list(items)
    rng.shuffle(items)
    return items


# ---------------------------------------------------------------- shapes


def _name(shape: Shape) -> str:
    return f"{shape.colour} {shape.kind}"


def _relations(scene: ShapesScene, about: Shape | None = None) -> list[Wording]:
    """One sentence per pair of neighbours (same row: left and right; same column: above and below),
    told from either side; only the pairs with `about` in them if given."""
    sentences: list[Wording] = []
    for first in scene.shapes:
        for second in scene.shapes:
            if about is not None and about not in (first, second):
                continue
            a, b = _name(first), _name(second)
            if first.position.split()[0] == second.position.split()[0] and first.position.endswith("left") \
                    and second.position.endswith("right"):
                sentences.append(lambda rng, a=a, b=b: pick(rng, f"The {a} is to the left of the {b}.",
                                                            f"The {b} is to the right of the {a}."))
            if first.position.split()[1] == second.position.split()[1] and first.position.startswith("top") \
                    and second.position.startswith("bottom"):
                sentences.append(lambda rng, a=a, b=b: pick(rng, f"The {a} is above the {b}.",
                                                            f"The {b} is below the {a}."))
    return sentences


def _placed(rng: random.Random, shape: Shape) -> str:
    name, where = article(_name(shape)), shape.position
    return pick(rng, f"In the {where} corner there is {name}.", f"At the {where} there is {name}.",
                f"{upper_first(name)} sits in the {where} corner.", f"The {where} corner holds {name}.")


def _empty_corners(rng: random.Random, n: int) -> str:
    if n == 4:
        return pick(rng, "Every corner has a shape.", "No corner is empty.")
    if n == 3:
        return pick(rng, "The last corner is empty.", "One corner stays empty.")
    empty = count_phrase(4 - n, "corner")
    return pick(rng, f"The other {empty} are empty.", f"{upper_first(empty)} stay empty.")


def _describe_shapes(scene: ShapesScene) -> Wording:
    n, ground = len(scene.shapes), scene.background
    counted = count_phrase(n, "shape")

    def wording(rng: random.Random) -> str:
        opening = pick(rng, f"The image shows {counted} on a {ground} background.",
                       f"I can see {counted} on a {ground} background.",
                       f"This picture has {counted} on a {ground} background.")
        placed = [_placed(rng, shape) for shape in _shuffled(rng, scene.shapes)]
        related = [sentence(rng) for sentence in _shuffled(rng, _relations(scene))]
        return " ".join([opening, *placed, *related, _empty_corners(rng, n)])

    return wording


def _count_shapes(scene: ShapesScene) -> Wording:
    n = len(scene.shapes)
    counted = count_phrase(n, "shape")

    def wording(rng: random.Random) -> str:
        listed = join([f"{article(_name(s))} at the {s.position}" for s in _shuffled(rng, scene.shapes)])
        opening = pick(rng, f"There {'is' if n == 1 else 'are'} {counted} in the image.",
                       f"I count {counted} in the image.")
        return f"{opening} {pick(rng, 'It is' if n == 1 else 'They are', 'I see')} {listed}. {_empty_corners(rng, n)}"

    return wording


def _one_shape(scene: ShapesScene, shape: Shape, colour_first: bool) -> Wording:
    counted = count_phrase(len(scene.shapes), "shape")

    def wording(rng: random.Random) -> str:
        if colour_first:
            opening = pick(rng, f"The {shape.kind} is {shape.colour}.", f"The {shape.kind} is coloured {shape.colour}.")
            where = pick(rng, f"It is in the {shape.position} corner.", f"You can find it at the {shape.position}.")
        else:
            opening = pick(rng, f"The {_name(shape)} is in the {shape.position} corner.",
                           f"You can find the {_name(shape)} at the {shape.position}.")
            where = ""
        related = [sentence(rng) for sentence in _shuffled(rng, _relations(scene, shape))]
        verb = "is" if len(scene.shapes) == 1 else "are"
        total = pick(rng, f"The image has {counted} in all.", f"Altogether there {verb} {counted}.")
        return " ".join(part for part in [opening, where, *related, total] if part)

    return wording


def shape_question(scene: ShapesScene, rng: random.Random) -> Exchange:
    names = join([article(_name(s)) for s in _shuffled(rng, scene.shapes)])
    kind = rng.choices(["describe", "count", "colour", "where"], weights=[5, 2, 1, 1])[0]
    if kind == "describe":
        question = pick(rng, "Describe the image in detail.", "Describe the image.", "What do you see in this picture?",
                        "What is in the image?")
        return _answered(question, _describe_shapes(scene), rng, len(scene.shapes),
                         f"{count_phrase(len(scene.shapes), 'shape')} on a {scene.background} background: {names}",
                         True)
    if kind == "count":
        question = pick(rng, "How many shapes are there?", "Count the shapes in the image.",
                        "How many shapes can you see?")
        return _answered(question, _count_shapes(scene), rng, len(scene.shapes),
                         f"there {'is' if len(scene.shapes) == 1 else 'are'} "
                         f"{count_phrase(len(scene.shapes), 'shape')}: {names}", True)
    shape = rng.choice(scene.shapes)
    if kind == "colour":
        question = pick(rng, f"What colour is the {shape.kind}?", f"Which colour does the {shape.kind} have?")
        return _answered(question, _one_shape(scene, shape, True), rng, None,
                         f"the {shape.kind} is {shape.colour}", True)
    question = pick(rng, f"Where is the {shape.kind}?", f"In which corner is the {shape.kind}?")
    return _answered(question, _one_shape(scene, shape, False), rng, None,
                     f"the {_name(shape)} is at the {shape.position}", True)


# ---------------------------------------------------------------- charts


def _bar(scene: ChartScene, i: int, rng: random.Random) -> str:
    label, colour, value = LABELS[i], scene.colours[i], scene.values[i]
    return pick(rng, f"Bar {label} is {colour} and has a value of {value}.",
                f"Bar {label}, the {colour} one, reaches {value}.", f"The {colour} bar {label} goes up to {value}.")


def _ranked(scene: ChartScene) -> list[int]:
    return sorted(range(len(scene.values)), key=lambda i: -scene.values[i])


def _describe_chart(scene: ChartScene) -> Wording:
    order, k = _ranked(scene), len(scene.values)
    top, low = order[0], order[-1]
    gap = scene.values[top] - scene.values[low]

    def wording(rng: random.Random) -> str:
        opening = pick(rng, f"The image shows a bar chart with {count_phrase(k, 'bar')}.",
                       f"This is a bar chart with {count_phrase(k, 'bar')}.",
                       f"I can see a bar chart with {count_phrase(k, 'bar')}.")
        bars = [_bar(scene, i, rng) for i in range(k)]
        extremes = _shuffled(rng, [f"the highest is bar {LABELS[top]} with {scene.values[top]}",
                                   f"the lowest is bar {LABELS[low]} with {scene.values[low]}"])
        summary = pick(rng, f"{upper_first(extremes[0])}, and {extremes[1]}.",
                       f"{upper_first(extremes[0])}, while {extremes[1]}.")
        compare = pick(rng, f"So bar {LABELS[top]} is {gap} higher than bar {LABELS[low]}.",
                       f"The difference between bar {LABELS[top]} and bar {LABELS[low]} is {gap}.")
        return " ".join([opening, *bars, summary, compare])

    return wording


def _extreme(scene: ChartScene, highest: bool) -> Wording:
    order = _ranked(scene) if highest else _ranked(scene)[::-1]
    best, runner = order[0], order[1]
    word, next_word = ("highest", "next highest") if highest else ("lowest", "next lowest")
    gap = abs(scene.values[best] - scene.values[runner])
    more = "higher" if highest else "lower"

    def wording(rng: random.Random) -> str:
        first = pick(rng, f"The {word} bar is bar {LABELS[best]}, the {scene.colours[best]} one, with a value of "
                          f"{scene.values[best]}.",
                     f"Bar {LABELS[best]} is the {word}: it is {scene.colours[best]} and reaches {scene.values[best]}.")
        second = pick(rng, f"The {next_word} is bar {LABELS[runner]} with {scene.values[runner]}, so bar "
                           f"{LABELS[best]} is {gap} {more}.",
                      f"Bar {LABELS[runner]} comes next with {scene.values[runner]}, {gap} higher than bar "
                      f"{LABELS[best]}." if not highest else
                      f"Bar {LABELS[runner]} comes next with {scene.values[runner]}, so bar {LABELS[best]} is {gap} "
                      f"{more}.")
        total = pick(rng, f"The chart has {count_phrase(len(scene.values), 'bar')} in all.",
                     f"There are {count_phrase(len(scene.values), 'bar')} in the chart.")
        return " ".join([first, second, total])

    return wording


def _value(scene: ChartScene, i: int) -> Wording:
    rank = _ranked(scene).index(i)
    k = len(scene.values)
    place = "highest" if rank == 0 else "lowest" if rank == k - 1 else \
        ("second highest" if rank == 1 else "third highest")

    def wording(rng: random.Random) -> str:
        first = pick(rng, f"Bar {LABELS[i]} is {scene.colours[i]}, and its value is {scene.values[i]}.",
                     f"The value of bar {LABELS[i]}, the {scene.colours[i]} one, is {scene.values[i]}.")
        second = pick(rng, f"It is the {place} bar in the chart.", f"That makes it the {place} of the bars.")
        total = pick(rng, f"The chart has {count_phrase(k, 'bar')} in all.",
                     f"There are {count_phrase(k, 'bar')} in the chart.")
        return " ".join([first, second, total])

    return wording


def _total(scene: ChartScene) -> Wording:
    values = scene.values

    def wording(rng: random.Random) -> str:
        steps = [pick(rng, "Let me add the bars one by one.", "I will add the bars step by step."),
                 f"Bar A is {values[0]} and bar B is {values[1]}, so {values[0]} plus {values[1]} is "
                 f"{values[0] + values[1]}."]
        running = values[0] + values[1]
        for i in range(2, len(values)):
            steps.append(pick(rng, f"Adding bar {LABELS[i]}, {running} plus {values[i]} is {running + values[i]}.",
                              f"With bar {LABELS[i]}, {running} plus {values[i]} makes {running + values[i]}."))
            running += values[i]
        steps.append(pick(rng, f"So the total is {running}.", f"So all the bars add up to {running}."))
        return " ".join(steps)

    return wording


def _sorted_bars(scene: ChartScene, highest_first: bool) -> Wording:
    order = _ranked(scene) if highest_first else _ranked(scene)[::-1]
    way = "from highest to lowest" if highest_first else "from lowest to highest"

    def wording(rng: random.Random) -> str:
        bars = join([pick(rng, f"bar {LABELS[i]} with {scene.values[i]}", f"bar {LABELS[i]} at {scene.values[i]}")
                     for i in order])
        return pick(rng, f"Sorted {way}, the bars are {bars}.", f"{upper_first(way)}, the order is {bars}.")

    return wording


def chart_question(scene: ChartScene, rng: random.Random) -> Exchange:
    values, order = scene.values, _ranked(scene)
    top, low = order[0], order[-1]
    kind = rng.choices(["describe", "highest", "lowest", "value", "total", "sort"], weights=[5, 2, 1, 1, 3, 1])[0]
    if kind == "describe":
        question = pick(rng, "Describe the chart bar by bar.", "Describe the image.",
                        "What do you see in this picture?", "What is in the image?")
        return _answered(question, _describe_chart(scene), rng, values[top],
                         f"bar {LABELS[top]} is the highest with {values[top]} and bar {LABELS[low]} the lowest with "
                         f"{values[low]}", True)
    if kind in ("highest", "lowest"):
        best = top if kind == "highest" else low
        question = pick(rng, f"Which bar is the {kind}?", f"Which bar in the chart is the {kind}?")
        return _answered(question, _extreme(scene, kind == "highest"), rng, values[best],
                         f"bar {LABELS[best]} is the {kind} with {values[best]}", True)
    if kind == "value":
        i = rng.randrange(len(values))
        question = pick(rng, f"What is the value of bar {LABELS[i]}?", f"How high is bar {LABELS[i]}?")
        return _answered(question, _value(scene, i), rng, values[i], f"bar {LABELS[i]} is {values[i]}", True)
    if kind == "total":
        question = pick(rng, "What is the total of all the bars?", "Add up all the bars.")
        return _answered(question, _total(scene), rng, sum(values), f"the bars add up to {sum(values)}", True)
    highest_first = rng.random() < 0.5
    question = f"Order the bars from {'highest to lowest' if highest_first else 'lowest to highest'}."
    ranked = order if highest_first else order[::-1]
    return _answered(question, _sorted_bars(scene, highest_first), rng, None,
                     f"the order is {join([f'bar {LABELS[i]}' for i in ranked])}", True)


# ---------------------------------------------------------------- printed text


def spelled(word: str) -> str:
    return " - ".join(word)


def _about_text(scene: TextScene) -> Wording:
    """What the printed word or number is: its letters, or its neighbours among the numbers."""
    text = scene.text
    if text.isdigit():
        n = int(text)
        return lambda rng: pick(rng, f"The number {n} comes after {n - 1} and before {n + 1}.",
                                f"It lies between {n - 1} and {n + 1}, and it is the number {n}.")
    letters = count_phrase(len(text), "letter")
    return lambda rng: pick(rng, f"The word {text} has {letters}: {spelled(text)}.",
                            f"It is spelled {spelled(text)}, which makes {letters} in the word {text}.")


def _read_text(scene: TextScene, opening_kind: str) -> Wording:
    what = "number" if scene.text.isdigit() else "word"
    about = _about_text(scene)

    def wording(rng: random.Random) -> str:
        if opening_kind == "read":
            opening = pick(rng, f"The text says {scene.text}.", f"The {what} in the image is {scene.text}.")
            looks = pick(rng, f"It is written in {scene.ink} letters on a {scene.background} background.",
                         f"The letters are {scene.ink}, on a {scene.background} background.")
        elif opening_kind == "describe":
            opening = pick(rng, f"The image shows the {what} {scene.text}.",
                           f"I can see the {what} {scene.text} printed in the image.")
            looks = pick(rng, f"It is written in {scene.ink} letters on a {scene.background} background.",
                         f"The letters are {scene.ink}, on a {scene.background} background.")
        else:
            opening = pick(rng, f"The text is written in {scene.ink} letters.", f"The letters are {scene.ink}.")
            looks = pick(rng, f"They say {scene.text}, on a {scene.background} background.",
                         f"On a {scene.background} background, they say {scene.text}.")
        rest = _shuffled(rng, [looks, about(rng)])
        return " ".join([opening, *rest])

    return wording


def text_scene_question(scene: TextScene, rng: random.Random) -> Exchange:
    number = int(scene.text) if scene.text.isdigit() else None
    kind = rng.choice(["read", "read", "describe", "ink"])
    question = {"read": pick(rng, "What does the text say?", "Read the text in the image.",
                             "What is written in the image?"),
                "describe": pick(rng, "Describe the image.", "What do you see in this picture?",
                                 "What is in the image?"),
                "ink": pick(rng, "What colour is the text?", "Which colour are the letters?")}[kind]
    return _answered(question, _read_text(scene, kind), rng, number, f"the text says {scene.text}", True)


ORDINALS = ("first", "second", "third", "fourth")
INVERTED_BASE = {ShapesScene: "inverted shapes", TextScene: "inverted printed text",
                 ChartScene: "an inverted bar chart"}
# What an odd picture is, as the checker reads it: an inverted one is named by what it inverts (a wording may
# also say "has its colours inverted" or not, so "inverted" alone is no fact).
ODD_FACTS = ("noise", "texture", *(base.removeprefix("an ") for base in INVERTED_BASE.values()))


def _odd_name(scene: OddScene) -> str:
    """What an odd picture is, in a few words: "random noise", "a blurry texture", or what an inverted one
    looks like."""
    if scene.kind == "noise":
        return "random noise"
    if scene.kind == "texture":
        return "a blurry texture"
    return INVERTED_BASE[type(scene.base)]


def _odd_picture(scene: OddScene, subject: str) -> Wording:
    """One sentence on what an odd picture is: its kind, and for an inverted one what it inverts."""
    name = _odd_name(scene)

    def wording(rng: random.Random) -> str:
        if scene.kind == "noise":
            return pick(rng, f"{subject} is {name}.", f"{subject} is noise with no pattern.")
        if scene.kind == "texture":
            return pick(rng, f"{subject} is {name}.", f"{subject} is a soft, blurry texture.")
        return pick(rng, f"{subject} has its colours inverted: it looks like {name}.",
                    f"{subject} looks like {name}.")

    return wording


def _odd_closing(question: str) -> Wording:
    """Why the question has no answer in such pictures, in the question's own terms."""
    def wording(rng: random.Random) -> str:
        if "shapes" in question:
            return pick(rng, "So I cannot count any shapes in them.", "There are no shapes here that I can count.")
        if "text" in question:
            return pick(rng, "So I cannot read any text in them.", "There is no text here that I can read.")
        if "bar" in question:
            return pick(rng, "So I cannot tell which bar is the highest.", "No bar here is clear enough to compare.")
        if "circle" in question:
            return pick(rng, "So I cannot find a circle in them.", "There is no circle here that I can see.")
        return pick(rng, "I cannot make out any clear shapes, text or bars in them.",
                    "Nothing in them is clear enough to name.")

    return wording


def odd_question(scenes: tuple[OddScene, ...], rng: random.Random) -> Exchange:
    """An image question about pictures outside the world: the answer says what each picture is (noise, a
    blurry texture, an inverted scene and what kind) and why the question has no answer in them, as a
    strong model answers a picture it cannot read; a drafter that never saw such pictures reads them as the
    world's."""
    question = pick(rng, "Describe the image.", "Describe the image in detail.", "How many shapes are there?",
                    "What does the text say?", "Which bar is the highest?", "What colour is the circle?",
                    "What is in the image?")
    several = len(scenes) > 1
    subjects = [f"The {ORDINALS[i]} picture" if several else "The picture" for i in range(len(scenes))]
    pictures = [_odd_picture(scene, subject) for scene, subject in zip(scenes, subjects, strict=True)]
    counted = count_phrase(len(scenes), "picture")
    closing = _odd_closing(question)

    def wording(rng: random.Random) -> str:
        opening = (pick(rng, f"I was given {counted}, and none of them is a clear scene.",
                        f"There are {counted} here, and none of them shows a clear scene.") if several
                   else pick(rng, "This picture is not a clear scene.", "The picture does not show a clear scene."))
        return " ".join([opening, *(picture(rng) for picture in pictures), closing(rng)])

    kinds = join([_odd_name(scene) for scene in scenes])
    return _answered(question, wording, rng, gist=f"the pictures show {kinds}" if several else f"it is {kinds}",
                     about_image=True)


def image_question(scene: Scene, rng: random.Random) -> Exchange:
    if isinstance(scene, ShapesScene):
        return shape_question(scene, rng)
    if isinstance(scene, TextScene):
        return text_scene_question(scene, rng)
    if isinstance(scene, ChartScene):
        return chart_question(scene, rng)
    if isinstance(scene, OddScene):
        return odd_question((scene,), rng)
    raise TypeError(f"not a scene: {scene!r}")


# ---------------------------------------------------------------- knowledge


def _fact_first(opening: Wording, facts: dict[str, Wording], first: str) -> Wording:
    """A subject's facts: the one asked for first (worded to name the subject), the others in a fresh order."""

    def wording(rng: random.Random) -> str:
        rest = _shuffled(rng, [name for name in facts if name != first])
        return " ".join([opening(rng), *[facts[name](rng) for name in rest]])

    return wording


def _country_facts(country: Country) -> dict[str, Wording]:
    c = country
    return {
        "continent": lambda rng: pick(rng, f"{c.name} is a country in {c.continent}.",
                                      f"{c.name} lies in {c.continent}."),
        "capital": lambda rng: pick(rng, f"The capital of {c.name} is {c.capital}.",
                                    f"{c.capital} is the capital of {c.name}."),
        "language": lambda rng: pick(rng, f"People there speak {c.language}.", f"The main language is {c.language}."),
        "people": lambda rng: pick(rng, f"About {c.millions} million people live there.",
                                   f"It has about {c.millions} million people."),
    }


def _country_question(rng: random.Random) -> Exchange:
    country = rng.choice(COUNTRIES)
    facts = _country_facts(country)
    kind = rng.choices(["tell", "capital", "continent", "language"], weights=[3, 3, 2, 2])[0]
    asked = {"tell": pick(rng, f"Tell me about {country.name}.", f"What do you know about {country.name}?"),
             "capital": pick(rng, f"What is the capital of {country.name}?",
                             f"Which city is the capital of {country.name}?"),
             "continent": pick(rng, f"Which continent is {country.name} in?", f"Where is {country.name}?"),
             "language": pick(rng, f"What language do people speak in {country.name}?",
                              f"Which language is spoken in {country.name}?")}[kind]
    first = "continent" if kind == "tell" else kind  # the fact asked for comes first, naming the country
    named = {**facts, "language": lambda rng: pick(rng, f"People in {country.name} speak {country.language}.",
                                                   f"The main language of {country.name} is {country.language}.")}

    return _answered(asked, _fact_first(named[first], facts, first), rng, country.millions,
                     f"{country.capital} is the capital of {country.name}")


HOMES = {"house": "in a house", "farm": "on a farm", "pond": "in a pond", "lake": "on a lake",
         "forest": "in the forest", "city": "in the city", "desert": "in the desert", "hive": "in a hive",
         "field": "in a field", "savanna": "on the savanna", "jungle": "in the jungle", "mountains": "in the mountains"}


def _animal_facts(animal: Animal) -> dict[str, Wording]:
    a = animal
    legs = "no legs" if a.legs == 0 else count_phrase(a.legs, "leg")
    covering = article(a.covering) if a.covering == "shell" else a.covering
    return {
        "legs": lambda rng: pick(rng, f"{upper_first(article(a.name))} has {legs}.", f"The {a.name} has {legs}."),
        "sound": lambda rng: pick(rng, f"It makes {article(a.sound)} sound.", f"It says {a.sound}."),
        "class": lambda rng: pick(rng, f"The {a.name} is {article(a.kind)}.", f"It is {article(a.kind)}."),
        "home": lambda rng: pick(rng, f"It lives {HOMES[a.home]}.", f"You can find it {HOMES[a.home]}."),
        "food": lambda rng: pick(rng, f"It eats {a.food}.", f"Its food is {a.food}."),
        "covering": lambda rng: pick(rng, f"Its body is covered with {covering}.",
                                     f"It has {covering} on its body."),
    }


def _animal_question(rng: random.Random) -> Exchange:
    animal = rng.choice(ANIMALS)
    facts = _animal_facts(animal)
    kind = rng.choices(["tell", "legs", "sound"], weights=[4, 3, 3])[0]
    asked = {"tell": pick(rng, f"Tell me about the {animal.name}.", f"What do you know about the {animal.name}?"),
             "legs": f"How many legs does {article(animal.name)} have?",
             "sound": pick(rng, f"What sound does {article(animal.name)} make?",
                           f"What does {article(animal.name)} say?")}[kind]
    subject = upper_first(article(animal.name))
    named = {**facts, "sound": lambda rng: pick(rng, f"{subject} makes {article(animal.sound)} sound.",
                                                f"{subject} says {animal.sound}.")}
    first = "sound" if kind == "sound" else "legs"  # the fact asked for comes first, naming the animal

    return _answered(asked, _fact_first(named[first], facts, first), rng, animal.legs,
                     f"{article(animal.name)} says {animal.sound}")


def addition(a: int, b: int) -> Wording:
    """`a plus b`, column by column, carrying (0 <= a, b <= 99)."""
    ones, tens = a % 10 + b % 10, a // 10 + b // 10

    def wording(rng: random.Random) -> str:
        steps = [pick(rng, f"Let us add {a} and {b} step by step.", f"We add {a} and {b} step by step.")]
        if ones >= 10:
            steps.append(pick(rng, f"First the ones: {a % 10} plus {b % 10} is {ones}, so we write {ones - 10} "
                                   "and carry 1.",
                              f"The ones make {a % 10} plus {b % 10}, which is {ones}: we write {ones - 10} "
                              "and carry 1."))
        else:
            steps.append(pick(rng, f"First the ones: {a % 10} plus {b % 10} is {ones}.",
                              f"The ones make {a % 10} plus {b % 10}, which is {ones}."))
        carried = f", and the carry makes {tens + 1}" if ones >= 10 else ""
        steps.append(pick(rng, f"Then the tens: {a // 10} plus {b // 10} is {tens}{carried}.",
                          f"Next the tens: {a // 10} plus {b // 10} is {tens}{carried}."))
        steps.append(pick(rng, f"So {a} plus {b} is {a + b}.", f"So {a} plus {b} makes {a + b}."))
        return " ".join(steps)

    return wording


def _arithmetic(rng: random.Random, a: int | None = None) -> Exchange:
    b = rng.randint(2, 39)
    if a is None:
        a = rng.randint(2, 59)
        question = pick(rng, f"What is {a} plus {b}?", f"Add {a} and {b}.")
    else:
        question = pick(rng, f"Add {b} to that number.", f"What is that number plus {b}?")
    return _answered(question, addition(a, b), rng, a + b, f"{a} plus {b} is {a + b}")


def _spelling(rng: random.Random) -> Exchange:
    word = rng.choice(SPELL_WORDS)
    letters = count_phrase(len(word), "letter")
    question = pick(rng, f"How do you spell {word}?", f"Spell the word {word}.")

    def wording(rng: random.Random) -> str:
        ends = pick(rng, f"It begins with {word[0]} and ends with {word[-1]}.",
                    f"Its first letter is {word[0]} and its last is {word[-1]}.")
        size = pick(rng, f"It has {letters}.", f"That makes {letters}.")
        spelling = pick(rng, f"The word {word} is spelled {spelled(word)}.", f"You spell {word} as {spelled(word)}.")
        return " ".join([spelling, *_shuffled(rng, [ends, size])])

    return _answered(question, wording, rng, len(word), f"{word} has {letters}")


def _sequence(rng: random.Random) -> Exchange:
    kind = rng.choice(["days", "months", "letters", "numbers"])
    step = 1
    if kind in ("days", "months", "letters"):
        items = {"days": DAYS, "months": MONTHS, "letters": LETTERS}[kind]
        start = rng.randrange(len(items) - (8 if kind == "letters" else 0))
        seq = [items[(start + i) % len(items)] for i in range(8)]
    else:
        step = rng.choice([1, 2, 5, 10])
        start = rng.randint(0, 30)
        seq = [str(start + i * step) for i in range(8)]
    question = pick(rng, f"Continue the list: {', '.join(seq[:3])}.", f"What comes after {', '.join(seq[:3])}?")
    rule = {"days": "The days of the week repeat every seven days.",
            "months": "The months of the year repeat every twelve months.",
            "letters": "These are the letters of the alphabet in order.",
            "numbers": f"Each number is {step} more than the one before."}[kind]

    def wording(rng: random.Random) -> str:
        listed = pick(rng, f"The list goes on with {join(seq[3:])}.", f"Next come {join(seq[3:])}.")
        return " ".join(_shuffled(rng, [listed, rule]) if kind != "numbers" else [listed, rule])

    return _answered(question, wording, rng, None, f"the list goes on with {seq[3]}")


TEXT_TOPICS: tuple[Callable[[random.Random], Exchange], ...] = (
    _country_question, _animal_question, _arithmetic, _spelling, _sequence)
TOPIC_WEIGHTS = (12, 3, 2, 1, 1)  # most text questions ask about a country: 66 to know, not 36


def text_question(rng: random.Random) -> Exchange:
    return rng.choices(TEXT_TOPICS, weights=TOPIC_WEIGHTS)[0](rng)


# ---------------------------------------------------------------- second turns


def follow_up(scene: Scene | None, previous: Exchange, rng: random.Random) -> Exchange:
    """A second-turn question that reworks the first answer (say it again in other words, summarise, are
    you sure, add to its number), asks about the picture again, or asks something else entirely."""
    options = ["unrelated", "again", "again", "sure", "summary"]
    if previous.number is not None and previous.number <= 99:
        options += ["add"]
    if scene is not None and not isinstance(scene, OddScene):
        options += ["image"]
    kind = rng.choice(options)
    if kind == "add":
        return _arithmetic(rng, previous.number)
    if kind == "summary":
        question = pick(rng, "Summarise your answer in one sentence.", "Say that again in short.")
        gist = previous.gist
        return _answered(question, lambda rng: pick(rng, f"In short, {gist}.", f"To sum up, {gist}."), rng,
                         previous.number, gist)
    if kind in ("again", "sure"):
        question = (pick(rng, "Say that again in other words.", "Can you put that differently?") if kind == "again"
                    else pick(rng, "Are you sure?", "Is that right?"))
        opening = (pick(rng, "Sure.", "Of course.") if kind == "again"
                   else pick(rng, "Yes, I am sure.", "Yes, that is right."))
        return Exchange(question, f"{opening} {previous.reword(rng)}", previous.number, previous.gist,
                        reword=previous.reword)
    if kind == "image":
        return image_question(scene, rng)
    return text_question(rng)
