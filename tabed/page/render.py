"""Turning engine events into what a page shows: coloured token HTML, block rows and plotly figures.

Nothing here knows Gradio: the page's view (`view.py`) calls it and hands the results to the components.
Token text always comes
from token ids and is escaped, so code or markdown in an answer cannot break the page.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from ..engine.events import BlockEvent, GenerationResult, Metrics, StopReason, TokenEvent, TreeNode
from ..engine.speed import TIMED_TOKENS, SpeedModel, decode_speedup
from .reasons import draft_detail
from .words import END, Words, below, counted, token_text, token_word

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


# The colours users of speculative-decoding visualisers know (see the legend).
KINDS = {
    "accepted": ("#1a7f37", "draft accepted by the target"),
    "rejected": ("#cf222e", "draft rejected by the target (not part of the answer)"),
    "discarded": ("#8c959f", "draft after a rejected one: never tested"),
    "corrected": ("#d4760a", "the target's own token at a rejection"),
    "bonus": ("#0969da", "bonus token after a fully accepted block"),
    "plain": ("#24292f", "decoded by the target alone"),
}
METHOD_COLOURS = {"M": "#1a7f37", "T": "#8250df", "C": "#d4760a", "P": "#0969da", "N": "#6e7781"}
STRUCK = ("rejected", "discarded")  # drafts that are not part of the answer


LEGEND_NAMES = {"accepted": "kept", "rejected": "rejected", "discarded": "never tested", "corrected": "corrected",
                "bonus": "bonus", "plain": "plain"}  # each kind of token in a word, for the legend's one line


def legend_html() -> str:
    """What the answers' colours mean: one line of coloured words (each hovers its meaning), and every
    meaning one click away."""
    shown, meanings = [], []
    for kind, (colour, meaning) in KINDS.items():
        style = f"color:{colour};font-weight:600" + (";text-decoration:line-through" if kind in STRUCK else "")
        span = (f'<span class="tabed-legend-item" style="{style}" title="{html.escape(meaning)}">'
                f"{LEGEND_NAMES[kind]}</span>")
        shown.append(span)
        meanings.append(f"<li>{span}: {html.escape(meaning)}</li>")
    meanings.append("<li>\u2423 a space, \u21b5 a new line, \u23ce the end of the answer (tokens with no ink)</li>")
    meanings.append("<li>with 'show rejected drafts' off, the struck drafts hide and their count shows</li>")
    return (f'<details class="tabed-legend"><summary>{" · ".join(shown)}</summary><ul>{"".join(meanings)}</ul>'
            "</details>")


def _span(kind: str, text: str, title: str, block: int | None = None) -> str:
    colour = KINDS[kind][0]
    style = f"color:{colour}"
    if kind in STRUCK:
        style += ";text-decoration:line-through;opacity:0.7;font-size:0.8em"  # smaller: the answer reads past them
    elif kind in ("corrected", "bonus"):
        style += ";font-weight:600"
    shown = html.escape(text) if text else END  # an end-of-sequence token shows as ⏎
    steps = "" if block is None else f' data-block="{block}"'  # a tap steps the stepper to its block
    return f'<span class="tk tk-{kind}" style="{style}" title="{html.escape(title, quote=True)}"{steps}>{shown}</span>'


WHOLE_WORD_CHARS = 24  # a word with struck drafts in it is kept on one line up to this long (a URL may wrap)


@dataclass
class TokenStream:
    """The answer as coloured HTML, appended to block by block (a token shown stays as it is). A word with a
    block's struck drafts in it is kept on one line (`.tk-word`): a browser may break a line at the drafts'
    box, even inside a word."""

    tokenizer: object
    ids: list[int] = field(default_factory=list)
    done: list[str] = field(default_factory=list)  # the words before the last one, each as `_word` wrote it
    word: list[str] = field(default_factory=list)  # the last word's spans (and boxes), which more may join
    word_text: str = ""
    boxed: bool = False  # the last word holds a box of struck drafts
    rejected: int = 0  # drafts shown struck through, rejected or discarded

    @property
    def html(self) -> str:
        return "".join(self.done) + self._word()

    def _word(self) -> str:
        last = "".join(self.word)
        whole = self.boxed and len(self.word_text.strip()) <= WHOLE_WORD_CHARS
        return f'<span class="tk-word">{last}</span>' if whole else last

    def _piece(self, piece: str, text: str, box: bool = False) -> None:
        """A kept token's span (or a box with one), `text` what it reads: a blank starts or ends a word."""
        if text[:1].isspace():
            self._end_word()
        self.word.append(piece)
        self.word_text += text
        self.boxed |= box
        if text[-1:].isspace():
            self._end_word()

    def _end_word(self) -> None:
        self.done.append(self._word())
        self.word, self.word_text, self.boxed = [], "", False

    def _span(self, kind: str, token: int, title: str, block: int | None, after: list[int] = ()) -> tuple[str, str]:
        """`after`: the rejected drafts before this one, which it was drafted after (its spaces follow them)."""
        text = token_text(self.tokenizer, self.ids + list(after), token)
        text = text if text or token_word(self.tokenizer, token) == END else " "
        return _span(kind, text, title, block), text

    def token(self, event: TokenEvent, kind: str = "plain") -> None:
        what = "the prompt's pass, which gives the first token" if event.index == 0 else "its plain decoding step"
        title = f"token {event.index + 1} · {what} took {event.step_s * 1e3:.1f} ms"
        self._piece(*self._span(kind, event.token_id, title, None))
        self.ids.append(event.token_id)

    def block(self, block: BlockEvent) -> None:
        """A block's kept drafts, then its struck ones set above the target's token that replaced them, in a box
        (`.tk-fix`), so that a rejection inside a word leaves the word whole on its line: "Just", with "le"
        struck above "ust"."""
        kept, word = len(block.emitted), Words(self.tokenizer)
        for j, token in enumerate(block.draft[:min(block.accepted, kept)]):
            self._piece(*self._span("accepted", token, draft_detail(word, block, j), block.index))
            self.ids.append(token)
        struck = block.draft[block.accepted:]
        drafts = ""
        for j, token in enumerate(struck, start=block.accepted):
            kind = "rejected" if j == block.accepted else "discarded"
            drafts += self._span(kind, token, draft_detail(word, block, j), block.index,
                                 after=struck[:j - block.accepted])[0]
            self.rejected += 1
        if kept <= block.accepted:  # no target's token after them (a stopped answer): they stay inline
            self.word.append(drafts)
            return
        kind = "bonus" if block.bonus else "corrected"
        title = (f"block {block.index} · the target's token · target p={block.target_token_prob:.2f}"
                 f" · {'all drafts accepted' if block.bonus else 'replaces the first rejected draft'}")
        own, text = self._span(kind, block.target_token, title, block.index)
        if drafts:
            self._piece(f'<span class="tk-fix"><span class="tk-drafts">{drafts}</span>{own}</span>', text, box=True)
        else:
            self._piece(own, text)
        self.ids.append(block.target_token)


Groups = list[tuple[str, list[str]]]  # the page's methods: (name, the methods it stands for)


def method_groups(methods: list[str], shared: list[str] = ()) -> Groups:
    """A line of the weights chart and a column of the block table per method; the methods drafted as one
    row (`Started.shared`: no picture) as one, named "M=T" and weighing their total."""
    groups = [(m, [m]) for m in methods if m not in shared]
    return ([("=".join(shared), list(shared))] if shared else []) + groups


def group_weight(block: BlockEvent, members: list[str]) -> float:
    return sum(block.weights.get(m, 0.0) for m in members)


def answer_html(stream: TokenStream) -> str:
    """The answer, and the count of its rejected drafts, which the page shows while it hides them (its
    "show rejected drafts" switch: the CSS class `hide-rejected`)."""
    if not stream.rejected:
        return stream.html
    count = f"{counted(stream.rejected, 'draft')} not kept, hidden (rejected, or never tested after a rejection)"
    return stream.html + f'<div class="tabed-rejected-count">{count}</div>'


def block_rows(tokenizer: PreTrainedTokenizerBase, blocks: list[BlockEvent], groups: Groups) -> list[list]:
    """One row per block, in `block_columns`' order: first what a student reads a block by (its weights, the
    ensemble's draft, how many the target kept, the target's own token, how long the draft was and why),
    then each method's own guesses and the times."""
    def words(ids: list[int]) -> str:
        return " | ".join(token_word(tokenizer, t) for t in ids)

    rows = []
    for block in blocks:
        target = f"{'bonus' if block.bonus else 'corrected'}: {words([block.target_token])}" \
            if block.target_token is not None else "(the answer ended)"
        weights = " · ".join(f"{name} rests" if name in block.resting else f"{name} {group_weight(block, members):.2f}"
                             for name, members in groups)
        rows.append([block.index, weights, words(block.draft), block.accepted, target, draft_length(block)]
                    + ["(resting)" if name in block.resting else words(block.drafts.get(members[0], []))
                       for name, members in groups]
                    + [round(block.draft_s * 1e3, 1), round(block.verify_s * 1e3, 1)])
    return rows


STOP_WORDS = {StopReason.CAP: "its cap", StopReason.BUDGET: "the answer's token limit", StopReason.EOS: "an end token",
              StopReason.IMAGE: "an image placeholder", StopReason.NODES: "the tree's node budget"}


def draft_length(block: BlockEvent) -> str:
    """How many tokens the block drafted and why it stopped there, in words, e.g. '3, unsure: 0.21 < 0.30'
    (the estimated chance that every draft is accepted fell below the minimum); a tree's depth and nodes,
    e.g. '6 deep, 11 nodes, its cap'."""
    count = f"{tree_depth(block.tree)} deep, {len(block.tree)} nodes" if block.tree else len(block.draft)
    if block.stop == StopReason.UNSURE:
        return f"{count}, unsure: {' < '.join(below(block.survival, block.threshold))}"
    return f"{count}, {STOP_WORDS.get(block.stop, block.stop)}" if block.stop != StopReason.FIXED else str(count)


def node_depths(nodes: list[TreeNode]) -> list[int]:
    """Each tree node's depth, 1 under the root (nodes come parents first)."""
    depths = []
    for node in nodes:
        depths.append(1 + (depths[node.parent] if node.parent >= 0 else 0))
    return depths


def tree_depth(nodes: list[TreeNode]) -> int:
    """How deep a block's tree goes."""
    return max(node_depths(nodes), default=0)


# the block table's columns a student reads a block by, and their widths (px), narrow enough (their cells
# wrap) to be in view together in the page's column at 1400 px; each method's guesses and the times follow
LEADING_COLUMNS = {"block": 64, "weights": 96, "ensemble draft": 170, "kept": 56, "target's token": 112,
                   "drafted (why it stopped)": 150}


def block_widths(groups: Groups) -> list[str]:
    """The block table's column widths, in `block_columns`' order."""
    # (two methods' table fits a 1400 px screen whole; more scroll sideways)
    return [f"{width}px" for width in LEADING_COLUMNS.values()] + ["150px"] * len(groups) + ["72px", "72px"]


def block_columns(groups: Groups) -> list[str]:
    """The block table's headers: the `LEADING_COLUMNS`, then each method's guesses and the times."""
    return list(LEADING_COLUMNS) + [f"{name} guesses" for name, _ in groups] + ["draft ms", "verify ms"]


RESTED = "open dot: resting"  # short: a phone gives each legend entry a row


def weights_figure(blocks: list[BlockEvent], groups: Groups, alone: str | None = None) -> go.Figure:
    """Ensemble weight of each method per block (lines; methods drafted as one row, one line) and accepted
    drafts per block (bars). `alone`: the label of a single method's run ("M alone"), which mixed nothing:
    its chart has the bars only, and a title that says so."""
    figure = go.Figure()
    index = [b.index for b in blocks]
    figure.add_bar(x=index, y=[b.accepted for b in blocks], name="accepted drafts", yaxis="y2",
                   marker_color="rgba(140,140,140,0.35)", hovertemplate="block %{x}: %{y} accepted<extra></extra>")
    for order, (method, members) in enumerate(groups if alone is None else []):
        rested = [method in b.resting for b in blocks]  # an open marker: the row sat out the draft steps
        one_row = " (one row: no picture)" if len(members) > 1 else ""
        # each later method's dots smaller, so that two methods at one weight both show
        figure.add_scatter(x=index, y=[group_weight(b, members) for b in blocks], mode="lines+markers",
                           name=f"weight of {method}{one_row}", line={"color": METHOD_COLOURS.get(members[0])},
                           marker={"symbol": ["circle-open" if r else "circle" for r in rested],
                                   "size": max(4, 15 - 5 * order)},
                           customdata=[" (resting: its row sat out the draft steps)" if r else "" for r in rested],
                           hovertemplate=f"block %{{x}}: w({method}) = %{{y:.2f}}%{{customdata}}<extra></extra>")
    if alone is None and any(b.resting for b in blocks):  # what an open dot means, in the legend
        figure.add_scatter(x=[None], y=[None], mode="markers", name=RESTED,
                           marker={"symbol": "circle-open", "color": "#57606a", "size": 10})
    last = max(index, default=0)
    if alone is not None:  # no weight to draw: a short title (a phone's width holds it) says so
        figure.update_layout(title={"text": f"{alone}: no ensemble, no weights", "x": 0.02}, showlegend=True)
    figure.update_layout(  # no title for an ensemble: the page labels the chart, and a phone has no width for one
        xaxis={"title": "block", "dtick": block_step(last + 1), "tickformat": "d", "range": [-0.5, last + 0.5]},
        yaxis={"title": "weight", "range": [-0.02, 1.02], "visible": alone is None},
        # the bars' axis ends just above the most a block kept: an axis to γ (20 when adaptive) leaves them flat
        yaxis2={"title": "accepted", "overlaying": "y", "side": "right", "showgrid": False, "tickformat": "d",
                "range": [0, max((b.accepted for b in blocks), default=0) + 1.5]},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0, "xanchor": "left"},  # clear of the axes
        margin={"l": 50, "r": 50, "t": 120, "b": 40},  # room for the legend in four rows (a phone's) and the label
        height=400,
        uirevision="weights",
    )
    return figure


TICKS = 8  # the most block numbers the weights chart labels: they stay apart on a phone's 390 px


def block_step(blocks: int) -> int:
    """Every how many blocks the weights chart labels one: 1, 2, 5, 10, 20, 50, … (at most `TICKS` labels)."""
    return next(step for power in range(12) for step in (10 ** power, 2 * 10 ** power, 5 * 10 ** power)
                if blocks <= TICKS * step)


SEVERAL = "#24292f"  # a tree node proposed by several methods
NOBODY = "#8c959f"  # a tree node no method had as its top-1 (the ensemble's further choice, or a draw)
PATH_COLOUR = "rgba(212, 167, 44, 0.55)"  # the accepted path, drawn like a highlighter under its nodes
BAND = 0.65  # the height of one block's band in the trees figure (one block per unit, top to bottom)


def tree_lanes(parents: list[int], first: set[int] = frozenset()) -> list[int]:
    """A lane (row) per tree node: each node's first child stays in its lane, so the main path is straight,
    and every further child opens a lane of its own below. The nodes in `first` (the accepted path) come
    first among their siblings: the path the target kept runs straight along its block's own row."""
    lanes, taken, children = [0] * len(parents), 0, {}
    for node, parent in enumerate(parents):
        children.setdefault(parent, []).append(node)

    def place(parent: int, lane: int) -> None:
        nonlocal taken
        for rank, child in enumerate(sorted(children.get(parent, []), key=lambda node: node not in first)):
            if rank:
                taken += 1
            lanes[child] = lane if rank == 0 else taken
            place(child, lanes[child])

    place(-1, 0)
    return lanes


def _node_colour(proposer: str) -> str:
    if not proposer:
        return NOBODY
    return METHOD_COLOURS.get(proposer, "#24292f") if len(proposer) == 1 else SEVERAL


def _no_trees_title(width: int, hedge_first: bool) -> str:
    """Why a run has no tree to draw, on two lines: the chart is as narrow as the page's column."""
    if width > 1:
        why = "no block branched: every one drafted a chain"
    elif hedge_first:
        why = "the first block did not fork: the ensemble was sure, or there was no picture"
    else:
        return "Token trees<br><sup>set the tree width above 1 to draft trees</sup>"
    return f"Token trees: none in this answer<br><sup>{why}</sup>"


def trees_figure(tokenizer: PreTrainedTokenizerBase, blocks: list[BlockEvent], width: int = 1,
                 hedge_first: bool = False) -> go.Figure:
    """Each block's token tree in its own band, blocks top to bottom like the block table: depth to the
    right, nodes coloured by the methods that proposed them, the accepted path bold, rejected branches
    greyed; hovering a node shows its token and its draft and target probabilities. `width` and
    `hedge_first`: the run's tree settings, which say why a run has no tree to draw."""
    figure = go.Figure()
    shown = [block for block in blocks if block.tree]
    edges = {True: ([], []), False: ([], [])}
    nodes = {True: ([], [], [], [], []), False: ([], [], [], [], [])}
    above: list[str] = []  # where each accepted node's label goes: above and below in turn, apart from the next
    for block in shown:
        kept = {index for index, node in enumerate(block.tree) if node.accepted}
        lanes = tree_lanes([node.parent for node in block.tree], kept)
        spacing = BAND / max(1, max(lanes))
        depth = node_depths(block.tree)
        for index, node in enumerate(block.tree):
            y = -block.index - lanes[index] * spacing
            parent_y = -block.index - (lanes[node.parent] * spacing if node.parent >= 0 else 0)
            xs, ys = edges[node.accepted]
            xs += [depth[index] - 1, depth[index], None]
            ys += [parent_y, y, None]
            x, y_values, colours, texts, hovers = nodes[node.accepted]
            word = token_word(tokenizer, node.token)
            if node.accepted:
                above.append("top center" if depth[index] % 2 else "bottom center")
            x.append(depth[index])
            y_values.append(y)
            colours.append(_node_colour(node.proposer))
            texts.append(word)
            hovers.append(f"block {block.index} · {html.escape(word)} · ensemble p={node.draft_prob:.2f} · target "
                          f"p={node.target_prob:.2f} · proposed by {node.proposer or 'the ensemble only'} · "
                          f"{'accepted' if node.accepted else 'rejected'}")
    for accepted in (False, True):
        xs, ys = edges[accepted]
        figure.add_scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=accepted, name="accepted path",
                           line={"color": PATH_COLOUR, "width": 7} if accepted else {"color": "#d0d7de", "width": 1})
    for accepted in (False, True):
        x, y, colours, texts, hovers = nodes[accepted]
        figure.add_scatter(x=x, y=y, mode="markers+text" if accepted else "markers", text=texts,
                           textposition=above if accepted else "top center", textfont={"size": 9}, showlegend=False,
                           marker={"color": colours, "size": 9 if accepted else 7, "opacity": 1.0 if accepted else 0.4},
                           name="accepted node" if accepted else "rejected node", hovertext=hovers,
                           hovertemplate="%{hovertext}<extra></extra>")
    proposers = {_node_colour(node.proposer): node.proposer for block in shown for node in block.tree}
    for colour, proposer in sorted(proposers.items(), key=lambda item: (len(item[1]) != 1, item[1])):
        name = ("several methods" if len(proposer) > 1 else f"proposed by {proposer}") if proposer else "ensemble only"
        figure.add_scatter(x=[None], y=[None], mode="markers", marker={"color": colour, "size": 8}, name=name,
                           hoverinfo="skip")
    every_x = nodes[True][0] + nodes[False][0]
    every_y = nodes[True][1] + nodes[False][1]
    figure.update_layout(  # the ranges hold every node and the label above it
        title={"text": "Token trees (hover or tap a node)" if shown else _no_trees_title(width, hedge_first),
               "x": 0.02},
        xaxis={"title": "depth", "dtick": 1, "range": [-0.4, max(every_x, default=6) + 0.6]},
        yaxis={"tickvals": [-b.index for b in shown], "ticktext": [f"block {b.index}" for b in shown],
               "showgrid": False, "zeroline": False,
               "range": [min(every_y, default=-len(blocks) + 1 - BAND) - 0.25, max(every_y, default=0) + 0.45]},
        # under the depth axis's title, so that a phone's narrow chart wraps it clear of the title and the trees
        legend={"orientation": "h", "y": -62 / (_trees_height(shown) - 200), "yanchor": "top", "x": 0},  # 62 px under
        margin={"l": 60, "r": 20, "t": 60, "b": 140},
        height=_trees_height(shown),
        uirevision="trees",
    )
    return figure


def _trees_height(shown: list[BlockEvent]) -> int:
    return min(1260, max(330, 180 + 70 * len(shown)))


def too_short_to_time(autoregressive: Metrics) -> bool:
    """Plain decoding's answer has almost no decode time to compare: a ratio of two near-zero times says
    nothing (a one-token answer once showed "0.04×")."""
    return autoregressive.new_tokens < TIMED_TOKENS


BLOCK_EFFICIENCY = "block efficiency: tokens per target pass, the prompt's pass included"
PER_PASS = "why this speed: tokens per target pass after the prompt's (plain steps it replaces)"
DRAFTING = "drafting per pass, the drafter's prefill in the first (plain steps)"
OTHER = "other per pass: weights, bookkeeping (plain steps)"
OTHER_ALONE = "other per pass: bookkeeping (plain steps)"
PREDICTED = "speedup these predict: tokens per pass / (verify + drafting)"
WHOLE = "with the other time too: tokens per pass / (verify + drafting + other)"


def metrics_rows(speculative: Metrics | None, autoregressive: Metrics | None, unreliable: bool = False,
                 missing: str = "…") -> list[list]:
    """Headline numbers, TABED next to plain decoding (the speedup flagged when the timing was unreliable);
    a side with no numbers shows `missing` ("…" while it may still come, else why it has none)."""
    def value(metrics: Metrics | None, name: str, fmt: str) -> str:
        if metrics is None:
            return missing
        return format(getattr(metrics, name), fmt)

    rows = [
        ["tokens", value(speculative, "new_tokens", "d"), value(autoregressive, "new_tokens", "d")],
        ["tokens / s (walltime)", value(speculative, "tokens_per_s", ".1f"),
         value(autoregressive, "tokens_per_s", ".1f")],
        ["walltime (s)", value(speculative, "walltime_s", ".3f"), value(autoregressive, "walltime_s", ".3f")],
        ["decode time (s)", value(speculative, "decode_s", ".3f"), value(autoregressive, "decode_s", ".3f")],
        ["target forwards", value(speculative, "target_forwards", "d"), value(autoregressive, "target_forwards", "d")],
        [BLOCK_EFFICIENCY, value(speculative, "block_efficiency", ".2f"),
         value(autoregressive, "block_efficiency", ".2f")],
        ["acceptance rate", value(speculative, "acceptance_rate", ".2f"), "—"],
    ]
    if speculative is not None:
        rows += acceptance_rows(speculative)
        for method, efficiency in speculative.method_block_efficiency.items():
            rows.append([f"block efficiency (at least) if {method} alone had drafted", f"{efficiency:.2f}", "—"])
        rows.append(["draft / verify time after the prompt's pass (s)",
                     f"{speculative.draft_s:.3f} / {speculative.verify_s:.3f}", "—"])
    if speculative is not None and autoregressive is not None and speculative.decode_s > 0:
        times = decode_speedup(speculative, autoregressive)
        speedup = (f"too short to time (under {TIMED_TOKENS} tokens)" if too_short_to_time(autoregressive) or
                   times is None else f"{times:.2f}×")
        per_token = " per token: samples of two lengths" if speculative.new_tokens != autoregressive.new_tokens else ""
        rows.insert(0, [f"speedup (decode time{per_token})", speedup + (" (busy)" if unreliable else ""), "1.00×"])
        if unreliable:
            rows.insert(1, ["(busy: timings unreliable, the machine was busy)", "", ""])
    return rows


def alone_rows(alone: dict[str, GenerationResult], speedups: dict[str, float]) -> list[list]:
    """Each method's real figures, drafting alone with the same settings after plain decoding: its block
    efficiency (beside the at-least of the rows above) and its speedup over plain decoding (`speedups`, the
    figures the status says too: `RunView.alone_speedups`)."""
    rows = []
    for method, result in alone.items():
        if result.stopped:
            rows.append([f"{method} alone, really run", "stopped", "—"])
            continue
        times = speedups.get(method)
        speedup = f" · {times:.2f}× plain decoding" if times is not None else ""
        rows.append([f"{method} alone, really run: block efficiency · speedup (decode time)",
                     f"{result.metrics.block_efficiency:.2f}{speedup}", "—"])
    return rows


def speed_rows(speed: SpeedModel, weighed: bool = True) -> list[list]:
    """Why this speed, as rows of the metrics table: what one target pass of ours replaced and cost, in plain
    decoding's steps, and the speedup that predicts. `weighed`: an ensemble (a single method has no weights
    among its other time)."""
    return [[PER_PASS, f"{speed.tokens_per_pass:.2f}", "1"],
            ["a verify's cost (plain steps)", f"{speed.verify:.2f}", "1"],
            [DRAFTING, f"{speed.drafting:.2f}", "—"],
            ["one drafted token (plain steps)", f"{speed.draft_token:.3f}", "—"],
            ["drafts made per draft kept", f"{speed.drafts_per_kept:.2f}", "—"],
            [OTHER if weighed else OTHER_ALONE, f"{speed.other:.2f}", "—"],
            [PREDICTED, f"{speed.predicted:.2f}× (measured {speed.measured:.2f}×)", "—"],
            [WHOLE, f"{speed.whole:.2f}× (the measured "
                    "speedup: the other time is the gap)", "—"]]


SHOWN_POSITIONS = 8  # draft positions the metrics table lists (the JSON download has every one)
# two rates per position, on two bases (`engine/acceptance.py`): a draft is tested only after every one before it
# was kept, while a method's guess is judged wherever the target verified, so the two differ even for one method
KEPT_AT = "drafts kept at position 1, 2, … (of the blocks that drafted that far)"
RIGHT_AT = "'s own guess right at position 1, 2, … (of the positions the target verified)"


KEPT_BY_COUNT = "blocks by drafts kept (drafts kept: blocks)"


def acceptance_rows(metrics: Metrics) -> list[list]:
    """How the drafts fared, as rows of the metrics table: the mean drafts kept a block, the blocks by
    the number they kept, and each draft position's share kept (a draft is kept only with every one
    before it)."""
    if not metrics.accepted_histogram:
        return []
    def by_position(cells: list[dict]) -> str:
        shown = " · ".join(f"{index}: {cell['rate']:.0%}" for index, cell in enumerate(cells[:SHOWN_POSITIONS], 1))
        more = len(cells) - SHOWN_POSITIONS
        rest = f"position {len(cells)}" if more == 1 else f"positions {SHOWN_POSITIONS + 1}–{len(cells)}"
        return shown + (f" · {rest}: in the JSON download" if more > 0 else "")

    return [["drafts kept a block (mean)", f"{metrics.mean_accepted:.2f}", "—"],
            [KEPT_BY_COUNT, " · ".join(f"{kept}: {blocks}" for kept, blocks in enumerate(metrics.accepted_histogram)
                                       if blocks), "—"],  # short on a phone: the counts no block had left out
            [KEPT_AT, by_position(metrics.acceptance_by_position)
             or "none drafted", "—"],
            *([f"{method}{RIGHT_AT}", by_position(cells), "—"]
              for method, cells in metrics.method_match_by_position.items() if cells)]


def race_html(text: str, label: str, finished_s: float | None) -> str:
    """One side of the race: its label, the text so far and a cursor; once done, a tick and its own time
    (as measured: each side has its clock, the race's one may run faster)."""
    if finished_s is None:
        return f"<b>{html.escape(label)}</b><br>{html.escape(text)} \u258c"
    return f"<b>{html.escape(label)} \u2714 done in {finished_s:.2f} s</b><br>{html.escape(text)}"


def result_texts(tokenizer: PreTrainedTokenizerBase, result: GenerationResult) -> list[tuple[float, str]]:
    """(time, text so far) after each step of a finished run: the pace for a replay race."""
    frames, ids = [], []
    for event in result.tokens:
        ids.append(event.token_id)
        frames.append((event.elapsed_s, tokenizer.decode(ids, skip_special_tokens=True)))
    for block in result.blocks:
        ids.extend(block.emitted)
        frames.append((block.elapsed_s, tokenizer.decode(ids, skip_special_tokens=True)))
    return sorted(frames, key=lambda frame: frame[0])
