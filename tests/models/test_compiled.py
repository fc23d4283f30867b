"""A drafter's compiled forward (`models/compiled.py`) computes what its uncompiled one does, follows the
cache's length through steps and roll-backs, and falls back to running as it is when it cannot be compiled,
having run nothing twice."""

import pytest
import torch

from conftest import make_pair
from tabed.models.caches import StaticBackend
from tabed.models.compiled import CompiledForward

IDS = torch.tensor([[3, 4, 5, 6], [0, 7, 8, 9]])
MASK = torch.tensor([[1, 1, 1, 1], [0, 1, 1, 1]])  # the second row left-padded, as a drafter's rows are


def _steps(backend: StaticBackend) -> list[torch.Tensor]:
    """A prompt, a step of one token, one of two, a roll-back of two and another step: each step's logits."""
    with torch.inference_mode():
        logits = [backend.prefill(MASK, keep=4, input_ids=IDS)]
        logits.append(backend.forward(torch.tensor([[5], [5]])))
        logits.append(backend.forward(torch.tensor([[6, 7], [6, 7]])))
        backend.rewind(2)
        logits.append(backend.forward(torch.tensor([[9], [9]])))
        logits.append(backend.forward(torch.tensor([[4], [2]])))
    return logits


@pytest.mark.slow
def test_a_compiled_forward_gives_the_uncompiled_logits(pair, monkeypatch):
    calls = []
    compiled_call = CompiledForward.__call__
    monkeypatch.setattr(CompiledForward, "__call__", lambda self, *args: calls.append(1) or compiled_call(self, *args))
    compiled = StaticBackend(pair.drafter, 2, 64, compiled=True)
    expected, got = _steps(StaticBackend(pair.drafter, 2, 64)), _steps(compiled)
    assert len(calls) == 4  # every step went through the compiled forward (the prompt runs as it is)
    assert compiled.why_uncompiled is None
    for ours, theirs in zip(got, expected, strict=True):
        assert ours.shape == theirs.shape
        assert torch.allclose(ours, theirs, atol=1e-5), (ours - theirs).abs().max()


def test_a_forward_that_cannot_be_compiled_runs_as_it_is_once():
    runs = torch.zeros(())

    def data_dependent(x: torch.Tensor) -> torch.Tensor:
        runs.add_(1)  # an effect before the branch: it must happen once, not once per attempt
        if x.sum() > 0:  # a branch on the data: no whole graph to trace
            return x * 2
        return x

    forward = CompiledForward(data_dependent)
    assert torch.equal(forward(torch.ones(3)), torch.full((3,), 2.0))
    assert int(runs) == 1
    assert forward.why_not is not None and "could not be compiled" in forward.why_not
    assert torch.equal(forward(-torch.ones(3)), -torch.ones(3))  # from then on, as it is
    assert int(runs) == 2


def test_only_a_backend_asked_to_compile_compiles(pair):
    assert StaticBackend(pair.drafter, 1, 16)._sequence.__func__ is StaticBackend._run
    assert isinstance(StaticBackend(pair.drafter, 1, 16, compiled=True)._sequence, CompiledForward)


def test_the_pair_names_the_models_whose_steps_run_compiled(pair):
    static = make_pair(pair.target, pair.drafter, pair.target_processor)
    static.cache = "static"
    static.backend("target", 1)
    assert static.compiled_roles == []
    drafter = static.reused(("drafter", 2), lambda: StaticBackend(pair.drafter, 2, 64, compiled=True))
    assert static.compiled_roles == ["drafter"]
    drafter._sequence.why_not = "the drafter's forward could not be compiled (test): it runs uncompiled"
    assert static.compiled_roles == []
