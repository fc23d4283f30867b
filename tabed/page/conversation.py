"""What a browser session keeps between runs (its conversation), and the pictures and turns a run is
asked about."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from ..errors import InputError
from ..models.chat import Turn, load_image


@dataclass(frozen=True)
class LastRun:
    """The session's last finished run as its later views read it (the stepper, the race, the notes): one value,
    made when the run ends (`view.final_frames`). Its tokenizer words its blocks whatever pair another session
    loaded since (the process holds one pair at a time)."""

    blocks: list = field(default_factory=list)  # the answer's BlockEvents
    shared: list = field(default_factory=list)  # its methods drafted as one row (`RunView.shared`: no picture)
    mode: str = "tabed"  # what decoded it, as a value (`DraftingSpec.mode`): "tabed", "static" or "single"
    label: str = "TABED"  # the same in words (`RunView.label`), for its side of the race
    unlearned: str = ""  # why its blocks weighed as they did before learning (`RunView.unlearned`)
    tokenizer: object = None
    frames: dict = field(default_factory=dict)  # replay pace per side, when both sides finished
    race_note: str = ""  # why it cannot be raced, when it cannot


@dataclass
class Conversation:
    """What a browser session keeps between runs: the turns so far, the last run's downloads and the last
    run itself (`LastRun`)."""

    images: list[str] = field(default_factory=list)  # picture files, shown with the first prompt
    turns: list[tuple[str, str]] = field(default_factory=list)  # (prompt, answer) of finished turns
    export_dir: str | None = None  # the last run's downloads: replaced by the next run's, so one per session
    runs: int = 0  # the session's runs that reached their end (each names its downloads and its verdict)
    last: LastRun = field(default_factory=LastRun)
    preset: str | None = None  # the pair preset the conversation runs on: a follow-up keeps it


def session_state(value: object) -> Conversation:
    """The session's conversation; a fresh one when the session has none yet (or an API call sent none)."""
    return value if isinstance(value, Conversation) else Conversation()


def pictures_label(count: int) -> str:
    """What the conversation shows before the first prompt for its pictures: words, not an emoji a browser
    without an emoji font draws as a box."""
    return f"[{count} picture{'s' if count > 1 else ''}] " if count else ""


def as_typed(text: str) -> str:
    """Text as the conversation shows it (its Chatbot reads HTML, `render_markdown` off): every character as
    typed, a tag of it no tag, its line breaks kept."""
    return html.escape(text, quote=False).replace("\n", "<br>")


def chat_history(conversation: Conversation) -> list[dict]:
    messages = []
    for i, (prompt, answer) in enumerate(conversation.turns):
        shown = (pictures_label(len(conversation.images)) if i == 0 else "") + prompt
        messages += [{"role": "user", "content": as_typed(shown)}, {"role": "assistant", "content": as_typed(answer)}]
    return messages


MAX_PICTURES = 8  # pictures a conversation may show together (the teaching pair's context holds about 3)


def picture_paths(value: object) -> list[str]:
    """The gallery's value as paths: as Gradio sends it (a list of `{"image": {"path": …}, "caption": …}`), as
    the handlers' callers may give it ((path, caption) pairs, paths, or one path), or None; at most
    `MAX_PICTURES`, each a picture (not a video), else one line saying so."""
    if not value:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if not isinstance(value, (list, tuple)):
        raise InputError(f"pictures must be a list of picture files; got {type(value).__name__}")
    if len(value) > MAX_PICTURES:
        raise InputError(f"pictures: at most {MAX_PICTURES} at once; got {len(value)}")
    paths = []
    for number, item in enumerate(value, 1):
        if isinstance(item, dict):
            item = (item.get("image") or {}).get("path") if isinstance(item.get("image"), dict) else None
        elif isinstance(item, (tuple, list)):
            item = item[0] if item else None
        if not isinstance(item, (str, os.PathLike)):
            raise InputError(f"pictures: item {number} is not a picture file")
        paths.append(os.fspath(item))
    return paths


def checked_pictures(value: object, conversation: Conversation, follow_up: bool) -> list[str]:
    """The pictures of a request (`picture_paths`). A follow-up continues with the conversation's: other ones
    are refused, a file among them that is no picture named as such first. (A run's own pictures are opened
    once, by `build_turns`.)"""
    paths = picture_paths(value)
    if follow_up and paths and paths != conversation.images:
        for path in paths:
            open_picture(path)
        raise InputError("a follow-up continues with the same pictures: press Run to start over with new ones")
    return paths


def continued(conversation: Conversation, follow_up: bool, pictures: object, preset: str) -> Conversation:
    """The conversation a request runs in: a follow-up's own, on its own pictures and pair (others are refused),
    or a new one on `preset` with the `pictures` sent (`checked_pictures`), carrying on the session's run count
    and downloads."""
    pictures = checked_pictures(pictures, conversation, follow_up)
    if not follow_up:
        return Conversation(images=pictures, export_dir=conversation.export_dir, runs=conversation.runs, preset=preset)
    if conversation.preset not in (None, preset):
        raise InputError(f"a follow-up continues with the conversation's model pair ({conversation.preset!r}): "
                         "press Run to start over with another")
    return conversation


def checked_upload(upload: list[dict] | None) -> tuple[list[str], str]:
    """The gallery's upload (as Gradio sends it) split into the pictures kept and a line saying why the others
    were not: a file that is no picture (a text file named `.png` too), or one past `MAX_PICTURES`."""
    kept, refused = [], []
    for item in upload or []:
        data = item.get("image") or {}
        path, name = data.get("path"), data.get("orig_name") or Path(data.get("path") or "").name
        if not path:
            refused.append(f"{(item.get('video') or {}).get('orig_name') or 'a video'} is not a picture")
            continue
        try:
            load_image(path)
        except InputError as exc:
            refused.append(str(exc).replace(path, name))
            continue
        if len(kept) == MAX_PICTURES:
            refused.append(f"{name} left out: at most {MAX_PICTURES} pictures at once")
        else:
            kept.append(path)
    return kept, "; ".join(refused)


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
