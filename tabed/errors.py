"""Errors the engine raises for problems a user can fix (bad input, bad model pair)."""


class TabedError(Exception):
    """Base class: the message is meant to be shown to the user as it is."""


class InputError(TabedError, ValueError):
    """A prompt, image, drafting spec or setting that cannot be used."""


class ModelLoadError(TabedError):
    """A model or processor that cannot be found or is not an image-text-to-text model."""


class VocabularyMismatchError(ModelLoadError):
    """Target and drafter do not share one vocabulary, so drafts cannot be verified."""
