"""Token ids as the words a student reads: the text a token adds to an answer (its spaces right for every
tokenizer family), a token on its own as a table cell shows it, and quoted with its probability."""

from __future__ import annotations

import html
import re

from transformers import PreTrainedTokenizerBase

CONTEXT = 8  # tokens of left context used to decode one token's text (keeps leading spaces right)


def token_text(tokenizer: PreTrainedTokenizerBase, previous: list[int], token: int) -> str:
    """The text `token` adds after `previous`: the difference of two decodes, so that every
    tokenizer family (SentencePiece, byte-level BPE) gets its spaces right."""
    context = previous[-CONTEXT:]
    before = tokenizer.decode(context, skip_special_tokens=True)
    after = tokenizer.decode(context + [token], skip_special_tokens=True)
    if after.startswith(before):
        return after[len(before):]
    return tokenizer.decode([token], skip_special_tokens=True)


WHITESPACE = {" ": "\u2423", "\n": "\u21b5", "\t": "\u21e5"}  # ␣ ↵ ⇥: a blank token still shows what it is
END = "\u23ce"  # ⏎: the end of the answer
PIECE_SPACES = {"\u2581": " ", "\u0120": " ", "\u010a": "\n"}  # SentencePiece's and byte-level BPE's marks


def token_word(tokenizer: PreTrainedTokenizerBase, token: int) -> str:
    """A token on its own, as a table cell or a chart label shows it: ⏎ for the end of the answer (and
    any other special token with no text), a blank one's spaces and newlines drawn (a lone space is not
    the end of the answer)."""
    text = token_text(tokenizer, [], token)
    if text.strip():
        return text.strip()
    piece = tokenizer.convert_ids_to_tokens(token) or ""
    if not text and (token in tokenizer.all_special_ids and piece.strip() or not piece):
        return END
    raw = text or "".join(PIECE_SPACES.get(ch, ch) for ch in piece)
    return "".join(WHITESPACE.get(ch, ch) for ch in raw) or END


def one_row(shared: list[str]) -> str:
    """The one fact of methods drafted as one row, as every part of the page says it (then its consequence):
    "M and T read the same text (no picture): one row"."""
    return f"{' and '.join(shared)} read the same text (no picture): one row"


def counted(count: int, noun: str) -> str:
    """A count with its noun, singular or plural: "1 position", "3 positions"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


SHOWN = 3  # the top tokens of a distribution a reason or a step shows


AT_WORDS = 4  # words of the answer before a token quoted where it stands
def _escaped(text: str) -> str:
    """Text as HTML shows it literally."""
    return html.escape(text, quote=False)


class Words:
    """Token ids as the words a student reads, quoted."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, markup: bool = False) -> None:
        self.tokenizer = tokenizer
        self.markup = markup  # the words go into HTML as they are (escaped here), not into text escaped later

    def __call__(self, token: int) -> str:
        word = token_word(self.tokenizer, token)
        return f"'{_escaped(word) if self.markup else word}'"

    def at(self, answer: list[int], index: int) -> str:
        """The answer's token at `index` where it stands, as HTML: a few words before it, the token in bold, the
        rest of its word after ("…three shapes <b>again</b>st"), a space between them where the answer has one."""
        context, token = answer[max(0, index - CONTEXT):index], answer[index]
        before, upto, after = (self.tokenizer.decode(ids, skip_special_tokens=True) for ids in
                               (context, context + [token], context + answer[index:index + CONTEXT]))
        text = upto[len(before):] if upto.startswith(before) else token_text(self.tokenizer, [], token)
        if not text.strip():  # a blank token, or the end: drawn as the tables draw it
            return f"“…<b>{_escaped(token_word(self.tokenizer, token))}</b>”"
        words = before.split(" ")
        lead = ("…" if index > len(context) or len(words) > AT_WORDS else "") + " ".join(words[-AT_WORDS:])
        space = " " if text[0].isspace() or before[-1:].isspace() else ""
        rest = re.match(r"\S*", after[len(upto):]).group() if after.startswith(upto) and not text[-1].isspace() else ""
        return f"“{_escaped(lead.rstrip())}{space}<b>{_escaped(text.strip())}</b>{_escaped(rest)}”"

    def top(self, pairs: list[list]) -> str:
        return " · ".join(f"{self(token)} {prob:.2f}" for token, prob in pairs[:SHOWN])


def below(low: float, high: float) -> tuple[str, str]:
    """Two numbers shown with as few decimals (two to four) as tell them apart, so that a comparison the
    page states is one a reader can see: 0.198 < 0.200, never "0.20 < 0.20"."""
    for digits in (2, 3, 4):
        shown = f"{low:.{digits}f}", f"{high:.{digits}f}"
        if shown[0] != shown[1]:
            return shown
    return shown
