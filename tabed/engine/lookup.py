"""`N`: a drafting method with no model. It looks the last few tokens up in the prompt and the answer so
far and proposes what followed them there (prompt lookup, as in Song et al.'s model-free speculative
sampling), so it costs no forward. It enters the ensemble as one more distribution: a point mass on the
looked-up token, smoothed so that a wrong guess is not infinitely unlikely; where nothing matches it has
no opinion and takes the other methods' mixture, so that it neither helps nor hurts there.
"""

from __future__ import annotations

import torch

MAX_NGRAM = 3  # the longest suffix looked up; shorter ones are tried when it does not occur
SMOOTHING = 0.1  # probability spread over the vocabulary around the looked-up token


def ngram_continuation(context: list[int], max_n: int = MAX_NGRAM) -> int | None:
    """The token that followed the latest earlier occurrence of the context's last n tokens, for the
    longest n (up to `max_n`) that occurred; None when even the last token never occurred before."""
    for n in range(min(max_n, len(context) - 1), 0, -1):
        suffix = context[-n:]
        for start in range(len(context) - n - 1, -1, -1):
            if context[start:start + n] == suffix:
                return context[start + n]
    return None


class NgramLookup:
    """The N row of one answer: the prompt's tokens and the committed answer (the decoding loop's own list,
    read as it grows), looked up at every draft."""

    def __init__(self, prompt_ids: list[int], answer: list[int], max_n: int = MAX_NGRAM,
                 smoothing: float = SMOOTHING) -> None:
        self.prompt_ids = list(prompt_ids)
        self.answer = answer
        self.max_n, self.smoothing = max_n, smoothing

    def distribution(self, drafted: list[int], others: torch.Tensor) -> torch.Tensor:
        """N's next-token distribution after the block's drafts so far; `others` is the other methods'
        mixture, which N takes when it has no match."""
        guess = ngram_continuation(self.prompt_ids + self.answer + drafted, self.max_n)
        if guess is None or guess >= others.shape[-1]:
            return others
        point = torch.full_like(others, self.smoothing / others.shape[-1])
        point[guess] += 1.0 - self.smoothing
        return point
