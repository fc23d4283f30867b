"""What the page keeps between requests: the loaded pair, each session's conversation and Stop flags."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from ..engine.loop import warm_up
from ..errors import InputError
from ..models.chat import Turn, load_image
from ..models.loading import load_preset
from ..models.pair import ModelPair

ZERO_GPU_NOTE = "ZeroGPU: CUDA exists only inside a request there, so CUDA graphs are off and decoding runs eager"


class PairCache:
    """One loaded pair at a time (memory); loading another preset replaces it."""

    def __init__(self, zero_gpu: bool = False) -> None:
        self.zero_gpu = zero_gpu  # on ZeroGPU, CUDA exists only inside a request: no graphs, widened on the CPU
        self.lock = threading.Lock()
        self.name: str | None = None
        self.pair: ModelPair | None = None
        self.warm = False

    def _load(self, name: str) -> ModelPair:
        if not self.zero_gpu:
            return load_preset(name)
        pair = load_preset(name, cache="dynamic", widen_on="cpu")  # eager: graphs cannot outlive a request
        pair.notes.append(ZERO_GPU_NOTE)
        return pair

    def preload(self, name: str) -> None:
        """Load without a warm-up (on ZeroGPU, at import: `spaces` packs weights moved to CUDA there once)."""
        with self.lock:
            self.pair, self.name, self.warm = self._load(name), name, False

    def get(self, name: str) -> ModelPair:
        with self.lock:
            if self.name != name:
                self.pair, self.name = None, None
                self.pair, self.name, self.warm = self._load(name), name, False
            if not self.warm:
                warm_up(self.pair)
                self.warm = True
            return self.pair

    def loaded(self, name: str) -> bool:
        return self.name == name


class StopFlags:
    """Per browser session, a flag for each of its running events. The Stop button sets them; the running
    generator sees it, lets the engine end between blocks and yields its last frame: "Stopped", with what
    was decoded so far. (Gradio's `cancels=` kills a generator before it can yield that frame.)

    Stop is not queued and Run is: a Stop clicked right after Run can reach the server before the run has
    begun. Such a Stop is kept for `EARLY_S` seconds and stops the session's next run as it begins."""

    EARLY_S = 2.0

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flags: dict[str, set[threading.Event]] = {}
        self.early: dict[str, float] = {}  # session -> when a Stop found nothing running

    def begin(self, session: str | None) -> threading.Event:
        flag = threading.Event()
        if session:
            with self.lock:
                self.flags.setdefault(session, set()).add(flag)
                if time.monotonic() - self.early.pop(session, -self.EARLY_S) < self.EARLY_S:
                    flag.set()
        return flag

    def end(self, session: str | None, flag: threading.Event) -> None:
        with self.lock:
            flags = self.flags.get(session or "", set())
            flags.discard(flag)
            if not flags:
                self.flags.pop(session or "", None)

    def stop(self, session: str | None) -> None:
        with self.lock:
            running = self.flags.get(session or "", ())
            for flag in running:
                flag.set()
            now = time.monotonic()
            self.early = {s: t for s, t in self.early.items() if now - t < self.EARLY_S}
            if session and not running:
                self.early[session] = now


@dataclass
class Conversation:
    """What a browser session keeps between runs: the turns so far and the last run for export."""

    images: list[str] = field(default_factory=list)  # picture files, shown with the first prompt
    turns: list[tuple[str, str]] = field(default_factory=list)  # (prompt, answer) of finished turns
    last_run: dict | None = None
    export_dir: str | None = None  # the last run's downloads: replaced by the next run's, so one per session
    frames: dict[str, list[tuple[float, str]]] = field(default_factory=dict)  # replay pace per side
    race_note: str = ""  # why the last run cannot be raced, when it cannot


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


def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


LIBC = _libc()


def release_memory() -> None:
    """Hand the heap a finished run freed back to the system. glibc keeps freed memory in per-thread
    arenas, and Gradio's threads and the decoding thread take turns: a server's resident size grew 30%
    over its first 200 runs (Python objects: 3%) before levelling off; trimmed after each run, 3%. A
    no-op without glibc."""
    if LIBC is not None:
        LIBC.malloc_trim(0)
