"""The page's controls as a run's settings: the ticked methods, the ensemble as the page names it, and
the controls' values as sliders and boxes send them (floats for integers, None for an emptied box)."""

from __future__ import annotations

from dataclasses import fields

from ..engine.config import GenerationConfig
from ..engine.settings import Settings
from ..engine.spec import METHODS, DraftingSpec
from ..errors import InputError

ENSEMBLES = {"TABED (adaptive weights)": "tabed", "static ensemble (uniform)": "static",
             "single method": "single"}  # the page's words for TABED's weights, a uniform ensemble, one method alone
MODES = list(ENSEMBLES)
_INTEGERS = {f.name for f in fields(GenerationConfig) if f.type == "int"}
_FLOATS = {f.name for f in fields(GenerationConfig) if f.type == "float"}
_FLAGS = {f.name for f in fields(GenerationConfig) if f.type == "bool"}


def page_settings(methods: list[str] | None, mode: str, **config: object) -> Settings:
    """The settings of a run from the page's controls: the ticked methods, the ensemble (`MODES`, or its
    kind: "tabed", "static", "single", as an API call may send it) and the config's values. The page
    inspects every block (`GenerationConfig.inspect`): its download holds what each one decided."""
    return Settings(page_spec(methods, mode), GenerationConfig(**{"inspect": True} | coerced(config)))


def page_spec(methods: list[str] | None, mode: str) -> DraftingSpec:
    """The ticked methods as a spec of the chosen ensemble, each mismatch said in the page's words."""
    ensemble = ENSEMBLES.get(mode, mode)
    chosen = tuple(m for m in METHODS if m in (methods or []))
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
