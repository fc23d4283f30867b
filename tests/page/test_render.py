"""What the page draws from the engine's events: token labels, the block table's target column."""

from conftest import ending_on_a_draft
from tabed.engine.config import GenerationConfig
from tabed.engine.loop import collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.models.chat import Turn
from tabed.page.render import END, block_columns, block_rows, metrics_rows, token_word, trees_figure, weights_figure


def test_blank_tokens_are_drawn_and_only_the_end_is_the_end(teaching_pair):
    tokenizer = teaching_pair.tokenizer
    space = tokenizer.convert_tokens_to_ids("\u2581")  # the lone space of the teaching tokenizer
    newline = tokenizer.convert_tokens_to_ids("\n")
    assert token_word(tokenizer, tokenizer.eos_token_id) == END
    assert token_word(tokenizer, space) == "\u2423" and token_word(tokenizer, newline) == "\u21b5"
    assert token_word(tokenizer, tokenizer.convert_tokens_to_ids("\u2581red")) == "red"


def test_the_block_table_shows_no_target_token_after_the_end_of_the_answer(twin_pair, image):
    result = ending_on_a_draft(twin_pair, image, "M")
    row = block_rows(twin_pair.tokenizer, result.blocks, ["M"])[-1]
    assert row[block_columns(["M"]).index("target token")] == "(the answer ended)"


def _blocks(teaching_pair, prompt: str = "What is the capital of Japan?", **config):
    return collect(speculative_generate(teaching_pair, [Turn(prompt)], parse_spec("tabed-MT"),
                                        GenerationConfig(**config))).blocks


def test_the_weights_chart_counts_whole_blocks_and_shows_every_method(teaching_pair):
    """One block used to span -0.4 to 0.4 on the x-axis, and T's dot hid M's at the same weight."""
    blocks = _blocks(teaching_pair)
    figure = weights_figure(blocks, ["M", "T"], 20)
    assert figure.layout.xaxis.dtick == 1 and tuple(figure.layout.xaxis.range) == (-0.5, blocks[-1].index + 0.5)
    assert list(figure.data[1].x) == [block.index for block in blocks]  # a point per block
    sizes = [trace.marker.size for trace in figure.data if trace.name.startswith("weight of")]
    assert sizes[0] > sizes[1]  # a later method's dot sits inside an earlier one's


def test_the_trees_chart_holds_every_node(teaching_pair):
    blocks = _blocks(teaching_pair, "Continue the list: Monday, Tuesday, Wednesday.", tree_width=3, gamma=6,
                     adaptive=False)
    figure = trees_figure(teaching_pair.tokenizer, blocks, 3)
    xs = [x for trace in figure.data if trace.mode and "markers" in trace.mode for x in trace.x if x is not None]
    ys = [y for trace in figure.data if trace.mode and "markers" in trace.mode for y in trace.y if y is not None]
    (x_low, x_high), (y_low, y_high) = figure.layout.xaxis.range, figure.layout.yaxis.range
    assert xs and x_low < min(xs) and max(xs) < x_high and y_low < min(ys) and max(ys) + 0.3 < y_high


def test_a_side_with_no_numbers_says_why():
    assert {row[2] for row in metrics_rows(None, None)} - {"—"} == {"…"}  # still to come
    assert {row[2] for row in metrics_rows(None, None, missing="stopped")} - {"—"} == {"stopped"}
