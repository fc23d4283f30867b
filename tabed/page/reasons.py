"""Why, in words: why a draft was kept, rejected or never tested, as the stepper's lines and a token's
detail (hover, click or tap) say it. Made from what an inspected block recorded (`engine/inspection.py`)."""

from __future__ import annotations

import re

from ..engine.events import BlockEvent, Tried, WeightUpdate
from ..engine.events import Position as Verified
from .words import Words, below, counted, one_row

VERDICTS = {"kept": "\u2713 kept", "rejected": "\u2717 rejected", "discarded": "\u2013 discarded",
            "corrected": "\u21bb corrected", "bonus": "+ bonus"}
NEVER_TESTED = ("discarded, never tested: a draft is tested only when every draft before it was kept, and an "
                "earlier one of this block was rejected")


def why(word: Words, position: Verified) -> str:
    """Why the draft at a position was kept or rejected, in one line."""
    test, draft = position.test, position.draft
    target = dict(map(tuple, position.target))
    if test.kind == "greedy":
        top1, top = test.target_top1, position.target[0][1]  # the likeliest listed: the top-1's, tied or not
        if test.kept:
            return f"the target's top-1 is {word(top1)} ({top:.2f}): the draft is it, kept"
        if draft not in target:
            return (f"the target's top-1 is {word(top1)} ({top:.2f}); the draft {word(draft)} is "
                    f"not even among the target's top {len(target)}: rejected")
        under, shown = below(target[draft], top)  # a near tie shown with the decimals it needs
        return (f"the target's top-1 is {word(top1)} ({shown}); the draft {word(draft)} had {under} under the target: "
                "rejected")
    tried = test.tried or [Tried(-1, draft, test.kept, test.u, test.p, test.q)]
    tests = "; ".join(_drawn(word, t) if k == 0 else  # a tree's next draw meets what the rejected one left
                      f"then, with {word(tried[k - 1].token)} rejected, against what is left of the target's "
                      f"distribution (max(p − q, 0) renormalised: its p here): {_drawn(word, t)}"
                      for k, t in enumerate(tried))
    if test.kept:
        return tests
    return (f"{tests}; the target's {word(test.residual_token)} is drawn from what is left of its "
            "distribution, max(p − q, 0) renormalised")


def _drawn(word: Words, tried: Tried) -> str:
    """A sampled draft's test: its uniform draw u against p/q, with as many decimals as the comparison needs."""
    ratio = tried.p / tried.q if tried.q else float("inf")
    if tried.kept:
        if ratio >= 1:
            return f"{word(tried.token)}: p/q = {ratio:.2f} ≥ 1, so kept whatever u (u = {tried.u:.2f})"
        u, ratio_shown = below(tried.u, ratio)
        return f"{word(tried.token)}: u = {u} < p/q = {ratio_shown} kept"
    ratio_shown, u = below(ratio, tried.u)
    return f"{word(tried.token)}: u = {u} ≥ p/q = {ratio_shown} rejected"


def draft_detail(word: Words, block: BlockEvent, j: int) -> str:
    """Draft `j` of a block, as a token's detail says it: kept or rejected and why (the target's own top
    tokens, the draft's probability under the target and under the drafters' mix, the test it met), or
    discarded, never tested; who proposed it."""
    token = block.draft[j]
    proposers = ", ".join(m for m, guesses in block.drafts.items() if j < len(guesses) and guesses[j] == token)
    head = f"block {block.index} · draft {j + 1} of {len(block.draft)} · proposed by {proposers or 'the mix only'}"
    if j > block.accepted:
        return f"{head} · {NEVER_TESTED}"
    verdict = "kept" if j < block.accepted else "rejected"
    if j >= len(block.positions):  # not inspected: the probabilities alone
        return (f"{head} · {verdict} · drafters' mix p={block.draft_probs[j]:.2f} · "
                f"target p={block.target_probs[j]:.2f}")
    position = block.positions[j]
    return (f"{head} · {verdict}: {why(word, position)} · the target's top-3: {word.top(position.target)} · "
            f"this draft: target p={block.target_probs[j]:.2f}, drafters' mix q={block.draft_probs[j]:.2f}")


def guesses_matched(blocks: list[BlockEvent]) -> dict[str, tuple[int, int]]:
    """Per method, (positions where its own top-1 guess was the target's token, positions it guessed at):
    over the positions the target verified (the kept drafts, then the first rejected one), in the blocks
    where the method drafted (a resting method guesses at none)."""
    counts: dict[str, list[int]] = {}
    for block in blocks:
        truth = _verified(block)
        for method, guesses in block.drafts.items():
            seen = counts.setdefault(method, [0, 0])
            seen[0] += sum(g == t for g, t in zip(guesses, truth, strict=False))
            seen[1] += min(len(truth), len(guesses))
    return {method: (hit, total) for method, (hit, total) in counts.items()}


def _verified(block: BlockEvent) -> list[int]:
    """The target's token at each position of a block it verified: the kept drafts, then its own token at the
    first rejection (a bonus token follows no draft, so it is no position a method guessed at; an answer cut
    before the target's token, by an end token or max new tokens, verified its kept drafts alone)."""
    truth = block.draft[:block.accepted] + ([] if block.target_token is None else [block.target_token])
    return truth[:len(block.draft)]


KINDS = ("both", "M", "T", "neither")  # who was right, at a position M and T both guessed at
Position = tuple[int, int, int]  # its index in the answer (the target's token there), M's guess, T's guess


def m_against_t(blocks: list[BlockEvent]) -> dict[str, list[Position]]:
    """At the verified positions where M and T both guessed, by who was right (`KINDS`): each position as the
    answer before it, the target's token, M's guess and T's."""
    split: dict[str, list[Position]] = {kind: [] for kind in KINDS}
    start = 0
    for block in blocks:
        m, t = block.drafts.get("M", []), block.drafts.get("T", [])
        for j, (truth, by_m, by_t) in enumerate(zip(_verified(block), m, t, strict=False)):
            right = (by_m == truth, by_t == truth)
            kind = {(True, True): "both", (True, False): "M", (False, True): "T"}.get(right, "neither")
            split[kind].append((start + j, by_m, by_t))
        start += len(block.emitted)
    return split


CAUSES = {"both": "the words so far gave the next token away, no picture needed",
          "M": "there the picture told M what T cannot know",
          "T": "there M's reading of the picture led it astray",
          "neither": "the target's own wording, or what the drafter was never taught"}
QUOTED = 2  # positions of a kind quoted, in the answer's words


def where_they_differed(blocks: list[BlockEvent], word: Words | None = None) -> str:
    """Each kind of position M and T both guessed at, with its cause (M sees the picture and T does not, so
    where only one was right, the picture made the difference) and, given `word`, a few of them quoted."""
    split = m_against_t(blocks)
    if not any(split.values()):
        return ""
    answer = [token for block in blocks for token in block.emitted]
    said = [f"{({'both': 'both were right', 'M': 'only M', 'T': 'only T'}.get(kind, kind))} at {len(split[kind])} "
            f"({CAUSES[kind]}{_quoted(word, answer, kind, split[kind])})" for kind in KINDS]
    return (f" Where both M and T guessed ({counted(sum(map(len, split.values())), 'position')}): "
            f"{'; '.join(said)}.")


def _quoted(word: Words | None, answer: list[int], kind: str, positions: list[Position]) -> str:
    """A few positions of a kind in the answer's words, the target's token in bold, the wrong guesses beside."""
    if word is None or not positions:
        return ""
    shown = []
    for index, by_m, by_t in positions[:QUOTED]:
        guessed = {"M": f" (T guessed {word(by_t)})", "T": f" (M guessed {word(by_m)})",
                   "neither": f" (M guessed {word(by_m)}, T {word(by_t)})"}.get(kind, "")
        shown.append(f"{word.at(answer, index)}{guessed}")
    more = f", and {len(positions) - QUOTED} more" if len(positions) > QUOTED else ""
    return f": {', '.join(shown)}{more}"


FEW = 5  # positions: a method that guessed at fewer (it rested), and at under a quarter of the most, is not compared


def who_led(blocks: list[BlockEvent], shared: list[str], pictures: bool, learned: bool,
            word: Words | None = None) -> str | None:
    """Which method's guesses the target agreed with most, by how much, and the likely cause, in words;
    None when no draft was verified. `shared`: methods drafted as one row (no picture); `learned`: the
    weights were learned (TABED), so they followed the leader; `word`: quote the words where they differed."""
    matched = {m: hits for m, hits in guesses_matched(blocks).items() if hits[1]}
    if not matched:
        return None
    rate = {m: hit / total for m, (hit, total) in matched.items()}
    most = max(total for _, total in matched.values())
    said = ", ".join(f"{m}'s at {hit} of {counted(total, 'position')}" + (" (it rested in the other blocks)"
                                                                        if total < most else "")
                     for m, (hit, total) in sorted(matched.items(), key=lambda item: -rate[item[0]]))
    text = f"The target agreed with the drafts' own guesses: {said}."
    if shared:
        return text + f" {one_row(shared)}, one guess, so nothing told them apart."
    compared = {m: r for m, r in rate.items() if matched[m][1] >= min(FEW, most / 4)}
    drafted = set(compared)  # compared on their drafts (the history may compare them all instead)
    if few := [m for m in rate if m not in compared]:
        text += (f" {' and '.join(few)} drafted at too few positions to compare: a method at weight 0 rests (its "
                 "row sits out the drafting and catches up later).")
        if (history := history_matches(blocks)) is not None and history[0] >= FEW:
            positions, alone = history
            text += (f" Over the weights' history instead ({counted(positions, 'position')}: those verified until a "
                     "resting row last caught up, its top-1 then filled in, as the stepper counts): "
                     + ", ".join(f"{m}'s top-1 matched at {int(n)}" for m, n in alone.items()) + ".")
            compared = {m: n / positions for m, n in alone.items()}
    text += _lead(compared, learned, where_weights_sat(blocks) if learned else "")
    if pictures and {"M", "T"} <= drafted:
        text += where_they_differed(blocks, word)
    if max(rate.values()) < 0.5:
        text += (" Every method missed at most positions: the target is saying what the drafter does not "
                 "know (a fact it was never taught, a made-up name), so most tokens are the target's own.")
    return text


def history_matches(blocks: list[BlockEvent]) -> tuple[int, dict[str, float]] | None:
    """The last w-grid choice's figures: the positions in the weights' history and, at them, how often each
    method's own top-1 was the target's (its weighting alone); None when no block's weights were so chosen."""
    for block in reversed(blocks):
        update = block.weight_update
        if not update or update.rule != "w-grid" or update.shared:
            continue
        if (alone := alone_matches(update, list(block.weights))) is not None:
            return update.positions, alone
    return None


def alone_matches(update: WeightUpdate, methods: list[str]) -> dict[str, float] | None:
    """From a w-grid choice's figures: how often each method's own top-1 matched the target's (the weighting
    all on it); None when the grid has no such weighting for some method."""
    alone = {m: next((c.matches for c in update.candidates if c.weights[k] == 1.0), None)
             for k, m in enumerate(methods)}
    return None if None in alone.values() else alone


LEAD = 0.1  # a method leads when its share of right guesses is ahead by this much or more


def _lead(rate: dict[str, float], learned: bool, sat: str) -> str:
    """The method that led by `LEAD` or more, or that none did and what the weights followed (and, `sat`,
    where they sat: a tie-break can still put all of the weight on one method, which the chart shows)."""
    if len(rate) < 2:
        return ""
    leader, behind = max(rate, key=rate.get), min(rate, key=rate.get)
    if rate[leader] - rate[behind] >= LEAD:
        return (f" {leader} led: its guesses matched at {rate[leader]:.0%} of the positions it guessed at, "
                f"{behind}'s at {rate[behind]:.0%}" + (", and the weights followed it." if learned else "."))
    text = f" {'Neither method' if len(rate) == 2 else 'No method'} led by much"
    if not learned:
        return text + "."
    return (text + ", so the matches did not choose the weights: the rule's tie-break did (with w-grid: of the "
            "weightings whose top-1 matched the target's most often, the one whose probabilities came closest to "
            f"the target's wins){sat}; its figures are in the stepper.")


def where_weights_sat(blocks: list[BlockEvent]) -> str:
    """Where the weights sat over the answer's blocks, as the chart draws them: all on one method in most
    blocks, or each method's mean weight."""
    if not blocks or len(blocks[0].weights) < 2:
        return ""
    methods = list(blocks[0].weights)
    whole = {m: sum(block.weights[m] >= 0.999 for block in blocks) for m in methods}  # every block weighs them all
    top = max(whole, key=whole.get)
    if 2 * whole[top] > len(blocks):
        others = " and ".join(m for m in methods if m != top)
        return (f": it gave {top} all of the weight in {whole[top]} of {counted(len(blocks), 'block')}, where "
                f"{others} had none")
    mean = " · ".join(f"{m} {sum(block.weights[m] for block in blocks) / len(blocks):.2f}" for m in methods)
    return f": on average {mean}"


COMMON = set("""a an the and or but of to in on at by for from with about into is are was were be been am do does did
can could would will should may might what which who whom whose how why where when there here this that these those
it its it's i me my you your we our they them their he she his her tell say show give describe explain please
picture pictures image images photo photos detail details one two three many much any some see shown look""".split())


def unasked(question: str, answer: str) -> list[str]:
    """The words of a question (beside the commonest, and the picture's own names) when the answer holds none
    of them, which says the answer may be about something else; [] when it holds one, or the question has none."""
    def words(text: str) -> set[str]:
        return {w.removesuffix("s") for w in re.findall(r"[a-z']+", text.lower()) if w not in COMMON and len(w) > 2}
    asked = words(question)
    return [] if asked & words(answer) else sorted(asked)


VERIFY_DEAR = 1.25  # a verify this many plain steps or more is worth a word: it checked long blocks


ABOUT_EVEN = 0.1  # a speedup this close to 1.00× is about as fast as plain decoding, neither fast nor slow


def fast_or_slow(tokens_per_pass: float, cost: float, measured: float, verify: float = 1.0,
                 checked: float = 0.0, checking: float | None = None) -> str:
    """Why an answer was fast or slow, in one plain sentence: a target pass's tokens against what a whole pass
    cost (its verify, its drafting and the rest), in plain decoding's steps (`engine/speed.py`); and why a
    verify can come out cheaper than the one step it replaces, or dearer (`checked`: drafts per pass). The
    drafts are blamed for a slow answer only where its tokens per pass are under what its verify and drafting
    cost (`checking`), not where the rest of a pass (the weights, bookkeeping, the machine) made it slow."""
    whole = f"a whole pass (verify, drafting and the rest) cost {cost:.2f} plain steps"
    if measured >= 1 + ABOUT_EVEN:
        text = (f"Fast because each target pass produced {tokens_per_pass:.2f} tokens where a plain step makes one, "
                f"and {whole}.")
    elif measured > 1 - ABOUT_EVEN:
        predicted = tokens_per_pass / cost if cost > 0 else 0.0
        took = (": nearly all that it gained" if abs(predicted - 1) < ABOUT_EVEN else
                f"; these predict {predicted:.2f}×, the clock gave {measured:.2f}×")
        text = (f"About as fast as plain decoding ({measured:.2f}×): each target pass produced {tokens_per_pass:.2f} "
                f"tokens where a plain step makes one, but {whole}{took}.")
    elif checking is not None and tokens_per_pass > checking:
        text = (f"Slower than plain decoding, though each target pass produced {tokens_per_pass:.2f} tokens where "
                f"its verify and drafting cost {checking:.2f} plain steps: the rest of a pass ({cost - checking:.2f} "
                "more) made it slow, not the drafts.")
    else:
        text = (f"Slower than plain decoding: each target pass produced only {tokens_per_pass:.2f} tokens, and "
                f"{whole}: the drafts missed too often to pay for themselves.")
    if round(verify, 2) < 1.0:
        text += (f" A verify came out under one plain step ({verify:.2f}): checking a few tokens costs the target "
                 "about what making one does, and the two are timed in different runs, so their noise can tip it.")
    elif verify >= VERIFY_DEAR and checked:
        text += (f" A verify cost {verify:.2f} plain steps, not one: the target reads every draft of a block in its "
                 f"pass ({checked:.1f} on average here), and on this machine a pass over more tokens takes longer.")
    return text
