"""The page's controls read as a run's settings: the ticked methods, the ensemble in the page's words, and
every value a visitor can type or an API client can send, checked here rather than by Gradio's component
limits (which refuse an event with a toast that names no field, and error badges over every output).

A value the app cannot use is refused in one line naming the field (in the page's words), what was wrong and
what is accepted; an emptied box takes the default, and the run's status says so."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..engine.config import LIMITS, TREE_BLOCKS, TREE_POLICIES, GenerationConfig
from ..engine.draft_length import AUTO_CAP
from ..engine.settings import Settings, hedges_first
from ..engine.spec import METHODS, RULES, DraftingSpec
from ..engine.speed import REPEATS
from ..errors import InputError

ENSEMBLES = {"TABED (adaptive weights)": "tabed", "static ensemble (uniform)": "static",
             "single method": "single"}  # the page's words for TABED's weights, a uniform ensemble, one method alone
MODES = list(ENSEMBLES)
DEFAULTS = GenerationConfig()


@dataclass(frozen=True)
class Field:
    """One setting as the page shows it and its API takes it: the control's words, the value's type and what
    it accepts (a range, or choices)."""

    label: str
    kind: type
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    above_low: bool = False  # the low end itself is refused (top-p: more than 0)
    meaning: str = ""  # what a value means, said with the range ("0 keeps every position")

    def accepted(self) -> str:
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        if self.kind is bool:
            return "true or false"
        what = "a whole number" if self.kind is int else "a number"
        span = (f"above {_shown(self.low)} and at most {_shown(self.high)}" if self.above_low
                else f"from {_shown(self.low)} to {_shown(self.high)}")
        return f"{what} {span}" + (f" ({self.meaning})" if self.meaning else "")

    def read(self, value: object) -> object:
        """The value as the config's type, or an `InputError` that says which field, what and what it takes."""
        refused = InputError(f"{self.label} must be {self.accepted()}; got {value!r}")
        if self.choices:
            if value not in self.choices:
                raise refused
            return value
        if self.kind is bool:
            if not isinstance(value, bool) and value not in (0, 1):
                raise refused
            return bool(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise refused
        if self.kind is int and value != int(value):
            raise refused
        number = self.kind(value)
        if not (self.low < number if self.above_low else self.low <= number) or number > self.high:
            raise InputError(f"{self.label} must be {self.accepted()}; got {_shown(number)}")
        return number


def _shown(number: float) -> str:
    """A bound or a value as a person writes it: 4294967295, 0, 2, 0.1."""
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


FIELDS = {  # the decoding settings the page sends, by their config name
    "rule": Field("TABED weight rule", str, choices=RULES),
    "window": Field("history window", int, *LIMITS["window"], meaning="0 keeps every position"),
    "gamma": Field("γ (draft tokens per block)", int, LIMITS["gamma"][0], AUTO_CAP),
    "adaptive": Field("adaptive draft length", bool),
    "tree_width": Field("tree width", int, *LIMITS["tree_width"], meaning="1 drafts a chain"),
    "tree_policy": Field("tree branches", str, choices=TREE_POLICIES),
    "tree_blocks": Field("trees in", str, choices=TREE_BLOCKS),
    "hedge_first": Field("fork the first block where unsure", bool),
    "max_new_tokens": Field("max new tokens", int, *LIMITS["max_new_tokens"]),
    "temperature": Field("temperature", float, *LIMITS["temperature"], meaning="0 is greedy"),
    "top_p": Field("top-p", float, 0.0, 1.0, above_low=True, meaning="1 keeps every token"),
    "seed": Field("seed", int, *LIMITS["seed"]),
}

FLAGS = {"compare_ar": Field("compare with plain decoding (the target alone)", bool),
         "methods_alone": Field("then run each method alone", bool),
         "repeat": Field("repeat", int, *REPEATS, meaning="runs of each side, the median shown")}  # besides decoding

# Every control's words, as the page shows them and its status lines name them: a rename in the code cannot
# reach the page.
LABELS = {"pictures": "Pictures (optional)", "prompt": "Prompt", "preset": "Model pair", "methods": "Drafting methods",
          "mode": "Ensemble", **{name: f.label for name, f in {**FIELDS, **FLAGS}.items()}}


def page_flag(name: str, value: object) -> bool | int:
    """One of the page's own switches and counts (`FLAGS`), checked like a setting."""
    return FLAGS[name].read(value)


def page_settings(methods: list[str] | None, mode: str, notes: list[str] | None = None, **config: object) -> Settings:
    """The settings of a run from the page's controls: the ticked methods, the ensemble (`MODES`, or its
    kind: "tabed", "static", "single", as an API call may send it) and the config's values, each checked
    (`FIELDS`); an emptied box (None) takes the default, said in `notes`. The page inspects every block
    (`GenerationConfig.inspect`): its download holds what each one decided."""
    values = {}
    for name, value in config.items():
        if value is None or value == "":
            if notes is not None:
                notes.append(f"{FIELDS[name].label} was empty: {getattr(DEFAULTS, name)} was used")
            continue
        values[name] = FIELDS[name].read(value)
    return Settings(page_spec(methods, mode), GenerationConfig(**{"inspect": True} | values))


def page_spec(methods: list[str] | None, mode: str) -> DraftingSpec:
    """The ticked methods as a spec of the chosen ensemble, each mismatch said in the page's words."""
    ensemble = ENSEMBLES.get(mode, mode) if isinstance(mode, str) else mode
    methods = [] if methods is None else methods
    if not isinstance(methods, (list, tuple)) or not all(isinstance(m, str) for m in methods):
        raise InputError(f"drafting methods must be a list of letters from {', '.join(METHODS)}; got {methods!r}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise InputError(f"drafting methods are {', '.join(METHODS)}; {', '.join(map(repr, unknown))} is not one")
    chosen = tuple(m for m in METHODS if m in methods)
    if not chosen:
        raise InputError("tick at least one drafting method (M, T, C, P or N)")
    if ensemble not in ENSEMBLES.values():
        raise InputError(f"unknown ensemble {mode!r}: choose one of {', '.join(ENSEMBLES)}")
    if ensemble == "single":
        if len(chosen) != 1:
            raise InputError(f"single-method drafting uses one method; {len(chosen)} are ticked")
        return DraftingSpec(chosen)
    if len(chosen) < 2:
        raise InputError("an ensemble needs at least two methods: tick another, or choose 'single method'")
    return DraftingSpec(chosen, tabed=ensemble == "tabed")


def methods_for_mode(methods: list[str] | None, mode: str, defaults: tuple[str, ...]) -> list[str]:
    """The ticked methods as a change of ensemble leaves them, so that Run works at once: "single method"
    keeps the first ticked, an ensemble short of two adds the defaults back."""
    ticked = [m for m in METHODS if m in (methods or [])]
    if ENSEMBLES.get(mode) == "single":
        return ticked[:1] or list(defaults[:1])
    return ticked if len(ticked) >= 2 else [m for m in METHODS if m in ticked or m in defaults]


def may_draft_trees(methods: list[str] | None, mode: str, tree_width: object, hedge_first: object) -> bool:
    """Whether some block of a run with these controls may draft a tree: with trees, or TABED's hedged first
    block (asked before the pictures are known); a spec the ticked methods do not make yet drafts none."""
    if isinstance(tree_width, (int, float)) and tree_width > 1:
        return True
    try:
        spec = page_spec(methods, mode)
    except InputError:
        return False
    return hedges_first(spec, replace(DEFAULTS, hedge_first=bool(hedge_first)))
