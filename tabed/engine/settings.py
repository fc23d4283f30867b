"""A run's settings in one place: the drafting spec and the decoding config.

Users write them three ways, each read where it is written: the CLI a spec and a draft length as text
(`Settings.parse`, here), the page ticked methods, an ensemble kind and the controls' values
(`page/controls.py`), the bench a row such as `tabed-MT@5+tree2` on top of its settings
(`bench/rows.py`). The defaults are `GenerationConfig`'s and `DEFAULT_SPEC`; the bounds are
`config.LIMITS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import GenerationConfig
from .draft_length import parse_gamma
from .spec import DEFAULT_SPEC, DraftingSpec, parse_spec


@dataclass(frozen=True)
class Settings:
    """What a run decodes with: which methods draft and how they are ensembled, and the decoding config."""

    spec: DraftingSpec = field(default_factory=lambda: parse_spec(DEFAULT_SPEC))
    config: GenerationConfig = field(default_factory=GenerationConfig)

    @classmethod
    def parse(cls, drafting: str = DEFAULT_SPEC, gamma: str | int = "auto", **config: object) -> Settings:
        """The CLI's grammar: a spec such as `tabed-MT` and a draft length `auto`, `auto:N` or `N`."""
        length, adaptive = parse_gamma(gamma)
        return cls(parse_spec(drafting), GenerationConfig(gamma=length, adaptive=adaptive, **config))


def hedges_first(spec: DraftingSpec, config: GenerationConfig, pictures: bool = True) -> bool:
    """Whether the first block hedges: with chains, a TABED spec whose drafter runs several rows (two model
    methods or more, and a picture in the conversation, without which every row is the same text) drafts
    its first block as a width-2 "unsure" tree. That block is drafted before any weight is learned, so
    where the methods disagree the uniform ensemble follows whichever is surer, which on image questions
    is at times the text-only method's wrong word; the tree tries the second token too, and stays a chain
    while the ensemble is sure. The page asks before it knows the pictures: `pictures` then says "may"."""
    return config.hedge_first and config.tree_width == 1 and spec.tabed and pictures and len(spec.model_methods) > 1
