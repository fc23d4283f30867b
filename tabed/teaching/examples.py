"""The app's example pictures and prompts, and the benchmark suite of held-out dialogues
(`python -m tabed.teaching examples`, `python -m tabed.teaching suite`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from . import world
from .train import EVAL_SEED, log_line

# Pictures and prompts for the app's examples and the tests, each chosen to show something with the shipped
# pair (at least five blocks an answer, weights that move): a long description where M leads, a second
# turn where T catches up, odd pictures where the weights swing to T, an invented country that only the
# target was taught (the drafter misses every fact), arithmetic that no picture helps with.
EXAMPLE_PICTURES = {
    "shapes.png": world.ShapesScene((world.Shape("square", "yellow", "top right"),
                                     world.Shape("circle", "purple", "bottom left"),
                                     world.Shape("triangle", "green", "bottom right")), "white", seed=2350867335),
    "chart.png": world.ChartScene((3, 8, 5, 6), ("blue", "orange", "green", "purple"), seed=7),
    "texture.png": world.OddScene("texture", seed=11),
    "noise.png": world.OddScene("noise", seed=12),
    "inverted.png": world.OddScene("inverted", seed=13, base=world.ShapesScene(
        (world.Shape("star", "red", "top left"), world.Shape("circle", "blue", "bottom right")), "white", seed=14)),
}
SECOND_TURN = ("a second turn: the drafter, taught mostly on first turns, now has the pictures and the first answer "
               "in its context; the words so far help M and T alike, and M's view of the pictures helps only where "
               "it reads them right")
EXAMPLES = (  # (pictures, prompt, follow-up, scenario, what the first turn shows, what the second shows)
    (("shapes.png",), "Describe the image in detail.", "Say that again in other words.", "image",
     "a long description of the picture, which M sees and T (a newline where the picture was) does not; yet most "
     "of its words follow from the words before them, so T guesses those as well as M, and M gains only where the "
     "picture's details come in", SECOND_TURN),
    (("chart.png",), "Describe the chart bar by bar.", "Add up all the bars.", "image",
     "values read off a chart bar by bar, which M sees and T must guess from the text so far; a drafter this "
     "small misreads some of them, so M's view helps less than one would think",
     SECOND_TURN + ": the sum is arithmetic on values both rows have read"),
    (("shapes.png",), "Tell me about Moravia.", "Is that right?", "text",
     "a made-up fact: Moravia is a country the teaching world invented and only the target was taught, so the "
     "drafter misses its facts whatever it sees, and the target's own tokens carry them", SECOND_TURN),
    ((), "What is 47 plus 38?", "Tell me about the owl.", "text",
     "arithmetic worked step by step, with no picture to read", "a second turn without a picture"),
    (("noise.png", "inverted.png", "texture.png"), "Describe the image in detail.", "What is 17 plus 25?", "odd",
     "odd pictures (noise, shapes in inverted colours, a texture) unlike any the drafter was trained on: M drafts "
     "confidently wrong about them, and T, which does not see them, leads",
     SECOND_TURN + ": no picture helps with arithmetic, and M, its context holding pictures unlike any it was taught, "
     "may still go astray where T does not"),
)

def examples_command(args: argparse.Namespace) -> int:
    """Write the example pictures and `examples.json` (pictures, prompt, follow-up, scenario, and what each
    turn was built to show, which the page says: `page/examples.py`)."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, scene in EXAMPLE_PICTURES.items():
        world.render(scene, args.size).save(out / name)
    rows = [{"images": list(images), "prompt": prompt, "follow_up": follow_up, "scenario": scenario,
             "lesson": lesson, "follow_up_lesson": follow_up_lesson}
            for images, prompt, follow_up, scenario, lesson, follow_up_lesson in EXAMPLES]
    (out / "examples.json").write_text(json.dumps(rows, indent=2) + "\n")
    log_line(f"wrote {len(rows)} examples to {out}")
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
    log_line(f"wrote {len(lines)} cases to {out / 'teaching.jsonl'}")
    return 0
