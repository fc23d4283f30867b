"""What the page draws from the engine's events: token labels, the block table's target column, and
every figure equal to the engine's own (the tokens' colours, the weights, the trees, each method's row)."""

import html
import math
import re
from dataclasses import replace
from html.parser import HTMLParser

import pytest

from conftest import a_word_split_by_a_rejection, ending_on_a_draft, hand_block
from tabed.engine.config import GenerationConfig
from tabed.engine.events import Metrics
from tabed.engine.loop import collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.engine.speed import TIMED_TOKENS
from tabed.models.chat import Turn
from tabed.page.render import (
    BAND,
    END,
    KEPT_AT,
    KINDS,
    RESTED,
    RIGHT_AT,
    TokenStream,
    block_columns,
    block_rows,
    block_step,
    counted,
    draft_length,
    method_groups,
    metrics_rows,
    node_depths,
    token_word,
    too_short_to_time,
    trees_figure,
    weights_figure,
)


def test_blank_tokens_are_drawn_and_only_the_end_is_the_end(teaching_pair):
    tokenizer = teaching_pair.tokenizer
    space = tokenizer.convert_tokens_to_ids("\u2581")  # the lone space of the teaching tokenizer
    newline = tokenizer.convert_tokens_to_ids("\n")
    assert token_word(tokenizer, tokenizer.eos_token_id) == END
    assert token_word(tokenizer, space) == "\u2423" and token_word(tokenizer, newline) == "\u21b5"
    assert token_word(tokenizer, tokenizer.convert_tokens_to_ids("\u2581red")) == "red"


def test_the_block_table_shows_no_target_token_after_the_end_of_the_answer(twin_pair, image):
    result = ending_on_a_draft(twin_pair, image, "M")
    row = block_rows(twin_pair.tokenizer, result.blocks, method_groups(["M"]))[-1]
    assert row[block_columns(method_groups(["M"])).index("target's token")] == "(the answer ended)"
    assert result.blocks[-1].target_token is None and result.blocks[-1].target_token_prob is None


def _tiny_run(pair, image, **config):
    settings = {"max_new_tokens": 30, "gamma": 4} | config
    return collect(speculative_generate(pair, [Turn("w1 w2 w3", [image])], parse_spec("tabed-MTCP"),
                                        GenerationConfig(**settings)))


def test_the_block_table_says_what_the_targets_token_is(pair, image):
    """Each block's target token in words, bonus or corrected, as the stepper and the legend say it."""
    blocks = _tiny_run(pair, image).blocks
    groups = method_groups(["M", "T", "C", "P"])
    said = [row[block_columns(groups).index("target's token")].split(": ")[0]
            for row in block_rows(pair.tokenizer, blocks, groups)]
    assert said == ["bonus" if b.bonus else "corrected" for b in blocks] and "corrected" in said


def test_the_weights_chart_counts_whole_blocks_and_shows_every_method(pair, image):
    """One block used to span -0.4 to 0.4 on the x-axis, and T's dot hid M's at the same weight."""
    blocks = _tiny_run(pair, image).blocks
    figure = weights_figure(blocks, method_groups(["M", "T", "C", "P"]))
    assert tuple(figure.layout.xaxis.range) == (-0.5, blocks[-1].index + 0.5)
    assert figure.layout.xaxis.dtick == block_step(len(blocks)) and figure.layout.xaxis.tickformat == "d"
    assert [block_step(n) for n in (1, 8, 9, 16, 17, 40, 41, 400)] == [1, 1, 2, 2, 5, 5, 10, 50]  # ≤ 8 labels
    assert list(figure.data[1].x) == [block.index for block in blocks]  # a point per block
    sizes = [trace.marker.size for trace in figure.data if trace.name.startswith("weight of")]
    assert sizes[0] > sizes[1]  # a later method's dot sits inside an earlier one's


def test_the_trees_chart_holds_every_node(pair, image):
    blocks = _tiny_run(pair, image, tree_width=3, gamma=6, adaptive=False).blocks
    figure = trees_figure(pair.tokenizer, blocks, 3)
    xs = [x for trace in figure.data if trace.mode and "markers" in trace.mode for x in trace.x if x is not None]
    ys = [y for trace in figure.data if trace.mode and "markers" in trace.mode for y in trace.y if y is not None]
    (x_low, x_high), (y_low, y_high) = figure.layout.xaxis.range, figure.layout.yaxis.range
    assert xs and x_low < min(xs) and max(xs) < x_high and y_low < min(ys) and max(ys) + 0.3 < y_high


def test_a_side_with_no_numbers_says_why():
    assert {row[2] for row in metrics_rows(None, None)} - {"—"} == {"…"}  # still to come
    assert {row[2] for row in metrics_rows(None, None, missing="stopped")} - {"—"} == {"stopped"}


def test_each_token_is_coloured_by_what_the_target_did_with_it(pair, image):
    """Drafts before the first rejection are accepted, the first rejected one rejected, those after it
    discarded (never tested); the target's own token is a bonus after a fully accepted block and a correction
    otherwise: worked out from each block's counts."""
    result = _tiny_run(pair, image, adaptive=False)  # 4 drafts a block: some after a rejected one
    stream = TokenStream(pair.tokenizer)
    expected = []
    for block in result.blocks:
        stream.block(block)
        kept = len(block.emitted)
        expected += ["accepted" if j < block.accepted else "rejected" if j == block.accepted else "discarded"
                     for j in range(len(block.draft)) if j >= block.accepted or j < kept]
        if kept > block.accepted:
            expected.append("bonus" if block.accepted == len(block.draft) else "corrected")
    shown = re.findall(r'class="tk tk-(\w+)"', stream.html)
    assert shown == expected and stream.ids == result.token_ids
    assert {"accepted", "rejected", "discarded", "bonus", "corrected"} <= set(shown)  # every kind is exercised


def test_the_weights_chart_draws_each_methods_own_weights_and_each_blocks_accepted_drafts(pair, image):
    result = _tiny_run(pair, image)
    methods = ["M", "T", "C", "P"]
    figure = weights_figure(result.blocks, method_groups(methods))
    bars = [trace for trace in figure.data if trace.type == "bar"]
    assert list(bars[0].y) == [b.accepted for b in result.blocks]
    most = max(b.accepted for b in result.blocks)  # the bars' axis fits them (γ = 20 left them flat)
    assert most < figure.layout.yaxis2.range[1] <= most + 2
    lines = {trace.name: list(trace.y) for trace in figure.data if trace.type == "scatter" and trace.name != RESTED}
    assert lines == {f"weight of {m}": [b.weights[m] for b in result.blocks] for m in methods}
    assert len({tuple(y) for y in lines.values()}) > 1  # the methods' weights differ: a swap would show


def test_the_trees_chart_draws_every_node_of_every_block_where_it_belongs(pair, image):
    result = _tiny_run(pair, image, tree_width=2)
    figure = trees_figure(pair.tokenizer, result.blocks, 2)
    nodes = [t for t in figure.data if t.name in ("accepted node", "rejected node")]
    placed = [(x, y) for t in nodes for x, y in zip(t.x, t.y, strict=True)]
    assert len(set(placed)) == len(placed) == sum(len(b.tree) for b in result.blocks)  # no node hides another
    for accepted in (True, False):
        trace = next(t for t in figure.data if t.name == ("accepted node" if accepted else "rejected node"))
        want = sorted((d, b.index) for b in result.blocks if b.tree
                      for d, node in zip(node_depths(b.tree), b.tree, strict=True) if node.accepted == accepted)
        # a block's nodes sit in its band, from y = -index down to -index - BAND: (depth, block) of each
        got = sorted((x, math.floor(-y + 1e-9)) for x, y in zip(trace.x, trace.y, strict=True))
        assert got == want and all(-y % 1 <= BAND + 1e-9 for y in trace.y)
    assert sum(len(b.tree) for b in result.blocks) > sum(len(b.draft) for b in result.blocks)  # trees branched
    kept = next(t for t in figure.data if t.name == "accepted node")
    assert all(y == round(y) for y in kept.y)  # the kept path runs straight along its block's row, never slants
    assert set(kept.textposition) == {"top center", "bottom center"}  # labels by turns above and below the path


def test_a_tree_nodes_hover_says_whether_the_target_kept_it(pair, image):
    result = _tiny_run(pair, image, tree_width=2)
    figure = trees_figure(pair.tokenizer, result.blocks, 2)
    for name, said in (("accepted node", "accepted"), ("rejected node", "rejected")):
        hovers = next(t for t in figure.data if t.name == name).hovertext
        assert hovers and all(hover.endswith(f" · {said}") for hover in hovers)


def test_each_methods_row_shows_that_methods_own_figure():
    metrics = Metrics(new_tokens=10, prefill_s=0.1, decode_s=0.5, walltime_s=0.6, tokens_per_s=16.7,
                      target_forwards=4, block_efficiency=2.5,
                      method_block_efficiency={"M": 2.25, "T": 1.5, "C": 3.75})
    rows = {row[0]: row[1] for row in metrics_rows(metrics, None)}
    for method, value in metrics.method_block_efficiency.items():
        assert rows[f"block efficiency (at least) if {method} alone had drafted"] == f"{value:.2f}"


def test_the_metrics_say_how_the_drafts_fared_block_by_block_and_position_by_position():
    metrics = Metrics(new_tokens=10, prefill_s=0.1, decode_s=0.5, walltime_s=0.6, tokens_per_s=16.7,
                      target_forwards=4, block_efficiency=2.5, accepted_histogram=[1, 0, 2, 1], mean_accepted=1.75,
                      acceptance_by_position=[{"rate": 0.75, "blocks": 4}] + [{"rate": 0.5, "blocks": 2}] * 9,
                      method_match_by_position={"M": [{"rate": 1.0, "blocks": 3}, {"rate": 0.25, "blocks": 4}],
                                                "T": []})
    rows = {row[0]: row[1] for row in metrics_rows(metrics, None)}
    assert rows["drafts kept a block (mean)"] == "1.75"
    assert rows["blocks by drafts kept (drafts kept: blocks)"] == "0: 1 · 2: 2 · 3: 1"  # none kept 1
    assert rows[KEPT_AT] == "1: 75% · " + " · ".join(
        f"{i}: 50%" for i in range(2, 9)) + " · positions 9–10: in the JSON download"  # the first eight, and where
    nine = replace(metrics, acceptance_by_position=metrics.acceptance_by_position[:9])
    assert {row[0]: row[1] for row in metrics_rows(nine, None)}[KEPT_AT].endswith(" · position 9: in the JSON download")
    assert rows[f"M{RIGHT_AT}"] == "1: 100% · 2: 25%"
    assert f"T{RIGHT_AT}" not in rows  # T rested through every block
    assert "drafts kept a block (mean)" not in {row[0] for row in metrics_rows(replace(metrics, accepted_histogram=[]),
                                                                                 None)}


def test_the_speedup_is_plain_decodings_time_over_ours():
    def timed(decode_s):
        return Metrics(new_tokens=10, prefill_s=0.1, decode_s=decode_s, walltime_s=decode_s + 0.1, tokens_per_s=1.0,
                       target_forwards=4, block_efficiency=2.5)
    rows = {row[0]: row[1:] for row in metrics_rows(timed(0.5), timed(1.5))}
    assert rows["speedup (decode time)"] == ["3.00×", "1.00×"]


def test_an_answer_of_timed_tokens_shows_its_speedup_and_one_token_fewer_is_too_short():
    """Plain decoding's answer of TIMED_TOKENS (8) tokens is long enough for a speedup; one of 7 is not."""
    def timed(new_tokens, decode_s):
        return Metrics(new_tokens=new_tokens, prefill_s=0.1, decode_s=decode_s, walltime_s=decode_s + 0.1,
                       tokens_per_s=1.0, target_forwards=4, block_efficiency=2.0)
    assert TIMED_TOKENS == 8
    assert not too_short_to_time(timed(8, 1.0)) and too_short_to_time(timed(7, 1.0))
    rows = {row[0]: row[1] for row in metrics_rows(timed(8, 0.5), timed(8, 1.0))}
    assert rows["speedup (decode time)"] == "2.00×"
    rows = {row[0]: row[1] for row in metrics_rows(timed(7, 0.5), timed(7, 1.0))}
    assert rows["speedup (decode time)"] == "too short to time (under 8 tokens)"


def test_a_method_run_alone_shows_its_block_efficiency_and_its_speedup():
    """Its row reads as the ensemble's: 12 tokens in 4 forwards is 3.00 a forward, beside its speedup over
    plain decoding as the view gave it (a stopped run says so; none given, no speedup)."""
    from tabed.engine.events import GenerationResult
    from tabed.page.render import alone_rows

    def metrics(decode_s: float, tokens: int = 12) -> Metrics:
        return Metrics(new_tokens=tokens, prefill_s=0.1, decode_s=decode_s, walltime_s=decode_s + 0.1,
                       tokens_per_s=1.0, target_forwards=4, block_efficiency=tokens / 4)

    alone = {"M": GenerationResult("speculative", "M", [], "", metrics(0.5)),
             "T": GenerationResult("speculative", "T", [], "", metrics(0.5), stopped=True)}
    rows = alone_rows(alone, {"M": 4.0, "T": 9.0})
    assert rows == [["M alone, really run: block efficiency · speedup (decode time)", "3.00 · 4.00× plain decoding",
                     "—"], ["T alone, really run", "stopped", "—"]]
    assert alone_rows(alone, {})[0][1] == "3.00"


def test_counts_take_their_plural_and_a_stated_comparison_is_visible():
    """'1 position', never '1 positions'; an unsure block's survival below its minimum never reads
    '0.20 < 0.20': as many decimals as tell the two apart."""
    from tabed.engine.events import BlockEvent, StopReason

    assert [counted(n, "position") for n in (0, 1, 2)] == ["0 positions", "1 position", "2 positions"]

    def unsure(survival: float, threshold: float) -> str:
        block = BlockEvent(index=1, weights={"M": 1.0}, draft=[5, 6], drafts={}, accepted=1, target_token=7,
                           bonus=False, emitted=[5, 7], draft_probs=[0.9, 0.5], target_probs=[1.0, 0.0],
                           target_token_prob=1.0, method_accepted={}, stop=StopReason.UNSURE, survival=survival,
                           threshold=threshold, draft_s=0.0, verify_s=0.0, weights_s=0.0, elapsed_s=0.0)
        return draft_length(block)

    assert unsure(0.2049, 0.21) == "2, unsure: 0.20 < 0.21"
    assert unsure(0.198, 0.2) == "2, unsure: 0.198 < 0.200"
    assert unsure(0.1996, 0.2) == "2, unsure: 0.1996 < 0.2000"


def test_rejected_drafts_keep_the_spaces_they_were_drafted_with(tokenizer):
    """Each rejected draft is written after the drafts before it, as it was drafted: at the start of an answer
    'w1 w2 w3' struck through, never 'w1w2w3'; the target's own token follows the kept answer."""
    from tabed.engine.events import BlockEvent, StopReason

    ids = tokenizer.convert_tokens_to_ids(["w1", "w2", "w3", "w4"])
    block = BlockEvent(index=0, weights={"M": 1.0}, draft=ids[:3], drafts={}, accepted=0, target_token=ids[3],
                       bonus=False, emitted=[ids[3]], draft_probs=[0.9] * 3, target_probs=[0.0] * 3,
                       target_token_prob=1.0, method_accepted={}, stop=StopReason.FIXED, survival=None,
                       threshold=None, draft_s=0.0, verify_s=0.0, weights_s=0.0, elapsed_s=0.0)
    stream = TokenStream(tokenizer)
    stream.block(block)
    struck = re.findall(r'tk-(?:rejected|discarded)"[^>]*>([^<]*)<', stream.html)
    assert "".join(struck) == "w1 w2 w3"
    assert re.findall(r'tk-corrected"[^>]*>([^<]*)<', stream.html) == ["w4"]


def _unbreakable_words(page: str) -> list[str]:
    """The kept text of each `.tk-word` span of an answer's HTML."""
    words: list[str] = []

    class Reader(HTMLParser):
        open: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.open.append(dict(attrs).get("class", ""))
            if self.open[-1] == "tk-word":
                words.append("")

        def handle_endtag(self, tag):
            self.open.pop()

        def handle_data(self, data):
            if "tk-word" in self.open and not {"tk tk-rejected", "tk tk-discarded"} & set(self.open):
                words[-1] += data
    Reader().feed(page)
    return words


def test_a_word_with_struck_drafts_in_it_is_kept_on_one_line_and_each_token_names_its_block():
    """A browser may break a line at the struck drafts' box even inside a word ("Add / itionally" on a phone):
    the word it stands in, from its blank to the next, is one unbreakable span; the words around it are not.
    Each token of a block carries the block's number, for a tap to step to it."""
    tokenizer, blocks = a_word_split_by_a_rejection()
    stream = TokenStream(tokenizer)
    for block in blocks:
        stream.block(block)
    assert _unbreakable_words(stream.html) == ["Additionally,"], stream.html
    kept = r'class="tk tk-(?:accepted|corrected|bonus)"[^>]*>([^<]*)<'
    assert html.unescape("".join(re.findall(kept, stream.html))) == "Additionally, the picture w1"
    assert re.findall(r'tk-(\w+)"[^>]*data-block="(\d)"', stream.html) == [
        ("accepted", "0"), ("rejected", "0"), ("corrected", "0"), ("accepted", "1"), ("bonus", "1"),
        ("accepted", "2"), ("accepted", "2"), ("bonus", "2")]


@pytest.mark.parametrize("sampling", [False, True], ids=["greedy", "sampling"])
def test_a_tokens_detail_says_why_it_was_kept_rejected_or_never_tested(pair, image, sampling):
    """A tested draft's detail gives the target's own top-3, the draft's probability under the target and
    under the drafters' mix, and the test it met (greedy: the target's top-1; sampling: u against p/q, with
    the numbers); a draft after the block's first rejection is said discarded, never tested."""
    config = {"temperature": 1.0, "seed": 2} if sampling else {}
    result = _tiny_run(pair, image, inspect=True, adaptive=False, **config)
    stream = TokenStream(pair.tokenizer)
    for block in result.blocks:
        stream.block(block)
    spans = re.findall(r'class="tk tk-(\w+)"[^>]*title="([^"]*)"', stream.html)
    details = {kind: [html.unescape(title) for k, title in spans if k == kind] for kind in KINDS}
    assert details["rejected"] and details["discarded"] and details["accepted"]
    test = "u = " if sampling else "the target's top-1 is "
    for title in details["rejected"] + details["accepted"]:
        assert "the target's top-3: '" in title and test in title and "target p=" in title and "mix q=" in title
    assert all(": rejected" in title or "rejected" in title.split(" · ")[3] for title in details["rejected"])
    assert all("discarded, never tested" in title and "top-3" not in title for title in details["discarded"])



def _titles(stream) -> list[tuple[str, str]]:
    return [(kind, html.unescape(title)) for kind, title in re.findall(r'class="tk tk-(\w+)"[^>]*title="([^"]*)"',
                                                                         stream.html)]


def test_each_tokens_title_says_what_it_is(pair):
    """Plain tokens count from 1; the target's token says whether it followed every draft or replaced a rejected
    one; every struck draft, rejected or discarded, is struck through and counted."""
    from tabed.engine.events import TokenEvent

    ids = pair.tokenizer.convert_tokens_to_ids(["w1", "w2", "w3", "w4", "w5", "w6"])
    plain = TokenStream(pair.tokenizer)
    plain.token(TokenEvent(0, ids[0], 0.002, 0.002))
    plain.token(TokenEvent(4, ids[1], 0.001, 0.003))
    assert [title.split(" · ")[0] for _, title in _titles(plain)] == ["token 1", "token 5"]
    stream = TokenStream(pair.tokenizer)
    stream.block(hand_block(ids[:2], 2, ids[2]))
    stream.block(hand_block(ids[3:6], 0, ids[0]))
    titles = _titles(stream)
    assert titles[2][0] == "bonus" and titles[2][1].endswith("all drafts accepted")
    assert titles[-1][0] == "corrected" and titles[-1][1].endswith("replaces the first rejected draft")
    assert stream.rejected == 3
    assert re.findall(r'class="tk tk-(?:rejected|discarded)" style="[^"]*line-through', stream.html).__len__() == 3


def test_the_block_tables_draft_length_says_how_many_and_why_only_when_it_stopped_early():
    from tabed.engine.events import TreeNode

    assert draft_length(hand_block([1, 2, 3], 1, 4)) == "3"
    assert draft_length(hand_block([1, 2, 3], 1, 4, stop="cap")) == "3, its cap"
    tree = [TreeNode(1, -1, "M", True, 0.5, 0.5), TreeNode(2, -1, "T", False, 0.5, 0.5),
            TreeNode(3, 0, "MT", True, 0.5, 0.5), TreeNode(5, 2, "", False, 0.5, 0.5)]
    assert draft_length(hand_block([1, 3], 2, 4, tree=tree, stop="nodes")) == "3 deep, 4 nodes, the tree's node budget"


def test_the_trees_chart_hovers_the_ensembles_probability_and_names_its_proposers(pair):
    from tabed.engine.events import TreeNode

    tree = [TreeNode(5, -1, "MT", True, 0.61, 0.07), TreeNode(6, -1, "M", False, 0.22, 0.93),
            TreeNode(7, 0, "", True, 0.44, 0.18)]
    figure = trees_figure(pair.tokenizer, [hand_block([5, 7], 2, 8, tree=tree)], 2)
    hovers = [h for t in figure.data if t.name in ("accepted node", "rejected node") for h in t.hovertext]
    assert sorted(re.search(r"ensemble p=([\d.]+)", h)[1] for h in hovers) == ["0.22", "0.44", "0.61"]
    assert {t.name for t in figure.data if t.x == (None,)} == {"several methods", "proposed by M", "ensemble only"}
