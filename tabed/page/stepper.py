"""One block, step by step, as the page's block stepper shows it: at each draft position the target
verified, each method's top tokens, the ensemble's mix, the target's, the verdict and why in one line;
then the target's own token, and how the block's weights were chosen. Made from what an inspected block
recorded (`engine/inspection.py`); nothing here knows Gradio."""

from __future__ import annotations

import html
import math

from transformers import PreTrainedTokenizerBase

from ..engine.events import BlockEvent, Position, StopReason, WeightUpdate
from .reasons import NEVER_TESTED, VERDICTS, alone_matches, why
from .render import STOP_WORDS, counted, tree_depth
from .words import SHOWN, Words, below, one_row

SCROLL_HINT = "The table scrolls sideways: the target's column and the verdict are on the right."  # phones only
UNLEARNED = "nothing verified yet to learn from, so every method weighs the same"


def chosen_block(index: object, count: int) -> tuple[int, str | None]:
    """The block to show of `count` for the stepper's `index` (a number box's value, None when emptied), and
    why it is another when the index is no block: a line for the status."""
    if index is None:
        return 0, None
    if isinstance(index, bool) or not isinstance(index, (int, float)) or not math.isfinite(index) or index % 1:
        return 0, f"block must be a whole number, one of this answer's blocks; got {index!r}"
    if not count:
        return 0, None
    shown = max(0, min(int(index), count - 1))
    if shown == index:
        return shown, None
    return shown, f"block {int(index)} is not one of this answer's blocks (0 to {count - 1}): showing block {shown}"


def refused_html(refused: str) -> str:
    """Why the stepper shows another block than the one asked for, in a line above it."""
    return f'<p class="tabed-step-refused">\u26a0\ufe0f {html.escape(refused)}</p>'


WEIGHTS_WHY = "Why these weights, and how the next block's moved"


def step_html(tokenizer: PreTrainedTokenizerBase, blocks: list[BlockEvent], index: int,
              unlearned: str = UNLEARNED, shared: list[str] = ()) -> str:
    """Block `index` of a run (clamped to the run's blocks), as HTML. `unlearned`: why a block whose weights
    were not learned weighs as it does (the first block of TABED; every block of a static ensemble); `shared`:
    the methods drafted as one row (no picture), which the weights chart draws as one line."""
    if not blocks:
        return '<div class="tabed-step">Run a prompt, then step through its blocks here.</div>'
    index = max(0, min(int(index), len(blocks) - 1))
    block = blocks[index]
    word = Words(tokenizer)
    weights = _weights_text(block, mark_resting=True) + _one_row(shared, block)
    head = (f"<p><b>Block {index} of blocks 0–{len(blocks) - 1}</b>: drafted {html.escape(drafted(block))}; the "
            f"target kept {block.accepted}. Weights {html.escape(weights)}.</p>")
    if not block.positions and block.draft:
        return f'<div class="tabed-step">{head}<p>This run did not record its blocks (inspect was off).</p></div>'
    methods = list(block.positions[0].methods) if block.positions else []
    header = "".join(f"<th>{html.escape(c)}</th>" for c in
                     ["#", "draft", *(f"{m} top-{SHOWN}" for m in methods), "mix", "target", "verdict"])
    rows = [_position_row(word, position, j, methods) for j, position in enumerate(block.positions)]
    rows += [_discarded_row(word, block.draft[j], j, 2 + len(methods) + 3, said=j == block.accepted + 1)
             for j in range(len(block.positions), len(block.draft)) if j > block.accepted]
    rows.append(_target_row(word, block, 2 + len(methods) + 3))
    table = (f'<p class="tabed-scroll-hint">{SCROLL_HINT}</p>'
             f'<div class="tabed-step-table"><table><tr>{header}</tr>{"".join(rows)}</table></div>')
    moved = (f"<p>{html.escape(moved_why(block, blocks[index + 1]))}</p>" if index + 1 < len(blocks)
             and blocks[index + 1].weight_update is not None else "")
    why = f"<p>{html.escape(weights_why(block, unlearned))}</p>{moved}"
    return (f'<div class="tabed-step">{head}{table}<details class="tabed-weights-why"><summary>{WEIGHTS_WHY}</summary>'
            f"{why}</details></div>")


def drafted(block: BlockEvent) -> str:
    """What the block drafted and why it stopped there, in words (the block table's cell in short: '3, unsure:
    0.198 < 0.200'; '18 deep, 28 nodes')."""
    if block.tree:
        what = (f"a tree of {counted(len(block.tree), 'token')}, {tree_depth(block.tree)} deep (more than one guess "
                "at some positions: below, the branch the target followed; the trees chart draws every one)")
    else:
        what = counted(len(block.draft), "token")
    if block.stop == StopReason.UNSURE:
        low, high = below(block.survival, block.threshold)
        return (f"{what}, then stopped: the chance that every draft so far would be kept fell to {low}, under the "
                f"{high} at which drafting stops")
    return f"{what}, up to {STOP_WORDS.get(block.stop, block.stop)}" if block.stop != StopReason.FIXED else what


def _one_row(shared: list[str], block: BlockEvent) -> str:
    """Methods drafted as one row (no picture) weigh as one: the chart's single line, here split equally."""
    if len(shared) < 2:
        return ""
    total = sum(block.weights[m] for m in shared)  # every block weighs every method
    return f" ({one_row(shared)}, the chart's line {'='.join(shared)} {total:.2f}, split equally here)"


def _position_row(word: Words, position: Position, j: int, methods: list[str]) -> str:
    test = position.test
    verdict = VERDICTS["kept" if test.kept else "rejected"]
    cells = [str(j + 1), word(position.draft), *(word.top(position.methods[m]) for m in methods),
             word.top(position.ensemble), word.top(position.target), verdict]
    span = len(cells)
    return ("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells) + "</tr>"
            f'<tr class="tabed-why"><td colspan="{span}"><div>{html.escape(why(word, position))}</div></td></tr>')


def _discarded_row(word: Words, token: int, j: int, span: int, said: bool) -> str:
    """A draft after the block's first rejection: shown, and (under the first such, `said`) why never tested."""
    cells = [str(j + 1), word(token), *[""] * (span - 3), VERDICTS["discarded"]]
    why_not = (f'<tr class="tabed-why"><td colspan="{span}"><div>{html.escape(NEVER_TESTED)}</div></td></tr>'
               if said else "")
    return "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells) + "</tr>" + why_not


def _target_row(word: Words, block: BlockEvent, span: int) -> str:
    if len(block.emitted) <= block.accepted:
        text = "the answer ended here: nothing follows"
    elif not block.draft:  # no room left to draft: the pass gave the target's token alone (a bonus, as coloured)
        text = f"{VERDICTS['bonus']}: nothing was drafted, so the target's own next token is {word(block.target_token)}"
    elif block.bonus:
        text = f"{VERDICTS['bonus']}: every draft kept, so the target's own next token {word(block.target_token)} " \
               "comes free"
    else:
        text = (f"{VERDICTS['corrected']}: the target's {word(block.target_token)} takes the first rejected "
                "draft's place")
    return f'<tr class="tabed-why"><td colspan="{span}"><div><b>{html.escape(text)}</b></div></td></tr>'


def moved_why(block: BlockEvent, after: BlockEvent) -> str:
    """What this block changed, in short (the next block says how its weights were chosen): its verified
    positions joined the history and the next block's weights, or, while a method rests, not yet: its
    positions wait for the resting row to catch up."""
    verified = counted(len(block.positions), "verified position")
    update = after.weight_update
    if update is not None and update.waiting:
        waits = "waits" if len(block.positions) == 1 else "wait"
        return (f"What this block changed: nothing yet. Its {verified} {waits}, with the others verified while "
                f"{_resting(after)} rested, for its row to catch up: until then the history holds "
                f"{counted(update.positions, 'position')} and the next block's weights stay "
                f"{_weights_text(after)}.")
    now, then = _weights_text(after), _weights_text(block)
    change = f"stay {now}" if now == then else f"go from {then} to {now}"
    alone = alone_matches(update, list(after.weights)) if update.rule == "w-grid" else None
    over = (" (over them " + ", ".join(f"{m}'s top-1 matched the target's {counted(int(n), 'time')}"
                                        for m, n in alone.items()) + ")") if alone and len(alone) > 1 else ""
    return (f"What this block changed: its {verified} joined the history, which holds "
            f"{counted(update.positions, 'position')} now{over}, and the next block's weights {change}. "
            f"Block {after.index} says how they were chosen.")


def _resting(block: BlockEvent) -> str:
    return " and ".join(block.resting) or "a method"


def weights_why(block: BlockEvent, unlearned: str = UNLEARNED) -> str:
    """How the block's weights were chosen from the history of the blocks before it, in a sentence;
    `unlearned` says why when they were not learned."""
    chosen = _weights_text(block)
    if block.weight_update is None:
        return f"Weights {chosen}: {unlearned}." if len(block.weights) > 1 else f"Weights {chosen}."
    return f"How this block's weights were chosen: {_choice(block)}"


def _choice(block: BlockEvent) -> str:
    """The rule's choice of a block's weights, from the figures it recorded (`weight_update`)."""
    update, methods, chosen = block.weight_update, list(block.weights), _weights_text(block)
    seen = f"over the {counted(update.positions, 'position')} the target had verified"
    if update.waiting:
        seen = (f"over the {counted(update.positions, 'position')} in the history ({update.waiting} more wait "
                f"for {_resting(block)}'s row to catch up, so the weights stay as they were)")
    if update.shared:
        chosen += f" ({one_row(update.shared)}, its weight shared equally, since no split of it changes the mix)"
    if update.rule == "w-grid":
        candidates = update.candidates
        alone = alone_matches(update, methods)
        best = candidates[update.winner]
        matched = ", ".join(f"{m}'s top-1 matched the target's {counted(int(n), 'time')}" for m, n in alone.items())
        tied = len(update.most_matches)
        whole = (" (all of it to one method: alone, its probabilities sat closer to the target's than any mix's "
                 "did; a method left at 0 rests, and the rule weighs it again when it catches up)"
                 if max(best.weights) == 1.0 and len(methods) > 1 else "")
        closest = _closest(update, methods)
        won = ("As close as the winner to six decimals, the first of them in the rule's order won"
               if _equally_close(update) else "The closest won")
        if tied == len(candidates):  # the matches told the weightings nothing apart
            return (f"{seen}, {matched} (w-grid). All {len(candidates)} weightings tried matched as often "
                    f"({int(best.matches)}), a tie that says nothing about which method is better, so the rule "
                    f"went on to {CLOSEST}: {closest}. {won}: {chosen}{whole}.")
        beyond = (", more than any method alone: a mix's top-1 is that of the weighted sum of the methods' "
                  "distributions, which can be right where each one's own top-1 is not"
                  if best.matches > max(alone.values()) else "")
        among = f"; of those, by {CLOSEST}: {closest}. {won}" if tied > 1 else ", and won"
        return (f"{seen}, {matched} (w-grid). Of the {len(candidates)} weightings tried, "
                f"{tied} matched most often ({int(best.matches)}{beyond}){among}: {chosen}{whole}.")
    if update.rule in ("kld", "tvd"):
        sums = ", ".join(f"{m} {d:.2f}" for m, d in zip(methods, update.divergence, strict=True))
        return (f"{seen}, each method's summed divergence from the target ({update.rule}): {sums}; weights ∝ "
                f"1 / divergence: {chosen}.")
    losses = ", ".join(f"{m} {loss:.2f}" for m, loss in zip(methods, update.loss, strict=True))
    return (f"{seen}, each method's summed log-loss (hedge): {losses}; weights ∝ exp(−{update.rate:.3f} × "
            f"loss): {chosen}.")


CLOSEST = ("how close each weighting's probabilities for every token came to the target's, summed over those "
           "positions (KL: 0 would be the target's own; less is closer)")


ALL_TIED_SHOWN = 4  # tied weightings listed whole up to this many


def _closest(update: WeightUpdate, methods: list[str]) -> str:
    """The tied weightings' closeness (KL) as the rule compared it, closest first: all of them when they are few
    (a winner alone beside its figure says nothing), else the winner, each method alone and the even mix."""
    candidates, tied = update.candidates, update.most_matches
    even = [1 / len(methods)] * len(methods)
    shown = tied if len(tied) <= ALL_TIED_SHOWN else [
        k for k in tied if k == update.winner or max(candidates[k].weights) == 1.0
        or all(abs(w - e) < 1e-3 for w, e in zip(candidates[k].weights, even, strict=True))]
    kls = [candidates[k].kl for k in shown]
    # as many decimals as tell the figures apart, six at most (they read "0.16, 0.16, 0.16" with two)
    apart = len({round(kl, 6) for kl in kls})
    digits = next(d for d in range(2, 7) if len({round(kl, d) for kl in kls}) == apart)
    said = ", ".join(f"{_weighting(candidates[k].weights, methods)} {candidates[k].kl:.{digits}f}"
                     for k in sorted(shown, key=lambda k: candidates[k].kl))
    left = len(tied) - len(shown)
    return said + (f" (and {left} more, none closer than the winner)" if left else "")


def _equally_close(update: WeightUpdate) -> bool:
    """Whether a tied weighting came as close as the winner, to six decimals (then the first in order wins)."""
    candidates, winner = update.candidates, update.winner
    return any(k != winner and round(candidates[k].kl, 6) == round(candidates[winner].kl, 6)
               for k in update.most_matches)


def _weighting(weights: list[float], methods: list[str]) -> str:
    """A w-grid weighting as words: "T alone", "M and T equally", "M 0.70 · T 0.30"."""
    if max(weights) == 1.0:
        return f"{methods[weights.index(1.0)]} alone"
    if max(weights) - min(weights) < 1e-3:
        return f"{' and '.join(methods)} equally"
    return " · ".join(f"{m} {w:.2f}" for m, w in zip(methods, weights, strict=True))


def _weights_text(block: BlockEvent, mark_resting: bool = False) -> str:
    """The block's weights, e.g. "M 0.70 · T 0.30" (with `mark_resting`, the resting methods marked)."""
    return " · ".join(f"{m} {w:.2f}" + (" (resting)" if mark_resting and m in block.resting else "")
                      for m, w in block.weights.items())
