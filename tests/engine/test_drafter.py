"""The batched drafter: rows, one forward for K rows, and cache roll-back."""

import pytest
import torch
from tokenizers import Tokenizer, models, normalizers
from transformers import PreTrainedTokenizerFast

from tabed.engine.drafter import (
    BatchedDrafter,
    build_rows,
    image_runs,
    newline_ids,
    pooled_image_features,
    splice,
    vision_features,
)
from tabed.engine.session import TargetSession
from tabed.models.chat import Turn, encode

CPU = torch.device("cpu")


def rows_for(pair, turns, methods, captions=None):
    prompt = encode(pair.drafter_processor, turns, CPU, torch.float32)
    with torch.no_grad():
        return build_rows(pair.drafter, pair.tokenizer, prompt, methods, captions)


def test_image_runs_and_splice():
    ids = torch.tensor([1, 4, 4, 4, 7, 4, 4, 9])
    runs = image_runs(ids, 4)
    assert runs == [(1, 4), (5, 7)]
    assert splice(ids, runs, [torch.tensor([5]), torch.tensor([6, 6])]).tolist() == [1, 5, 7, 6, 6, 9]


def test_rows_replace_the_image_as_the_methods_say(pair, image):
    turns = [Turn("w1 w2", [image])]
    rows = {r.method: r for r in rows_for(pair, turns, ("M", "T", "C", "P"), captions=["w3 w4"])}
    image_id = pair.drafter.config.image_token_id
    newline = pair.tokenizer.convert_tokens_to_ids("\n")
    m_images = int((rows["M"].input_ids == image_id).sum())
    assert m_images == 16 and rows["M"].image_features.shape[0] == 16
    assert int((rows["P"].input_ids == image_id).sum()) == 4 == rows["P"].image_features.shape[0]  # 2x2 pooled
    assert image_id not in rows["T"].input_ids.tolist() and newline in rows["T"].input_ids.tolist()
    assert rows["T"].image_features is None
    caption = pair.tokenizer.encode("image: w3 w4", add_special_tokens=False)
    c_ids = rows["C"].input_ids.tolist()
    assert any(c_ids[i: i + len(caption)] == caption for i in range(len(c_ids)))
    assert len(rows["T"].input_ids) == len(rows["M"].input_ids) - 16 + 1


def test_m_and_p_share_one_pass_of_the_vision_tower(pair, image):
    """P pools the vision features M projects: with both, the drafter's vision tower runs once (on the
    paper's pair, a CLIP ViT-L forward saved per request), and each row gets what it gets alone."""
    turns = [Turn("w1 w2", [image, image.rotate(90)])]
    passes = []
    hook = pair.drafter.model.vision_tower.register_forward_hook(lambda *_: passes.append(1))
    try:
        both = {r.method: r for r in rows_for(pair, turns, ("M", "T", "P"))}
        assert len(passes) == 1
        alone = {method: rows_for(pair, turns, (method,))[0] for method in ("M", "P")}
    finally:
        hook.remove()
    assert len(passes) == 3
    for method in ("M", "P"):
        assert torch.equal(both[method].input_ids, alone[method].input_ids)
        assert torch.equal(both[method].image_features, alone[method].image_features), method


def test_rows_without_image_are_all_text_only(pair):
    rows = rows_for(pair, [Turn("w1 w2")], ("M", "T", "C", "P"))
    assert all(torch.equal(r.input_ids, rows[0].input_ids) for r in rows)
    assert all(r.image_features is None for r in rows)


def test_one_batched_forward_equals_separate_forwards(pair, image):
    turns = [Turn("w1 w2 w3", [image])]
    rows = rows_for(pair, turns, ("M", "T", "P"), captions=None)
    assert len({len(r.input_ids) for r in rows}) == 3  # different lengths: padding is exercised
    batched = BatchedDrafter(pair.drafter, rows, pair.backend("drafter", len(rows)))
    alone = [BatchedDrafter(pair.drafter, [row], pair.backend("drafter")) for row in rows]
    outputs = [(batched.prefill(), [a.prefill() for a in alone])]
    for tokens in ([7], [12], [20, 21], [9]):
        outputs.append((batched.step(tokens), [a.step(tokens) for a in alone]))
    batched.rollback(2), [a.rollback(2) for a in alone]
    for token in range(2 * batched.backend.mask.shape[1]):  # past the single step's mask as it was first made
        outputs.append((batched.step([9 + token % 40]), [a.step([9 + token % 40]) for a in alone]))
    for together, separate in outputs:
        assert torch.allclose(together, torch.cat(separate), atol=1e-4), (together - torch.cat(separate)).abs().max()


@pytest.mark.parametrize("methods, picture", [(("M", "T", "P"), True), (("M", "T"), True), (("M", "T"), False)],
                         ids=["three-lengths", "two-lengths", "one-length"])
def test_rows_are_prefilled_at_their_own_lengths(pair, image, methods, picture):
    """A row padded to the longest costs as much as the longest: on a dynamic cache rows of different lengths
    (M's picture is many tokens, T's one newline) each run alone, at their own length, and the caches are
    stacked left-padded (the steps after it are checked against separate forwards above); rows of one length
    (no picture) run as one batch."""
    rows = rows_for(pair, [Turn("w1 w2 w3", [image] if picture else [])], methods)
    lengths = [len(row.input_ids) for row in rows]
    seen = []
    hook = pair.drafter.model.language_model.layers[0].input_layernorm.register_forward_pre_hook(
        lambda _, args: seen.append(tuple(args[0].shape[:2])))  # every path runs the layers' own modules
    try:
        drafter = BatchedDrafter(pair.drafter, rows, pair.backend("drafter", len(rows)))
        drafter.prefill()
    finally:
        hook.remove()
    if not picture:
        assert len(set(lengths)) == 1 and seen == [(len(rows), lengths[0])]
        return
    assert len(set(lengths)) == len(rows) and seen == [(1, length) for length in lengths]
    longest = max(lengths)
    assert drafter.backend.mask.shape == (len(rows), longest)
    assert drafter.backend.lengths.tolist() == lengths
    assert all(layer.keys.shape[0] == len(rows) and layer.keys.shape[-2] == longest
               for layer in drafter.backend.cache.layers)


def _cache_tensors(cache):
    return [(layer.keys, layer.values) for layer in cache.layers]


def test_drafter_rollback_equals_a_fresh_prefix(pair, image):
    rows = rows_for(pair, [Turn("w1 w2", [image])], ("M", "T"))
    rolled = BatchedDrafter(pair.drafter, rows, pair.backend("drafter", len(rows)))
    rolled.prefill()
    rolled.step([7])
    rolled.step([12])
    rolled.step([13])
    rolled.rollback(2)  # keep only [7]
    fresh = BatchedDrafter(pair.drafter, rows, pair.backend("drafter", len(rows)))
    fresh.prefill()
    fresh.step([7])
    caches = _cache_tensors(rolled.backend.cache), _cache_tensors(fresh.backend.cache)
    for (k1, v1), (k2, v2) in zip(*caches, strict=True):
        assert k1.shape == k2.shape and torch.allclose(k1, k2, atol=1e-5) and torch.allclose(v1, v2, atol=1e-5)
    assert torch.equal(rolled.backend.mask, fresh.backend.mask)
    assert torch.equal(rolled.backend.lengths, fresh.backend.lengths)
    assert torch.allclose(rolled.step([20]), fresh.step([20]), atol=1e-4)


def test_target_rollback_equals_a_fresh_prefix(pair, image):
    prompt = encode(pair.target_processor, [Turn("w1 w2", [image])], CPU, torch.float32)
    rolled, fresh = TargetSession(pair.backend("target")), TargetSession(pair.backend("target"))
    rolled.prefill(prompt)
    rolled.forward([7, 12, 13, 14])
    rolled.rollback(3)
    fresh.prefill(prompt)
    fresh.forward([7])
    caches = _cache_tensors(rolled.backend.cache), _cache_tensors(fresh.backend.cache)
    for (k1, v1), (k2, v2) in zip(*caches, strict=True):
        assert k1.shape == k2.shape and torch.allclose(k1, k2, atol=1e-5) and torch.allclose(v1, v2, atol=1e-5)
    assert torch.allclose(rolled.forward([20, 21]), fresh.forward([20, 21]), atol=1e-4)


def test_the_t_row_stands_a_newline_for_the_picture_where_a_llama_tokenizer_splits_it():
    """LLaVA's Llama tokenizer (SentencePiece, byte fallback) encodes "\n" as "▁" then the newline's byte: the T
    row's stand-in for a picture is the byte, not the space before it. Built here as that tokenizer is."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "<0x0A>": 4}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    core.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode("\n", add_special_tokens=False)) == ["\u2581", "<0x0A>"]
    assert newline_ids(tokenizer).tolist() == [4]


def test_the_p_rows_picture_is_each_2x2_patch_block_averaged_in_reading_order_then_projected(pair, image):
    """P sees the picture as M does, at a quarter of the tokens: token k is the mean of the k-th 2x2 block of
    patches (left to right, top to bottom), through the projector. Worked out here patch by patch."""
    prompt = encode(pair.drafter_processor, [Turn("w1", [image])], CPU, torch.float32)
    with torch.no_grad():
        features = vision_features(pair.drafter, prompt)[0]
        side = int(features.shape[0] ** 0.5)
        grid = features.reshape(side, side, -1)  # row-major patches
        blocks = [grid[2 * i:2 * i + 2, 2 * j:2 * j + 2].reshape(4, -1).mean(0)
                  for i in range(side // 2) for j in range(side // 2)]
        expected = pair.drafter.model.multi_modal_projector(torch.stack(blocks)[None])[0]
        pooled = pooled_image_features(pair.drafter, prompt)
    assert len(pooled) == 1 and pooled[0].shape == expected.shape
    torch.testing.assert_close(pooled[0], expected)
