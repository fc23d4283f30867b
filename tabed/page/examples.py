"""The bundled examples: pictures and a prompt that start a conversation, a follow-up that continues it, and
what each was built to show (`teaching/examples.py` writes them with the teaching pair), which the page says
beside what a run measured when the run asks an example's question of that pair."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

OWN_QUESTION = ("This is a question of your own, so the page says only what it measured. What the teaching drafter "
                "knows: the teaching world's pictures (shapes, bar charts, printed words and numbers) and facts; on "
                "a picture of another kind (a photograph) M's guesses suffer and T's do not, and where the target "
                "knows what the drafter was never taught, both miss. It was taught a few kinds of question, worded "
                "as in the examples, in English, with sums of two numbers up to 99: to one worded otherwise, in "
                "another language or past that range, the target may answer about something else (an animal, a "
                "country), and that answer is still its own, which the drafts are judged against.")
LATER_TURN = ("This is a later turn: the drafter, taught mostly on first turns, has the pictures and the answers so "
              "far in its context; the words so far help M and T alike, and M's view of the pictures helps only where "
              "it reads them right (the counts above say where it did).")


@dataclass(frozen=True)
class Example:
    images: tuple[str, ...]  # file names in the examples' folder
    prompt: str
    follow_up: str
    lesson: str = ""  # what the first turn was built to show
    follow_up_lesson: str = ""  # what the second turn was built to show


class Examples:
    """The examples of a folder (`examples.json` and its pictures), none when it has no such file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        path = folder / "examples.json"
        rows = json.loads(path.read_text()) if path.exists() else []
        self.rows = [Example(tuple(row["images"]), row["prompt"], row["follow_up"], row.get("lesson", ""),
                             row.get("follow_up_lesson", "")) for row in rows]
        self._digests = {name: _digest(folder / name) for row in self.rows for name in row.images}

    def starts(self) -> list[list]:
        """(pictures, prompt) rows to start a conversation, as `gr.Examples` takes them."""
        return [[[str(self.folder / name) for name in row.images] or None, row.prompt] for row in self.rows]

    def follow_ups(self) -> list[list]:
        return [[text] for text in sorted({row.follow_up for row in self.rows})]

    def lesson(self, pictures: list[str], asked: list[str]) -> str | None:
        """What the example whose pictures (by content, whatever their files are called now) and prompts these
        are was built to show, in a sentence: `asked` is the conversation's prompts, this run's last. Any other
        later turn about pictures is one too (`LATER_TURN`), and any other first turn, with pictures or without, a
        question of one's own (`OWN_QUESTION`: what the teaching pair knows)."""
        digests = [_digest(Path(path)) for path in pictures]
        for row in self.rows:
            if [self._digests[name] for name in row.images] != digests:
                continue
            lesson = {(row.prompt,): row.lesson, (row.prompt, row.follow_up): row.follow_up_lesson}.get(tuple(asked))
            if lesson:
                return f"This example was built to show {lesson}."
        if len(asked) > 1:
            return LATER_TURN if pictures else None  # (what it says is of the pictures in the context)
        return OWN_QUESTION  # with pictures or without


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:  # a picture gone from the disk matches no example
        return ""
