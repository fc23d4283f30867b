"""A run's settings in one place: the drafting spec and the decoding config.

Users write them three ways, and each way is read here: the page sends ticked methods, an ensemble kind
and the controls' values (`Settings.from_page`); the CLI a spec and a draft length as text
(`Settings.parse`); the bench a row such as `tabed-MT@5+tree2` on top of its settings (`Settings.row`).
The defaults are `GenerationConfig`'s and `DEFAULT_SPEC`; the bounds are `config.LIMITS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from ..errors import InputError
from .config import TREE_BLOCKS, GenerationConfig
from .draft_length import parse_gamma
from .spec import DEFAULT_SPEC, METHODS, DraftingSpec, parse_spec

ENSEMBLES = ("tabed", "static", "single")  # TABED's adaptive weights, a uniform ensemble, one method alone
_INTEGERS = {f.name for f in fields(GenerationConfig) if f.type == "int"}
_FLOATS = {f.name for f in fields(GenerationConfig) if f.type == "float"}
_FLAGS = {f.name for f in fields(GenerationConfig) if f.type == "bool"}


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

    @classmethod
    def from_page(cls, methods: list[str] | None, ensemble: str, **config: object) -> Settings:
        """The page's controls: the ticked methods, the ensemble kind (`ENSEMBLES`), and the config's values
        as sliders and boxes send them (floats for integers, None for an emptied box: the default)."""
        return cls(page_spec(methods, ensemble), GenerationConfig(**coerced(config)))

    def row(self, text: str) -> Settings:
        """A bench row on top of these settings: a drafting spec, optionally with its own weight rule after
        '/' (`tabed-MT/hedge`), its own draft length after '@' (`tabed-MT@5`: always 5 tokens, the paper's
        setting; `tabed-MT@auto:8`) and its own token trees after '+tree' (`tabed-MT+tree2`: width 2;
        `tabed-MT+tree2:methods`: and the "methods" policy; `tabed-MT+tree2:first`: in the first block only;
        `tabed-MT+tree1`: chains in every block, no hedged first block either) and the adaptive draft length's
        own minimum survival after '~' (`tabed-MT~0.65`)."""
        config = self.config
        text, _, tree = text.partition("+tree")
        if tree:
            width, *options = tree.split(":")
            if not width.isdigit():
                raise InputError(f"bench row {text}+tree{tree}: give the tree width as a number, e.g. +tree2")
            blocks = [option for option in options if option in TREE_BLOCKS]
            policies = [option for option in options if option not in TREE_BLOCKS]
            config = replace(config, tree_width=int(width), hedge_first=False,
                             tree_policy=policies[-1] if policies else config.tree_policy,
                             tree_blocks=blocks[-1] if blocks else config.tree_blocks)
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


def hedges_first(spec: DraftingSpec, config: GenerationConfig, pictures: bool = True) -> bool:
    """Whether the first block hedges: with chains, a TABED spec whose drafter runs several rows (two model
    methods or more, and a picture in the conversation, without which every row is the same text) drafts
    its first block as a width-2 "unsure" tree. That block is drafted before any weight is learned, so
    where the methods disagree the uniform ensemble follows whichever is surer, which on image questions
    is at times the text-only method's wrong word; the tree tries the second token too, and stays a chain
    while the ensemble is sure. The page asks before it knows the pictures: `pictures` then says "may"."""
    return config.hedge_first and config.tree_width == 1 and spec.tabed and pictures and len(spec.model_methods) > 1


def page_spec(methods: list[str] | None, ensemble: str) -> DraftingSpec:
    """The ticked methods as a spec of the chosen ensemble kind, each mismatch said in the page's words."""
    chosen = tuple(m for m in METHODS if m in (methods or []))
    if not chosen:
        raise InputError("tick at least one drafting method (M, T, C, P or N)")
    if ensemble not in ENSEMBLES:
        raise InputError(f"unknown ensemble {ensemble!r}: choose one of {', '.join(ENSEMBLES)}")
    if ensemble == "single":
        if len(chosen) != 1:
            raise InputError(f"single-method drafting uses one method; {len(chosen)} are ticked")
        return DraftingSpec(chosen)
    if len(chosen) < 2:
        raise InputError("an ensemble needs at least two methods: tick another, or choose 'single method'")
    return DraftingSpec(chosen, tabed=ensemble == "tabed")


def coerced(values: dict[str, object]) -> dict[str, object]:
    """Config values as the config's types: a slider's 5.0 is 5, an emptied number box (None) is left to
    the default, and a value that is no number says so."""
    out = {}
    for name, value in values.items():
        if value is None or value == "":
            continue
        try:
            out[name] = (int(value) if name in _INTEGERS else float(value) if name in _FLOATS
                         else bool(value) if name in _FLAGS else value)
        except (TypeError, ValueError):
            raise InputError(f"{name.replace('_', ' ')} must be a number, got {value!r}") from None
    return out
