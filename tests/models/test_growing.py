"""The cache that appends in place holds what transformers' concatenating one holds, after every operation the
backends put a cache through, and appends without copying what it holds."""

import copy

import pytest
import torch
from transformers import MistralConfig
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from tabed.models import growing
from tabed.models.growing import GrowingLayer, growing_cache


def _entries(batch: int, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(batch, 2, count, 4, generator=generator) for _ in range(2))


class Twins:
    """A `GrowingLayer` and a `DynamicLayer` put through the same operations."""

    def __init__(self) -> None:
        self.layers = (GrowingLayer(), DynamicLayer())

    def apply(self, operation) -> None:
        for layer in self.layers:
            operation(layer)
        ours, theirs = self.layers
        assert torch.equal(ours.keys, theirs.keys) and torch.equal(ours.values, theirs.values)


@pytest.fixture(autouse=True)
def _small_room(monkeypatch):
    """Room for a few entries only, so that the sequences below outgrow it too, and room from the first."""
    monkeypatch.setattr(growing, "ROOM", 3)
    monkeypatch.setattr(growing, "IN_PLACE_FROM", 0)


@pytest.mark.parametrize("in_place_from", [0, 12])
def test_every_operation_leaves_what_a_dynamic_layer_holds(monkeypatch, in_place_from):
    """Prefill, steps, a verify, roll-backs, rows selected (a row resting), a tree compacted in place
    (`caches._keep_entries`), rows padded and stacked (a row rejoining), shared padding dropped: after each,
    the same keys and values as a `DynamicLayer` put through the same; in room from the first, or
    concatenated while short."""
    monkeypatch.setattr(growing, "IN_PLACE_FROM", in_place_from)
    twins = Twins()
    twins.apply(lambda layer: layer.update(*_entries(2, 5, 0)))
    for seed in range(1, 4):
        twins.apply(lambda layer, seed=seed: layer.update(*_entries(2, 1, seed)))
    twins.apply(lambda layer: layer.update(*_entries(2, 6, 4)))
    twins.apply(lambda layer: layer.crop(-4))
    twins.apply(lambda layer: layer.update(*_entries(2, 2, 5)))

    def compact(layer):
        for tensor in (layer.keys, layer.values):
            tensor[..., 8:10, :] = tensor[..., torch.tensor([9, 10]), :]
        layer.crop(-1)
    twins.apply(compact)
    twins.apply(lambda layer: layer.batch_select_indices(torch.tensor([1])))
    twins.apply(lambda layer: layer.update(*_entries(1, 3, 6)))

    def pad_and_stack(layer):
        keys, values = _entries(1, layer.keys.shape[-2], 7)
        layer.keys, layer.values = torch.cat([layer.keys, keys]), torch.cat([layer.values, values])
    twins.apply(pad_and_stack)
    twins.apply(lambda layer: layer.update(*_entries(2, 2, 8)))

    def drop_leading(layer):
        layer.keys, layer.values = layer.keys[..., 2:, :], layer.values[..., 2:, :]
    twins.apply(drop_leading)
    for seed in range(9, 20):
        twins.apply(lambda layer, seed=seed: layer.update(*_entries(2, 1, seed)))
    assert [layer.get_seq_length() for layer in twins.layers] == [25, 25]


def test_steps_write_into_the_room_instead_of_copying_the_cache():
    """Once there is room, a step or a roll-back leaves the keys where they are (`torch.cat` would copy them
    all at every step); outgrowing the room moves them once, with half as much room again."""
    layer = GrowingLayer()
    layer.update(*_entries(1, 8, 0))
    room = layer.room_keys.shape[-2]
    assert room == 8 + max(growing.ROOM, 8 // 2)
    where = layer.keys.data_ptr()
    for seed in range(1, room - 8 + 1):
        layer.update(*_entries(1, 1, seed))
        assert layer.keys.data_ptr() == where and layer.values.data_ptr() == layer.room_values.data_ptr()
    layer.crop(-2)
    layer.update(*_entries(1, 2, 20))
    assert layer.keys.data_ptr() == where and layer.get_seq_length() == room
    layer.update(*_entries(1, 1, 21))
    assert layer.keys.data_ptr() != where and layer.room_keys.shape[-2] == room + 1 + max(growing.ROOM, (room + 1) // 2)


def test_a_short_layer_concatenates_until_it_is_long_enough(monkeypatch):
    monkeypatch.setattr(growing, "IN_PLACE_FROM", 6)
    layer = GrowingLayer()
    layer.update(*_entries(1, 4, 0))
    layer.update(*_entries(1, 1, 1))
    assert layer.room_keys is None
    layer.update(*_entries(1, 1, 2))
    assert layer.keys.data_ptr() == layer.room_keys.data_ptr() and layer.get_seq_length() == 6


def test_a_copied_layer_takes_its_own_room():
    """A shallow copy (a row split off to rest) holds the same entries but writes its updates elsewhere."""
    layer = GrowingLayer()
    layer.update(*_entries(1, 4, 0))
    twin = copy.copy(layer)
    twin.update(*_entries(1, 1, 1))
    layer.update(*_entries(1, 1, 2))
    assert torch.equal(twin.keys[..., :4, :], layer.keys[..., :4, :])
    assert not torch.equal(twin.keys[..., 4, :], layer.keys[..., 4, :])
    assert torch.equal(twin.keys[..., 4:, :], _entries(1, 1, 1)[0])


def test_only_full_attention_layers_grow_in_place(pair):
    """The pair's layers all grow in place; a sliding-window model's layers stay transformers' own."""
    assert all(type(layer) is GrowingLayer for layer in growing_cache(pair.target.config).layers)
    sliding = MistralConfig(num_hidden_layers=2, hidden_size=16, intermediate_size=32, num_attention_heads=2,
                            num_key_value_heads=2, sliding_window=4)
    assert all(type(layer) is DynamicSlidingWindowLayer for layer in growing_cache(sliding).layers)
