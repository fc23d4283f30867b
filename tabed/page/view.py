"""One run as the page shows it: the view built from the engine's events, the frames streamed while it
decodes and when it ends, its downloads, and the replayed race. Each frame names its outputs (`Frame`)."""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields, replace

import gradio as gr
import plotly.graph_objects as go
import torch

from ..bench.machine import describe_machine, machine_line
from ..engine.events import BlockEvent, Finished, GenerationResult, Started, TokenEvent
from ..engine.settings import Settings, hedges_first
from ..engine.spec import METHOD_NAMES
from ..engine.speed import (
    Repeats,
    RunCosts,
    SpeedModel,
    answer_speed,
    decode_speedup,
    differing_runs,
    repeats_record,
    run_costs,
)
from ..models.pair import ModelPair
from . import reasons, render, status, stepper, texts
from .conversation import Conversation, LastRun, chat_history
from .downloads import Report, write_downloads
from .examples import LATER_TURN, OWN_QUESTION
from .pairs import Probe
from .render import too_short_to_time
from .words import Words, one_row
from .worker import ALONE, AUTOREGRESSIVE, SPECULATIVE, ComparisonWorker, Done, Failure, PhaseEvent

HTML_EVERY_S = 0.1  # token stream and status
RACE_CLOCK_S = 0.5  # the replayed race's clock is resent at least this often when no token comes
# The race's frames, at most this often: the browser handles each frame by copying every value on the page (the
# block table's and the charts' too), so that a frame every 50 ms (20 a second) kept a busy machine's browser
# behind the race for seconds, and a click on Stop waited behind them.
RACE_FRAME_S = 0.2
PLOT_EVERY_S = 0.75  # plotly figures and tables are resent whole: keep them rare (Stop stays responsive)
NO_RACE = "Run a prompt with 'compare with plain decoding' ticked first."
BUSY_RACE = "The last run's timings are unreliable (the machine was busy): run it again when it is idle to race it."
RACE_PACES = {"×1": 1.0, "×½": 0.5, "×¼": 0.25}  # the replayed race's pace, of the measured one, by its words
STOPPED_MARK = '<div class="tabed-stopped">\u25a0 stopped here</div>'
STEPPABLE = '<span class="tabed-steppable" hidden></span>'  # its blocks are the stepper's: a tap steps


@dataclass
class Frame:
    """One update of the page, output by output (the handlers' outputs, in this order): each field is its
    component's new value, and one left at `gr.skip()` keeps what the page shows."""

    status: object = field(default_factory=gr.skip)
    tabed: object = field(default_factory=gr.skip)  # TABED's answer (HTML)
    plain: object = field(default_factory=gr.skip)  # plain decoding's answer (HTML)
    metrics: object = field(default_factory=gr.skip)
    weights: object = field(default_factory=gr.skip)  # the ensemble weights' figure
    blocks: object = field(default_factory=gr.skip)  # the block-by-block table
    chat: object = field(default_factory=gr.skip)
    state: object = field(default_factory=gr.skip)  # the session's Conversation
    downloads: object = field(default_factory=gr.skip)
    trees: object = field(default_factory=gr.skip)  # the token trees' figure

    def values(self) -> tuple:
        """The values in the outputs' order, as Gradio takes them."""
        return tuple(getattr(self, name) for name in OUTPUTS)


OUTPUTS = tuple(f.name for f in fields(Frame))


@dataclass
class RunView:
    """Everything the page shows about one run, updated from engine events."""

    pair: ModelPair
    settings: Settings
    tabed: render.TokenStream
    plain: render.TokenStream
    blocks: list[BlockEvent] = field(default_factory=list)
    results: dict[str, GenerationResult] = field(default_factory=dict)  # by phase: SPECULATIVE, AUTOREGRESSIVE
    alone: dict[str, GenerationResult] = field(default_factory=dict)  # by method: each run alone, for comparison
    notes: list[str] = field(default_factory=list)
    phase: str = SPECULATIVE
    method: str | None = None  # the method drafting alone, in the ALONE phase
    error: str | None = None
    racing: bool = False  # with plain decoding: the charts wait for the end (see `stream_frames`)
    shared: list[str] = field(default_factory=list)  # methods drafted as one row (`Started.shared`)
    started: bool = False  # the engine took the request (`Started`): until then a refusal changes nothing
    run: int = 1  # the session's run this is (its downloads are named for it; "Done" says it)
    pictures: bool = False  # the conversation has pictures (what M sees and T does not)
    lesson: str | None = None  # what the bundled example asked was built to show, in a sentence (`page/examples.py`)
    question: str | None = None  # the prompt, asked of the teaching pair: its answer may be about something else
    runs: int = 1  # how many times each side runs, alternately (`repeat`): the median run's figures are shown
    repeat: int = 0  # the run on its way (0: the first, the one streamed)
    repeats: list[dict[str, GenerationResult]] = field(default_factory=list)  # runs 1, 2…: their results by phase
    spread: Repeats | None = None  # the speedups of every run that finished both sides (`settle`), when several
    differing: tuple[int, ...] = ()  # runs (1-based) whose greedy answer differs from the first's: a bug
    timed_runs: int = 1  # the runs that finished both sides (`settle`)
    probe: Probe | None = None  # the pair's quiet costs, which the runs' are held against (None: not measured)

    def starved(self) -> float | None:
        """The smallest CPU share of the run's sides that the engine found busy (`Metrics.busy`: they
        shared the machine, so their timings mean nothing); None when none was."""
        shares = [result.metrics.cpu_share for result in [*self.results.values(), *self.alone.values()]
                  if result.metrics.busy]
        return min(shares) if shares else None

    def costs(self, run: dict[str, GenerationResult]) -> RunCosts | None:
        """What a run's target forwards cost against the quiet ones (`speed.RunCosts`), when both are known."""
        if self.probe is None or self.probe.costs is None or not self._finished(run):
            return None
        return run_costs(run[SPECULATIVE], run[AUTOREGRESSIVE], self.probe.costs)

    def slowed(self) -> RunCosts | None:
        """The shown run's costs, when they were far from the quiet ones (the machine was busy)."""
        costs = self.costs(self.results)
        return costs if costs is not None and costs.far else None

    def unmeasured(self) -> bool:
        """The probe before the run found the machine busy, and it has never been found quiet."""
        return self.probe is not None and self.probe.busy and self.probe.costs is None

    def unreliable(self) -> bool:
        """The machine was busy (`starved`, `slowed` or `unmeasured`): the run's timings measured its other work."""
        return self.starved() is not None or self.slowed() is not None or self.unmeasured()

    def add(self, item: PhaseEvent) -> None:
        event = item.event
        self.phase, self.method, self.repeat = item.phase, item.method, item.repeat
        if item.repeat:  # a repeat, for its timings only: the page shows the first run's tokens as they came
            if isinstance(event, Finished):
                while len(self.repeats) < item.repeat:
                    self.repeats.append({})
                self.repeats[item.repeat - 1][item.phase] = event.result
            return
        stream = self.tabed if item.phase == SPECULATIVE else self.plain
        if item.phase == ALONE:  # a method alone, for comparison: only its figures are shown
            if isinstance(event, Finished):
                self.alone[item.method] = event.result
        elif isinstance(event, Started):
            self.notes += [note for note in event.notes if note not in self.notes]
            self.shared = self.shared or event.shared
            self.started = True
        elif isinstance(event, TokenEvent):
            stream.token(event, "plain")
        elif isinstance(event, BlockEvent):
            self.blocks.append(event)
            stream.block(event)
        elif isinstance(event, Finished):
            self.results[item.phase] = event.result

    def settle(self) -> None:
        """The run is over: of the runs that finished both sides (`timed_runs`: fewer than asked when Stop ended
        the repeats), the one with the median speedup becomes the run whose timings the page shows (its metrics,
        block table, weights, reasons, race and download; the tokens streamed are the first run's), its range kept
        in `spread`; runs a busy machine starved or slowed count only when every run was. A greedy answer that differs
        between runs is a bug, kept in `differing`."""
        if self.runs < 2 or not self.compared():
            return
        runs = [self.results, *(run for run in self.repeats if self._finished(run))]
        self.timed_runs = len(runs)
        slowed = frozenset(i for i, run in enumerate(runs) if (costs := self.costs(run)) is not None and costs.far)
        spread = Repeats.of([(run[SPECULATIVE].metrics, run[AUTOREGRESSIVE].metrics) for run in runs], slowed)
        if not self.settings.config.temperature:
            self.differing = tuple(differing_runs([tuple(run[p].token_ids for p in (SPECULATIVE, AUTOREGRESSIVE))
                                                   for run in runs]))
        if spread is not None:  # one quiet run among disturbed ones is still a figure
            self.results = runs[spread.median_run]
            self.blocks = list(self.results[SPECULATIVE].blocks)
            self.spread = spread if len(spread.speedups) > 1 else None

    @staticmethod
    def _finished(run: dict[str, GenerationResult]) -> bool:
        return all(phase in run and not run[phase].stopped for phase in (SPECULATIVE, AUTOREGRESSIVE))

    def metrics(self) -> gr.Dataframe:
        return gr.Dataframe(value=self.metric_rows(), headers=self.metric_headers())

    def metric_headers(self) -> list[str]:
        return ["", self.label, "plain"]

    def metric_rows(self) -> list[list]:
        """Both sides' numbers; a stopped side's are left out, so no speedup compares unequal answers."""
        speculative = self.results.get(SPECULATIVE)
        plain = self.results.get(AUTOREGRESSIVE)
        missing = "…" if self.racing else "not run"
        if speculative is not None and speculative.stopped or plain is not None and plain.stopped:
            plain, missing = None, "stopped"
        rows = render.metrics_rows(speculative.metrics if speculative else None, plain.metrics if plain else None,
                                   unreliable=self.unreliable(), missing=missing)
        if self.spread is not None and rows[0][0].startswith("speedup"):
            spread = self.spread
            rows.insert(1, [f"speedup over {len(spread.speedups)} runs of each side (the median run's above)",
                            f"{spread.low:.2f}× to {spread.high:.2f}×", "—"])
        if self.alone:
            rows += render.alone_rows(self.alone, self.alone_speedups())
        if plain is not None and (speed := self.speed()) is not None:
            at = next(i for i, row in enumerate(rows) if row[0] == "tokens")  # under the speedup: why it is so
            rows[at:at] = render.speed_rows(speed, weighed=not self.single())
        return rows

    def groups(self) -> render.Groups:
        return render.method_groups(list(self.settings.spec.methods), self.shared)

    def block_table(self) -> gr.Dataframe:
        groups = self.groups()
        return gr.Dataframe(value=render.block_rows(self.pair.tokenizer, self.blocks, groups),
                            headers=render.block_columns(groups), column_widths=render.block_widths(groups))

    def figure(self) -> go.Figure:
        return render.weights_figure(self.blocks, self.groups(), self.label if self.single() else None)

    def single(self) -> bool:
        """A single method drafted: nothing was mixed, no weight learned (as `texts.notes_for` tells it)."""
        return self.settings.spec.mode == "single"

    def trees(self) -> go.Figure:
        spec, config = self.settings.spec, self.settings.config
        return render.trees_figure(self.pair.tokenizer, self.blocks, config.tree_width, hedges_first(spec, config))

    def stopped(self) -> str | None:
        """Which side Stop ended, once the run is over: "speculative" (TABED, or before it began) or
        "autoregressive" (plain decoding, TABED's answer complete); None when nothing was stopped."""
        speculative, plain = self.results.get(SPECULATIVE), self.results.get(AUTOREGRESSIVE)
        if speculative is None or speculative.stopped:
            return SPECULATIVE
        if plain is None:  # asked for and never begun: Stop landed as TABED's answer ended
            return AUTOREGRESSIVE if self.racing else None
        return AUTOREGRESSIVE if plain.stopped else None

    def compared(self) -> bool:
        """Both sides decoded their whole answer: only then is a speedup (or a race) a comparison."""
        return self._finished(self.results)

    def speedup(self) -> float | None:
        """Plain decoding's decode time over ours for as many tokens (`speed.decode_speedup`), when both sides
        finished an answer long enough to time."""
        if not self.compared() or self.too_short():
            return None
        return decode_speedup(self.results[SPECULATIVE].metrics, self.results[AUTOREGRESSIVE].metrics)

    def speed(self) -> SpeedModel | None:
        """What the speedup is made of (`engine/speed.py`), when there is one and both answers are as long."""
        if self.speedup() is None or self.unreliable():  # a disturbed run's timings explain nothing
            return None
        return answer_speed(self.results[SPECULATIVE].metrics, self.results[AUTOREGRESSIVE].metrics)

    def too_short(self) -> bool:
        """Plain decoding finished an answer too short to time (`render.too_short_to_time`)."""
        plain = self.results.get(AUTOREGRESSIVE)
        return plain is not None and too_short_to_time(plain.metrics)

    @property
    def name(self) -> str:
        """What decoded the answer beside plain decoding, as the page names it: TABED, a static ensemble, or
        one method alone."""
        spec = self.settings.spec
        return {"tabed": "TABED", "static": f"the static ensemble {spec.name}"}.get(spec.mode,
                                                                                    f"{spec.name} alone")

    def unlearned(self) -> str:
        """Why a block whose weights were not learned weighs its methods as it does (`stepper.step_html`)."""
        spec = self.settings.spec
        if spec.mode == "static":
            return "a static ensemble weighs every method the same in every block"
        if spec.tabed and len(self.shared) == len(spec.methods):
            return f"{one_row(self.shared)}, drafted once, so there is nothing to weigh between them"
        return stepper.UNLEARNED

    @property
    def label(self) -> str:
        """`name` as a column's header or an answer's label: "TABED", "static ensemble MT", "M alone"."""
        return self.name.removeprefix("the ")

    def answer_box(self) -> dict:
        """The answer so far, in a box labelled with what decodes it."""
        return gr.update(value=render.answer_html(self.tabed), label=f"Answer ({self.label})")

    def status(self, finished: bool, charted: bool = True) -> str:
        """The status (HTML, `page/status.py`): in progress, done (the verdict and its reasons), stopped (saying
        which side), or an error. A stopped run is never shown as done, not even in the frame that ends its
        stream; a finished one is done only beside its charts (`charted`; the frame before says it is finishing)."""
        if self.error:
            return status.error(self.error)
        if not finished:
            done = len(self.blocks) if self.phase == SPECULATIVE else len(self.plain.ids)
            return status.progress(self.name, self.where, self.phase, done, self.method, self.racing, self.started,
                                   (self.repeat + 1, self.runs) if self.runs > 1 and self.phase != ALONE else None)
        if not self.started:
            return status.stopped(self.name, self.where, None, 0)
        if (side := self.stopped()) is not None:
            plain = self.results.get(AUTOREGRESSIVE)
            done = len(self.blocks) if side == SPECULATIVE else len(plain.token_ids) if plain else 0
            return status.stopped(self.name, self.where, side, done)
        return status.done_html(self.facts()) if charted else status.finishing(self.where)

    @property
    def where(self) -> str:
        """The pair and where it ran: "teaching on cpu (float32)"."""
        return f"{self.pair.name} on {self.pair.device.type} ({str(self.pair.dtype).removeprefix('torch.')})"

    def facts(self) -> status.RunFacts:
        """The finished run as the status words it (`status.RunFacts`)."""
        metrics, spec = self.results[SPECULATIVE].metrics, self.settings.spec
        facts = status.RunFacts(
            self.label, spec.mode, self.run, self.where, notes=tuple(self.notes),
            tokens_per_check=((metrics.new_tokens - 1) / (metrics.target_forwards - 1)
                              if metrics.target_forwards > 1 else None))
        if not self.compared():
            return facts
        checked = sum(len(block.tree) or len(block.draft) for block in self.blocks) / max(len(self.blocks), 1)
        lesson_said = self.lesson in (None, OWN_QUESTION, LATER_TURN)  # an example's answer is the expected one
        return replace(facts, exact=self.exactness(), speedup=self.speedup(), starved=self.starved(),
                       slowed=self.slowed(), unmeasured=self.unmeasured(),
                       too_short=self.too_short(), speed=self.speed(), checked=checked,
                       seen=tuple(m for m in spec.methods if m in METHOD_NAMES), blocks=self.blocks,
                       shared=self.shared, pictures=self.pictures, word=Words(self.pair.tokenizer, markup=True),
                       alone=self.alone_speedups(), lesson=self.lesson,
                       unasked=tuple(self.unasked()) if lesson_said else (), half_precision=self.half_precision,
                       spread=self.spread, differing=self.differing,
                       cut=(self.timed_runs, self.runs) if self.timed_runs < self.runs else None)

    def exactness(self) -> status.Exactness:
        """How TABED's answer compares with plain decoding's, both finished: identical, a sample, or where they
        part (1-based)."""
        ours, plain = self.results[SPECULATIVE].token_ids, self.results[AUTOREGRESSIVE].token_ids
        first = next((i for i, (a, b) in enumerate(zip(ours, plain, strict=False)) if a != b),
                     min(len(ours), len(plain)))
        return status.Exactness(len(ours), len(plain), self.settings.config.temperature > 0, ours == plain, first + 1)

    def unasked(self) -> list[str]:
        """The question's words when the answer holds none of them (`reasons.unasked`); [] when it holds one."""
        if not self.question:
            return []
        answer = self.pair.tokenizer.decode(self.results[SPECULATIVE].token_ids, skip_special_tokens=True)
        return reasons.unasked(self.question, answer)

    def alone_speedups(self) -> dict[str, float]:
        """Each method run alone for comparison, when both sides finished an answer long enough to time: plain
        decoding's decode time over its own for as many tokens (`speed.decode_speedup`, as for the ensemble)."""
        if not self.compared() or self.too_short():
            return {}
        plain = self.results[AUTOREGRESSIVE].metrics
        speedups = {method: decode_speedup(result.metrics, plain)
                    for method, result in self.alone.items() if not result.stopped}
        return {method: speedup for method, speedup in speedups.items() if speedup is not None}

    def lossless(self) -> str:
        """What the two answers show of speculative decoding being lossless, in words (the Exact reason's
        detail, as typed)."""
        return html.unescape(status.exact_reason(self.exactness(), self.label, self.half_precision).detail)

    @property
    def half_precision(self) -> bool:
        """The pair computes in 16 bits: a near-tie may round either way between a verify and a step."""
        return self.pair.dtype in (torch.float16, torch.bfloat16)

    def plain_column(self) -> str:
        """Plain decoding's answer, or why there is none."""
        if self.plain.html or AUTOREGRESSIVE in self.results:
            return self.plain.html
        if not self.racing:
            return "<i>Plain decoding was not asked for ('compare with plain decoding' is off).</i>"
        return "<i>Plain decoding did not run: the run was stopped first.</i>"


def export_run(conversation: Conversation, view: RunView, request: dict, answers: tuple[str, str]) -> list[str]:
    """The run as JSON (events and metrics) and its report (`downloads.Report`: what the page shows of it, the
    charts included) as one page that opens offline, for download, in place of the session's previous ones."""
    record = {"request": request, "pair": view.pair.name, "device": str(view.pair.device),
              "dtype": str(view.pair.dtype), "results": {k: r.to_dict() for k, r in view.results.items()}
              | {f"alone:{method}": r.to_dict() for method, r in view.alone.items()}}  # the download's keys
    if (speedup := view.speedup()) is not None:  # never from a side that was stopped
        record["speedup"] = speedup
    if (costs := view.costs(view.results)) is not None:  # the machine's quiet costs, the run's beside them
        record["costs"] = {"quiet": asdict(costs.quiet), "step_s": costs.step_s, "steps": costs.steps,
                           "checks": costs.checks, "far": costs.far}
    if view.runs > 1:  # the results are the median run's
        record["repeats"] = repeats_record(view.spread, view.runs, view.timed_runs, view.differing)
    conversation.runs = view.run
    return write_downloads(conversation, record, report(view, request, answers), texts.CSS, time.time())


def report(view: RunView, request: dict, answers: tuple[str, str]) -> Report:
    """What the run's report shows: the status as the page ends with it, both answers (`answers`: TABED's and
    plain decoding's, as the page shows them, a stop marked), the metrics, the charts, the request and where it
    ran."""
    figures = [view.figure()] + ([view.trees()] if any(block.tree for block in view.blocks) else [])
    pair = view.pair
    machine = machine_line(describe_machine(pair.device, pair.linears, pair.compiled_roles))
    settings = {"prompt": request["prompt"], "turn": request["turn"], "pictures": request["images"],
                "drafting": request["spec"], **request["config"], "repeat": view.runs}
    return Report(view.status(True), render.legend_html(),
                  [("tabed-answer", f"Answer ({view.label})", answers[0]),
                   ("plain-answer", "Plain decoding", answers[1])],
                  view.metric_rows(), view.metric_headers(), figures, settings, f"{view.where}; {machine}")


def stream_frames(view: RunView, worker: ComparisonWorker, conversation: Conversation) -> Iterator[Frame]:
    """The run's frames while it decodes: tokens every 0.1 s; the figure, table and metrics when they
    changed, at most every 0.75 s (they are resent whole). In a race with plain decoding (`view.racing`)
    they wait for its end: drawing them (here, and in a browser on the same machine) takes cores from
    whichever side is being timed, and a race must time both sides alike."""
    last_html = last_plot = 0.0
    last_shown = (0, 0)
    finished = cleared = False
    while not finished:
        for item in worker.drain(HTML_EVERY_S):
            if isinstance(item, PhaseEvent):
                view.add(item)
            elif isinstance(item, Probe):
                view.probe = item
            elif isinstance(item, Failure):
                view.error = item.message
            elif isinstance(item, Done):
                finished = True
                view.settle()
        now = time.monotonic()
        if not finished and now - last_html < HTML_EVERY_S:
            continue
        last_html = now
        if not view.started:  # the engine may still refuse the request: only the status says anything yet
            yield Frame(status=view.status(finished))
            continue
        shown = (len(view.blocks), len(view.results) + len(view.alone))  # the figure, table and metrics change
        # the last frame says how the run ended at once: its charts come with `final_frames`
        heavy = not finished and not view.racing and now - last_plot >= PLOT_EVERY_S and shown != last_shown
        if heavy:
            last_plot, last_shown = now, shown
        frame = Frame(status=view.status(finished, charted=False), tabed=render.answer_html(view.tabed),
                      plain=view.plain.html, state=conversation)
        if not cleared:  # the engine took the request: the last run's charts and downloads would sit beside this
            # one's tokens (in a race, until it is over), and a download taken then would be the last run's
            cleared = True
            frame.tabed = view.answer_box()
            frame.metrics = frame.weights = frame.blocks = frame.downloads = frame.trees = None
        if heavy:
            frame.metrics, frame.weights, frame.blocks, frame.trees = (view.metrics(), view.figure(),
                                                                        view.block_table(), view.trees())
        yield frame


def final_frames(view: RunView, conversation: Conversation, request: dict) -> Iterator[Frame]:
    """The finished (or stopped) run: a complete TABED answer joins the conversation (even when plain
    decoding was stopped after it); a stopped one is marked and stays out of it; either way the run can
    be downloaded, and replayed as a race when both sides finished. A run that failed shows what it decoded."""
    if not view.started:  # refused (or stopped) before the engine took it: nothing else changes
        yield Frame(status=view.status(True))
        return
    if view.error:
        yield Frame(status=view.status(True), metrics=view.metrics(), weights=view.figure(),
                    blocks=view.block_table(), trees=view.trees(), state=conversation)
        return
    stopped = view.stopped()
    tabed_html = render.answer_html(view.tabed) + (STOPPED_MARK if stopped == SPECULATIVE else "")
    plain_html = view.plain_column() + (STOPPED_MARK if stopped == AUTOREGRESSIVE else "")
    if SPECULATIVE not in view.results:  # stopped before TABED began
        yield Frame(status=view.status(True), tabed=tabed_html, plain=plain_html, chat=chat_history(conversation),
                    state=conversation)
        return
    tabed_html = STEPPABLE + tabed_html
    if stopped != SPECULATIVE:
        conversation.turns.append((request["prompt"], view.results[SPECULATIVE].text))
    compared = view.compared()
    raceable = compared and not view.unreliable()  # a busy machine's pace is not the method's
    frames = ({phase: render.result_texts(view.pair.tokenizer, view.results[phase])
               for phase in (SPECULATIVE, AUTOREGRESSIVE)} if raceable else {})
    race_note = ("" if raceable else BUSY_RACE if compared else "The last run was stopped before both sides "
                 "finished: run it again to race them." if view.racing else "")
    conversation.last = LastRun(view.results[SPECULATIVE].blocks, view.shared, view.settings.spec.mode, view.label,
                                view.unlearned(), view.pair.tokenizer, frames, race_note)
    files = export_run(conversation, view, request, (tabed_html, plain_html))
    yield Frame(status=view.status(True), tabed=tabed_html, plain=plain_html, metrics=view.metrics(),
                weights=view.figure(), blocks=view.block_table(), chat=chat_history(conversation), state=conversation,
                downloads=files, trees=view.trees())


def race_frames(conversation: Conversation, stop: threading.Event, pace: float = 1.0) -> Iterator[str]:
    """Both answers again, side by side, at the pace each was measured at (sped up past 20 s), or at a `pace`
    of it (`RACE_PACES`: a 120-token race lasts about a second on a CPU, too fast to follow)."""
    frames = conversation.last.frames
    if SPECULATIVE not in frames or AUTOREGRESSIVE not in frames:
        yield f"<i>{conversation.last.race_note or NO_RACE}</i>"
        return
    end = max(frames[SPECULATIVE][-1][0], frames[AUTOREGRESSIVE][-1][0])
    scale = max(1.0, end / 20.0) * pace  # replays longer than 20 s are sped up; either way it is said
    start = time.monotonic()
    shown = {SPECULATIVE: 0, AUTOREGRESSIVE: 0}
    sent, last = None, 0.0  # what the last frame showed, and when: a frame goes only when it shows more
    while True:
        clock = (time.monotonic() - start) * scale
        for phase, sequence in frames.items():
            while shown[phase] < len(sequence) and sequence[shown[phase]][0] <= clock:
                shown[phase] += 1

        def side(phase: str, label: str) -> str:
            sequence = frames[phase]
            text = sequence[shown[phase] - 1][1] if shown[phase] else ""
            return render.race_html(text, label, sequence[-1][0] if shown[phase] == len(sequence) else None)

        note = (f" (×{scale:.1f} faster than measured)" if scale > 1 else " (at the measured pace)" if scale == 1
                else f" (at ×{scale:g} of the measured pace, slowed to follow)")
        stopped = stop.is_set()
        if stopped:
            note += " \u25a0 Stopped"
        done = stopped or all(shown[p] == len(frames[p]) for p in frames)
        if done and not stopped:  # the slower side's finish, not when the loop looked next (on a busy machine,
            clock = end  # a frame or more later: "race clock 1.41 s" beside "done in 1.24 s")
        if done or dict(shown) != sent or time.monotonic() - last >= RACE_CLOCK_S:  # a slow browser keeps up
            yield (f'<div class="tabed-race"><div>{side(SPECULATIVE, conversation.last.label)}</div>'
                   f'<div>{side(AUTOREGRESSIVE, "plain decoding")}</div></div><small>race clock {clock:.2f} s{note}'
                   '</small>')
            sent, last = dict(shown), time.monotonic()
        if done:
            return
        stop.wait(RACE_FRAME_S)  # (a Stop ends the wait at once)
