"""What a browser session keeps between runs (its conversation), and the pictures and turns a run is
asked about."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from ..errors import InputError
from ..models.chat import Turn, load_image


@dataclass
class Conversation:
    """What a browser session keeps between runs: the turns so far, the last run's downloads, its pace and
    its blocks (for the block stepper)."""

    images: list[str] = field(default_factory=list)  # picture files, shown with the first prompt
    turns: list[tuple[str, str]] = field(default_factory=list)  # (prompt, answer) of finished turns
    export_dir: str | None = None  # the last run's downloads: replaced by the next run's, so one per session
    frames: dict[str, list[tuple[float, str]]] = field(default_factory=dict)  # replay pace per side
    race_note: str = ""  # why the last run cannot be raced, when it cannot
    label: str = "TABED"  # what decoded the last answer (`RunView.label`), for its side of the race
    unlearned: str = ""  # why the last answer's blocks weighed as they did before learning (`RunView.unlearned`)
    blocks: list = field(default_factory=list)  # the last answer's BlockEvents


@functools.cache
def _downloads() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="tabed-downloads-", ignore_cleanup_errors=True)


def downloads_root() -> Path:
    """The server process's folder of run downloads (one subfolder per session)."""
    return Path(_downloads().name)


def new_downloads_folder(conversation: Conversation) -> Path:
    """A fresh folder for the session's run downloads, in place of its last run's (so one per session).
    All of them live in one folder per server process that is removed when the process exits (Ctrl-C
    included): a server that runs for weeks, or stops, leaves no downloads behind."""
    forget_downloads(conversation)
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=downloads_root()))
    conversation.export_dir = str(folder)
    return folder


def forget_downloads(conversation: object) -> None:
    """Delete the session's last downloads: before its next run's, on "New conversation", and when Gradio
    deletes the session's state, an hour after its browser tab closed (Gradio's own copies it deletes
    itself, after an hour)."""
    if isinstance(conversation, Conversation) and conversation.export_dir:
        shutil.rmtree(conversation.export_dir, ignore_errors=True)
        conversation.export_dir = None


def session_state(value: object) -> Conversation:
    """The session's conversation; a fresh one when the session has none yet (or an API call sent none)."""
    return value if isinstance(value, Conversation) else Conversation()


def pictures_label(count: int) -> str:
    """What the conversation shows before the first prompt for its pictures: words, not an emoji a browser
    without an emoji font draws as a box."""
    return f"[{count} picture{'s' if count > 1 else ''}] " if count else ""


def chat_history(conversation: Conversation) -> list[dict]:
    messages = []
    for i, (prompt, answer) in enumerate(conversation.turns):
        shown = (pictures_label(len(conversation.images)) if i == 0 else "") + prompt
        messages += [{"role": "user", "content": shown}, {"role": "assistant", "content": answer}]
    return messages


def picture_paths(value: object) -> list[str]:
    """The gallery's value (a list of (path, caption) pairs, or None) or a single path, as paths."""
    if not value:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    return [os.fspath(item[0] if isinstance(item, (tuple, list)) else item) for item in value]


def open_picture(path: str) -> Image.Image:
    """The picture, or an error that names the file but not where the server keeps uploads."""
    try:
        return load_image(path)
    except InputError as error:
        raise InputError(str(error).replace(os.fspath(path), Path(path).name)) from None


def build_turns(conversation: Conversation, prompt: str) -> list[Turn]:
    images = [open_picture(path) for path in conversation.images]
    turns = [Turn(p, images if i == 0 else [], a) for i, (p, a) in enumerate(conversation.turns)]
    turns.append(Turn(prompt, images if not turns else []))
    return turns
