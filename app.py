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
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import torch

from tabed.errors import InputError, TabedError
from tabed.models.loading import skip_cudnn_attention
from tabed.models.presets import PRESETS, default_preset
from tabed.page import render, status, stepper, texts
from tabed.page.controls import ENSEMBLES, LABELS, may_draft_trees, methods_for_mode
from tabed.page.conversation import Conversation, build_turns, checked_upload, continued, session_state
from tabed.page.downloads import forget_downloads
from tabed.page.examples import Examples
from tabed.page.layout import settings_accordion, stepper_group
from tabed.page.pairs import PairCache, release_memory
from tabed.page.request import INPUTS, Request, api_handler
from tabed.page.stops import StopFlags
from tabed.page.view import OUTPUTS, RACE_PACES, Frame, RunView, final_frames, race_frames, stream_frames
from tabed.page.worker import ComparisonWorker

ROOT = Path(__file__).resolve().parent
EXAMPLES = ROOT / "assets" / "examples"
BUNDLED = Examples(EXAMPLES)  # what each was built to show is said of the teaching pairs only
PAGE = Request()  # the page's defaults
ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "t", "true")
PAIRS = PairCache(zero_gpu=ZERO_GPU)  # one loaded pair at a time
STOPS = StopFlags()
DOWNLOADS_LABEL = "Downloads: the run (JSON) and its report (one HTML page, plotly.js inside: it opens offline)"


def _session(request: gr.Request | None) -> str | None:
    return getattr(request, "session_hash", None)


def request_stop(request: gr.Request) -> None:
    """The Stop button: ask this session's running decode (or replay race) to stop and show it."""
    STOPS.stop(_session(request))


# ---------------------------------------------------------------- one run, streamed


def _gpu_seconds(follow_up: bool, request: Request, *_args, **_kwargs) -> int:
    """ZeroGPU budget for one request: both runs, scaled with max new tokens."""
    alone = request.methods_alone is True and isinstance(request.methods, (list, tuple))
    try:
        repeat = request.flag("repeat")
    except InputError:  # refused by the run itself, which then uses no GPU time
        repeat = 1
    runs = (2 * repeat if request.compare_ar is not False else 1) + (len(request.methods) if alone else 0)
    tokens = request.max_new_tokens if isinstance(request.max_new_tokens, (int, float)) else PAGE.max_new_tokens
    return int(min(300, 30 + 0.25 * runs * float(tokens)))


@GPU(duration=_gpu_seconds)
def respond(follow_up: bool, request: Request, browser: gr.Request = None,
            progress=gr.Progress(track_tqdm=True)):  # noqa: B008 - gradio's idiom
    """Validate, load the pair if needed, run TABED then plain decoding, and stream the page's frames
    (`Frame.values()`, in `OUTPUTS` order)."""
    session = _session(browser)
    stop = STOPS.begin(session)
    STOPS.taken(session)
    try:
        for frame in _respond(follow_up, request, session_state(request.conversation), stop):
            if STOPS.waiting(session) and isinstance(frame.status, str):  # Run pressed again meanwhile
                frame = replace(frame, status=status.line_html(QUEUED) + frame.status)
            yield frame.values()
    finally:
        STOPS.end(session, stop)
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
        compare, alone, repeat = request.flag("compare_ar"), request.flag("methods_alone"), request.flag("repeat")
        turns = build_turns(conversation, prompt)
        if PRESETS[name].needs_gpu and not torch.cuda.is_available():
            raise InputError(f"the preset {name!r} needs a GPU and this machine has none: choose 'teaching'")
        if not PAIRS.loaded(name):
            extra = "; on this GPU that includes capturing CUDA graphs and compiling the drafter, up to a minute" \
                if torch.cuda.is_available() and not ZERO_GPU else ""
            yield Frame(status=status.line_html(f"\u25f7 Loading the model pair {name!r} (first run only{extra})…"))
        pair = PAIRS.get(name)
    except TabedError as error:  # refused: the page stays as it was but for the status (the state too)
        yield Frame(status=status.error(str(error)))
        return
    teaching = name.startswith("teaching")  # the bundled examples, and what its target was taught, are its own
    lesson = BUNDLED.lesson(conversation.images, [asked for asked, _ in conversation.turns] + [prompt]) \
        if teaching else None
    view = RunView(pair, settings, render.TokenStream(pair.tokenizer), render.TokenStream(pair.tokenizer),
                   racing=compare, notes=notes, run=conversation.runs + 1, pictures=bool(conversation.images),
                   lesson=lesson, question=prompt if teaching else None, runs=repeat if compare else 1)
    alone = settings.spec.model_methods if alone and len(settings.spec.methods) > 1 else ()
    worker = ComparisonWorker(pair, turns, settings, compare_ar=compare, alone=alone, cancel=stop, repeat=repeat,
                              quiet=PAIRS.quiet).start()
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


def replay_race(conversation, pace: float = 1.0, request: gr.Request = None):
    """Both answers again, side by side, at the pace each was measured at, or at a `pace` of it (1, 0.5 or
    0.25); Stop ends it where it is.

    Args:
        conversation: the session state (None from an API call: no race yet)
        pace: of the measured pace: 1, 0.5 or 0.25
    """
    if isinstance(pace, bool) or pace not in RACE_PACES.values():
        paces = ", ".join(f"{value:g}" for value in RACE_PACES.values())
        yield f"<i>{status.text(f'pace must be one of {paces}; got {pace!r}')}</i>"
        return
    stop = STOPS.begin(_session(request))
    try:
        yield from race_frames(session_state(conversation), stop, pace)
    finally:
        STOPS.end(_session(request), stop)


def check_upload(upload: list[dict] | None) -> tuple:
    """On upload, before Gradio reads the pictures itself (where an unreadable file fails with a bare "Error"):
    files that are no picture, and pictures past the most a run takes, are taken off the page with a line
    saying why; the others stay (`conversation.checked_upload`)."""
    kept, refused = checked_upload(upload)
    return (kept or None, status.line_html(f"\u26a0\ufe0f {refused}")) if refused else (gr.update(), gr.update())


WAITING = ("\u25f7 Waiting for the machine: it runs one request at a time, so that each is timed alone; yours starts "
           "when the one before it ends.")
QUEUED = "\u25f7 Your next run waits: it starts when this one ends (Stop ends this one now)."


def run_starts(browser: gr.Request = None) -> tuple:
    """Run (or a follow-up) pressed: the last replayed race goes, the status says the request waits its turn
    until its first frame says more (another visitor's run may hold the machine), and Stop turns red. Pressed
    while one of the session's runs decodes, the new run waits behind it, and that run's frames say so
    (`QUEUED`)."""
    STOPS.ask(_session(browser))
    return "", status.line_html(WAITING), gr.update(variant="stop")


def new_conversation(conversation: object = None) -> tuple:
    """An empty conversation and a clean page: nothing of the last run stays (answers, metrics, charts,
    block table, trees, downloads and their files; then the replayed race, the pictures and the prompt)."""
    forget_downloads(conversation)
    frame = Frame(status=status.line_html("Start a new conversation: pick pictures (or none) and type a prompt."),
                  tabed="", plain="", metrics=None, weights=None, blocks=None, chat=[], downloads=None, trees=None,
                  state=Conversation(runs=session_state(conversation).runs))  # the verdicts' run numbers count on
    return (*frame.values(), "", None, "")


# ---------------------------------------------------------------- layout

def pair_note(name: str | None) -> str:
    """What the chosen pair is and what it can see, for the page."""
    name = name if name in PRESETS else default_preset()
    line, more = texts.PAIR_NOTES.get(name, (f"**{name}**: {PRESETS[name].description}.", ""))
    return line + (f"\n\n<details><summary>More</summary>\n\n{more}\n\n</details>" if more else "")


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
        ui.stop = gr.Button("Stop", variant="secondary", elem_id="stop")  # red only while a run goes (`_wire`)
    starts, follow_ups = BUNDLED.starts(), BUNDLED.follow_ups()  # under the buttons: Run in reach after a pick
    gr.Examples(starts, inputs=[ui.image, ui.prompt], cache_examples=False, elem_id="examples",
                label="Examples: image-oriented, text-oriented, no picture, three odd pictures (then Run)")
    ui.new = gr.Button("New conversation", size="sm", elem_id="new")
    ui.chat = gr.Chatbot(label="Conversation", show_label=False, height=220, elem_id="chat", buttons=["copy"],
                         render_markdown=False)  # as typed (`conversation.as_typed`); no label over its first turn
    gr.Examples(follow_ups, inputs=[ui.prompt], cache_examples=False, elem_id="follow-up-examples",
                label="Follow-ups: after a run, pick one and press 'Ask as follow-up'")
    ui.settings = settings_accordion(default, PAGE)
    return ui


def _answer_column() -> SimpleNamespace:
    """The status, both answers, the metrics, the charts, the block table, the race and the downloads."""
    ui = SimpleNamespace()
    ui.status = gr.HTML(status.line_html("Pick pictures (or none), type a prompt and press Run."), elem_id="status",
                        label="Status", show_label=False)
    gr.HTML(render.legend_html(), elem_id="legend")
    ui.show_rejected = gr.Checkbox(True, label="show rejected drafts", elem_id="show-rejected", container=False)
    ui.tabed = gr.HTML(label="Answer (TABED)", elem_id="tabed-answer", show_label=True, container=True)
    ui.plain = gr.HTML(label="Plain decoding", elem_id="plain-answer", container=True, show_label=True)
    gr.HTML(texts.TOKEN_DETAIL, elem_id="token-detail")
    with gr.Accordion("Speed and acceptance, in numbers", open=False, elem_id="metrics-fold"):
        ui.metrics = gr.Dataframe(headers=["", "TABED", "plain"], label="Speed and acceptance", elem_id="metrics",
                                  wrap=True, column_widths=["48%", "30%", "22%"], interactive=False, max_height=4000)
    with gr.Accordion("How the speed is measured", open=False, elem_id="timing"):
        ui.timing = gr.Markdown(texts.TIMING, elem_id="timing-note")
    ui.plot = gr.Plot(label="Ensemble weights", elem_id="weights-plot")
    with gr.Accordion("How the weights move", open=False, elem_id="weights"):
        ui.weights_note = gr.Markdown(texts.WEIGHTS_NOTE, elem_id="weights-note")
    groups = render.method_groups(list(PAGE.methods))
    ui.blocks = gr.Dataframe(headers=render.block_columns(groups), column_widths=render.block_widths(groups),
                             wrap=True, label="Block by block", elem_id="blocks", interactive=False, max_height=480)
    ui.trees = gr.Plot(label="Token trees", elem_id="trees-plot")  # shown while blocks may draft trees
    ui.stepper = stepper_group()
    with gr.Row(equal_height=True):
        ui.race_button = gr.Button("Replay race", elem_id="race", scale=2)
        ui.race_pace = gr.Radio([(words, pace) for words, pace in RACE_PACES.items()], value=1.0, scale=3,
                                label="pace, of the measured one", elem_id="race-pace")
    ui.race = gr.HTML(elem_id="race-view", label="Race", show_label=False)  # under its button: in view when pressed
    ui.downloads = gr.File(label=DOWNLOADS_LABEL, file_count="multiple", elem_id="downloads")
    return ui


def show_step(conversation, index) -> tuple:
    """Block `index` of the session's last answer: the index shown and the block; a number that is no block of
    it shows the nearest one, and the stepper says so above it (the status keeps the run's reasons)."""
    state = session_state(conversation)
    last = state.last
    shown, refused = stepper.chosen_block(index, len(last.blocks))
    page = stepper.step_html(last.tokenizer, last.blocks, shown, last.unlearned or stepper.UNLEARNED, last.shared)
    return shown, stepper.refused_html(refused) + page if refused else page


def typed_step(conversation, index) -> tuple:
    """The block whose number is in the stepper's box (typed, or put there by previous / next or a click on the
    weights chart); the box is left as it is unless the number is no block: a number typed while this step was
    on its way is then still there for the next."""
    shown, page = show_step(conversation, index)
    return (gr.skip() if shown == index else shown), page


def first_step(conversation) -> tuple:
    """A new answer's first block, and the notes in the words of what decoded it (`texts.notes_for`)."""
    last = session_state(conversation).last
    return (*show_step(conversation, 0), *texts.notes_for(last.mode, last.label))


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
    # A run first clears the last run's replayed race, says it waits its turn and turns Stop red (`run_starts`),
    # then decodes: chained, so that no frame of the run can land before that one (the run's API is its own)
    started = [trigger(run_starts, None, [show.race, show.status, ask.stop], queue=False, api_name=False,
                       js=texts.RUN_STARTS_JS) for trigger in (ask.run.click, ask.follow_up.click, ask.prompt.submit)]
    run_event = started[0].then(run, inputs, outputs, api_name="run", **decode)
    follow_event = started[1].then(ask_follow_up, inputs, outputs, api_name="follow_up", **decode)
    submit_event = started[2].then(run, inputs, outputs, api_name=False, **decode)
    # trigger_mode="multiple": a picture added while the last one's check is on its way is checked too
    ask.image.upload(check_upload, [ask.image], [ask.image, show.status], preprocess=False, queue=False,
                     api_name=False, trigger_mode="multiple")
    race_event = show.race_button.click(replay_race, [state, show.race_pace], [show.race], api_name="replay_race",
                                        trigger_mode="always_last", show_progress="hidden")  # it has its clock
    # On ZeroGPU the handler runs in another process, out of reach of the session's flags: cancel it there.
    # trigger_mode="multiple": every click of Stop is sent, even while an earlier one is still on its way
    ask.stop.click(request_stop, None, None, queue=False, api_name=False, trigger_mode="multiple",
                   cancels=[run_event, follow_event, submit_event, race_event] if ZERO_GPU else None)
    preset.change(pair_note, [preset], [note], queue=False, api_name=False)
    # single method: one ticked; an ensemble: two at least. trigger_mode="always_last": with Gradio's "once" for
    # `.input`, an ensemble picked while the last pick's methods were on their way was dropped (Run then said
    # "single-method drafting uses one method; 2 are ticked")
    mode.input(lambda m, e: methods_for_mode(m, e, PAGE.methods), [methods, mode], [methods], queue=False,
               api_name=False, trigger_mode="always_last")
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
    for event in (run_event, follow_event, submit_event, new_event):  # a new answer: its first block, then (a
        shown = event.then(first_step, [state], stepped + notes, api_name=False)  # run's) the verdict in view
        if event is not new_event:
            shown.then(lambda: gr.update(variant="secondary"), None, [ask.stop], js=texts.RUN_ENDS_JS, api_name=False,
                       queue=False)
    # Every way of stepping is one queue, in the order asked, and a step asked while another is on its way is
    # kept (the last one; Gradio's default, "once", drops it): the stepper ends on the block asked last.
    # Previous and next change the number in the box in the browser, at once, as a person would type it.
    stepping = dict(api_name=False, trigger_mode="always_last", concurrency_id="stepper", concurrency_limit=1)
    step.index.input(typed_step, [state, step.index], stepped, preprocess=False, **stepping)
    show.blocks.select(pick_step, [state], stepped, **stepping)
    for button, by in ((step.previous, -1), (step.next, 1)):
        button.click(None, None, None, js=texts.step_by_js(by), queue=False, api_name=False)
    show.show_rejected.change(None, [show.show_rejected], None, js=texts.SHOW_REJECTED_JS, api_name=False)


def build_demo() -> gr.Blocks:
    default = default_preset()
    with gr.Blocks(title="TABED demo", delete_cache=(3600, 3600)) as demo:
        state = gr.State(Conversation(), delete_callback=forget_downloads)
        gr.Markdown(texts.INTRO, elem_id="intro")
        with gr.Accordion("How TABED works", open=False, elem_id="intro-more"):
            gr.Markdown(texts.INTRO_MORE)
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
