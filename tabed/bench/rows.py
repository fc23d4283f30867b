"""The bench's rows: a drafting spec with its own settings, such as `tabed-MT@5+tree2`, on top of the
bench's settings."""

from __future__ import annotations

from dataclasses import replace

from ..engine.config import TREE_BLOCKS
from ..engine.draft_length import parse_gamma
from ..engine.settings import Settings
from ..engine.spec import parse_spec
from ..errors import InputError


def row_settings(base: Settings, text: str) -> Settings:
    """A bench row on top of `base`: a drafting spec, optionally with its own weight rule after
    '/' (`tabed-MT/hedge`), its own draft length after '@' (`tabed-MT@5`: always 5 tokens, the paper's
    setting; `tabed-MT@auto:8`) and its own token trees after '+tree' (`tabed-MT+tree2`: width 2;
    `tabed-MT+tree2:methods`: and the "methods" policy; `tabed-MT+tree2:first`: in the first block only;
    `tabed-MT+tree1`: chains in every block, no hedged first block either) and the adaptive draft length's
    own minimum survival after '~' (`tabed-MT~0.65`)."""
    config = base.config
    text, _, tree = text.partition("+tree")
    if tree:
        width, *options = tree.split(":")
        if not width.isdigit():
            raise InputError(f"bench row {text}+tree{tree}: give the tree width as a number, e.g. +tree2")
        blocks = [option for option in options if option in TREE_BLOCKS]
        policies = [option for option in options if option not in TREE_BLOCKS]
        if len(blocks) > 1 or len(policies) > 1:  # which one was meant is the user's to say
            raise InputError(f"bench row {text}+tree{tree}: give one tree policy and one of "
                             f"{', '.join(TREE_BLOCKS)} at most, e.g. +tree2:members:first")
        config = replace(config, tree_width=int(width), hedge_first=False,
                         tree_policy=policies[0] if policies else config.tree_policy,
                         tree_blocks=blocks[0] if blocks else config.tree_blocks)
    text, _, survival = text.partition("~")
    if survival:
        try:
            config = replace(config, min_survival=float(survival))
        except ValueError:
            raise InputError(f"bench row {text}~{survival}: give the minimum survival as a number, "
                             "e.g. ~0.65") from None
    name, _, gamma = text.partition("@")
    name, _, rule = name.partition("/")
    if rule:
        config = replace(config, rule=rule)
    if gamma:
        length, adaptive = parse_gamma(gamma)
        config = replace(config, gamma=length, adaptive=adaptive)
    return Settings(parse_spec(name), config)
