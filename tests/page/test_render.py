"""What the page draws from the engine's events: token labels, the block table's target column."""

from tabed.engine.config import GenerationConfig
from tabed.engine.loop import collect, speculative_generate
from tabed.engine.spec import parse_spec
from tabed.models.chat import Turn
from tabed.page.render import END, block_columns, block_rows, token_word


def test_blank_tokens_are_drawn_and_only_the_end_is_the_end(teaching_pair):
    tokenizer = teaching_pair.tokenizer
    space = tokenizer.convert_tokens_to_ids("\u2581")  # the lone space of the teaching tokenizer
    newline = tokenizer.convert_tokens_to_ids("\n")
    assert token_word(tokenizer, tokenizer.eos_token_id) == END
    assert token_word(tokenizer, space) == "\u2423" and token_word(tokenizer, newline) == "\u21b5"
    assert token_word(tokenizer, tokenizer.convert_tokens_to_ids("\u2581red")) == "red"


def test_the_block_table_shows_no_target_token_after_the_end_of_the_answer(teaching_pair):
    """A text question the teaching pair drafts whole: its one block ends on the end token, accepted."""
    result = collect(speculative_generate(teaching_pair, [Turn("What is the capital of Japan?")],
                                          parse_spec("tabed-MT"), GenerationConfig()))
    block = result.blocks[-1]
    assert block.accepted == len(block.draft) == len(block.emitted) and not block.bonus
    row = block_rows(teaching_pair.tokenizer, result.blocks, ["M", "T"])[-1]
    assert row[block_columns(["M", "T"]).index("target token")] == "(the answer ended)"
