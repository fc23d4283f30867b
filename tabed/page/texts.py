"""The page's fixed words and styles."""

import json

from ..engine.draft_length import CPU_MIN_SURVIVAL, FIRST_MIN_SURVIVAL, MIN_SURVIVAL
from ..engine.resting import PROBE_EVERY, REST_AFTER
from .words import WHITESPACE

CSS = """
#tabed-answer, #plain-answer { white-space: pre-wrap; font-family: ui-monospace, monospace; line-height: 1.6;
  min-height: 4em; }
.tabed-legend { font-size: 0.85em; }
.hide-rejected .tk-rejected, .hide-rejected .tk-discarded { display: none; }
/* struck drafts sit above the target's token that replaced them: the answer's line reads whole, a line with drafts is
   taller (as ruby text is); drafts longer than their token end in "…" (run on, they ran into the next drafts), and
   show whole over the line's next ones under a mouse (on a touch screen that takes the tap; the stepper lists them) */
#tabed-answer { overflow-x: clip; }
.tk-fix { display: inline-block; }
.tk-word { white-space: pre; }  /* a word with drafts in it: a browser breaks lines at a box, word or not */
.tk-drafts { display: block; width: 0; min-width: 100%; white-space: pre; line-height: 1.15; overflow: hidden;
  text-overflow: ellipsis; }
@media (hover: hover) { .tk-fix:hover .tk-drafts { overflow: visible; position: relative; z-index: 5; } }
.tk-drafts .tk { background: var(--body-background-fill, #fff); box-shadow: -1px 0 0 #d0d7de; }
.tabed-rejected-count { display: none; color: #cf222e; font-size: 0.85em; margin-top: 0.4em; }
.hide-rejected .tabed-rejected-count { display: block; }
/* the block table is wider than its column: its label says so, as the stepper's hint does on a phone */
#blocks .header-row .label p::after { content: " ↔ scrolls sideways: each method's own draft, then the times";
  font-weight: normal; font-size: 0.85em; color: #57606a; }
.tabed-stopped { color: #b45309; font-weight: 600; margin-top: 0.4em; }
.tabed-race { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; white-space: pre-wrap; }
.tabed-step-table { overflow-x: auto; max-width: 100%; }
.tabed-step table { font-size: 0.85em; border-collapse: collapse; }
.tabed-step td, .tabed-step th { padding: 0.15em 0.5em; vertical-align: top; }
.tabed-step .tabed-why td { color: #555; font-style: italic; padding-bottom: 0.5em; }
.tabed-token-detail { font-size: 0.85em; color: #555; min-height: 1.4em; }
#token-detail:has(.filled) { position: sticky; bottom: 0; z-index: 20; background: var(--body-background-fill, #fff);
  box-shadow: 0 -1px 0 #d0d7de; padding: 0.3em 0; max-height: 30vh; overflow-y: auto; }  /* in view, not over all */
.gradio-container { overflow: clip !important; }  /* clipped as before, but no scroll box: the page's sticks */
#examples table { table-layout: fixed; width: 100%; }
#examples td { max-width: none !important; overflow-wrap: anywhere; overflow: hidden; }
#metrics td *, #metrics th * { word-break: normal !important; overflow-wrap: break-word !important; }  /* at spaces */
#examples th { white-space: normal; }  /* a header wraps inside its column rather than run into the next */
#examples .images-wrapper { flex-wrap: wrap; }  /* three pictures wrap in a phone's cell, off the prompt */
.tabed-scroll-hint { display: none; font-size: 0.85em; color: #555; }
@media (max-width: 640px) { .tabed-scroll-hint { display: block; } }
/* a reason's line spans the stepper's wide table: on a phone it stays in view and wraps there as the table scrolls */
@media (max-width: 640px) { .tabed-why td > div { position: sticky; left: 0; max-width: calc(100vw - 90px); } }
/* a struck draft is a finger's target on a phone: 24 px tall, its line that much taller */
@media (max-width: 640px) { #tabed-answer:not(.hide-rejected) .tk-drafts .tk { display: inline-block; min-height: 24px;
  line-height: 24px; } }
@media (max-width: 640px) { .js-plotly-plot .modebar-container { display: none; } }  /* off the chart's label */
#status p { margin: 0.1em 0; }
#status .tabed-verdict { font-weight: 600; font-size: 1.05em; }
#status ul.tabed-reasons { margin: 0.3em 0 0; padding-left: 0.2em; list-style: none; }
#status ul.tabed-reasons li { margin: 0.15em 0; }
#status b { font-size: inherit; }  /* a reason's label, the size of its line */
#status summary { cursor: pointer; }
#status .tabed-detail { margin: 0.2em 0 0.5em 1.2em; color: #444; }
.tabed-legend summary { cursor: pointer; }
.tabed-legend ul { margin: 0.3em 0 0; }
"""

PHONE_COLUMNS = (44, 54, 60, 36, 72, 58)  # px: the block table's leading columns on a phone, together in view


def _phone_block_table() -> str:
    """On a phone the block table's leading columns narrow (their cells wrap) so that they are in view together:
    the table sets each column's width inline, on its header (`data-heading`) and body (`data-col`) cells. The
    header row is laid out as a flex row like the body's rows (a table's columns ignore a narrower width), and
    there is no `:is(a, b)`: Gradio splits the page's CSS selectors at every comma."""
    columns = "".join(f'  #blocks [data-heading="{i}"], #blocks [data-col="{i}"] {{ width: {w}px !important; '
                      f"min-width: {w}px !important; max-width: {w}px !important; flex: 0 0 {w}px !important; }}\n"
                      for i, w in enumerate(PHONE_COLUMNS))
    return ("@media (max-width: 640px) {\n  #blocks table.header-table thead tr { display: flex; padding: 0; }\n"
            "  #blocks .header-cell { flex: 0 0 auto; }\n"
            "  #blocks .header-cell, #blocks .body-cell { font-size: 0.75em; overflow-wrap: anywhere; }\n"
            "  #blocks .header-cell .cell-wrap { padding-left: 2px !important; padding-right: 2px !important; }\n"
            "  #blocks .body-cell .cell-wrap { padding-left: 2px !important; padding-right: 2px !important; }\n"
            "  #blocks .header-cell * { word-break: keep-all !important; overflow-wrap: normal !important; }\n"
            + columns + "}\n")


CSS += _phone_block_table()

def step_by_js(by: int) -> str:
    """Previous (-1) and next (+1): the stepper's box changed in the browser and its input event sent, as a
    typed number is, so that quick clicks each count and every step goes through one event (`app._wire`)."""
    return f"""() => {{
  const box = document.querySelector('#step-index input');
  if (!box) return;
  box.value = String(Math.max(0, (parseInt(box.value, 10) || 0) + ({by})));  // previous stops at block 0
  box.dispatchEvent(new Event('input', {{bubbles: true}}));
}}"""


# A click (or tap) on a block in the weights chart steps to that block: gr.Plot has no click event of its own, so
# the chart's plotly_click types the block's number into the stepper's box, as a person would.
STEP_ON_CLICK_JS = """() => {
  const hook = () => {
    const plot = document.querySelector('#weights-plot .js-plotly-plot');
    if (!plot || plot.tabedStepHook || !plot.on) return;
    plot.tabedStepHook = true;
    plot.on('plotly_click', (data) => {
      const box = document.querySelector('#step-index input');
      if (!box || !data.points.length) return;
      box.value = String(Math.round(data.points[0].x));
      box.dispatchEvent(new Event('input', {bubbles: true}));
    });
  };
  const chart = document.querySelector('#weights-plot') || document.body;  // redrawn there, not elsewhere
  new MutationObserver(hook).observe(chart, {childList: true, subtree: true});
}"""

# The "show rejected drafts" switch, in the browser alone: it hides the struck-through drafts of the answer (and
# shows their count instead), with no round trip and without touching what the server sent.
SHOW_REJECTED_JS = """(shown) => {
  document.querySelector('#tabed-answer')?.classList.toggle('hide-rejected', !shown);
  return shown;
}"""

# A run or a new conversation starts: the last answer's token detail goes (it would speak of a token no longer
# shown); and, a phone stacking the page's two columns with the status a screen below Run, a run brings it into view.
FORGET_DETAIL_JS = """() => {
  const detail = document.querySelector('#token-detail .tabed-token-detail');
  if (detail) { detail.textContent = DETAIL_PROMPT; detail.classList.remove('filled'); }
}"""
RUN_ENDS_JS = """() => {
  const status = document.querySelector('#status')?.getBoundingClientRect();
  if (status && (status.top < 0 || status.bottom > window.innerHeight))
    window.scrollTo({top: Math.floor(window.scrollY + status.top) - 8, behavior: 'instant'});  // whole pixels, at once
}"""  # a run's verdict is its point: in view when it ends (a phone's answer follows it there)
RUN_STARTS_JS = """() => {
  (FORGET_DETAIL_JS)();
  const status = document.querySelector('#status')?.getBoundingClientRect();
  if (window.innerWidth <= 640 && status)
    window.scrollTo({top: Math.floor(window.scrollY + status.top) - 8, behavior: 'instant'});
}"""

# A slider's number box puts a typed value outside its range back in range in the browser, before the app sees
# it: the status says which setting, what was typed and what it was set to (the app checks what it receives).
CLAMPED_NOTE_JS = """() => {
  const say = (event) => {
    const box = event.target;
    if (!(box instanceof HTMLInputElement) || box.type !== 'number' || box.value === '') return;
    const slider = box.closest('.block')?.querySelector('input[type=range]');
    if (!slider) return;
    const typed = Number(box.value), low = Number(slider.min), high = Number(slider.max);
    if (typed >= low && typed <= high) return;
    const set = typed < low ? low : high;
    const name = (box.getAttribute('aria-label') || '').replace('number input for ', '').split(/[:(]/)[0].trim();
    const status = document.querySelector('#status .prose') || document.querySelector('#status');
    if (status) status.textContent = `\u26a0\ufe0f ${name} takes ${low} to ${high}: ${box.value} was set to ${set}`;
  };
  for (const kind of ['change', 'blur', 'keydown']) {  // before the slider's own handler puts it back in range
    document.addEventListener(kind, (event) => {
      if (kind !== 'keydown' || event.key === 'Enter') say(event);
    }, true);
  }
}"""

# A token's details (its block, probabilities and proposers) are its hover title; a phone cannot hover, so the
# pointer over a token of either answer writes them in the detail line too, and a tap or a click keeps that line
# at the bottom of the screen (`.filled`: sticky) wherever the answer is scrolled to. (Hovering alone never
# makes it sticky: an answer streaming in under a still pointer would put a bar over the page's buttons.) Only a
# mouse that moves writes it: after a tap a phone sends mouse events too, one of them over another token.
# A tap or click on a token of a finished TABED answer also steps the stepper to its block.
TOKEN_TAP_JS = """() => {
  const uncover = (token, detail) => {  // a kept detail sits at the screen's bottom: under the token, never over it
    const bar = detail.closest('#token-detail') || detail;  // the sticky bar, its padding too
    const covered = token.getBoundingClientRect().bottom - bar.getBoundingClientRect().top;
    if (covered > 0) window.scrollBy({top: covered + 8, behavior: 'instant'});
  };
  const say = (event, keep) => {
    const token = event.target.closest?.('#tabed-answer .tk, #plain-answer .tk');
    const detail = document.querySelector('#token-detail .tabed-token-detail');
    if (!token || !detail) return;
    const text = token.textContent;  // as the stepper shows a token: trimmed, a blank one's ␣ ↵ ⇥ drawn
    const shown = text.trim() || text.replace(/\\s/g, (blank) => (WHITESPACE)[blank] ?? blank);
    detail.textContent = '\u201c' + shown + '\u201d: ' + token.title;
    if (keep) detail.classList.add('filled');
    const block = token.dataset.block, box = document.querySelector('#step-index input');
    if (keep && block !== undefined && box && token.closest('#tabed-answer')?.querySelector('.tabed-steppable')) {
      // (a streaming answer's blocks are not the stepper's yet: it steps through the last finished one)
      detail.textContent += ' \u2014 Step through a block, below, now shows block ' + block + '.';
      if (box.value !== block) {
        box.value = block;
        box.dispatchEvent(new Event('input', {bubbles: true}));
      }
    }
    if (keep) uncover(token, detail);
  };
  document.addEventListener('click', (event) => say(event, true));
  document.addEventListener('pointermove', (event) => event.pointerType === 'mouse' && say(event, false));
}"""
TOKEN_TAP_JS = TOKEN_TAP_JS.replace("WHITESPACE", json.dumps(WHITESPACE))  # the table `words.token_word` draws with
DETAIL_PROMPT = "Tap or hover a token of an answer for its details."
TOKEN_DETAIL = f'<div class="tabed-token-detail">{DETAIL_PROMPT}</div>'
FORGET_DETAIL_JS = FORGET_DETAIL_JS.replace("DETAIL_PROMPT", repr(DETAIL_PROMPT))
RUN_STARTS_JS = RUN_STARTS_JS.replace("FORGET_DETAIL_JS", FORGET_DETAIL_JS)

INTRO = """# TABED: speculative decoding for vision-language models
A small drafter guesses ahead several ways, mixed by weights learned as it goes; the big target checks the
guesses in one pass, keeping exactly its own answer."""
INTRO_MORE = """A small **drafter** guesses the next few tokens in several ways at once — **M** sees the image,
**T** sees only the text, **C** a caption, **P** a pooled image, **N** looks the words up in the prompt and the
answer so far (M and T unless Settings tick more) — and an ensemble mixes the guesses with weights learned while
decoding (TABED). The big **target** checks a whole block in one forward pass and keeps the longest correct prefix,
so the answer is exactly the target's own, only faster. The page shows the verdict and both answers first; each reason,
chart and table below opens on a click."""

RULE_PHRASES = {  # each weight rule in a phrase, for its choice (whole, on a phone too)
    "w-grid": "w-grid: the weighting (in steps of 0.1) whose top-1 matched the target's most often",
    "kld": "kld: each method weighted by 1 / its summed KL divergence from the target",
    "tvd": "tvd: each method weighted by 1 / its summed total-variation distance from the target",
    "hedge": "hedge: exponential weights on each method's log-loss against the target",
}

_ORDINAL = {2: "second", 3: "third"}.get(REST_AFTER, f"{REST_AFTER}th")  # the block a method rests from
WEIGHTS_NOTE = f"""**How the weights move.** After each block the target's distributions at the positions it
verified join a history; the next block's weights are the rule's choice from it (the default, w-grid, as in
the paper: of the weightings in steps of 0.1, the one whose mixed top-1 matched the target's most often, ties
by the least KL). The first block has nothing to learn from, so every method weighs the same; it also drafts
on until its chance of being kept whole falls below {FIRST_MIN_SURVIVAL} instead of {CPU_MIN_SURVIVAL}
({MIN_SURVIVAL} on a GPU, where a draft costs less against a target step), since the prompt's pass verifies
it at no extra cost. A method given weight 0 for a {_ORDINAL} block in a row **rests** from it on: its row
leaves the drafter's batch and catches up {PROBE_EVERY} blocks later (then less and less often while it earns
nothing); each catch-up lets the rule weigh it again, and it rejoins only if it wins weight. *Step through a
block* below shows the figures each choice was made from."""

PAIR_NOTES = {  # each pair in one line (its caveat), the rest one click away
    "teaching": ("**Teaching pair** (CPU, offline): tiny models taught only a synthetic world; elsewhere they "
                 "make things up.",
                 "A 17M target and a 1M drafter trained only on a synthetic world: shapes on plain or patterned "
                 "ground, bar charts, printed words and numbers, countries and animals, sums. Its answers are long "
                 "and worded anew each time, so the drafter misses now and then and the weights have something to "
                 "learn. Its answers about any other picture (a photograph, say) are made up. Real photographs need "
                 "a real pair: `TABED_PRESET=llava-1.5-7b` on a GPU."),
    "teaching-7b": ("**The teaching pair at LLaVA-1.5-7B's cost**: same answers, real speed; it knows only its "
                    "synthetic world.",
                    "Both models are widened in memory to the paper pair's shapes (a 7B target, a 68M drafter) "
                    "without changing what they compute, so every forward costs what the real pair's does. It still "
                    "knows only its synthetic world (shapes, bar charts, printed words); real photographs need "
                    "`TABED_PRESET=llava-1.5-7b`."),
}


STATIC_WEIGHTS_NOTE = """**How the weights move.** They do not: a static ensemble weighs every method the same in every
block, learning nothing from the target. Choose *TABED* under Settings → Ensemble to see them learn."""

SINGLE_WEIGHTS_NOTE = """**Weights.** One method drafted every block alone: there was no ensemble, so there is no
weight to learn (its line stays at 1). Tick two methods and choose *TABED* under Settings → Ensemble to see
weights move."""


def notes_for(mode: str, label: str) -> tuple[str, str]:
    """The timing note and the weights note for what decoded the last answer: its mode (`DraftingSpec.mode`:
    "tabed", "static", "single") and its name (`RunView.label`: "TABED", "static ensemble MT", "M alone"), so
    that a single-method run never reads as an ensemble."""
    weights = {"single": SINGLE_WEIGHTS_NOTE, "static": STATIC_WEIGHTS_NOTE}.get(mode, WEIGHTS_NOTE)
    return TIMING_OF.format(Name=label[:1].upper() + label[1:], name=label), weights


TIMING_OF = """**How the speed is measured.** {Name} runs first, then (if ticked) the target alone, one after the
other on the same device — never at the same time. Each model did one warm-up forward when the pair was
loaded. Speedup is the ratio of decode times: everything after the target's pass over the prompt, which both
make ({name}'s also checks its first drafts, as transformers' assisted generation does); walltime includes it.
On a CPU the same run's speedup can differ by a tenth or more from one try to the next: *repeat* runs both
sides several times and shows the median. A run whose steps of the target cost over 1.5× what they cost on this
machine quiet (measured before runs) timed the machine's load: it shows no speedup and no race.
*Replay race* plays both answers back side by side at the measured pace. Hover, click or tap a token of an
answer for why it was kept, rejected or never tested; the block table scrolls."""
TIMING = TIMING_OF.format(Name="TABED", name="TABED")
