"""Tiny random LLaVA pairs built from configs (no downloads), shared by the tests."""

import atexit
import contextlib
import copy
import html
import os
import re
import shutil
import tempfile
import threading

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Every temporary file of the run (downloads, Gradio's and its client's copies, compiled kernels, servers
# started in other processes) goes into one folder that the run removes at its end: runs leave no files.
SCRATCH = tempfile.mkdtemp(prefix="tabed-tests-")
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)  # at the process's end: mutmut runs several sessions in one
os.environ["TMPDIR"] = tempfile.tempdir = SCRATCH
os.environ["GRADIO_TEMP_DIR"] = os.path.join(SCRATCH, "gradio")

import pytest  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

from tabed.engine.config import GenerationConfig  # noqa: E402
from tabed.engine.loop import autoregressive_generate, collect, speculative_generate  # noqa: E402
from tabed.engine.spec import parse_spec  # noqa: E402
from tabed.engine.tree import ROOT, DraftTree  # noqa: E402
from tabed.models.caches import TreeLayout  # noqa: E402
from tabed.models.chat import Turn  # noqa: E402
from tabed.models.factory import SPECIAL_TOKENS, LlavaSize, llava_processor, random_llava  # noqa: E402
from tabed.models.pair import ModelPair  # noqa: E402
from tabed.page.worker import WORKER_THREAD  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):  # the suite runs in several processes (pyproject.toml): one thread each,
    torch.set_num_threads(1)  # since a second torch thread would only spin against the others for these tiny models

WORDS = [f"w{i}" for i in range(40)]
SIZE = LlavaSize()


def pytest_addoption(parser):
    parser.addoption("--torch-threads", type=int, help="torch's threads in this process; mutmut, which forks a process "
                     "per mutant, needs 1 (a thread pool made before a fork hangs in the child)")


def pytest_configure(config):
    if config.getoption("--torch-threads"):
        torch.set_num_threads(config.getoption("--torch-threads"))


def pytest_collection_modifyitems(items):
    """The slow tests first (stably: each module's in its order): the processes take tests one at a time as they
    finish, so the long ones start early instead of ending the run last."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)




def word_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer: special tokens, a newline token, the chat markers, then `words`."""
    vocab: dict[str, int] = {}
    for token in SPECIAL_TOKENS + ["USER:", "ASSISTANT:", "image:"] + list(words):
        vocab.setdefault(token, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("\n", "isolated"),
        pre_tokenizers.Split("</s>", "isolated"),
        pre_tokenizers.WhitespaceSplit(),
    ])
    core.decoder = decoders.WordPiece(prefix="##")
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>",
        extra_special_tokens={"image_token": "<image>"},
    )
    tokenizer.add_tokens(["\n"])
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    return tokenizer


def a_word_split_by_a_rejection() -> tuple[PreTrainedTokenizerFast, list]:
    """'Additionally, the picture' in three blocks, their tokens pieces of words: the first keeps 'Add' and
    rejects 'le', the target's 'it' after it (inside the word); the second keeps 'ionally' ',' and the third
    'the picture', all its drafts kept."""
    from tabed.engine.events import BlockEvent, StopReason

    tokenizer = word_tokenizer(["Add", "##it", "##le", "##ionally", "##,", "the", "picture", "w1"])
    ids = dict(zip(["Add", "it", "le", "ionally", ",", "the", "picture", "w1"], tokenizer.convert_tokens_to_ids(
        ["Add", "##it", "##le", "##ionally", "##,", "the", "picture", "w1"]), strict=True))

    def block(index: int, draft: list[str], accepted: int, target: str, bonus: bool):
        draft_ids = [ids[word] for word in draft]
        return BlockEvent(index=index, weights={"M": 1.0}, draft=draft_ids, drafts={}, accepted=accepted,
                          target_token=ids[target], bonus=bonus, emitted=draft_ids[:accepted] + [ids[target]],
                          draft_probs=[0.9] * len(draft), target_probs=[0.5] * len(draft), target_token_prob=1.0,
                          method_accepted={}, stop=StopReason.FIXED, survival=None, threshold=None, draft_s=0.0,
                          verify_s=0.0, weights_s=0.0, elapsed_s=0.0)
    return tokenizer, [block(0, ["Add", "le"], 1, "it", False), block(1, ["ionally"], 1, ",", True),
                       block(2, ["the", "picture"], 2, "w1", True)]


def hand_block(draft: list[int], accepted: int, target: int, tree=(), stop: str = "fixed", index: int = 2):
    """A block made by hand: `draft` (M's and T's alike, weights even), its first `accepted` kept, then the
    target's `target`; `tree` its token tree, if it drafted one."""
    from tabed.engine.events import BlockEvent, StopReason

    return BlockEvent(index=index, weights={"M": 0.5, "T": 0.5}, draft=draft, drafts={"M": draft, "T": draft},
                      accepted=accepted, target_token=target, bonus=accepted == len(draft),
                      emitted=draft[:accepted] + [target], draft_probs=[0.5] * len(draft),
                      target_probs=[0.5] * len(draft), target_token_prob=0.5, method_accepted={},
                      stop=StopReason(stop), threshold=None, survival=None, draft_s=0.0, verify_s=0.0,
                      weights_s=0.0, elapsed_s=0.0, tree=list(tree))


SPECS = ["M", "T", "C", "P", "MT", "MTC", "MTP", "MTCP", "tabed-MT", "tabed-MTC", "tabed-MTP", "tabed-MTCP",
         "tabed-MTN"]


def conversations(image):
    """The four kinds of conversation every drafting spec is checked on."""
    return {
        "image-first-turn": [Turn("w1 w2 w3", [image])],
        "text-first-turn": [Turn("w7")],
        "image-second-turn": [Turn("w1 w2 w3", [image], answer="w4 w5 w6"), Turn("w7 w8")],
        "text-second-turn": [Turn("w1 w2", answer="w9 w10"), Turn("w7")],
    }


def ending_on_a_draft(pair, image, spec: str):
    """The pair's answer made to end on a token it drafts (a drafter that is the target accepts every draft):
    one of the answer's own tokens becomes the end token."""
    turns = [Turn("w1 w2 w3", [image])]
    config = GenerationConfig(max_new_tokens=24, gamma=8, adaptive=False)
    end = collect(autoregressive_generate(pair, turns, config)).token_ids[5]
    saved = pair.target.generation_config.eos_token_id
    pair.target.generation_config.eos_token_id = end
    try:
        return collect(speculative_generate(pair, turns, parse_spec(spec), config))
    finally:
        pair.target.generation_config.eos_token_id = saved


def verify_tree() -> tuple[torch.Tensor, TreeLayout]:
    """The last committed token and a 5-node tree that branches twice, laid out as a target's verify sees
    them (`TreeVerifier`: the root first, then the nodes)."""
    tree = DraftTree()
    for token, parent in ((9, ROOT), (12, ROOT), (5, 0), (7, 0), (9, 1)):
        tree.add(parent, token, 0.5, 0.5)
    entries = [ROOT, *range(len(tree.tokens))]
    return torch.tensor([[4, *tree.tokens]]), tree.layout(entries, entries, shift=0)


def sharpen(model, std: float = 0.1, seed: int = 0):
    """Redraw the matrices with a larger spread so that the random model has peaked, varied outputs."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=generator) * std)
    return model


def perturbed(model, noise: float, seed: int = 1):
    """A copy of `model` with Gaussian noise on every weight: a drafter that agrees often, not always."""
    copy_ = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in copy_.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * noise)
    return copy_


def make_pair(target, drafter, processor, name="tiny", drafter_processor=None) -> ModelPair:
    """A CPU pair; the drafter shares the target's processor unless it sees pictures otherwise."""
    return ModelPair(target, drafter, processor, drafter_processor or processor, torch.device("cpu"), torch.float32,
                     name)


@contextlib.contextmanager
def serving(pair):
    """The app module with `pair` standing in for the (default) teaching preset, its runs held against no quiet
    costs (`PairCache.quiet`) and never starved (`session.BUSY_SHARE`)."""
    import app
    from tabed.engine import session

    saved = (app.PAIRS.name, app.PAIRS.pair, app.PAIRS.quiet, session.BUSY_SHARE)
    # a tiny pair's runs last milliseconds beside other tests: held against no quiet costs and never found
    # starved, so that what the page shows does not hang on the machine's load (a test of either sets its own)
    app.PAIRS.name, app.PAIRS.pair, app.PAIRS.quiet, session.BUSY_SHARE = "teaching", pair, None, 0.0
    try:
        yield app
    finally:
        app.PAIRS.name, app.PAIRS.pair, app.PAIRS.quiet, session.BUSY_SHARE = saved


def workers_alive() -> int:
    """Decoding worker threads still running."""
    return sum(thread.name == WORKER_THREAD and thread.is_alive() for thread in threading.enumerate())


@pytest.fixture(scope="session")
def tokenizer():
    return word_tokenizer(WORDS)


@pytest.fixture(scope="session")
def processor(tokenizer):
    return llava_processor(tokenizer, SIZE.image_size, SIZE.patch_size)


@pytest.fixture(scope="session")
def target(tokenizer):
    return sharpen(random_llava(SIZE, tokenizer, seed=0), seed=0)


@pytest.fixture(scope="session")
def pair(target, processor):
    """A drafter close to the target: blocks are partly accepted, partly rejected."""
    return make_pair(target, perturbed(target, noise=0.004), processor)


@pytest.fixture(scope="session")
def loose_pair(target, processor):
    """A drafter further from the target than `pair`'s: its second choices are often the right ones."""
    return make_pair(target, perturbed(target, noise=0.02), processor)


@pytest.fixture(scope="session")
def twin_pair(target, processor):
    """The drafter IS a copy of the target: with the image (M), every draft is accepted."""
    return make_pair(target, copy.deepcopy(target), processor)


@pytest.fixture(scope="session")
def teaching_pair():
    """The bundled teaching pair on the CPU, loaded once (tests only read it)."""
    from tabed.models.loading import load_preset

    return load_preset("teaching", device="cpu")


@pytest.fixture(scope="session")
def image():
    img = Image.new("RGB", (48, 40), (200, 30, 30))
    for x in range(10, 30):
        for y in range(5, 25):
            img.putpixel((x, y), (20, 40, 220))
    return img


@pytest.fixture(scope="session")
def other_image():
    return Image.new("RGB", (40, 40), (30, 200, 60))


@pytest.fixture(scope="session")
def pair_dirs(tmp_path_factory, pair, processor):
    """The `pair` fixture saved as two model folders, as a user would have them on disk."""
    root = tmp_path_factory.mktemp("pair")
    for role, model in (("target", pair.target), ("drafter", pair.drafter)):
        model.save_pretrained(root / role)
        processor.save_pretrained(root / role)
    return root


def status_text(status):
    """What the status (HTML) says, as text: its verdict, then a reason a line ("- key: line") with its folded
    detail on the next; anything that is no text (a skipped output) as it is."""
    if not isinstance(status, str):
        return status
    text = re.sub(r"<li>", "\n- ", status)
    text = re.sub(r"</summary>|</p>|</div>", "\n", text)
    text = re.sub(r"<[^>]+>", "", text)
    return html.unescape(re.sub(r"\n+", "\n", text)).strip()
