"""The static cache backend (CUDA graphs on a GPU, eager here) gives exactly the dynamic path's tokens; the dynamic
one runs token ids through a LLaVA's language model directly, with the model's own logits."""

import pytest
import torch

from conftest import conversations, make_pair, verify_tree
from tabed.engine.config import GenerationConfig
from tabed.engine.drafter import BatchedDrafter, build_rows
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate, warm_up
from tabed.engine.session import TargetSession
from tabed.engine.spec import parse_spec
from tabed.errors import ModelLoadError
from tabed.models import caches
from tabed.models.caches import (
    TREE_GRAPH_SPAN,
    TREE_GRAPH_TOKENS,
    TREE_VERIFY_BUCKETS,
    DynamicBackend,
    StaticBackend,
    TreeLayout,
    fit_logits,
)
from tabed.models.chat import Turn, encode
from tabed.models.pair import ModelPair, resolve_cache
from tabed.models.warmup import TREE_STEPS

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def static_pair(pair):
    static = make_pair(pair.target, pair.drafter, pair.target_processor)
    static.cache = "static"
    return static


@pytest.mark.parametrize("spec", ["M", "T", "P", "MTCP", "tabed-MT", "tabed-MTCP"])
@pytest.mark.parametrize("gamma", [1, 4])
def test_static_gives_the_dynamic_paths_tokens(pair, static_pair, image, spec, gamma):
    config = GenerationConfig(max_new_tokens=20, gamma=gamma, may_rest=False)  # static rows never rest
    rejected = 0
    for name, turns in conversations(image).items():
        dynamic = collect(speculative_generate(pair, turns, parse_spec(spec), config))
        static = collect(speculative_generate(static_pair, turns, parse_spec(spec), config))
        assert static.token_ids == dynamic.token_ids, (spec, name)
        assert [b.draft for b in static.blocks] == [b.draft for b in dynamic.blocks]
        pictured = any(turn.images for turn in turns)  # without one, every row is the same: weights are ties
        for ours, theirs in zip(static.blocks, dynamic.blocks, strict=True) if pictured else ():
            assert all(abs(ours.weights[m] - theirs.weights[m]) < 1e-6 for m in ours.weights)
        rejected += sum(not b.bonus for b in static.blocks)
    assert rejected > 0  # roll-back by rewinding was exercised


def test_token_forwards_skip_the_llava_wrapper_and_give_its_logits(pair, image):
    """Token ids alone (no pixels) go through the language model and the output head directly: the very
    logits the whole model gives, without the wrapper's Python (a seventh of a small drafter's step)."""
    prompt = encode(pair.target_processor, [Turn("w1 w2", [image])], CPU, torch.float32)
    lean, whole = DynamicBackend(pair.target), DynamicBackend(pair.target)
    whole.text_path = whole.lean = None
    assert lean.text_path == (pair.target.model.language_model, pair.target.lm_head)
    for backend in (lean, whole):
        TargetSession(backend).prefill(prompt)
    calls = []
    hook = pair.target.register_forward_pre_hook(lambda *_: calls.append(1))
    try:
        for tokens in ([7], [12, 13, 14], [9]):
            ids = torch.tensor([tokens])
            assert torch.equal(lean.forward(ids), whole.forward(ids))
    finally:
        hook.remove()
    assert len(calls) == 3  # the whole model ran for `whole` only


def test_static_plain_decoding_and_sampling_match_dynamic(pair, static_pair, image):
    turns = [Turn("w1 w2 w3", [image])]
    greedy = GenerationConfig(max_new_tokens=24)
    assert (collect(autoregressive_generate(static_pair, turns, greedy)).token_ids
            == collect(autoregressive_generate(pair, turns, greedy)).token_ids)
    sampled = GenerationConfig(max_new_tokens=24, temperature=1.0, seed=3)
    assert (collect(speculative_generate(static_pair, turns, parse_spec("tabed-MT"), sampled)).token_ids
            == collect(speculative_generate(pair, turns, parse_spec("tabed-MT"), sampled)).token_ids)


def test_static_backends_are_made_once_and_reused(static_pair, pair, image):
    assert static_pair.backend("target") is static_pair.backend("target")
    assert static_pair.backend("drafter", 2) is not static_pair.backend("drafter", 3)
    assert isinstance(pair.backend("target"), DynamicBackend) and pair.backend("target") is not pair.backend("target")
    warm_up(static_pair)
    long_turns = [Turn("w1 w2 w3 w4 w5 w6 w7 w8 w9", [image])]
    short_turns = [Turn("w2")]  # after a longer request: stale cache entries must be masked
    config = GenerationConfig(max_new_tokens=16, gamma=3)
    for turns in (long_turns, short_turns, long_turns):
        assert (collect(speculative_generate(static_pair, turns, parse_spec("tabed-MT"), config)).token_ids
                == collect(autoregressive_generate(pair, turns, config)).token_ids)


def test_static_left_padded_rows_equal_separate_forwards(static_pair, image):
    prompt = encode(static_pair.drafter_processor, [Turn("w1 w2 w3", [image])], CPU, torch.float32)
    with torch.inference_mode():
        rows = build_rows(static_pair.drafter, static_pair.drafter_processor.tokenizer, prompt, ("M", "T", "P"))
    assert len({len(r.input_ids) for r in rows}) == 3
    batched = BatchedDrafter(static_pair.drafter, rows, static_pair.backend("drafter", 3))
    outputs = [(batched.prefill(), [])]
    for row in rows:  # one row at a time through the dynamic backend
        alone = BatchedDrafter(static_pair.drafter, [row], DynamicBackend(static_pair.drafter))
        outputs[0][1].append(alone.prefill())
        for i, tokens in enumerate(([7], [12, 13], [9])):
            if len(outputs) <= i + 1:
                outputs.append((batched.step(tokens), []))
            outputs[i + 1][1].append(alone.step(tokens))
    for together, separate in outputs:
        assert torch.allclose(together, torch.cat(separate), atol=1e-4)


def test_static_rewind_equals_a_fresh_prefix(static_pair, image):
    prompt = encode(static_pair.target_processor, [Turn("w1 w2", [image])], CPU, torch.float32)
    rolled = TargetSession(static_pair.backend("target"))
    rolled.prefill(prompt)
    rolled.forward([7, 12, 13, 14])
    rolled.rollback(3)
    after_rewind = rolled.forward([20, 21])
    fresh = TargetSession(DynamicBackend(static_pair.target))
    fresh.prefill(prompt)
    fresh.forward([7])
    assert torch.allclose(after_rewind, fresh.forward([20, 21]), atol=1e-4)


def test_a_prompt_longer_than_the_static_cache_is_refused(static_pair):
    backend = StaticBackend(static_pair.target, batch=1, max_len=8)
    with pytest.raises(ValueError, match="does not fit"):
        backend.prefill(torch.ones(1, 8, dtype=torch.long), input_ids=torch.ones(1, 8, dtype=torch.long))


def test_cache_defaults_and_bad_names(pair):
    assert resolve_cache(None, CPU) == "dynamic" and resolve_cache(None, torch.device("cuda")) == "static"
    with pytest.raises(ModelLoadError, match="unknown cache"):
        resolve_cache("paged", CPU)
    with pytest.raises(ModelLoadError, match="unknown cache"):
        ModelPair(pair.target, pair.drafter, pair.target_processor, pair.drafter_processor, CPU, torch.float32,
                  "x", cache="paged")


def test_a_tree_forward_padded_to_the_graphs_span_scores_the_same(pair, image):
    """The fixed-address tree forward a GPU replays sees the tree through a visibility padded to
    TREE_GRAPH_SPAN columns; whatever the padding holds, the logits are the exact-span forward's."""
    prompt = encode(pair.target_processor, [Turn("w1 w2", [image])], CPU, torch.float32)
    visible = torch.tensor([[True, False, True, False], [True, True, False, True]])  # 2 nodes after 2 earlier ones
    offsets, ids = torch.tensor([1, 2]), torch.tensor([[9, 12]])
    logits = []
    for width in (4, TREE_GRAPH_SPAN):
        backend = StaticBackend(pair.target, 1, 256)
        session = TargetSession(backend)
        session.prefill(prompt)
        backend.forward(torch.tensor([[4, 7]]))  # the tree's two earlier tokens
        padded = torch.ones(2, width, dtype=torch.bool)  # past the tree: anything, here all visible
        padded[:, :4] = visible
        with torch.inference_mode():
            logits.append(backend._run_tree(ids, offsets, padded, 2))
    assert torch.allclose(logits[0], logits[1], atol=1e-5)


def test_a_verify_tree_padded_to_a_bucket_scores_the_same_and_leaves_no_trace(pair, image):
    """A GPU replays a target's whole tree padded to a bucket's size: the real tokens' logits are the
    unpadded forward's, and once the path is kept the cache answers as if there had been no padding."""
    prompt = encode(pair.target_processor, [Turn("w1 w2", [image])], CPU, torch.float32)
    ids, layout = verify_tree()
    results = []
    for bucket in (None, 8, 16):
        backend = StaticBackend(pair.target, 1, 256)
        TargetSession(backend).prefill(prompt)
        with torch.inference_mode():
            tree = backend.forward(ids, layout) if bucket is None else backend.padded_tree(ids, layout, bucket)
        backend.keep(6, [0, 2, 5])  # the path: the root, node 2, node 5
        after = backend.forward(torch.tensor([[11]]))
        results.append((tree, after, int(backend.cache.layers[0].cumulative_length)))
    for tree, after, length in results[1:]:
        assert tree.shape == results[0][0].shape and torch.allclose(tree, results[0][0], atol=1e-5)
        assert torch.allclose(after, results[0][1], atol=1e-5) and length == results[0][2]


def test_a_verify_tree_that_fails_to_capture_runs_eagerly(pair, image):
    """As on a GPU where a padded tree cannot be captured: the forward still answers right, says why,
    and later trees run eagerly at their own size."""
    prompt = encode(pair.target_processor, [Turn("w1", [image])], CPU, torch.float32)
    ids, layout = verify_tree()
    answers = []
    for graphs in (True, False):
        backend = StaticBackend(pair.target, 1, 256)
        backend.graphs = graphs
        TargetSession(backend).prefill(prompt)
        answers.append((backend.forward(ids, layout), int(backend.cache.layers[0].cumulative_length)))
        if graphs:
            assert not backend.tree_graphs and "tree forwards run eager" in backend.why_eager
    assert torch.allclose(answers[0][0], answers[1][0], atol=1e-5) and answers[0][1] == answers[1][1]


def test_the_warm_up_captures_the_trees_only_with_graphs(pair, image):
    """Where there are graphs, every tree step and padded tree size is captured before anything is timed;
    where a capture fails, the warm-up stops trying and the cache is left as it was."""
    prompt = encode(pair.target_processor, [Turn("w1", [image])], CPU, torch.float32)
    for graphs in (False, True):
        backend = StaticBackend(pair.target, 1, 256)
        backend.graphs = graphs
        TargetSession(backend).prefill(prompt)
        backend.capture_trees(4, (1, 2, 3, 4, 8, 16, 32, 64, 128))
        assert int(backend.cache.layers[0].cumulative_length) == prompt.length
        assert backend.tree_graphs is not graphs  # here capture fails, as it would where graphs cannot be made


class Replayed:
    """A stand-in for a captured graph on a machine without CUDA: replaying runs the forward again on its
    fixed-address inputs, which is what a graph's replay computes."""

    def __init__(self, run):
        self.run = run

    def replay(self):
        return self.run()


def stand_in_capture(run, warm_ups=1, undo=None):
    out = run()  # a real capture records the kernels without running them: nothing to take back
    if undo is not None:
        undo()
    return Replayed(lambda: out.copy_(run())), out


@pytest.mark.parametrize("role, rows, sizes", [("drafter", 2, TREE_STEPS),
                                               ("target", 1, TREE_STEPS + TREE_VERIFY_BUCKETS)])
def test_the_warm_up_captures_every_tree_step_and_verify_size_that_fits(pair, image, monkeypatch, role, rows, sizes):
    """A hedged first block forks into a drafter step of up to TREE_GRAPH_TOKENS nodes: captured in the
    warm-up (here with a stand-in for CUDA graphs), the cache left as it was, and a later tree step then
    replays the captured forward with the eager forward's answer."""
    monkeypatch.setattr(caches, "capture_graph", stand_in_capture)
    model = pair.drafter if role == "drafter" else pair.target
    backend, eager = StaticBackend(model, rows, 256), StaticBackend(model, rows, 256)
    ids = torch.tensor([[1, 5, 6, 7]]).expand(rows, -1)
    for each in (backend, eager):
        each.prefill(torch.ones_like(ids), input_ids=ids)
    backend.graphs, eager.graphs = True, False
    backend.capture_trees(4, sizes)
    assert int(backend.cache.layers[0].cumulative_length) == 4 and backend.tree_graphs
    steps = {("tree", size, TREE_GRAPH_SPAN) for size in TREE_STEPS}
    assert set(backend._graphs) == steps | {("tree", size, size) for size in sizes if size > TREE_GRAPH_TOKENS}
    layout = TreeLayout(torch.tensor([0, 0]), torch.tensor([[True, False], [False, True]]))  # two siblings
    assert torch.allclose(backend.forward(torch.tensor([[9, 11]]).expand(rows, -1), layout),
                          eager.forward(torch.tensor([[9, 11]]).expand(rows, -1), layout), atol=1e-5)


def test_a_tree_graph_that_fails_to_capture_leaves_sequence_graphs_on(pair, image):
    """Where a tree forward cannot be captured, tree forwards run eagerly and say why once; the chain's
    graphs are not given up for it."""
    backend = StaticBackend(pair.target, 1, 256)
    backend.graphs = True  # as on a GPU: capturing fails here, as it would where graphs cannot be made
    TargetSession(backend).prefill(encode(pair.target_processor, [Turn("w1", [image])], CPU, torch.float32))
    layout = TreeLayout(torch.tensor([0, 1]), torch.tensor([[True, False], [True, True]]))
    expected = StaticBackend(pair.target, 1, 256)
    TargetSession(expected).prefill(encode(pair.target_processor, [Turn("w1", [image])], CPU, torch.float32))
    assert torch.allclose(backend.forward(torch.tensor([[4, 7]]), layout), expected.forward(torch.tensor([[4, 7]])),
                          atol=1e-5)
    assert not backend.tree_graphs and backend.graphs
    assert "tree forwards run eager" in backend.why_eager


def test_logits_are_fitted_to_the_pairs_vocabulary_and_padding_is_never_drawn():
    """A model whose head is shorter than the pair's vocabulary (the real checkpoints pad 32000 tokens to 32064)
    gets logits of -inf there: probability 0, never a draft, even where every real logit is negative; a longer
    head is cut; suppressed ids are -inf."""
    inf = float("inf")
    logits = torch.tensor([[-1.0, -2.0, -0.5]])
    padded = fit_logits(logits, 5, None)
    assert padded.tolist() == [[-1.0, -2.0, -0.5, -inf, -inf]] and int(padded.argmax()) == 2
    assert torch.softmax(padded, -1)[0, 3:].tolist() == [0.0, 0.0]
    assert fit_logits(logits, 2, None).tolist() == [[-1.0, -2.0]]
    assert fit_logits(logits, 3, torch.tensor([2])).tolist() == [[-1.0, -2.0, -inf]]
    assert fit_logits(logits, None, None) is logits
