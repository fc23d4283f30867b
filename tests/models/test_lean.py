"""The lean decoder gives a Llama language model's own logits, bit for bit, on every kind of token forward a
backend makes: one token and several, a single row and a left-padded batch, a tree; its prefill of a drafter's
rows gives the library's keys and values, bit for bit, and its last logits to rounding; a drafter's fused token
forwards (each layer's projections joined) give its logits to rounding; and only such models take it."""

import copy

import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaModel

from conftest import verify_tree
from tabed.bench.overhead import take_path
from tabed.engine.drafter import BatchedDrafter, build_rows
from tabed.engine.session import TargetSession
from tabed.models.caches import DynamicBackend
from tabed.models.chat import Turn, encode
from tabed.models.lean import ROPE_ROWS, FusedLayer, LeanDecoder, lean_decoder

CPU = torch.device("cpu")


def backends(model, fused: bool = False) -> tuple[DynamicBackend, DynamicBackend]:
    """The same model's backend through the lean decoder (`fused` or not) and through transformers' language
    model."""
    lean, library = DynamicBackend(model, fused=fused), DynamicBackend(model)
    take_path(library, "library")
    assert isinstance(lean.lean, LeanDecoder) and lean.text_path == library.text_path
    return lean, library


def tree_forward(backend: DynamicBackend) -> torch.Tensor:
    """`verify_tree`'s 5 nodes after the last token, in every row of the batch."""
    ids, layout = verify_tree()
    return backend.forward(ids.expand(backend.mask.shape[0], -1), layout)


FORWARDS = ([7], [12, 13, 14], [9], [3, 4])  # one token, several (a verify, a catch-up), after them again


def test_a_target_step_verify_and_tree_give_the_library_logits(pair, image):
    """The target after a picture's prompt: steps, verifies (which need a causal mask the lean decoder is given),
    a tree, and a rewind between them."""
    prompt = encode(pair.target_processor, [Turn("w1 w2", [image])], CPU, torch.float32)
    lean, library = backends(pair.target)
    for backend in (lean, library):
        TargetSession(backend).prefill(prompt)
    for tokens in FORWARDS:
        ids = torch.tensor([tokens])
        assert torch.equal(lean.forward(ids), library.forward(ids)), tokens
    for backend in (lean, library):
        backend.rewind(2)
    assert torch.equal(tree_forward(lean), tree_forward(library))
    assert torch.equal(lean.lengths, library.lengths)


@pytest.mark.parametrize("methods", [("M", "T"), ("M", "T", "C")])
def test_a_left_padded_drafter_batch_gives_the_library_logits(pair, image, methods):
    """The drafter's rows of different lengths, left-padded in one batch: each row's steps and several-token
    forwards see its own tokens only, as the library's do."""
    prompt = encode(pair.drafter_processor, [Turn("w1 w2 w3", [image])], CPU, torch.float32)
    with torch.inference_mode():
        rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, methods, ["w5 w6"])
    lean, library = backends(pair.drafter)
    starts = [BatchedDrafter(pair.drafter, rows, backend).prefill() for backend in (lean, library)]
    assert torch.allclose(*starts, rtol=0, atol=1e-5) and lean.padded
    assert_same_cache(lean, library)
    for tokens in FORWARDS:
        ids = torch.tensor([tokens] * len(methods))
        assert torch.equal(lean.forward(ids), library.forward(ids)), tokens
    assert torch.equal(tree_forward(lean), tree_forward(library))


@pytest.mark.parametrize("methods", [("M", "T"), ("T",)])
def test_a_fused_drafter_gives_the_library_logits_to_rounding(pair, image, methods, monkeypatch):
    """Fused token forwards (one row and a left-padded batch; a step, several tokens, a tree) give the library's
    logits and caches to rounding, the same top tokens, after a prefill that is the library's bit for bit (never
    fused: on some CPUs the joined products round alike, so the prefill is also watched not to call them); a row
    split off to rest keeps the fused path."""
    prompt = encode(pair.drafter_processor, [Turn("w1 w2 w3", [image])], CPU, torch.float32)
    with torch.inference_mode():
        rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, methods)
    fused, library = backends(pair.drafter, fused=True)
    joined = []
    inputs = FusedLayer.attention_inputs
    monkeypatch.setattr(FusedLayer, "attention_inputs", lambda layer, *args: joined.append(1) or inputs(layer, *args))
    for backend in (fused, library):
        BatchedDrafter(pair.drafter, rows, backend).prefill()
    assert_same_cache(fused, library)
    assert joined == []
    forwards = [(fused.forward(ids), library.forward(ids)) for ids in
                (torch.tensor([tokens] * len(methods)) for tokens in FORWARDS)]
    forwards.append((tree_forward(fused), tree_forward(library)))
    for mine, theirs in forwards:
        assert torch.allclose(mine, theirs, rtol=0, atol=1e-5)
        assert torch.equal(mine.argmax(-1), theirs.argmax(-1))
    assert not all(torch.equal(mine, theirs) for mine, theirs in forwards)  # another order of sums: it did run
    assert joined  # the token forwards took the joined products
    for mine, theirs in zip(fused.cache.layers, library.cache.layers, strict=True):
        assert torch.allclose(mine.keys, theirs.keys, rtol=0, atol=1e-5)
        assert torch.allclose(mine.values, theirs.values, rtol=0, atol=1e-5)
    if len(methods) > 1:
        assert fused.split([1]).lean is fused.lean


def causal(new: int, cached: int) -> torch.Tensor:
    """The additive causal mask (1, 1, new, cached + new) of `new` tokens after `cached` ones."""
    hidden = torch.ones(new, cached + new, dtype=torch.bool).triu(cached + 1)
    return torch.zeros(1, 1, new, cached + new).masked_fill_(hidden, float("-inf"))


def test_fused_projections_keep_biases_and_grouped_heads():
    """A Llama with biases on every projection and one key-value head for two query heads: the fused forwards'
    hidden states are the unfused ones' to rounding, over steps and several-token forwards, the last at positions
    past the fused decoder's first table of rotary rows."""
    config = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, attention_bias=True, mlp_bias=True,
                         attn_implementation="sdpa")
    model = LlamaModel(config).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    plain, fused = LeanDecoder(model), LeanDecoder(model, fused=True)
    caches = [DynamicCache(config=config), DynamicCache(config=config)]
    with torch.inference_mode():
        for start, ids, mask in ((0, [3], None), (1, [7], None), (2, [1], None), (3, [4, 9, 2], causal(3, 3)),
                                 (ROPE_ROWS - 1, [5, 8], causal(2, 6))):
            positions = torch.arange(start, start + len(ids))[None]
            one, other = (decoder(torch.tensor([ids]), positions, mask, cache)
                          for decoder, cache in zip((plain, fused), caches, strict=True))
            assert torch.allclose(one, other, rtol=0, atol=1e-5), ids
    layer = fused.fused_layers()[0]  # query (2 heads of 16) and key (1), value, the query and key rotated
    assert layer.qkv.widths == (48, 16, 48) and layer.heads == 2 and plain.fused_layers() == [None, None]


def test_a_pair_fuses_its_drafters_forwards_not_its_targets(pair):
    """Only the drafter is fused: the target's layers keep the order chosen per row count (`matmul.py`)."""
    assert pair.backend("drafter", 2).lean.fused and not pair.backend("target").lean.fused


def assert_same_cache(one: DynamicBackend, other: DynamicBackend) -> None:
    assert torch.equal(one.mask, other.mask) and torch.equal(one.lengths, other.lengths)
    for mine, theirs in zip(one.cache.layers, other.cache.layers, strict=True):
        assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)


@pytest.mark.parametrize("methods", [("M",), ("T",), ("M", "M")])
def test_a_drafter_prefill_gives_the_library_cache_and_last_logits(pair, image, methods):
    """Rows of one length (a picture's M row, a text row, two rows alike): every layer's keys and values as the
    library makes them, the last logits to rounding (the last layer runs for the last position alone); and the
    steps after it, on the same cache, the library's again."""
    prompt = encode(pair.drafter_processor, [Turn("w1 w2 w3 w4", [image])], CPU, torch.float32)
    with torch.inference_mode():
        rows = build_rows(pair.drafter, pair.drafter_processor.tokenizer, prompt, methods)
    lean, library = backends(pair.drafter)
    starts = [BatchedDrafter(pair.drafter, rows, backend).prefill() for backend in (lean, library)]
    assert starts[0].shape == (len(methods), pair.vocab_size)
    assert torch.allclose(*starts, rtol=0, atol=1e-5) and not lean.padded
    assert_same_cache(lean, library)
    ids = torch.tensor([[5, 6]] * len(methods))
    assert torch.equal(lean.forward(ids), library.forward(ids))


def test_only_a_drafters_unpadded_embeddings_for_the_last_logits_prefill_lean(pair, image, monkeypatch):
    """Pixels (the target's prompt), ids, padding or more than the last logits go through the whole model."""
    backend = DynamicBackend(pair.drafter)
    leaned, prefill = [], backend.lean.prefill
    monkeypatch.setattr(backend.lean, "prefill", lambda *args: leaned.append(True) or prefill(*args))
    embeds = pair.drafter.get_input_embeddings()(torch.tensor([[3, 4, 5]]))
    ones, padded = torch.ones(1, 3, dtype=torch.long), torch.tensor([[0, 1, 1]])
    backend.prefill(ones, keep=2, inputs_embeds=embeds)
    backend.prefill(padded, inputs_embeds=embeds)
    backend.prefill(ones, input_ids=torch.tensor([[3, 4, 5]]))
    prompt = encode(pair.drafter_processor, [Turn("w1", [image])], CPU, torch.float32)
    backend.prefill(torch.ones_like(prompt.input_ids), input_ids=prompt.input_ids, **prompt.image_inputs)
    assert not leaned
    backend.prefill(ones, inputs_embeds=embeds)
    assert leaned == [True]


def test_only_transformers_llama_with_sdpa_attention_is_lean(pair):
    decoder = pair.drafter.model.language_model
    assert isinstance(lean_decoder(decoder), LeanDecoder)
    eager = copy.copy(decoder)
    eager.config = copy.deepcopy(decoder.config)
    eager.config._attn_implementation = "eager"
    assert lean_decoder(eager) is None
    assert lean_decoder(pair.drafter.model.vision_tower) is None
    assert DynamicBackend(torch.nn.Linear(2, 2)).lean is None  # not a LLaVA: runs whole


def test_the_overhead_report_times_each_path_its_own_way(pair):
    """`python -m tabed overhead` times a drafter step through the lean decoder, fused (as it runs) and not,
    transformers' language model and the whole LLaVA: each backend it times takes the path it is told."""
    for path, lean, text, fused in (("lean", True, True, True), ("unfused", True, True, False),
                                    ("library", False, True, False), ("whole", False, False, False)):
        backend = pair.backend("drafter")
        take_path(backend, path)
        assert (backend.lean is not None, backend.text_path is not None) == (lean, text), path
        assert (backend.lean is not None and backend.lean.fused) == fused, path
