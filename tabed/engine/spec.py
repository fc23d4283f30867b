"""DraftContext specs: which drafting methods run as rows, and how their drafts are ensembled.

Users type them as `M`, `T`, `MT`, `MTCP` (static uniform ensemble when several methods are given)
or `tabed-MT`, `tabed-MTCP` (TABED: weights adapted at test time from past verifications); `N`, the
model-free n-gram lookup, joins any of them (`tabed-MTN`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

METHODS = ("M", "T", "C", "P", "N")
METHOD_NAMES = {
    "M": "multimodal (image + prompt)",
    "T": "text-only (image replaced by a newline)",
    "C": "caption (image replaced by 'image: <caption>')",
    "P": "pooled (image features average-pooled 2x2)",
    "N": "n-gram lookup in the prompt and the answer so far (no model)",
}
RULES = ("w-grid", "kld", "tvd", "hedge")
DEFAULT_SPEC = "tabed-MT"  # what the CLI, the bench and the page use unless told otherwise
TABED_PREFIX = "tabed-"


@dataclass(frozen=True)
class DraftingSpec:
    """The drafting methods (rows of one batched drafter forward) and the ensembling mode."""

    methods: tuple[str, ...]
    tabed: bool = False  # TABED: weights learned at test time (else uniform, or one method alone)

    def __post_init__(self) -> None:
        if not self.model_methods:
            raise InputError("N (n-gram lookup) drafts beside a model method: add M, T, C or P, e.g. 'tabed-MTN'")
        if self.tabed and len(self.methods) < 2:
            raise InputError(f"drafting spec {self.name!r}: TABED needs at least two methods to weigh, e.g. 'tabed-MT'")

    @property
    def model_methods(self) -> tuple[str, ...]:
        """The methods that are rows of the drafter (all but the model-free N)."""
        return tuple(m for m in self.methods if m != "N")

    @property
    def name(self) -> str:
        letters = "".join(self.methods)
        return TABED_PREFIX + letters if self.tabed else letters

    @property
    def mode(self) -> str:
        """`single`, `static` (uniform ensemble, IbED) or `tabed` (weights learned at test time)."""
        if self.tabed:
            return "tabed"
        return "single" if len(self.methods) == 1 else "static"

    def __str__(self) -> str:
        return self.name


def parse_spec(text: str) -> DraftingSpec:
    """Parse `M`, `MT`, `tabed-MTCP`, ... (letters in any order, case-insensitive)."""
    raw = text.strip()
    tabed = raw.lower().startswith(TABED_PREFIX)
    letters = raw[len(TABED_PREFIX):] if tabed else raw
    letters = letters.upper()
    if not letters or any(ch not in METHODS for ch in letters) or len(set(letters)) != len(letters):
        raise InputError(
            f"unknown drafting spec {text!r}: use letters from M, T, C, P, N (each once), "
            "optionally prefixed by 'tabed-', e.g. 'M', 'MT', 'tabed-MTCP', 'tabed-MTN'"
        )
    return DraftingSpec(methods=tuple(m for m in METHODS if m in letters), tabed=tabed)
