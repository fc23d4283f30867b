"""The teaching world: conversations about its pictures, for training and evaluating the bundled pair.

Everything is drawn from a `random.Random(seed)`, so a seed names a reproducible split. Pictures are
shapes on a background, a printed word or number, or a bar chart (`scenes.py`); questions are about the
picture or about a knowledge base of countries, animals, arithmetic, spelling and lists (`knowledge.py`),
and their answers are long and worded anew each time (`answers.py`); second turns rework the first
answer, ask about the picture again, or change the subject. Odd pictures (noise, blurry textures,
inverted colours) show one to four at once; the world's answer about them says what each picture is and
why the question has no answer in them. The training stream shows them only where a recipe asks for a
share of them (`training_dialogue(odd_share=...)`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from PIL import Image

from .answers import ODD_FACTS, Exchange, follow_up, image_question, odd_question, text_question
from .knowledge import ANIMALS, COUNTRIES, DAYS, INVENTED_COUNTRIES, LETTERS, MONTHS, SPELL_WORDS
from .scenes import (
    BACKGROUNDS,
    CANVAS,
    COLOURS,
    INK,
    LABELS,
    NUMBER_WORDS,
    ODD_KINDS,
    ODD_PICTURES,
    POSITIONS,
    SHAPES,
    WORDS,
    ChartScene,
    OddScene,
    Scene,
    Shape,
    ShapesScene,
    TextScene,
    random_chart,
    random_odd,
    random_scene,
    random_shapes,
    random_text,
    render,
)

__all__ = ["ANIMALS", "BACKGROUNDS", "CANVAS", "COLOURS", "COUNTRIES", "DAYS", "INK", "INVENTED_COUNTRIES", "LABELS",
           "LETTERS", "MONTHS", "NUMBER_WORDS", "ODD_FACTS", "ODD_KINDS", "ODD_PICTURES", "POSITIONS", "SCENARIOS",
           "SHAPES", "SPELL_WORDS", "WORDS", "ChartScene", "Dialogue", "Exchange", "OddScene", "Scene", "Shape",
           "ShapesScene", "TextScene", "corpus", "follow_up", "image_question", "odd_question", "random_chart",
           "random_odd", "random_scene", "random_shapes", "random_text", "render", "scenario_dialogue", "split",
           "text_question", "training_dialogue", "training_scenario"]

SCENARIOS = ("image", "text", "followup", "odd")


@dataclass(frozen=True)
class Dialogue:
    """A conversation about its pictures (none, one, or several odd ones), all shown with the first
    question; `scenario` says what its last turn tests."""

    scenes: tuple[Scene, ...]
    exchanges: tuple[Exchange, ...]
    scenario: str
    seed: int = field(default=0, compare=False)

    @property
    def scene(self) -> Scene | None:
        """The (first) picture the questions are about, None without a picture."""
        return self.scenes[0] if self.scenes else None

    def images(self, size: int = CANVAS) -> list[Image.Image]:
        return [render(scene, size) for scene in self.scenes]

    def first_turns(self, count: int) -> Dialogue:
        """The dialogue cut to its first `count` exchanges (itself when it has no more)."""
        if len(self.exchanges) <= count:
            return self
        exchanges = self.exchanges[:count]
        return replace(self, exchanges=exchanges, scenario=training_scenario(exchanges))


def training_scenario(exchanges: tuple[Exchange, ...]) -> str:
    """What a training dialogue's last turn is: a second or third turn, or a first question on its picture
    or not."""
    return "followup" if len(exchanges) > 1 else ("image" if exchanges[0].about_image else "text")


# ---------------------------------------------------------------- dialogues and splits


def _dialogue_rng(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1_000_003 + index)


def training_dialogue(seed: int, index: int, shapes_share: float = 0.0, odd_share: float = 0.0) -> Dialogue:
    """Dialogue `index` of the training stream named by `seed`: 1 to 3 turns, in-world pictures, or with
    probability `odd_share` one to four odd pictures (the other dialogues are the same for every share).
    With `shapes_share`, that share of its in-world pictures are scenes of shapes, the rest drawn from the
    world's mix."""
    if odd_share and random.Random(f"odd {seed} {index}").random() < odd_share:
        return _odd_dialogue(_dialogue_rng(seed, index), index, image_share=0.6, turns=(6, 3, 1))
    rng = _dialogue_rng(seed, index)
    scene = _training_scene(rng, shapes_share) if rng.random() < 0.8 else None
    if scene is not None and rng.random() < 0.75:
        first = image_question(scene, rng)
    else:
        first = text_question(rng)
    exchanges = [first]
    turns = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
    while len(exchanges) < turns:
        exchanges.append(follow_up(scene, exchanges[-1], rng))
    return Dialogue(() if scene is None else (scene,), tuple(exchanges), training_scenario(tuple(exchanges)),
                    seed=index)


def _training_scene(rng: random.Random, shapes_share: float) -> Scene:
    """A picture of the stream; without a share it draws exactly what the world's mix draws (same rng use)."""
    if shapes_share and rng.random() < shapes_share:
        return random_shapes(rng)
    return random_scene(rng)


def _odd_dialogue(rng: random.Random, index: int, image_share: float, turns: tuple[int, int, int] = (1, 0, 0),
                  scenario: str | None = None) -> Dialogue:
    """One to four odd pictures, a first question about them (`image_share` of the time) or not, and
    second turns drawn with the `turns` weights for 1, 2, 3 turns."""
    scenes = tuple(random_odd(rng) for _ in range(rng.randint(*ODD_PICTURES)))
    exchanges = [odd_question(scenes, rng) if rng.random() < image_share else text_question(rng)]
    count = rng.choices([1, 2, 3], weights=turns)[0]
    while len(exchanges) < count:
        exchanges.append(follow_up(scenes[0], exchanges[-1], rng))
    exchanges = tuple(exchanges)
    return Dialogue(scenes, exchanges, scenario or training_scenario(exchanges), seed=index)


def scenario_dialogue(scenario: str, seed: int, index: int) -> Dialogue:
    """Dialogue `index` of an evaluation split: the last turn is the one a scenario tests."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}: choose one of {', '.join(SCENARIOS)}")
    rng = _dialogue_rng(seed, index)
    if scenario == "image":
        scene = random_scene(rng)
        return Dialogue((scene,), (image_question(scene, rng),), scenario, seed=index)
    if scenario == "text":
        scenes = (random_scene(rng),) if rng.random() < 0.5 else ()
        return Dialogue(scenes, (text_question(rng),), scenario, seed=index)
    if scenario == "odd":
        return _odd_dialogue(rng, index, image_share=1.0, scenario=scenario)
    scene = random_scene(rng)
    first = image_question(scene, rng) if rng.random() < 0.7 else text_question(rng)
    return Dialogue((scene,), (first, follow_up(scene, first, rng)), scenario, seed=index)


def split(scenario: str, seed: int, count: int) -> list[Dialogue]:
    return [scenario_dialogue(scenario, seed, i) for i in range(count)]


def corpus(seed: int, count: int) -> list[str]:
    """`count` training dialogues as chat text (LLaVA-1.5 style), for training a tokenizer."""
    texts = []
    for i in range(count):
        for exchange in training_dialogue(seed, i).exchanges:
            texts.append(f"USER: {exchange.question} ASSISTANT: {exchange.answer}")
    return texts
