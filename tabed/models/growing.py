"""A dynamic cache that appends in place.

transformers' `DynamicLayer` grows by `torch.cat`, which copies a layer's whole keys and values at every
forward. A decoding step's own work does not grow with the context, so on a CPU that copy is a share of a
small drafter's step that grows with the pictures in its M row (three pictures, 783 tokens: about 7% of a
two-row step). `GrowingLayer` keeps spare room after the filled part and writes new entries there, once
the layer is long enough for that to cost less than the copy. Its `keys` and `values` stay views of the
filled part, so everything that reads or replaces them works as on a `DynamicLayer`: cropping slices the
view; a layer whose tensors were replaced (rows split or joined, padding dropped) is copied into new room
at its next update.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

ROOM = 256  # entries of spare room at least (an answer's drafts, a tree), or half the filled part
IN_PLACE_FROM = 128  # entries: a shorter layer concatenates, which costs less there (on a CPU, a row of 30
# entries 2 µs against 5 µs writing into room; of 300 7 µs against 5; of 800 11 against 5)


class GrowingLayer(DynamicLayer):
    """A `DynamicLayer` whose updates write into spare room instead of concatenating."""

    room_keys: torch.Tensor | None = None  # (B, H, capacity, D); `keys` is its first entries
    room_values: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs,
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        filled = self.keys.shape[-2] if self.keys.dim() == 4 else 0
        end = filled + key_states.shape[-2]
        if not self._in_room() or end > self.room_keys.shape[-2]:
            if end < IN_PLACE_FROM:
                return super().update(key_states, value_states)
            self._move_to_room(filled, end, key_states)
        self.room_keys[..., filled:end, :] = key_states
        self.room_values[..., filled:end, :] = value_states
        self.keys, self.values = self.room_keys[..., :end, :], self.room_values[..., :end, :]
        return self.keys, self.values

    def _in_room(self) -> bool:
        """Whether `keys` and `values` still start this layer's room with all its rows: a tensor that replaced
        them (rows selected or stacked, padding dropped) starts elsewhere, since the room is still held."""
        room = self.room_keys
        return (room is not None and self.keys.data_ptr() == room.data_ptr()
                and self.values.data_ptr() == self.room_values.data_ptr() and self.keys.shape[0] == room.shape[0])

    def _move_to_room(self, filled: int, end: int, like: torch.Tensor) -> None:
        """New room for at least `end` entries, holding the `filled` ones there are."""
        batch, heads, _, width = like.shape
        capacity = end + max(ROOM, end // 2)
        self.room_keys = like.new_empty(batch, heads, capacity, width)
        self.room_values = like.new_empty(batch, heads, capacity, width)
        if filled:
            self.room_keys[..., :filled, :] = self.keys
            self.room_values[..., :filled, :] = self.values

    def __copy__(self) -> GrowingLayer:
        """A copy shares the tensors but never the room: its own updates take new room."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.room_keys = twin.room_values = None
        return twin


def growing_cache(config) -> DynamicCache:
    """A `DynamicCache` for `config` whose full-attention layers are `GrowingLayer`s (others, such as
    sliding-window ones, stay as transformers makes them)."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
