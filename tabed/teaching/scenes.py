"""The pictures of the teaching world: scenes (shapes on a background, a printed word or number, a bar
chart, odd pictures outside the world) and how each is drawn, the same for the same scene."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

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

ODD_KINDS = ("noise", "texture", "inverted")
# Odd dialogues show 1 to 4 odd pictures at once, as the paper's out-of-distribution sets (PororoSV,
# VIST: stories over several frames) show varying numbers of images; training shows one at most.
ODD_PICTURES = (1, 4)

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
    count = rng.choices([1, 2, 3, 4], weights=[1, 2, 3, 3])[0]
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
