"""The app's example pictures and prompts, and the benchmark suite of held-out dialogues
(`python -m tabed.teaching examples`, `python -m tabed.teaching suite`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import world
from .train import EVAL_SEED, say

# Pictures and prompts for the app's examples and the tests: one per scenario, all in-world but the odd set.
EXAMPLE_PICTURES = {
    "chart.png": world.ChartScene((3, 8, 5), ("blue", "orange", "green"), seed=7),
    "shapes.png": world.ShapesScene((world.Shape("star", "red", "top left"),
                                     world.Shape("circle", "blue", "bottom right")), "white", seed=3),
    "text.png": world.TextScene("tiger", "blue", "white", seed=5),
    "texture.png": world.OddScene("texture", seed=11),
    "noise.png": world.OddScene("noise", seed=12),
    "inverted.png": world.OddScene("inverted", seed=13, base=world.ChartScene((6, 2, 4), ("red", "green", "blue"),
                                                                              seed=14)),
    "blur.png": world.OddScene("texture", seed=15),
}
EXAMPLES = (  # (pictures, prompt, follow-up, scenario)
    (("chart.png",), "Which bar is the highest?", "Add 5 to that number.", "image"),
    (("shapes.png",), "Describe the image.", "How many shapes are there?", "image"),
    (("text.png",), "What does the text say?", "How do you spell tiger?", "image"),
    (("shapes.png",), "What is the capital of Japan?", "Summarise your answer in a few words.", "text"),
    ((), "Continue the list: Monday, Tuesday, Wednesday.", "What is 7 plus 5?", "text"),
    (("texture.png", "noise.png", "inverted.png", "blur.png"), "What is the capital of Peru?",
     "How many legs does a dog have?", "odd"),
)


def examples_command(args: argparse.Namespace) -> int:
    """Write the example pictures and `examples.json` (pictures, prompt, follow-up, scenario)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, scene in EXAMPLE_PICTURES.items():
        world.render(scene, args.size).save(out / name)
    rows = [{"images": list(images), "prompt": prompt, "follow_up": follow_up, "scenario": scenario}
            for images, prompt, follow_up, scenario in EXAMPLES]
    (out / "examples.json").write_text(json.dumps(rows, indent=2) + "\n")
    say(f"wrote {len(rows)} examples to {out}")
    return 0


def suite_command(args: argparse.Namespace) -> int:
    """Write the benchmark suite of the teaching pair: held-out dialogues of every scenario, as JSONL."""
    out = Path(args.out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    lines = []
    for scenario in world.SCENARIOS:
        for i, dialogue in enumerate(world.split(scenario, EVAL_SEED, args.cases)):
            case_id = f"{scenario}-{i:02d}"
            images = [f"images/{case_id}.png" if len(dialogue.scenes) == 1 else f"images/{case_id}-{j}.png"
                      for j in range(len(dialogue.scenes))]
            for name, picture in zip(images, dialogue.images(args.size), strict=True):
                picture.save(out / name)
            turns = [{"prompt": e.question, "answer": e.answer} for e in dialogue.exchanges[:-1]]
            turns.append({"prompt": dialogue.exchanges[-1].question})
            lines.append(json.dumps({"id": case_id, "scenario": scenario, "images": images, "turns": turns}))
    (out / "teaching.jsonl").write_text("\n".join(lines) + "\n")
    say(f"wrote {len(lines)} cases to {out / 'teaching.jsonl'}")
    return 0
