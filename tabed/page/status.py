"""The status's words, in HTML: a finished run's verdict first (its speed, that its answer is exact, and why in
a clause), then each reason as one plain line with its whole explanation folded under it (`<details>`). Made
from numbers the view hands over; a term a newcomer lacks is defined in the first detail that uses it. Every
text a user or a model wrote is escaped here (`text`): the status shows it as typed, never as markup."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from ..engine.session import BUSY_SHARE
from ..engine.spec import METHOD_NAMES
from ..engine.speed import FAR, TIMED_TOKENS, Repeats, RunCosts, SpeedModel
from .examples import LATER_TURN, OWN_QUESTION
from .reasons import ABOUT_EVEN, fast_or_slow, guesses_matched, who_led
from .words import Words, counted, one_row
from .worker import ALONE, SPECULATIVE

SEES = {"M": "the pictures", "T": "only the text", "C": "a caption of them", "P": "pooled pictures",
        "N": "the words so far (no model)"}  # what each method reads, in a few words (the line; the detail: names)
PLAIN_STEP = ("A plain step is one pass of the big model (the target) that makes one token, as plain decoding does; "
              "a check is one pass of the target over a whole block of drafts, keeping the drafts it agrees with "
              "and adding a token of its own.")


def text(said: str) -> str:
    """Any text as the status shows it: as typed, markup and all (`<b>` is no bold, `<img>` no picture)."""
    return html.escape(said, quote=False)


@dataclass(frozen=True)
class Reason:
    """One reason of a finished run: what it answers, its one plain line and its whole explanation (HTML)."""

    key: str  # "Why fast", "Exact"…
    line: str
    detail: str = ""


@dataclass(frozen=True)
class Exactness:
    """How the answer compares with plain decoding's: identical (greedy), a sample of the same distribution,
    or different from a token on (`first`, 1-based)."""

    tokens: int
    plain_tokens: int
    sampled: bool
    same: bool
    first: int = 0

    def verdict(self) -> str:
        """The verdict's words: "identical, 121 of 121 tokens"."""
        if self.sampled or not self.same:
            return self.line()
        return f"identical, {self.tokens} of {self.plain_tokens} tokens"

    def line(self) -> str:
        if self.sampled:
            return "a sample of the same distribution as plain decoding's" + ("" if not self.same else
                                                                            ", here the same sample")
        if self.same:
            return f"identical to plain decoding, {self.tokens} of {self.plain_tokens} tokens"
        return f"differs from plain decoding from token {self.first} on"


@dataclass(frozen=True)
class RunFacts:
    """A finished run as the status words it, in numbers and names (no Gradio): what decoded it, where,
    how it compares with plain decoding and what each reason draws on. `RunView.facts` makes it."""

    label: str  # what decoded it: "TABED", "static ensemble MT", "M alone"
    mode: str  # the same as a value (`DraftingSpec.mode`)
    run: int  # the session's run it is
    where: str  # "teaching on cpu (float32)"
    exact: Exactness | None = None  # None: plain decoding did not finish
    tokens_per_check: float | None = None  # tokens each target pass produced after the prompt's
    speedup: float | None = None  # plain decoding's decode time over this run's (None: nothing to compare)
    starved: float | None = None  # the smallest CPU share of a side the engine found starved
    slowed: RunCosts | None = None  # the run's costs, when far from the machine's quiet ones
    unmeasured: bool = False  # the machine was busy as the run began, and never found quiet
    too_short: bool = False  # plain decoding's answer too short to time
    speed: SpeedModel | None = None  # what the speedup is made of (None: no figure, or a disturbed run)
    checked: float = 0.0  # drafts a target pass checked, on average
    seen: tuple[str, ...] = ()  # the methods that read the pictures differently (what each method sees)
    blocks: list = field(default_factory=list)  # the answer's blocks: whose guesses the target kept
    shared: list[str] = field(default_factory=list)  # methods drafted as one row (no picture)
    pictures: bool = False
    word: Words | None = None  # the pair's tokens in words, to quote the answer
    alone: dict[str, float] = field(default_factory=dict)  # each method run alone: its speedup
    lesson: str | None = None  # what a bundled example was built to show
    unasked: tuple[str, ...] = ()  # the question's words, when the answer holds none of them
    half_precision: bool = False
    notes: tuple[str, ...] = ()
    spread: Repeats | None = None  # the speedups of the request's runs, when it ran each side several times
    differing: tuple[int, ...] = ()  # runs (1-based) whose greedy answer differs from the first's
    cut: tuple[int, int] | None = None  # (runs that finished, runs asked) when Stop ended the repeats

    @property
    def unreliable(self) -> bool:
        """The machine was busy: the run's timings measured its other work, not the method."""
        return self.starved is not None or self.slowed is not None or self.unmeasured


def done_html(facts: RunFacts) -> str:
    """The finished run's status: the verdict, then a reason a line, each line opening its detail."""
    items = []
    for reason in reasons(facts):
        head = f"<b>{text(reason.key)}</b>: {reason.line}"
        items.append(f"<li><details><summary>{head}</summary><div class='tabed-detail'>{reason.detail}</div>"
                     "</details></li>" if reason.detail else f"<li>{head}</li>")
    listed = f"<ul class='tabed-reasons'>{''.join(items)}</ul>" if items else ""
    title = html.escape(f"run {facts.run} · {facts.where}", quote=True)
    return f'<p class="tabed-verdict" data-run="{facts.run}" title="{title}">{verdict(facts)}</p>{listed}'


def reasons(facts: RunFacts) -> list[Reason]:
    """Why the answer was fast or slow, what each method sees, whose guesses the target kept, what the
    example shows, that it is exact, and the run's notes: a reason a line, its detail folded."""
    notes = [note_reason(note) for note in facts.notes]
    if facts.exact is None:  # plain decoding did not finish: nothing to compare
        return notes
    why = []
    if facts.speed is not None:
        rest = "bookkeeping" if facts.mode == "single" else "the weights and bookkeeping"
        ours, plain = facts.exact.tokens, facts.exact.plain_tokens  # two samples may differ in length
        per_token = f" per token: the two samples are {ours} and {plain} tokens long" if ours != plain else ""
        why.append(speed_reason(facts.speed, rest, facts.checked, per_token, f"run {facts.run}, {facts.where}",
                                facts.spread))
    if facts.starved is not None:
        why.append(busy_reason(facts.starved, BUSY_SHARE, facts.speedup))
    elif facts.slowed is not None:
        why.append(slowed_reason(facts.slowed, facts.speedup, facts.tokens_per_check))
    elif facts.unmeasured:
        why.append(unmeasured_reason(facts.speedup))
    if facts.pictures and len(facts.seen) > 1:
        why.append(sees_reason(list(facts.seen)))
    if led := who_led(facts.blocks, facts.shared, facts.pictures, facts.mode == "tabed", facts.word):
        why.append(led_reason(facts.blocks, facts.shared, led))
    if facts.alone and facts.speedup is not None:
        why.append(alone_reason(facts.label, facts.speedup, facts.alone))
    if facts.lesson:
        why.append(example_reason(facts.lesson))
    if facts.unasked:
        why.append(unasked_reason(list(facts.unasked)))
    if facts.differing:
        why.append(differing_reason(facts.differing))
    if facts.cut is not None:
        done, asked = facts.cut
        why.insert(0, Reason("\u25a0 Stopped", text(f"after {counted(done, 'run')} of {asked}: the figures are "
                                                     f"{'its' if done == 1 else 'theirs'}.")))
    return why + [exact_reason(facts.exact, facts.label, facts.half_precision)] + notes


def verdict(facts: RunFacts) -> str:
    """The run's first line (at most 30 words): its speed against plain decoding (or why there is no figure),
    that its answer is exact, and the cause in a clause: how many tokens each check by the big model produced
    (the drafts it kept and its own token)."""
    label, speedup, exact = facts.label, facts.speedup, facts.exact
    if facts.too_short:  # no figure whatever the machine did
        speed = f"{label}'s answer was too short to time (under {TIMED_TOKENS} tokens)"
    elif facts.unreliable and exact is not None:
        speed = f"{label}'s timings are unreliable (the machine was busy): no speedup"
    elif speedup is None:
        speed = f"{label} is done"
    else:
        spread = facts.spread
        over = f"the median of {len(spread.speedups)} runs, {spread.low:.2f}–{spread.high:.2f}×" if spread else ""
        if speedup >= 1 + ABOUT_EVEN:
            speed = f"{label} ran {speedup:.2f}× as fast as plain decoding" + (f" ({over})" if over else "")
        else:
            how = "about as fast as" if speedup > 1 - ABOUT_EVEN else "slower than"
            speed = f"{label} ran {how} plain decoding ({speedup:.2f}×" + (f"; {over})" if over else ")")
    said = speed + (f"; {'it' if facts.too_short else 'its answer'} is {exact.verdict()}" if exact is not None else "")
    if facts.tokens_per_check is not None:
        said += f"; each check by the big model produced {facts.tokens_per_check:.2f} tokens"
    return f"\u2713 {text(said)}."


def speed_reason(speed: SpeedModel, rest: str, checked: float, per_token: str = "", where: str = "",
                 spread: Repeats | None = None) -> Reason:
    """Why fast (or slow): the line says what a check produced against what it cost; the detail, what the speedup
    compares (`per_token`: two samples of different lengths; `spread`: the median of several runs), why, and
    every part of the decode time."""
    kind = ("Why fast" if speed.measured >= 1 + ABOUT_EVEN else "Why about even" if speed.measured > 1 - ABOUT_EVEN
            else "Why slow")
    line = (f"each check produced {speed.tokens_per_pass:.2f} tokens in the time plain decoding makes "
            f"{speed.pass_cost:.2f}.")
    said = fast_or_slow(speed.tokens_per_pass, speed.pass_cost, speed.measured, speed.verify, checked,
                        speed.verify + speed.drafting)
    compares = f"The speedup, {speed.measured:.2f}×, is plain decoding's decode time over this run's{per_token}" + (
        f" ({where})." if where else ".")
    if spread is not None:
        runs = ", ".join(f"{figure:.2f}×" for figure in spread.speedups)
        compares += (f" It is the median of {len(spread.speedups)} runs of each side, taken in turn ({runs}): one "
                     "run's figure moves with whatever else the machine did meanwhile, its tokens per check do not; "
                     "the figures below are the median run's.")
    return Reason(kind, line, text(f"{compares} {PLAIN_STEP} {said} In numbers: {speed.sentence(rest)}."))


def busy_reason(share: float, busy_share: float, speedup: float | None) -> Reason:
    """A run starved of CPU: its figure, if any, only here and marked."""
    measured = _clock_read(speedup)
    return Reason("\u26a0\ufe0f Timings unreliable", f"this run got {share:.0%} of one core: the machine was busy.",
                  f"The run got {share:.1%} of one core, under the {busy_share:.0%} an idle machine gives it, so its "
                  f"times measure the machine's other work, not the method; run again when it is idle.{measured}")


def _clock_read(speedup: float | None) -> str:
    """A disturbed run's figure, said only in its reason's detail, and marked."""
    if speedup is None:
        return ""
    return f" Its clock read {speedup:.2f}×, a figure of the machine's load, not the method's."


def slowed_reason(costs: RunCosts, speedup: float | None, tokens_per_check: float | None) -> Reason:
    """A run whose target forwards cost far more than this machine's quiet ones: the machine's doing, said with
    both costs side by side; the drafts' tokens per check are their own."""
    kept = ("" if tokens_per_check is None else f" Each check still produced {tokens_per_check:.2f} tokens: that is "
            "the drafts' doing, and the same on a quiet machine.")
    return Reason("\u26a0\ufe0f Timings unreliable",
                  f"this machine was slower this time: the big model took {costs.slower:.1f}× as long as quiet.",
                  f"Plain decoding's steps took {costs.step_s * 1e3:.1f} ms (the median), where this machine takes "
                  f"{costs.quiet.step_s * 1e3:.1f} ms when it is quiet (measured before a run found it idle), and this "
                  f"run's checks took {costs.checks:.1f}× what the same checks take quiet. A run more than {FAR:.1f}× "
                  "off the quiet costs measured the machine's other work, not the method: run again when it is idle."
                  f"{kept}{_clock_read(speedup)}")


def unmeasured_reason(speedup: float | None) -> Reason:
    """A run on a machine busy since the pair was loaded: no quiet costs to hold its own against."""
    return Reason("\u26a0\ufe0f Timings unreliable", "the machine was busy as this run began.",
                  "Before a run the page measures what the big model's steps cost on this machine when it is quiet, "
                  "to hold the run's own against; the measurement before this run got too little of the CPU, and "
                  "none has found the machine idle since the pair was loaded, so nothing tells this run's figure "
                  f"from the machine's load: run again when it is idle.{_clock_read(speedup)}")


def differing_reason(runs: tuple[int, ...]) -> Reason:
    """A repeat whose greedy answer is not the first run's: decoding the same request twice must give the same
    tokens, so this is a bug."""
    which = ", ".join(map(str, runs))
    return Reason("\u26a0\ufe0f Runs differ", text(f"run {which} answered differently from run 1: a bug, please "
                                                      "report it."),
                  text(f"Greedy decoding of one request gives the same tokens every time; run {which} did not. The "
                       "page shows run 1's answer and the median run's timings."))


def sees_reason(methods: list[str]) -> Reason:
    line = ", ".join(f"{m} {SEES[m]}" for m in methods) + "."
    return Reason("What each method sees", text(line), text("; ".join(f"{m}: {METHOD_NAMES[m]}" for m in methods)
                                                            + "."))


def led_reason(blocks: list, shared: list[str], detail: str) -> Reason | None:
    """Whose guesses the target agreed with: each method's share in the line (`reasons.who_led` the detail,
    already HTML: it quotes the answer's words)."""
    matched = {m: hits for m, hits in guesses_matched(blocks).items() if hits[1]}
    if not matched:
        return None
    if shared:
        line = f"{one_row(shared)}, one guess."
    else:
        rates = sorted(((hit / total, m, hit, total) for m, (hit, total) in matched.items()), reverse=True)
        line = ", ".join(f"{m}'s {hit} of {total}" for _, m, hit, total in rates) + "."  # a resting one: fewer
    return Reason("Whose guesses were right", text(line), detail)


def alone_reason(label: str, ours: float, alone: dict[str, float]) -> Reason:
    said = ", ".join(f"{m} {speedup:.2f}×" for m, speedup in sorted(alone.items(), key=lambda item: -item[1]))
    best = max(alone, key=alone.get)
    line = f"{said}, against {label}'s {ours:.2f}×."
    detail = f"Each method alone (the last rows of the metrics): {said} plain decoding, against {label}'s {ours:.2f}×."
    if alone[best] > ours:
        detail += (f" {best} alone beat {label}: it drafts one row where the ensemble drafts one per method, and it "
                   "never had to learn which method leads (the ensemble's first blocks weigh every method the same).")
    return Reason("Each method alone", text(line), text(detail))


def example_reason(lesson: str) -> Reason:
    """What the bundled example was built to show, or what a question of one's own or a later turn is: its first
    clause in the line, all of it in the detail."""
    shown = lesson.removeprefix("This example was built to show ")
    depth, head = 0, len(shown)
    for at, char in enumerate(shown):  # the first clause: up to a comma, semicolon or colon outside brackets
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char in ",;:":
            head = at
            break
    line = shown[:head].rstrip(".")
    if line[1:2].islower():  # a line goes on after its key's colon: "The example: this is…"
        line = line[:1].lower() + line[1:]
    key = "The question" if lesson in (OWN_QUESTION, LATER_TURN) else "The example"  # none of the examples
    return Reason(key, text(f"{line}."), text(lesson))


def unasked_reason(missing: list[str]) -> Reason:
    return Reason("The answer", "none of your question's words is in it: the small teaching model may have answered "
                  "another question.",
                  text(f"None of your question's words ({', '.join(missing)}) is in it: the teaching target, taught a "
                       "few kinds of question, may have answered one of those instead. It is still the target's own "
                       "answer, and the drafts were judged against it."))


def exact_reason(exact: Exactness, label: str, half_precision: bool) -> Reason:
    """Exact: the line says how the two answers compare; the detail, what exact means here."""
    if exact.sampled:
        same = "the same sample" if exact.same else "a different sample"
        detail = (f"Sampling: {same} from the same distribution. Each draft x is kept with probability "
                  "min(1, p(x)/q(x)) (p the target's, q the ensemble's: kept when a uniform draw u from 0 to 1 "
                  "is below p/q) and a rejected one is replaced from "
                  "what is left of p, so the answer is distributed exactly as plain decoding's. One pair of "
                  "answers cannot show a distribution; this page can show its parts: a token's detail gives the test "
                  "it met, with its numbers, and at temperature 0 the same steps give the target's own answer, "
                  f"identical token for token. The conversation goes on from {label}'s sample.")
    elif exact.same:
        detail = (f"Identical to plain decoding: {exact.tokens} of {exact.plain_tokens} tokens. Exact means the "
                  "target's own answer, not a true one: where the target is wrong, so is this answer, no more and no "
                  "less.")
    else:
        why = ("half precision rounds a near-tie differently in a many-token verify and a one-token step"
               if half_precision else "unexpected in float32: please report it")
        detail = f"Differs from plain decoding from token {exact.first} on: {why}."
    line = "the big model's own answer." if exact.same and not exact.sampled else exact.line() + "."
    return Reason("Exact", text(line), text(detail))


def note_reason(note: str) -> Reason:
    """A note of the run (an emptied setting, a lowered limit): its head the line, all of it the detail."""
    note = note if note.endswith(".") else note + "."
    head, _, _ = note.partition(": ")
    return Reason("Note", text(head if head != note else note), text(note) if head != note else "")


def progress(name: str, where: str, phase: str, done: int, method: str | None = None, racing: bool = False,
             started: bool = True, run: tuple[int, int] | None = None) -> str:
    """A run on its way (HTML): what decodes now and how far (`done`: TABED's blocks, plain decoding's tokens;
    `run`: which of the request's repeats, of how many, when it asked for several)."""
    if not started:
        return line_html(f"\u25f7 Reading the prompt for {name} · {where}")
    if run is not None and run[0] > 1:  # a repeat, timed only: its tokens are the first run's
        doing = f"timing run {run[0]} of {run[1]}: {name if phase == SPECULATIVE else 'plain decoding'}…"
    else:
        doing = {SPECULATIVE: f"{name} decoding… block {done}",
                 ALONE: f"{method} alone, for comparison: decoding…"}.get(
            phase, f"plain decoding (the target alone)… token {done}")
        doing += f" (run 1 of {run[1]})" if run is not None else ""
    later = " · the charts come when both sides are done, so that neither is timed while they are drawn"
    return line_html(f"\u25f7 {doing} · {where}" + (later if racing else ""))


def stopped(name: str, where: str, side: str | None, done: int) -> str:
    """A run Stop ended (HTML), by the side it stopped (None: before decoding began): what stays and what not."""
    if side is None:
        return line_html(f"\u25a0 Stopped before decoding began · {where}. The page is as it was.")
    if side == SPECULATIVE:
        return line_html(f"\u25a0 Stopped after {counted(done, 'block')} · {where}. The partial answer stays here "
                         "and is not added to the conversation.")
    where_stopped = f"plain decoding after {counted(done, 'token')}" if done else "before plain decoding began"
    return line_html(f"\u25a0 Stopped {where_stopped} · {where}. {name}'s answer is complete and joins the "
                     "conversation; no speedup is shown, since plain decoding did not finish.")


def finishing(where: str) -> str:
    return line_html(f"\u25f7 Finishing: the metrics, charts, block table and downloads · {where}")


def error(message: str) -> str:
    return line_html(f"\u26a0\ufe0f Error: {message}")


def line_html(said: str) -> str:
    """A status of one line (progress, a stop, an error, a refused upload), as typed."""
    return f"<p class='tabed-line'>{text(said)}</p>"
