"""TABED demo: speculative decoding for vision-language models with a test-time adaptive ensemble.

    python app.py            # the bundled teaching pair on CPU, or $TABED_PRESET on a GPU

The page streams TABED's answer block by block (accepted, rejected, corrected and bonus tokens),
the ensemble weights, and then the same answer from plain autoregressive decoding with the speed of
both. Decoding runs in a background thread (tabed/page/worker.py); this file only lays out and wires the page.
"""

from __future__ import annotations

try:  # ZeroGPU: `spaces` must be imported before anything touches CUDA; elsewhere GPU() is a no-op
    import spaces

    GPU = spaces.GPU
except ImportError:
    def GPU(function=None, **_kwargs):
        return function if function is not None else (lambda f: f)

import os
import threading
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import torch

from tabed.engine.config import LIMITS, TREE_POLICIES
from tabed.engine.draft_length import AUTO_CAP
from tabed.engine.spec import METHOD_NAMES, RULES
from tabed.errors import InputError, TabedError
from tabed.models.loading import skip_cudnn_attention
from tabed.models.presets import PRESETS, default_preset
from tabed.page import render, stepper, texts
from tabed.page.controls import ENSEMBLES, LABELS, MODES, may_draft_trees, methods_for_mode
from tabed.page.conversation import Conversation, build_turns, checked_upload, continued, session_state
from tabed.page.downloads import forget_downloads
from tabed.page.examples import Examples
from tabed.page.pairs import PairCache, release_memory
from tabed.page.request import INPUTS, Request, api_handler
from tabed.page.stops import StopFlags
from tabed.page.view import OUTPUTS, Frame, RunView, final_frames, race_frames, stream_frames
from tabed.page.worker import ComparisonWorker

ROOT = Path(__file__).resolve().parent
EXAMPLES = ROOT / "assets" / "examples"
BUNDLED = Examples(EXAMPLES)  # what each was built to show is said of the teaching pairs only
CPU_THREADS = 1  # torch threads of a run's worker on a CPU: why in tabed/page/worker.py
PAGE = Request()  # the page's defaults
ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "t", "true")
PAIRS = PairCache(zero_gpu=ZERO_GPU)  # one loaded pair at a time
STOPS = StopFlags()
DOWNLOADS_LABEL = "Downloads: the run (JSON) and its charts (one HTML page, plotly.js inside: it opens offline)"


def _session(request: gr.Request | None) -> str | None:
    return getattr(request, "session_hash", None)


def request_stop(request: gr.Request) -> None:
    """The Stop button: ask this session's running decode (or replay race) to stop and show it."""
    STOPS.stop(_session(request))


def preset_choices() -> list[tuple[str, str]]:
    return [(f"{name}: {preset.description}", name) for name, preset in PRESETS.items()]


# ---------------------------------------------------------------- one run, streamed


def _gpu_seconds(follow_up: bool, request: Request, *_args, **_kwargs) -> int:
    """ZeroGPU budget for one request: both runs, scaled with max new tokens."""
    alone = request.methods_alone is True and isinstance(request.methods, (list, tuple))
    runs = 2 + (len(request.methods) if alone else 0)
    tokens = request.max_new_tokens if isinstance(request.max_new_tokens, (int, float)) else PAGE.max_new_tokens
    return int(min(300, 30 + 0.25 * runs * float(tokens)))


@GPU(duration=_gpu_seconds)
def respond(follow_up: bool, request: Request, browser: gr.Request = None,
            progress=gr.Progress(track_tqdm=True)):  # noqa: B008 - gradio's idiom
    """Validate, load the pair if needed, run TABED then plain decoding, and stream the page's frames
    (`Frame.values()`, in `OUTPUTS` order)."""
    stop = STOPS.begin(_session(browser))
    try:
        for frame in _respond(follow_up, request, session_state(request.conversation), stop):
            yield frame.values()
    finally:
        STOPS.end(_session(browser), stop)
        release_memory()


def _respond(follow_up: bool, request: Request, conversation: Conversation, stop: threading.Event):
    try:
        prompt = request.prompt.strip() if isinstance(request.prompt, str) else ""
        if not prompt:
            raise InputError("type a prompt first")
        if follow_up and not conversation.turns:
            raise InputError("there is no answer to follow up yet: press Run to start a conversation")
        name = request.preset or default_preset()
        if not isinstance(name, str) or name not in PRESETS:
            raise InputError(f"model pair must be one of {', '.join(PRESETS)}; got {name!r}")
        conversation = continued(conversation, follow_up, request.pictures, name)
        notes: list[str] = []
        settings = request.settings(notes)
        compare, alone = request.flag("compare_ar"), request.flag("methods_alone")
        turns = build_turns(conversation, prompt)
        if PRESETS[name].needs_gpu and not torch.cuda.is_available():
            raise InputError(f"the preset {name!r} needs a GPU and this machine has none: choose 'teaching'")
        if not PAIRS.loaded(name):
            extra = "; on this GPU that includes capturing CUDA graphs and compiling the drafter, up to a minute" \
                if torch.cuda.is_available() and not ZERO_GPU else ""
            yield Frame(status=f"\u25f7 Loading the model pair {name!r} (first run only{extra})…")
        pair = PAIRS.get(name)
    except TabedError as error:  # refused: the page stays as it was but for the status (the state too)
        yield Frame(status=f"\u26a0\ufe0f Error: {error}")
        return
    teaching = name.startswith("teaching")  # the bundled examples, and what its target was taught, are its own
    lesson = BUNDLED.lesson(conversation.images, [asked for asked, _ in conversation.turns] + [prompt]) \
        if teaching else None
    view = RunView(pair, settings, render.TokenStream(pair.tokenizer), render.TokenStream(pair.tokenizer),
                   racing=compare, notes=notes, run=conversation.runs + 1, pictures=bool(conversation.images),
                   lesson=lesson, question=prompt if teaching else None)
    alone = settings.spec.model_methods if alone and len(settings.spec.methods) > 1 else ()
    worker = ComparisonWorker(pair, turns, settings, compare_ar=compare, alone=alone, cancel=stop,
                              threads=CPU_THREADS if pair.device.type == "cpu" else None).start()
    try:
        yield from stream_frames(view, worker, conversation)
    finally:
        worker.stop()
    record = {"prompt": prompt, "turn": len(turns), "images": len(conversation.images),
              "spec": settings.spec.name, "config": settings.config.__dict__}
    yield from final_frames(view, conversation, record)


run = api_handler("run", "Start a new conversation: TABED on the prompt (about the pictures), then plain decoding.",
                  lambda request, browser: respond(False, request, None if ZERO_GPU else browser))
ask_follow_up = api_handler("ask_follow_up", "The next turn of the same conversation, on the same pictures.",
                            lambda request, browser: respond(True, request, None if ZERO_GPU else browser))


def replay_race(conversation, request: gr.Request = None):
    """Both answers again, side by side, at the pace each was measured at; Stop ends it where it is."""
    stop = STOPS.begin(_session(request))
    try:
        yield from race_frames(session_state(conversation), stop)
    finally:
        STOPS.end(_session(request), stop)


def check_upload(upload: list[dict] | None) -> tuple:
    """On upload, before Gradio reads the pictures itself (where an unreadable file fails with a bare "Error"):
    files that are no picture, and pictures past the most a run takes, are taken off the page with a line
    saying why; the others stay (`conversation.checked_upload`)."""
    kept, refused = checked_upload(upload)
    return (kept or None, f"\u26a0\ufe0f {refused}") if refused else (gr.update(), gr.update())


def new_conversation(conversation: object = None) -> tuple:
    """An empty conversation and a clean page: nothing of the last run stays (answers, metrics, charts,
    block table, trees, downloads and their files; then the replayed race, the pictures and the prompt)."""
    forget_downloads(conversation)
    frame = Frame(status="Start a new conversation: pick pictures (or none) and type a prompt.", tabed="", plain="",
                  metrics=None, weights=None, blocks=None, chat=[], downloads=None, trees=None,
                  state=Conversation(runs=session_state(conversation).runs))  # "Done (run N)" counts on
    return (*frame.values(), "", None, "")


# ---------------------------------------------------------------- layout

def pair_note(name: str | None) -> str:
    """What the chosen pair is and what it can see, for the page."""
    name = name if name in PRESETS else default_preset()
    return texts.PAIR_NOTES.get(name, f"**{name}**: {PRESETS[name].description}.")


def _settings(default: str) -> dict[str, gr.components.Component]:
    """The Settings accordion's controls, by the name of the request's input each one is: the words from the
    page's table (`controls.LABELS`), the values from `Request`'s defaults, the bounds from the engine's."""
    def shown(name: str, **more) -> dict:
        return {"label": LABELS[name], "value": getattr(PAGE, name), **more}

    with gr.Accordion("Settings", open=False, elem_id="settings"):
        preset = gr.Dropdown(preset_choices(), **shown("preset", value=default),
                             info="presets marked GPU need a GPU and download their weights once")
        methods = gr.CheckboxGroup([(f"{m}: {name}", m) for m, name in METHOD_NAMES.items()],
                                   **shown("methods", value=list(PAGE.methods)))
        mode = gr.Radio(MODES, **shown("mode"), info="single method: the first ticked method drafts alone; the weight "
                        "rule and its window are TABED's own (a static ensemble or one method learns no weights)")
        rule = gr.Radio([(texts.RULE_PHRASES[r], r) for r in RULES], **shown("rule"), elem_id="settings-rule")
        window = gr.Number(**shown("window"), precision=0, minimum=0, info="positions the weights learn from; 0 = all")
        with gr.Row():
            gamma = gr.Slider(LIMITS["gamma"][0], AUTO_CAP, **shown("gamma"), step=1, precision=0,
                              elem_id="settings-gamma", info="the most, when the draft length is adaptive")
            adaptive = gr.Checkbox(**shown("adaptive"), elem_id="settings-adaptive",
                                   info="stop drafting when the ensemble is unsure")
        with gr.Row():
            tree_width = gr.Slider(*LIMITS["tree_width"], **shown("tree_width"), step=1, precision=0,
                                   elem_id="settings-tree-width",
                                   info="1 drafts a chain; more draws a token tree this many nodes wide per depth")
            tree_policy = gr.Radio(list(TREE_POLICIES), **shown("tree_policy"), elem_id="settings-tree-policy",
                                   info="the ensemble's top tokens, each method's own top-1, or the top "
                                        "tokens only where the ensemble is unsure (top under 1/2)")
            tree_blocks = gr.Radio([("every block", "all"), ("the first block", "first")], **shown("tree_blocks"),
                                   elem_id="settings-tree-blocks",
                                   info="the first block is drafted before any weight is learned")
        hedge_first = gr.Checkbox(**shown("hedge_first"), elem_id="settings-hedge-first",
                                  info="with chains and a picture, TABED's first block (drafted before any weight "
                                       "is learned) forks where the methods leave the ensemble unsure")
        max_new_tokens = gr.Slider(*LIMITS["max_new_tokens"], **shown("max_new_tokens"), step=1, precision=0,
                                   elem_id="settings-max-new-tokens",
                                   info="the prompt and the answer share the models' context (1024 tokens for the "
                                        "teaching pair): a run lowers this to what its prompt leaves, and says so")
        with gr.Row():
            temperature = gr.Slider(*LIMITS["temperature"], **shown("temperature"), step=0.05,
                                    elem_id="settings-temperature", info="0 is greedy")
            top_p = gr.Slider(0.01, 1.0, **shown("top_p"), step=0.01, elem_id="settings-top-p",
                              info="sampling draws from the likeliest tokens that add up to this (1 keeps every "
                                   "token)")
        seed = gr.Number(**shown("seed"), precision=0)
        compare_ar = gr.Checkbox(**shown("compare_ar"))
        methods_alone = gr.Checkbox(**shown("methods_alone"), elem_id="settings-methods-alone",
                                    info="its real block efficiency and speed beside the ensemble's (the metrics' "
                                         "per-method rows are otherwise lower bounds); slower: one run per method")
    return dict(preset=preset, methods=methods, mode=mode, rule=rule, window=window, gamma=gamma,
                max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, compare_ar=compare_ar,
                adaptive=adaptive, tree_width=tree_width, tree_policy=tree_policy, tree_blocks=tree_blocks,
                hedge_first=hedge_first, methods_alone=methods_alone, top_p=top_p)


def _question_column(default: str) -> SimpleNamespace:
    """Pictures, prompt, the buttons, the conversation, the settings and the examples."""
    ui = SimpleNamespace()
    ui.image = gr.Gallery(label=LABELS["pictures"], type="filepath", interactive=True,
                          sources=["upload", "clipboard"], file_types=["image"], elem_id="image", height=280,
                          columns=3, fit_columns=False, object_fit="contain")  # three pictures side by side
    ui.prompt = gr.Textbox(label=LABELS["prompt"], placeholder="Ask about the pictures (several are seen together), "
                           "or anything else", elem_id="prompt",
                           lines=2)
    with gr.Row():
        ui.run = gr.Button("Run", variant="primary", elem_id="run")
        ui.follow_up = gr.Button("Ask as follow-up", elem_id="follow-up")
        ui.stop = gr.Button("Stop", variant="stop", elem_id="stop")
    ui.new = gr.Button("New conversation", size="sm", elem_id="new")
    ui.chat = gr.Chatbot(label="Conversation", show_label=False, height=220, elem_id="chat",
                         buttons=["copy"])  # neither a label nor a toolbar over its first turn
    ui.settings = _settings(default)
    starts, follow_ups = BUNDLED.starts(), BUNDLED.follow_ups()
    gr.Examples(starts, inputs=[ui.image, ui.prompt], cache_examples=False, elem_id="examples",
                label="Examples: image-oriented, text-oriented, no picture, three odd pictures (then Run)")
    gr.Examples(follow_ups, inputs=[ui.prompt], cache_examples=False, elem_id="follow-up-examples",
                label="Follow-ups: after a run, pick one and press 'Ask as follow-up'")
    return ui


def _answer_column() -> SimpleNamespace:
    """The status, both answers, the metrics, the charts, the block table, the race and the downloads."""
    ui = SimpleNamespace()
    ui.status = gr.Markdown("Pick pictures (or none), type a prompt and press Run.", elem_id="status",
                            label="Status", show_label=False)
    gr.HTML(render.legend_html())
    ui.show_rejected = gr.Checkbox(True, label="show rejected drafts (struck through; hidden, their count shows)",
                                   elem_id="show-rejected", container=False)
    ui.tabed = gr.HTML(label="Answer (TABED)", elem_id="tabed-answer", show_label=True, container=True)
    ui.plain = gr.HTML(label="Plain decoding", elem_id="plain-answer", container=True, show_label=True)
    gr.HTML(texts.TOKEN_DETAIL, elem_id="token-detail")
    ui.metrics = gr.Dataframe(headers=["", "TABED", "plain"], label="Speed and acceptance", elem_id="metrics",
                              wrap=True, column_widths=["48%", "30%", "22%"], interactive=False, max_height=4000)
    ui.timing = gr.Markdown(texts.TIMING, elem_id="timing-note")
    ui.plot = gr.Plot(label="Ensemble weights", elem_id="weights-plot")
    ui.weights_note = gr.Markdown(texts.WEIGHTS_NOTE, elem_id="weights-note")
    groups = render.method_groups(list(PAGE.methods))
    ui.blocks = gr.Dataframe(headers=render.block_columns(groups), column_widths=render.block_widths(groups),
                             wrap=True, label="Block by block", elem_id="blocks", interactive=False, max_height=480)
    ui.trees = gr.Plot(label="Token trees", elem_id="trees-plot")  # shown while blocks may draft trees
    ui.stepper = _stepper()
    ui.race_button = gr.Button("Replay race", elem_id="race")
    ui.race = gr.HTML(elem_id="race-view", label="Race", show_label=False)  # under its button: in view when pressed
    ui.downloads = gr.File(label=DOWNLOADS_LABEL, file_count="multiple", elem_id="downloads")
    return ui


def _stepper() -> SimpleNamespace:
    """The block stepper: one block of the last answer at a time, by number, previous / next, a row of the
    block table, a block of the weights chart (`texts.STEP_ON_CLICK_JS`) or a token of the answer picked."""
    ui = SimpleNamespace()
    with gr.Group(elem_id="stepper"):
        gr.Markdown("**Step through a block** of the last finished answer: what each method proposed, what the mix "
                    "drafted, what the target kept and why, and how the weights were chosen. Tap a token of the "
                    "answer, a row of the block table or a block in the weights chart, or:")
        with gr.Row(equal_height=True):
            ui.previous = gr.Button("◀ previous", elem_id="step-previous", size="sm", min_width=80)
            ui.index = gr.Number(0, label="block", precision=0, elem_id="step-index", min_width=80)
            ui.next = gr.Button("next ▶", elem_id="step-next", size="sm", min_width=80)
        ui.view = gr.HTML(stepper.step_html(None, [], 0), elem_id="step-view")
    return ui


def show_step(conversation, index) -> tuple:
    """Block `index` of the session's last answer: the index shown and the block; a number that is no block of
    it shows the nearest one, and the stepper says so above it (the status keeps the run's reasons)."""
    state = session_state(conversation)
    shown, refused = stepper.chosen_block(index, len(state.blocks))
    page = stepper.step_html(state.tokenizer, state.blocks, shown, state.unlearned or stepper.UNLEARNED, state.shared)
    return shown, stepper.refused_html(refused) + page if refused else page


def pick_step(conversation, event: gr.SelectData) -> tuple:
    """The block of the block table's row that was picked (tapped or clicked)."""
    return show_step(conversation, event.index[0])


def trees_shown(methods, mode, tree_width, hedge_first) -> dict:
    """The trees chart is shown while some block may draft a tree (`controls.may_draft_trees`)."""
    return gr.update(visible=may_draft_trees(methods, mode, tree_width, hedge_first))


def _wire(state: gr.State, note: gr.Markdown, ask: SimpleNamespace, show: SimpleNamespace) -> None:
    """The events: runs and follow-ups share one queue slot (one decode at a time, fair timing)."""
    preset, methods, mode = ask.settings["preset"], ask.settings["methods"], ask.settings["mode"]
    tree_width, hedge_first = ask.settings["tree_width"], ask.settings["hedge_first"]
    controls = {"pictures": ask.image, "prompt": ask.prompt, "conversation": state, **ask.settings}
    inputs = [controls[name] for name in INPUTS]
    shown = {"status": show.status, "tabed": show.tabed, "plain": show.plain, "metrics": show.metrics,
             "weights": show.plot, "blocks": show.blocks, "chat": ask.chat, "state": state,
             "downloads": show.downloads, "trees": show.trees}
    outputs = [shown[name] for name in OUTPUTS]
    # preprocess=False: the handlers check every value themselves (`page/controls.py`), so that a bad one is a
    # line in the status that names its field, not Gradio's toast and error badges over every output
    decode = dict(concurrency_id="decode", concurrency_limit=1, trigger_mode="always_last", preprocess=False)
    # A run clears the last run's replayed race too, by a listener of its own (the run's API stays as it is),
    # registered before the run's: Gradio carries out a trigger's listeners in turn, the run's to its end.
    for trigger in (ask.run.click, ask.follow_up.click, ask.prompt.submit):
        trigger(lambda: "", None, [show.race], queue=False, api_name=False, js=texts.RUN_STARTS_JS)
    run_event = ask.run.click(run, inputs, outputs, api_name="run", **decode)
    follow_event = ask.follow_up.click(ask_follow_up, inputs, outputs, api_name="follow_up", **decode)
    submit_event = ask.prompt.submit(run, inputs, outputs, api_name=False, **decode)
    # trigger_mode="multiple": a picture added while the last one's check is on its way is checked too
    ask.image.upload(check_upload, [ask.image], [ask.image, show.status], preprocess=False, queue=False,
                     api_name=False, trigger_mode="multiple")
    race_event = show.race_button.click(replay_race, [state], [show.race], api_name="replay_race",
                                        trigger_mode="always_last", show_progress="hidden")  # it has its clock
    # On ZeroGPU the handler runs in another process, out of reach of the session's flags: cancel it there.
    # trigger_mode="multiple": every click of Stop is sent, even while an earlier one is still on its way
    ask.stop.click(request_stop, None, None, queue=False, api_name=False, trigger_mode="multiple",
                   cancels=[run_event, follow_event, submit_event, race_event] if ZERO_GPU else None)
    preset.change(pair_note, [preset], [note], queue=False, api_name=False)
    mode.input(lambda m, e: methods_for_mode(m, e, PAGE.methods), [methods, mode], [methods], queue=False,
               api_name=False)  # single method: one ticked; an ensemble: two at least
    mode.change(lambda m: [gr.update(interactive=ENSEMBLES.get(m) == "tabed")] * 2, [mode],
                [ask.settings["rule"], ask.settings["window"]], queue=False, api_name=False)  # TABED's own
    for control in (methods, mode, tree_width, hedge_first):
        control.change(trees_shown, [methods, mode, tree_width, hedge_first], [show.trees], queue=False,
                       api_name=False)
    ask.new.click(None, None, None, js=texts.FORGET_DETAIL_JS, queue=False, api_name=False)
    new_event = ask.new.click(new_conversation, [state], [*outputs, show.race, ask.image, ask.prompt], api_name=False)
    step = show.stepper
    stepped = [step.index, step.view]
    notes = [show.timing, show.weights_note]  # in the words of what decoded the answer (`texts.notes_for`)
    for event in (run_event, follow_event, submit_event, new_event):  # a new answer: its first block
        event.then(lambda c: (*show_step(c, 0), *texts.notes_for(session_state(c).label)), [state],
                   stepped + notes, api_name=False)
    step.index.input(show_step, [state, step.index], stepped, api_name=False, preprocess=False)
    step.previous.click(lambda c, i: show_step(c, (i or 0) - 1), [state, step.index], stepped, api_name=False)
    step.next.click(lambda c, i: show_step(c, (i or 0) + 1), [state, step.index], stepped, api_name=False)
    show.blocks.select(pick_step, [state], stepped, api_name=False)
    show.show_rejected.change(None, [show.show_rejected], None, js=texts.SHOW_REJECTED_JS, api_name=False)


def build_demo() -> gr.Blocks:
    default = default_preset()
    with gr.Blocks(title="TABED demo", delete_cache=(3600, 3600)) as demo:
        state = gr.State(Conversation(), delete_callback=forget_downloads)
        gr.Markdown(texts.INTRO)
        note = gr.Markdown(pair_note(default), elem_id="pair-note")
        with gr.Row():
            with gr.Column(scale=2):
                ask = _question_column(default)
            with gr.Column(scale=3):
                show = _answer_column()
        _wire(state, note, ask, show)
        demo.load(None, None, None, js=texts.STEP_ON_CLICK_JS)
        demo.load(None, None, None, js=texts.TOKEN_TAP_JS)
        demo.load(None, None, None, js=texts.CLAMPED_NOTE_JS)
    return demo


skip_cudnn_attention()  # process-wide, as an entry point may: why in its docstring
if ZERO_GPU:  # weights moved to CUDA at import are packed once by `spaces`, not reloaded by every cold worker
    PAIRS.preload(default_preset())
demo = build_demo()
demo.queue(max_size=32, default_concurrency_limit=1)

if __name__ == "__main__":
    demo.launch(css=texts.CSS, server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
