"""TABED demo: speculative decoding for vision-language models with a test-time adaptive ensemble.

    python app.py            # the bundled teaching pair on CPU, or $TABED_PRESET on a GPU

The page streams TABED's answer block by block (accepted, rejected, corrected and bonus tokens),
the ensemble weights, and then the same answer from plain autoregressive decoding with the speed of
both. Decoding runs in a background thread (tabed.runner); this file only lays out and renders.
"""

from __future__ import annotations

try:  # ZeroGPU: `spaces` must be imported before anything touches CUDA; elsewhere GPU() is a no-op
    import spaces

    GPU = spaces.GPU
except ImportError:
    def GPU(function=None, **_kwargs):
        return function if function is not None else (lambda f: f)

import ctypes
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import torch
from PIL import Image

from tabed.engine.config import TREE_POLICIES, GenerationConfig
from tabed.engine.draft_length import AUTO_CAP
from tabed.engine.events import BlockEvent, Finished, GenerationResult, Started, TokenEvent
from tabed.engine.loop import warm_up
from tabed.engine.spec import METHOD_NAMES, RULES, DraftingSpec
from tabed.errors import InputError, TabedError
from tabed.models.chat import Turn, load_image
from tabed.models.loading import load_preset
from tabed.models.pair import ModelPair
from tabed.models.presets import PRESETS, default_preset
from tabed.page import render
from tabed.page.worker import AUTOREGRESSIVE, SPECULATIVE, ComparisonWorker, Done, Failure, PhaseEvent

ROOT = Path(__file__).resolve().parent
EXAMPLES = ROOT / "assets" / "examples"
HTML_EVERY_S = 0.1  # token stream and status
PLOT_EVERY_S = 0.75  # plotly figures and tables are resent whole: keep them rare (Stop stays responsive)
CPU_THREADS = 1  # torch threads of a run's worker on a CPU: why in tabed/runner.py
MAX_NEW_TOKENS = 512
BUSY_SHARE = 0.6  # on a CPU, a run that got less than this much of one core shared the machine: timings unreliable
MODES = ["TABED (adaptive weights)", "static ensemble (uniform)", "single method"]

# ---------------------------------------------------------------- the model pair, loaded once


ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "t", "true")
ZERO_GPU_NOTE = "ZeroGPU: CUDA exists only inside a request there, so CUDA graphs are off and decoding runs eager"


class PairCache:
    """One loaded pair at a time (memory); loading another preset replaces it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.name: str | None = None
        self.pair: ModelPair | None = None
        self.warm = False

    def _load(self, name: str) -> ModelPair:
        if not ZERO_GPU:
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


PAIRS = PairCache()


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


STOPS = StopFlags()


def _session(request: gr.Request | None) -> str | None:
    return getattr(request, "session_hash", None)


def request_stop(request: gr.Request) -> None:
    """The Stop button: ask this session's running decode (or replay race) to stop and show it."""
    STOPS.stop(_session(request))


def preset_choices() -> list[tuple[str, str]]:
    return [(f"{name}: {preset.description}", name) for name, preset in PRESETS.items()]


# ---------------------------------------------------------------- conversation state


@dataclass
class Conversation:
    """What a browser session keeps between runs: the turns so far and the last run for export."""

    images: list[str] = field(default_factory=list)  # picture files, shown with the first prompt
    turns: list[tuple[str, str]] = field(default_factory=list)  # (prompt, answer) of finished turns
    last_run: dict | None = None
    export_dir: str | None = None  # the last run's downloads: replaced by the next run's, so one per session
    frames: dict[str, list[tuple[float, str]]] = field(default_factory=dict)  # replay pace per side


def session_state(value: object) -> Conversation:
    """The session's conversation; a fresh one when the session has none yet (or an API call sent none)."""
    return value if isinstance(value, Conversation) else Conversation()


def chat_history(conversation: Conversation) -> list[dict]:
    messages = []
    for i, (prompt, answer) in enumerate(conversation.turns):
        shown = ("\U0001f5bc\ufe0f " * len(conversation.images) if i == 0 else "") + prompt
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


def drafting_spec(methods: list[str], mode: str) -> DraftingSpec:
    chosen = tuple(m for m in METHOD_NAMES if m in (methods or []))
    if not chosen:
        raise InputError("tick at least one drafting method (M, T, C, P or N)")
    if mode == MODES[2]:
        if len(chosen) != 1:
            raise InputError(f"single-method drafting uses one method; {len(chosen)} are ticked")
        return DraftingSpec(chosen)
    if len(chosen) < 2:
        raise InputError("an ensemble needs at least two methods: tick another, or choose 'single method'")
    return DraftingSpec(chosen, dynamic=mode == MODES[0])


# ---------------------------------------------------------------- one run, streamed


@dataclass
class RunView:
    """Everything the page shows about one run, updated from engine events."""

    pair: ModelPair
    spec: DraftingSpec
    gamma: int
    tabed: render.TokenStream
    plain: render.TokenStream
    blocks: list[BlockEvent] = field(default_factory=list)
    results: dict[str, GenerationResult] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    phase: str = SPECULATIVE
    error: str | None = None
    racing: bool = False  # with plain decoding: the charts wait for the end (see `_stream`)
    tree_width: int = 1  # the run's: over 1, an empty trees chart means that no block branched
    hedge_first: bool = False  # the run's: with chains, an empty trees chart means the first block did not fork

    def starved(self) -> float | None:
        """On a CPU, the process's smallest CPU share over the run's sides, when it got less than most of
        one core, so that its timings mean nothing (other processes were using the cores; on an idle
        machine a CPU-bound run keeps at least one core busy); None otherwise."""
        shares = [result.metrics.cpu_share for result in self.results.values()]
        if self.pair.device.type != "cpu" or not shares or min(shares) >= BUSY_SHARE:
            return None
        return min(shares)

    def add(self, item: PhaseEvent) -> None:
        event = item.event
        self.phase = item.phase
        stream = self.tabed if item.phase == SPECULATIVE else self.plain
        if isinstance(event, Started):
            self.notes += event.notes
        elif isinstance(event, TokenEvent):
            stream.token(event, "plain")
        elif isinstance(event, BlockEvent):
            self.blocks.append(event)
            stream.block(event)
        elif isinstance(event, Finished):
            self.results[item.phase] = event.result

    def metrics(self) -> list[list]:
        """Both sides' numbers; a stopped side's are left out, so no speedup compares unequal answers."""
        speculative = self.results.get(SPECULATIVE)
        plain = self.results.get(AUTOREGRESSIVE)
        if speculative is not None and speculative.stopped or plain is not None and plain.stopped:
            plain = None
        return render.metrics_rows(speculative.metrics if speculative else None, plain.metrics if plain else None,
                                   unreliable=self.starved() is not None)

    def block_table(self):
        methods = list(self.spec.methods)
        return gr.Dataframe(value=render.block_rows(self.pair.tokenizer, self.blocks, methods),
                            headers=render.block_columns(methods))

    def figure(self):
        return render.weights_figure(self.blocks, list(self.spec.methods), self.gamma)

    def trees(self):
        return render.trees_figure(self.pair.tokenizer, self.blocks, self.tree_width, self.hedge_first)

    def status(self, finished: bool, stopped: bool = False) -> str:
        pair = self.pair
        where = f"{pair.name} on {pair.device.type} ({str(pair.dtype).removeprefix('torch.')})"
        if self.error:
            return f"\u26a0\ufe0f {self.error}"
        if stopped:
            return (f"\u23f9 Stopped after {len(self.blocks)} blocks · {where}. The partial answer stays here and "
                    "is not added to the conversation.")
        if not finished:
            doing = "TABED decoding" if self.phase == SPECULATIVE else "plain decoding (the target alone)"
            later = " · the charts come when both sides are done, so that neither is timed while they are drawn"
            return f"\u23f3 {doing}… block {len(self.blocks)} · {where}" + (later if self.racing else "")
        text = f"\u2705 Done · {where}."
        speculative, plain = self.results.get(SPECULATIVE), self.results.get(AUTOREGRESSIVE)
        if speculative and plain and speculative.metrics.decode_s > 0:
            text += f" Speedup {plain.metrics.decode_s / speculative.metrics.decode_s:.2f}× (decode time)."
            if (share := self.starved()) is not None:
                text += (f" \u26a0\ufe0f Timings unreliable: the machine was busy (the run got {share:.0%} of one "
                         "core); run again when it is idle.")
            if speculative.token_ids != plain.token_ids and speculative.metrics.block_efficiency:
                text += " The two answers differ: expected when sampling (temperature > 0), or from fp16 rounding."
        return text + "".join(f" Note: {note}" for note in self.notes)


def _export(conversation: Conversation, view: RunView, request: dict) -> list[str]:
    """The run as JSON (events and metrics) and the weights plot (and any token trees) as HTML, for
    download. The session's previous downloads are deleted (Gradio keeps its own copies, and deletes
    them after an hour)."""
    if conversation.export_dir:
        shutil.rmtree(conversation.export_dir, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(prefix="tabed-run-"))
    conversation.export_dir = str(folder)
    record = {"request": request, "pair": view.pair.name, "device": str(view.pair.device),
              "dtype": str(view.pair.dtype), "results": {k: r.to_dict() for k, r in view.results.items()}}
    speculative, plain = view.results.get(SPECULATIVE), view.results.get(AUTOREGRESSIVE)
    if speculative and plain and speculative.metrics.decode_s > 0:
        record["speedup"] = plain.metrics.decode_s / speculative.metrics.decode_s
    conversation.last_run = record
    (folder / "tabed-run.json").write_text(json.dumps(record, indent=2))
    files = [folder / "tabed-run.json", folder / "tabed-weights.html"]
    view.figure().write_html(files[1], include_plotlyjs="cdn")  # kilobytes, not 4.8 MB
    if any(block.tree for block in view.blocks):
        files.append(folder / "tabed-trees.html")
        view.trees().write_html(files[2], include_plotlyjs="cdn")
    return [str(file) for file in files]


def _gpu_seconds(*args, **kwargs) -> int:
    """ZeroGPU budget for one request: both runs, scaled with max new tokens."""
    max_new = args[10] if len(args) > 10 else kwargs.get("max_new_tokens", 128)  # respond's 11th parameter
    return int(min(300, 30 + 0.5 * float(max_new or 128)))


@GPU(duration=_gpu_seconds)
def respond(follow_up, image, prompt, conversation, preset, methods, mode, rule, window, gamma, max_new_tokens,
            temperature, seed, compare_ar, adaptive=True, tree_width=1, tree_policy="ensemble", tree_blocks="all",
            hedge_first=True, request: gr.Request = None,
            progress=gr.Progress(track_tqdm=True)):  # noqa: B008 - gradio's idiom
    """Event handler: validate, load the pair if needed, run TABED then plain decoding, stream the views.

    Yields (status, tabed html, plain html, metrics, weights plot, blocks, chat, state, downloads, trees plot)."""
    stop = STOPS.begin(_session(request))
    try:
        yield from _respond(follow_up, image, prompt, session_state(conversation), preset, methods, mode, rule,
                            window, gamma, max_new_tokens, temperature, seed, compare_ar, adaptive,
                            (tree_width, tree_policy, tree_blocks, hedge_first), stop)
    finally:
        STOPS.end(_session(request), stop)
        release_memory()


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


STOPPED_MARK = '<div class="tabed-stopped">\u23f9 stopped here</div>'


def _respond(follow_up, image, prompt, conversation, preset, methods, mode, rule, window, gamma, max_new_tokens,
             temperature, seed, compare_ar, adaptive, tree: tuple, stop: threading.Event):
    skip = gr.skip()
    try:
        prompt = (prompt or "").strip()
        if not prompt:
            raise InputError("type a prompt first")
        pictures = picture_paths(image)
        if not follow_up or not conversation.turns:
            conversation = Conversation(images=pictures, export_dir=conversation.export_dir)
        elif pictures and pictures != conversation.images:
            raise InputError("a follow-up continues with the same pictures: press Run to start over with new ones")
        spec = drafting_spec(methods, mode)
        config = GenerationConfig(max_new_tokens=int(max_new_tokens), temperature=float(temperature),
                                  seed=int(seed or 0), gamma=int(gamma), adaptive=bool(adaptive), rule=rule,
                                  window=int(window or 0), tree_width=int(tree[0] or 1), tree_policy=tree[1],
                                  tree_blocks=tree[2], hedge_first=bool(tree[3]))
        if not 1 <= config.max_new_tokens <= MAX_NEW_TOKENS:
            raise InputError(f"max new tokens must be between 1 and {MAX_NEW_TOKENS}")
        turns = build_turns(conversation, prompt)
        name = preset or default_preset()
        if PRESETS[name].needs_gpu and not torch.cuda.is_available():
            raise InputError(f"the preset {name!r} needs a GPU and this machine has none: choose 'teaching'")
        if not PAIRS.loaded(name):
            yield (f"\u23f3 Loading the model pair {name!r} (first run only)…", "", "", skip, skip, skip, skip,
                   conversation, skip, skip)
        pair = PAIRS.get(name)
    except TabedError as error:
        yield (f"\u26a0\ufe0f {error}", skip, skip, skip, skip, skip, skip, conversation, skip, skip)
        return

    view = RunView(pair, spec, config.gamma, render.TokenStream(pair.tokenizer), render.TokenStream(pair.tokenizer),
                   racing=bool(compare_ar), tree_width=config.tree_width,
                   hedge_first=config.hedge_first and spec.dynamic)
    # A clean page: the last run's charts and downloads would otherwise sit beside this one's tokens
    # (in a race, until it is over), and a download taken then would be the last run's.
    yield view.status(False), "", "", None, None, None, skip, conversation, None, None
    worker = ComparisonWorker(pair, turns, spec, config, compare_ar=bool(compare_ar), stop_event=stop,
                              threads=CPU_THREADS if pair.device.type == "cpu" else None).start()
    try:
        yield from _stream(view, worker, conversation)
    finally:
        worker.stop()
    request = {"prompt": prompt, "turn": len(turns), "images": len(conversation.images), "spec": spec.name,
               "config": config.__dict__}
    yield from _final_frames(view, conversation, request)


def _stream(view: RunView, worker: ComparisonWorker, conversation: Conversation):
    """The run's frames while it decodes: tokens every 0.1 s; the figure, table and metrics when they
    changed, at most every 0.75 s (they are resent whole). In a race with plain decoding (`view.racing`)
    they wait for its end: drawing them (here, and in a browser on the same machine) would take cores
    from whichever side was being timed (plain decoding, slowed by them, inflated the speedup shown)."""
    skip = gr.skip()
    last_html = last_plot = 0.0
    last_shown = (0, 0)
    finished = False
    while not finished:
        for item in worker.drain(HTML_EVERY_S):
            if isinstance(item, PhaseEvent):
                view.add(item)
            elif isinstance(item, Failure):
                view.error = item.message
            elif isinstance(item, Done):
                finished = True
        now = time.monotonic()
        if not finished and now - last_html < HTML_EVERY_S:
            continue
        last_html = now
        shown = (len(view.blocks), len(view.results))  # the figure, table and metrics change with these
        heavy = finished or (not view.racing and now - last_plot >= PLOT_EVERY_S and shown != last_shown)
        if heavy:
            last_plot, last_shown = now, shown
        yield (view.status(finished), view.tabed.html, view.plain.html, view.metrics() if heavy else skip,
               view.figure() if heavy else skip, view.block_table() if heavy else skip, skip, conversation, skip,
               view.trees() if heavy else skip)


def _final_frames(view: RunView, conversation: Conversation, request: dict):
    """The finished (or stopped) run: a finished answer joins the conversation; a stopped one is marked
    and stays out of it; either way the run can be downloaded and replayed."""
    skip = gr.skip()
    speculative = view.results.get(SPECULATIVE)
    if view.error:
        return
    if speculative is None:  # stopped before TABED began
        yield (view.status(True, stopped=True), view.tabed.html + STOPPED_MARK, "", skip, skip, skip,
               chat_history(conversation), conversation, skip, skip)
        return
    plain = view.results.get(AUTOREGRESSIVE)
    stopped = speculative.stopped or bool(plain and plain.stopped)
    tabed_html = view.tabed.html + (STOPPED_MARK if speculative.stopped else "")
    plain_html = view.plain.html + (STOPPED_MARK if plain is not None and plain.stopped else "")
    if stopped:  # say so at once: the exports below take a moment
        yield (view.status(True, stopped), tabed_html, plain_html, skip, skip, skip, skip, conversation, skip, skip)
    else:
        conversation.turns.append((request["prompt"], speculative.text))
    conversation.frames = {phase: render.result_texts(view.pair.tokenizer, result)
                           for phase, result in view.results.items()}
    files = _export(conversation, view, request)
    yield (view.status(True, stopped), tabed_html, plain_html, view.metrics(), view.figure(),
           view.block_table(), chat_history(conversation), conversation, files, view.trees())


def run(pictures, prompt, conversation, preset, methods, mode, rule, window, gamma, max_new_tokens, temperature,
        seed, compare_ar, adaptive=True, tree_width=1, tree_policy="ensemble", tree_blocks="all", hedge_first=True,
        request: gr.Request = None):
    """Start a new conversation: TABED on the prompt (about the pictures), then plain decoding.

    Args:
        pictures: image files shown with the prompt (none, one or several)
        prompt: the question
        conversation: the session state (None from an API call: a new conversation)
        preset: model pair preset, e.g. "teaching"
        methods: drafting methods, a list of "M", "T", "C", "P"
        mode: "TABED (adaptive weights)", "static ensemble (uniform)" or "single method"
        rule: TABED weight rule: "w-grid", "kld", "tvd" or "hedge"
        window: TABED history window in positions (0 = all)
        gamma: draft tokens per block (1-20): the most when adaptive, else always this many
        max_new_tokens: the answer's length limit (1-512)
        temperature: 0 = greedy
        seed: sampling seed
        compare_ar: also decode with the target alone and compare the speed
        adaptive: stop a block's draft early when the ensemble is unsure (the threshold is learned)
        tree_width: 1 drafts a chain per block; 2-4 draft a token tree expanding this many nodes per depth
        tree_policy: a tree node's children: "ensemble" (its top tokens), "methods" (each method's top-1) or
            "unsure" (its top tokens only where the top one has under half the ensemble's probability)
        tree_blocks: which blocks draft trees: "all", or "first" (drafted before any weight is learned)
        hedge_first: with a tree width of 1, TABED's first block (drafted before any weight is learned) forks where
            the methods leave the ensemble unsure, when there is a picture
    """
    yield from respond(False, pictures, prompt, conversation, preset, methods, mode, rule, window, gamma,
                       max_new_tokens, temperature, seed, compare_ar, adaptive, tree_width, tree_policy,
                       tree_blocks, hedge_first, None if ZERO_GPU else request)


def ask_follow_up(pictures, prompt, conversation, preset, methods, mode, rule, window, gamma, max_new_tokens,
                  temperature, seed, compare_ar, adaptive=True, tree_width=1, tree_policy="ensemble",
                  tree_blocks="all", hedge_first=True, request: gr.Request = None):
    """The next turn of the same conversation, on the same pictures (arguments as for /run)."""
    yield from respond(True, pictures, prompt, conversation, preset, methods, mode, rule, window, gamma,
                       max_new_tokens, temperature, seed, compare_ar, adaptive, tree_width, tree_policy,
                       tree_blocks, hedge_first, None if ZERO_GPU else request)


def replay_race(conversation, request: gr.Request = None):
    """Both answers again, side by side, at the pace each was measured at; Stop ends it where it is."""
    stop = STOPS.begin(_session(request))
    try:
        yield from _race(session_state(conversation).frames, stop)
    finally:
        STOPS.end(_session(request), stop)


def _race(frames: dict, stop: threading.Event):
    if SPECULATIVE not in frames or AUTOREGRESSIVE not in frames:
        yield "<i>Run a prompt with 'compare with plain decoding' ticked first.</i>"
        return
    end = max(frames[SPECULATIVE][-1][0], frames[AUTOREGRESSIVE][-1][0])
    scale = max(1.0, end / 20.0)  # replays longer than 20 s are sped up, and say so
    start = time.monotonic()
    shown = {SPECULATIVE: 0, AUTOREGRESSIVE: 0}
    while True:
        clock = (time.monotonic() - start) * scale
        for phase, sequence in frames.items():
            while shown[phase] < len(sequence) and sequence[shown[phase]][0] <= clock:
                shown[phase] += 1

        def side(phase: str, label: str) -> str:
            sequence = frames[phase]
            text = sequence[shown[phase] - 1][1] if shown[phase] else ""
            return render.race_html(text, label, shown[phase] == len(sequence))

        note = f" (×{scale:.1f} faster than measured)" if scale > 1 else " (at the measured pace)"
        stopped = stop.is_set()
        if stopped:
            note += " \u23f9 Stopped"
        yield (f'<div class="tabed-race"><div>{side(SPECULATIVE, "TABED")}</div>'
               f'<div>{side(AUTOREGRESSIVE, "plain decoding")}</div></div><small>{clock:.2f} s{note}</small>')
        if stopped or all(shown[p] == len(frames[p]) for p in frames):
            return
        time.sleep(0.05)


def check_upload(upload: list[dict] | None) -> tuple:
    """On upload, before Gradio reads the pictures itself (where an unreadable file fails with a bare
    "Error"): such files are refused here with a one-line message and taken off the page; the
    readable ones stay."""
    kept, refused = [], []
    for item in upload or []:
        data = item.get("image") or {}
        path = data.get("path")
        if not path:
            continue
        try:
            load_image(path)
            kept.append(path)
        except InputError as exc:
            refused.append(str(exc).replace(path, data.get("orig_name") or Path(path).name))
    if not refused:
        return gr.update(), gr.update()
    return kept or None, "\u26a0\ufe0f " + "; ".join(refused)


def new_conversation() -> tuple:
    """An empty conversation and a clean page: nothing of the last run stays (answers, metrics, charts,
    block table, trees, downloads, replayed race)."""
    return (Conversation(), [], "", "", "Start a new conversation: pick pictures (or none) and type a prompt.",
            None, None, None, None, None, "")


# ---------------------------------------------------------------- layout

CSS = """
#tabed-answer, #plain-answer { white-space: pre-wrap; font-family: ui-monospace, monospace; line-height: 1.6;
  min-height: 4em; }
.tabed-legend { font-size: 0.85em; }
.tabed-stopped { color: #b45309; font-weight: 600; margin-top: 0.4em; }
.tabed-race { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; white-space: pre-wrap; }
"""

INTRO = """# TABED: speculative decoding for vision-language models
A small **drafter** guesses the next few tokens in several ways at once — **M** sees the image, **T** sees only
the text, **C** a caption, **P** a pooled image — and an ensemble mixes the guesses with weights learned while
decoding (TABED). The big **target** checks a whole block in one forward pass and keeps the longest correct
prefix, so the answer is exactly the target's own, only faster.
"""

PAIR_NOTES = {
    "teaching": "**The bundled teaching pair** (CPU, no network): a 17M target and a 1M drafter trained only on a "
                "synthetic world: shapes on plain or patterned ground, bar charts, printed words and numbers, a "
                "small knowledge base. Its answers about any other picture (a photograph, say) are made up; that "
                "is instructive too, the weights move to T. Real photographs need a real pair: "
                "`TABED_PRESET=llava-1.5-7b` on a GPU.",
    "teaching-7b": "**The teaching pair at LLaVA-1.5-7B's cost: same answers, real speed.** Both models are widened "
                   "in memory to the paper pair's shapes (a 7B target, a 68M drafter) without changing what they "
                   "compute, so every forward costs what the real pair's does. It still knows only its synthetic "
                   "world (shapes, bar charts, printed words); real photographs need `TABED_PRESET=llava-1.5-7b`.",
}


def pair_note(name: str | None) -> str:
    """What the chosen pair is and what it can see, for the page."""
    name = name if name in PRESETS else default_preset()
    return PAIR_NOTES.get(name, f"**{name}**: {PRESETS[name].description}.")


TIMING = """**How the speed is measured.** TABED runs first, then (if ticked) the target alone, one after the
other on the same device — never at the same time. Each model did one warm-up forward when the pair was
loaded. Speedup is the ratio of decode times: everything after the target's pass over the prompt, which both
make (TABED's also checks its first drafts, as transformers' assisted generation does); walltime includes it.
*Replay race* plays both answers back side by side at the measured pace."""


def load_examples() -> tuple[list[list], list[list]]:
    """(pictures, prompt) rows to start a conversation, and follow-up prompts to continue one."""
    path = EXAMPLES / "examples.json"
    if not path.exists():
        return [], []
    rows = json.loads(path.read_text())
    starts = [[[str(EXAMPLES / name) for name in row["images"]] or None, row["prompt"]] for row in rows]
    follow_ups = sorted({row["follow_up"] for row in rows})
    return starts, [[text] for text in follow_ups]


def _settings(default: str) -> dict[str, gr.components.Component]:
    """The Settings accordion's controls by name, in the order the handlers take them."""
    with gr.Accordion("Settings", open=False, elem_id="settings"):
        preset = gr.Dropdown(preset_choices(), value=default, label="Model pair",
                             info="presets marked GPU need a GPU and download their weights once")
        methods = gr.CheckboxGroup([(f"{m}: {name}", m) for m, name in METHOD_NAMES.items()], value=["M", "T"],
                                   label="Drafting methods")
        mode = gr.Radio(MODES, value=MODES[0], label="Ensemble")
        with gr.Row():
            rule = gr.Dropdown(list(RULES), value="w-grid", label="TABED weight rule")
            window = gr.Number(0, label="history window (positions, 0 = all)", precision=0, minimum=0)
        with gr.Row():
            gamma = gr.Slider(1, AUTO_CAP, value=AUTO_CAP, step=1, elem_id="settings-gamma",
                              label="γ: draft tokens per block (the most, when adaptive)")
            adaptive = gr.Checkbox(True, label="adaptive draft length", elem_id="settings-adaptive",
                                   info="stop drafting when the ensemble is unsure")
        with gr.Row():
            tree_width = gr.Slider(1, 4, value=1, step=1, elem_id="settings-tree-width",
                                   label="tree width (1 = a chain of drafts)",
                                   info="draft token trees: this many nodes expanded per depth")
            tree_policy = gr.Radio(list(TREE_POLICIES), value="ensemble", label="tree branches",
                                   elem_id="settings-tree-policy",
                                   info="the ensemble's top tokens, each method's own top-1, or the top "
                                        "tokens only where the ensemble is unsure (top under 1/2)")
            tree_blocks = gr.Radio([("every block", "all"), ("the first block", "first")], value="all",
                                   label="trees in", elem_id="settings-tree-blocks",
                                   info="the first block is drafted before any weight is learned")
        hedge_first = gr.Checkbox(True, label="hedge the first block", elem_id="settings-hedge-first",
                                  info="with chains and a picture, TABED's first block (drafted before any weight "
                                       "is learned) forks where the methods leave the ensemble unsure")
        max_new_tokens = gr.Slider(1, MAX_NEW_TOKENS, value=96, step=1, label="max new tokens",
                                   elem_id="settings-max-new-tokens")
        temperature = gr.Slider(0, 2, value=0, step=0.05, label="temperature (0 = greedy)",
                                elem_id="settings-temperature")
        seed = gr.Number(0, label="seed", precision=0)
        compare_ar = gr.Checkbox(True, label="compare with plain decoding (the target alone)")
    return dict(preset=preset, methods=methods, mode=mode, rule=rule, window=window, gamma=gamma,
                max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, compare_ar=compare_ar,
                adaptive=adaptive, tree_width=tree_width, tree_policy=tree_policy, tree_blocks=tree_blocks,
                hedge_first=hedge_first)


def _question_column(default: str) -> SimpleNamespace:
    """Pictures, prompt, the buttons, the conversation, the settings and the examples."""
    ui = SimpleNamespace()
    ui.image = gr.Gallery(label="Pictures (optional; several are shown together)", type="filepath", interactive=True,
                          sources=["upload", "clipboard"], file_types=["image"], elem_id="image", height=280,
                          columns=2, fit_columns=False, object_fit="contain")
    ui.prompt = gr.Textbox(label="Prompt", placeholder="Ask about the image, or anything else", elem_id="prompt",
                           lines=2)
    with gr.Row():
        ui.run = gr.Button("Run", variant="primary", elem_id="run")
        ui.follow_up = gr.Button("Ask as follow-up", elem_id="follow-up")
        ui.stop = gr.Button("Stop", variant="stop", elem_id="stop")
    ui.new = gr.Button("New conversation", size="sm", elem_id="new")
    ui.chat = gr.Chatbot(label="Conversation", height=220, elem_id="chat")
    ui.settings = _settings(default)
    starts, follow_ups = load_examples()
    gr.Examples(starts, inputs=[ui.image, ui.prompt], cache_examples=False,
                label="Examples: image-oriented, text-oriented, no picture, four odd pictures (then Run)")
    gr.Examples(follow_ups, inputs=[ui.prompt], cache_examples=False,
                label="Follow-ups: after a run, pick one and press 'Ask as follow-up'")
    return ui


def _answer_column() -> SimpleNamespace:
    """The status, both answers, the metrics, the charts, the block table, the race and the downloads."""
    ui = SimpleNamespace()
    ui.status = gr.Markdown("Pick pictures (or none), type a prompt and press Run.", elem_id="status")
    gr.HTML(render.legend_html())
    ui.tabed = gr.HTML(label="TABED answer", elem_id="tabed-answer", show_label=True, container=True)
    ui.plain = gr.HTML(label="Plain decoding (the target alone)", elem_id="plain-answer", container=True,
                       show_label=True)
    ui.metrics = gr.Dataframe(headers=["", "TABED", "plain"], label="Speed and acceptance", elem_id="metrics",
                              interactive=False)
    gr.Markdown(TIMING)
    ui.plot = gr.Plot(label="Ensemble weights", elem_id="weights-plot")
    ui.blocks = gr.Dataframe(label="Block by block (scroll; hover a token above for details)", elem_id="blocks",
                             interactive=False, max_height=320)
    ui.trees = gr.Plot(label="Token trees", elem_id="trees-plot")  # shown while blocks may draft trees
    with gr.Row():
        ui.race_button = gr.Button("Replay race", elem_id="race")
        ui.downloads = gr.File(label="Download the run (JSON) and the plots (HTML)", file_count="multiple",
                               elem_id="downloads")
    ui.race = gr.HTML(elem_id="race-view")
    return ui


def trees_shown(tree_width, hedge_first, mode) -> dict:
    """The trees chart is shown while some block may draft a tree: with trees, or TABED's hedged first block."""
    return gr.update(visible=int(tree_width or 1) > 1 or bool(hedge_first) and mode == MODES[0])


def _wire(state: gr.State, note: gr.Markdown, ask: SimpleNamespace, show: SimpleNamespace) -> None:
    """The events: runs and follow-ups share one queue slot (one decode at a time, fair timing)."""
    preset, mode = ask.settings["preset"], ask.settings["mode"]
    tree_width, hedge_first = ask.settings["tree_width"], ask.settings["hedge_first"]
    inputs = [ask.image, ask.prompt, state, *ask.settings.values()]
    outputs = [show.status, show.tabed, show.plain, show.metrics, show.plot, show.blocks, ask.chat, state,
               show.downloads, show.trees]
    decode = dict(concurrency_id="decode", concurrency_limit=1, trigger_mode="always_last")
    # A run clears the last run's replayed race too, by a listener of its own (the run's API stays as it is),
    # registered first: registered after the run, it was only carried out once the run had ended.
    for trigger in (ask.run.click, ask.follow_up.click, ask.prompt.submit):
        trigger(lambda: "", None, [show.race], queue=False, api_name=False)
    run_event = ask.run.click(run, inputs, outputs, api_name="run", **decode)
    follow_event = ask.follow_up.click(ask_follow_up, inputs, outputs, api_name="follow_up", **decode)
    submit_event = ask.prompt.submit(run, inputs, outputs, api_name=False, **decode)
    ask.image.upload(check_upload, [ask.image], [ask.image, show.status], preprocess=False, queue=False,
                     api_name=False)
    race_event = show.race_button.click(replay_race, [state], [show.race], api_name="replay_race",
                                        trigger_mode="always_last")
    # On ZeroGPU the handler runs in another process, out of reach of the session's flags: cancel it there.
    ask.stop.click(request_stop, None, None, queue=False, api_name=False,
                   cancels=[run_event, follow_event, submit_event, race_event] if ZERO_GPU else None)
    preset.change(pair_note, [preset], [note], queue=False, api_name=False)
    for control in (tree_width, hedge_first, mode):
        control.change(trees_shown, [tree_width, hedge_first, mode], [show.trees], queue=False, api_name=False)
    ask.new.click(new_conversation, None, [state, ask.chat, show.tabed, show.plain, show.status, show.downloads,
                                           show.metrics, show.plot, show.blocks, show.trees, show.race], api_name=False)


def build_demo() -> gr.Blocks:
    default = default_preset()
    with gr.Blocks(title="TABED demo", delete_cache=(3600, 3600)) as demo:
        state = gr.State(Conversation())
        gr.Markdown(INTRO)
        note = gr.Markdown(pair_note(default), elem_id="pair-note")
        with gr.Row():
            with gr.Column(scale=2):
                ask = _question_column(default)
            with gr.Column(scale=3):
                show = _answer_column()
        _wire(state, note, ask, show)
    return demo


if ZERO_GPU:  # weights moved to CUDA at import are packed once by `spaces`, not reloaded by every cold worker
    PAIRS.preload(default_preset())
demo = build_demo()
demo.queue(max_size=32, default_concurrency_limit=1)

if __name__ == "__main__":
    demo.launch(css=CSS, server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
