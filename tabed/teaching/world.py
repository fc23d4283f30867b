"""A procedural image-text world for the bundled teaching pair: scenes, pictures and conversations.

Everything is drawn from a `random.Random(seed)`, so a seed names a reproducible split. Scenes are
shapes on a background, a printed word or number, or a bar chart; questions are about the picture
(image-oriented) or about a small built-in knowledge base (text-oriented); follow-ups depend on the
first answer or not. Odd pictures (noise, blurry textures, inverted colours) are never trained on,
and neither is a prompt with more than one picture: the odd scenario shows one to four at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from PIL import Image, ImageDraw, ImageFont, ImageOps

CANVAS = 192  # pixels; the models' processors resize to their own input size

COLOURS = {
    "red": (215, 40, 40),
    "green": (40, 160, 60),
    "blue": (40, 80, 215),
    "yellow": (235, 195, 30),
    "purple": (135, 60, 175),
    "orange": (245, 135, 30),
}
INK = {"black": (20, 20, 20), "blue": (30, 50, 190), "red": (190, 30, 30)}
SHAPES = ("circle", "square", "triangle", "star")
POSITIONS = ("top left", "top right", "bottom left", "bottom right")
BACKGROUNDS = ("white", "grey", "striped", "dotted")
WORDS = ("apple", "river", "stone", "cloud", "tiger", "music", "bread", "light",
         "house", "happy", "ocean", "train", "smile", "paper", "chair", "dream")
LABELS = "ABCD"
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

CAPITALS = (
    ("France", "Paris", "Europe"), ("Italy", "Rome", "Europe"), ("Spain", "Madrid", "Europe"),
    ("Germany", "Berlin", "Europe"), ("Greece", "Athens", "Europe"), ("Norway", "Oslo", "Europe"),
    ("Japan", "Tokyo", "Asia"), ("China", "Beijing", "Asia"), ("Thailand", "Bangkok", "Asia"),
    ("Egypt", "Cairo", "Africa"), ("Kenya", "Nairobi", "Africa"), ("Ghana", "Accra", "Africa"),
    ("Peru", "Lima", "South America"), ("Chile", "Santiago", "South America"),
    ("Canada", "Ottawa", "North America"), ("Australia", "Canberra", "Oceania"),
)
ANIMALS = (
    ("cat", 4, "meow"), ("dog", 4, "woof"), ("cow", 4, "moo"), ("sheep", 4, "baa"), ("horse", 4, "neigh"),
    ("duck", 2, "quack"), ("owl", 2, "hoot"), ("snake", 0, "hiss"), ("bee", 6, "buzz"), ("frog", 4, "croak"),
)
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
LETTERS = "abcdefghijklmnopqrstuvwxyz"
SPELL_WORDS = WORDS + tuple(name for name, _, _ in ANIMALS) + tuple(COLOURS) + tuple(SHAPES)
ODD_KINDS = ("noise", "texture", "inverted")
# Odd dialogues show 1 to 4 odd pictures at once, as the paper's out-of-distribution sets (PororoSV,
# VIST: stories over several frames) show varying numbers of images; training shows one at most.
ODD_PICTURES = (1, 4)
SCENARIOS = ("image", "text", "followup", "odd")


# ---------------------------------------------------------------- scenes


@dataclass(frozen=True)
class Shape:
    kind: str
    colour: str
    position: str


@dataclass(frozen=True)
class ShapesScene:
    shapes: tuple[Shape, ...]
    background: str
    seed: int  # jitter of sizes, places and tints


@dataclass(frozen=True)
class TextScene:
    text: str
    ink: str
    background: str
    seed: int


@dataclass(frozen=True)
class ChartScene:
    values: tuple[int, ...]
    colours: tuple[str, ...]
    seed: int


@dataclass(frozen=True)
class OddScene:
    kind: str  # one of ODD_KINDS
    seed: int
    base: ShapesScene | TextScene | ChartScene | None = None  # the scene an inverted picture inverts


Scene = ShapesScene | TextScene | ChartScene | OddScene


def _jitter(rng: random.Random, rgb: tuple[int, int, int], amount: int) -> tuple[int, int, int]:
    return tuple(max(0, min(255, c + rng.randint(-amount, amount))) for c in rgb)


def _background(rng: random.Random, kind: str, size: int) -> Image.Image:
    base = (200, 200, 200) if kind == "grey" else (248, 248, 248)
    image = Image.new("RGB", (size, size), _jitter(rng, base, 6))
    draw = ImageDraw.Draw(image)
    tint = _jitter(rng, (215, 220, 235), 12)
    if kind == "striped":
        step = rng.randint(10, 16)
        for y in range(rng.randint(0, step), size, step):
            draw.rectangle([0, y, size, y + step // 3], fill=tint)
    elif kind == "dotted":
        step = rng.randint(12, 18)
        for y in range(step // 2, size, step):
            for x in range(step // 2, size, step):
                draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=tint)
    return image


def _star(cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    import math

    points = []
    for i in range(10):
        radius = r if i % 2 == 0 else r * 0.45
        angle = -math.pi / 2 + i * math.pi / 5
        points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
    return points


def _draw_shape(draw: ImageDraw.ImageDraw, rng: random.Random, shape: Shape, size: int) -> None:
    cell = size / 2
    column = 0 if shape.position.endswith("left") else 1
    row = 0 if shape.position.startswith("top") else 1
    cx = (column + 0.5) * cell + rng.uniform(-0.08, 0.08) * cell
    cy = (row + 0.5) * cell + rng.uniform(-0.08, 0.08) * cell
    r = rng.uniform(0.27, 0.38) * cell
    fill = _jitter(rng, COLOURS[shape.colour], 14)
    if shape.kind == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif shape.kind == "square":
        s = r * 0.88
        draw.rectangle([cx - s, cy - s, cx + s, cy + s], fill=fill)
    elif shape.kind == "triangle":
        draw.polygon([(cx, cy - r), (cx + r, cy + r * 0.8), (cx - r, cy + r * 0.8)], fill=fill)
    else:
        draw.polygon(_star(cx, cy, r * 1.1), fill=fill)


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _render_text(scene: TextScene, size: int) -> Image.Image:
    rng = random.Random(scene.seed)
    image = _background(rng, scene.background, size)
    draw = ImageDraw.Draw(image)
    font = _font(int(size * rng.uniform(0.27, 0.33)))
    left, top, right, bottom = draw.textbbox((0, 0), scene.text, font=font)
    x = (size - (right - left)) / 2 - left + rng.uniform(-0.06, 0.06) * size
    y = (size - (bottom - top)) / 2 - top + rng.uniform(-0.12, 0.12) * size
    draw.text((x, y), scene.text, fill=_jitter(rng, INK[scene.ink], 10), font=font)
    return image


def _render_chart(scene: ChartScene, size: int) -> Image.Image:
    rng = random.Random(scene.seed)
    image = Image.new("RGB", (size, size), _jitter(rng, (250, 250, 250), 4))
    draw = ImageDraw.Draw(image)
    base, unit = size * 0.86, size * 0.085
    for level in range(1, 10):
        y = base - level * unit
        draw.line([(size * 0.08, y), (size * 0.96, y)], fill=(228, 228, 228), width=1)
    slot = size * 0.88 / len(scene.values)
    font = _font(max(8, size // 12))
    for i, (value, colour) in enumerate(zip(scene.values, scene.colours, strict=True)):
        x0 = size * 0.08 + i * slot + slot * 0.18
        x1 = x0 + slot * 0.64
        draw.rectangle([x0, base - value * unit, x1, base], fill=_jitter(rng, COLOURS[colour], 10))
        draw.text(((x0 + x1) / 2, base + 2), LABELS[i], fill=(40, 40, 40), font=font, anchor="mt")
    draw.line([(size * 0.06, base), (size * 0.97, base)], fill=(60, 60, 60), width=2)
    return image


def _render_odd(scene: OddScene, size: int) -> Image.Image:
    rng = random.Random(scene.seed)
    if scene.kind == "noise":
        return Image.frombytes("RGB", (size, size), rng.randbytes(size * size * 3))
    if scene.kind == "texture":
        cells = rng.randint(3, 7)
        small = Image.frombytes("RGB", (cells, cells), rng.randbytes(cells * cells * 3))
        return small.resize((size, size), Image.Resampling.BICUBIC)
    if scene.base is None:
        raise ValueError("an inverted picture needs a base scene")
    return ImageOps.invert(render(scene.base, size))


def render(scene: Scene, size: int = CANVAS) -> Image.Image:
    """The picture of a scene, `size` pixels square, the same for the same scene."""
    if isinstance(scene, ShapesScene):
        rng = random.Random(scene.seed)
        image = _background(rng, scene.background, size)
        draw = ImageDraw.Draw(image)
        for shape in scene.shapes:
            _draw_shape(draw, rng, shape, size)
        return image
    if isinstance(scene, TextScene):
        return _render_text(scene, size)
    if isinstance(scene, ChartScene):
        return _render_chart(scene, size)
    return _render_odd(scene, size)


def random_shapes(rng: random.Random) -> ShapesScene:
    count = rng.randint(1, 4)
    kinds = rng.sample(SHAPES, count)
    places = sorted(rng.sample(range(4), count))
    colours = [rng.choice(list(COLOURS)) for _ in range(count)]
    shapes = tuple(Shape(k, c, POSITIONS[p]) for k, c, p in zip(kinds, colours, places, strict=True))
    return ShapesScene(shapes, rng.choice(BACKGROUNDS), rng.getrandbits(32))


def random_text(rng: random.Random) -> TextScene:
    text = rng.choice(WORDS) if rng.random() < 0.5 else str(rng.randint(1, 20))
    return TextScene(text, rng.choice(list(INK)), rng.choice(BACKGROUNDS[:2]), rng.getrandbits(32))


def random_chart(rng: random.Random) -> ChartScene:
    count = rng.randint(2, 4)
    values = tuple(rng.sample(range(1, 10), count))
    return ChartScene(values, tuple(rng.sample(list(COLOURS), count)), rng.getrandbits(32))


def random_scene(rng: random.Random) -> ShapesScene | TextScene | ChartScene:
    return rng.choices([random_shapes, random_text, random_chart], weights=[4, 3, 3])[0](rng)


def random_odd(rng: random.Random) -> OddScene:
    kind = rng.choice(ODD_KINDS)
    return OddScene(kind, rng.getrandbits(32), random_scene(rng) if kind == "inverted" else None)


# ---------------------------------------------------------------- questions and answers


@dataclass(frozen=True)
class Exchange:
    """One user question and the answer the world holds true (None where the picture has no answer)."""

    question: str
    answer: str | None
    number: int | None = None  # the number the answer settles on, for "add k to that"
    gist: str | None = None  # a short restatement, for "summarise your answer"
    about_image: bool = False


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


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _count_phrase(n: int, noun: str) -> str:
    return f"{NUMBER_WORDS[n]} {noun}" + ("" if n == 1 else "s")


def _shape_questions(scene: ShapesScene, rng: random.Random) -> Exchange:
    shapes = scene.shapes
    n = len(shapes)
    kind = rng.choice(["describe", "count", "colour", "where"])
    if kind == "describe":
        question = rng.choice(["Describe the image.", "What do you see in this picture?", "What is in the image?"])
        parts = [f"a {s.colour} {s.kind} at the {s.position}" for s in shapes]
        answer = f"The image shows {_count_phrase(n, 'shape')} on a {scene.background} background: {_join(parts)}."
        return Exchange(question, answer, n, f"the image shows {_count_phrase(n, 'shape')}", True)
    if kind == "count":
        question = rng.choice(["How many shapes are there?", "Count the shapes in the image.",
                               "How many shapes can you see?"])
        verb = "is" if n == 1 else "are"
        items = _join([f"a {s.colour} {s.kind}" for s in shapes])
        answer = f"There {verb} {_count_phrase(n, 'shape')} in the image: {items}."
        return Exchange(question, answer, n, f"there {verb} {_count_phrase(n, 'shape')}", True)
    shape = rng.choice(shapes)
    if kind == "colour":
        question = rng.choice([f"What colour is the {shape.kind}?", f"Which colour does the {shape.kind} have?"])
        answer = f"The {shape.kind} is {shape.colour}. It is at the {shape.position} of the image."
        return Exchange(question, answer, None, f"the {shape.kind} is {shape.colour}", True)
    question = rng.choice([f"Where is the {shape.kind}?", f"In which corner is the {shape.kind}?"])
    answer = f"The {shape.colour} {shape.kind} is at the {shape.position} of the image."
    return Exchange(question, answer, None, f"the {shape.kind} is at the {shape.position}", True)


def _text_questions(scene: TextScene, rng: random.Random) -> Exchange:
    number = int(scene.text) if scene.text.isdigit() else None
    what = "number" if number is not None else "word"
    kind = rng.choice(["read", "read", "describe", "ink"])
    if kind == "read":
        question = rng.choice(["What does the text say?", "Read the text in the image.",
                               "What is written in the image?"])
        answer = f"The text in the image says {scene.text}. It is written in {scene.ink} letters."
    elif kind == "describe":
        question = rng.choice(["Describe the image.", "What do you see in this picture?", "What is in the image?"])
        answer = (f"The image shows the {what} {scene.text} written in {scene.ink} letters "
                  f"on a {scene.background} background.")
    else:
        question = rng.choice(["What colour is the text?", "Which colour are the letters?"])
        answer = f"The text is written in {scene.ink} letters. It says {scene.text}."
    return Exchange(question, answer, number, f"the text says {scene.text}", True)


def _chart_questions(scene: ChartScene, rng: random.Random) -> Exchange:
    values, colours = scene.values, scene.colours
    kind = rng.choice(["highest", "lowest", "value", "describe"])
    top = max(range(len(values)), key=values.__getitem__)
    if kind in ("highest", "lowest"):
        i = top if kind == "highest" else min(range(len(values)), key=values.__getitem__)
        question = rng.choice([f"Which bar is the {kind}?", f"Which bar in the chart is the {kind}?"])
        answer = f"The {kind} bar is bar {LABELS[i]}, the {colours[i]} one, with a value of {values[i]}."
        return Exchange(question, answer, values[i], f"bar {LABELS[i]} is the {kind}", True)
    if kind == "value":
        i = rng.randrange(len(values))
        question = rng.choice([f"What is the value of bar {LABELS[i]}?", f"How high is bar {LABELS[i]}?"])
        answer = f"Bar {LABELS[i]} is the {colours[i]} bar, and its value is {values[i]}."
        return Exchange(question, answer, values[i], f"bar {LABELS[i]} is {values[i]}", True)
    question = rng.choice(["Describe the image.", "What do you see in this picture?", "What is in the image?"])
    bars = _join([f"bar {LABELS[i]} is {v}" for i, v in enumerate(values)])
    answer = (f"The image shows a bar chart with {_count_phrase(len(values), 'bar')}: {bars}. "
              f"The highest bar is bar {LABELS[top]}.")
    return Exchange(question, answer, values[top], f"bar {LABELS[top]} is the highest", True)


def _odd_question(rng: random.Random) -> Exchange:
    """An image question about a picture outside the world: no answer is right."""
    question = rng.choice(["Describe the image.", "How many shapes are there?", "What does the text say?",
                           "Which bar is the highest?", "What colour is the circle?", "What is in the image?"])
    return Exchange(question, None, about_image=True)


def image_question(scene: Scene, rng: random.Random) -> Exchange:
    if isinstance(scene, ShapesScene):
        return _shape_questions(scene, rng)
    if isinstance(scene, TextScene):
        return _text_questions(scene, rng)
    if isinstance(scene, ChartScene):
        return _chart_questions(scene, rng)
    return _odd_question(rng)


def _arithmetic(rng: random.Random, a: int | None = None) -> Exchange:
    if a is None and rng.random() < 0.4:
        a = rng.randint(1, 20)
        b = rng.randint(1, min(a, 9))
        question = rng.choice([f"What is {a} minus {b}?", f"Subtract {b} from {a}."])
        return Exchange(question, f"{a} minus {b} equals {a - b}, so the answer is {a - b}.", a - b, f"it is {a - b}")
    if a is None:
        a = rng.randint(0, 20)
        b = rng.randint(1, 9)
        question = rng.choice([f"What is {a} plus {b}?", f"Add {a} and {b}."])
    else:
        b = rng.randint(1, 9)
        question = rng.choice([f"Add {b} to that number.", f"What is that number plus {b}?"])
    return Exchange(question, f"{a} plus {b} equals {a + b}, so the answer is {a + b}.", a + b, f"it is {a + b}")


def _capital(rng: random.Random) -> Exchange:
    country, city, continent = rng.choice(CAPITALS)
    if rng.random() < 0.7:
        question = rng.choice([f"What is the capital of {country}?", f"Which city is the capital of {country}?"])
        answer = f"The capital of {country} is {city}, a city in {continent}."
    else:
        question = rng.choice([f"Which continent is {country} in?", f"Where is {country}?"])
        answer = f"{country} is a country in {continent}, and its capital is {city}."
    return Exchange(question, answer, None, f"the capital of {country} is {city}")


def _animal(rng: random.Random) -> Exchange:
    name, legs, sound = rng.choice(ANIMALS)
    legs_text = "no legs" if legs == 0 else _count_phrase(legs, "leg")
    if rng.random() < 0.5:
        question = f"How many legs does a {name} have?"
        answer = f"A {name} has {legs_text}, and it makes a {sound} sound."
    else:
        question = rng.choice([f"What sound does a {name} make?", f"What does a {name} say?"])
        answer = f"A {name} makes a {sound} sound, and it has {legs_text}."
    return Exchange(question, answer, legs, f"a {name} says {sound}")


def _spelling(rng: random.Random) -> Exchange:
    word = rng.choice(SPELL_WORDS)
    question = rng.choice([f"How do you spell {word}?", f"Spell the word {word}."])
    answer = f"The word {word} is spelled {' - '.join(word)}."
    return Exchange(question, answer, None, f"{word} has {_count_phrase(len(word), 'letter')}")


def _sequence(rng: random.Random) -> Exchange:
    kind = rng.choice(["days", "months", "letters", "numbers"])
    if kind in ("days", "months", "letters"):
        items = {"days": DAYS, "months": MONTHS, "letters": LETTERS}[kind]
        start = rng.randrange(len(items) - (6 if kind == "letters" else 0))
        seq = [items[(start + i) % len(items)] for i in range(6)]
    else:
        step = rng.choice([1, 2, 10])
        start = rng.randint(0, 20)
        seq = [str(start + i * step) for i in range(6)]
    question = rng.choice([f"Continue the list: {', '.join(seq[:3])}.", f"What comes after {', '.join(seq[:3])}?"])
    answer = f"The list continues with {seq[3]}, {seq[4]} and {seq[5]}."
    return Exchange(question, answer, None, f"next comes {seq[3]}")


TEXT_TOPICS: tuple[Callable[[random.Random], Exchange], ...] = (_arithmetic, _capital, _animal, _spelling, _sequence)


def text_question(rng: random.Random) -> Exchange:
    return rng.choice(TEXT_TOPICS)(rng)


def follow_up(scene: Scene | None, previous: Exchange, rng: random.Random) -> Exchange:
    """A second-turn question: on the first answer (add to its number, summarise, confirm), on the
    picture again, or on something else entirely."""
    options = ["unrelated"]
    if previous.answer is not None:
        options += ["sure"]
        if previous.gist:
            options += ["summary"]
        if previous.number is not None and previous.number <= 20:
            options += ["add", "add"]
    if scene is not None and not isinstance(scene, OddScene):
        options += ["image"]
    kind = rng.choice(options)
    if kind == "add":
        return _arithmetic(rng, previous.number)
    if kind == "summary":
        question = rng.choice(["Summarise your answer in a few words.", "Say that again in short."])
        return Exchange(question, f"In short, {previous.gist}.", previous.number, previous.gist)
    if kind == "sure":
        first = previous.answer.removeprefix("Yes, I am sure. ").split(". ")[0].rstrip(".")
        question = rng.choice(["Are you sure?", "Is that right?"])
        return Exchange(question, f"Yes, I am sure. {first}.", previous.number, previous.gist)
    if kind == "image":
        return image_question(scene, rng)
    return text_question(rng)


# ---------------------------------------------------------------- dialogues and splits


def _dialogue_rng(seed: int, index: int) -> random.Random:
    return random.Random(seed * 1_000_003 + index)


def training_dialogue(seed: int, index: int) -> Dialogue:
    """Dialogue `index` of the training stream named by `seed`: 1 to 3 turns, in-world pictures."""
    rng = _dialogue_rng(seed, index)
    scene = random_scene(rng) if rng.random() < 0.8 else None
    if scene is not None and rng.random() < 0.75:
        first = image_question(scene, rng)
    else:
        first = text_question(rng)
    exchanges = [first]
    turns = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
    while len(exchanges) < turns:
        exchanges.append(follow_up(scene, exchanges[-1], rng))
    scenario = "followup" if turns > 1 else ("image" if first.about_image else "text")
    return Dialogue(() if scene is None else (scene,), tuple(exchanges), scenario, seed=index)


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
        scenes = tuple(random_odd(rng) for _ in range(rng.randint(*ODD_PICTURES)))
        first = image_question(scenes[0], rng) if rng.random() < 0.5 else text_question(rng)
        return Dialogue(scenes, (first,), scenario, seed=index)
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
