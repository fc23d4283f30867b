"""Build the bundled teaching pair and its assets:

    python -m tabed.teaching train      # tokenizer, target, drafter -> assets/models (resumable)
    python -m tabed.teaching eval       # accuracy, block efficiency and where drafts miss, on held-out splits
    python -m tabed.teaching examples   # the app's example pictures and prompts -> assets/examples
    python -m tabed.teaching suite      # the benchmark suite of held-out cases -> assets/bench
"""

from __future__ import annotations

import argparse

from .evaluate import eval_command
from .examples import examples_command, suite_command
from .train import train_command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tabed.teaching", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train the tokenizer, the target and the drafter")
    t.add_argument("--role", choices=["both", "target", "drafter"], default="both")
    t.add_argument("--work", default="runs/teaching", help="checkpoints and tokenizer (default: runs/teaching)")
    t.add_argument("--out", default="assets/models", help="where the trained models go (default: assets/models)")
    t.add_argument("--steps", type=int, help="override the recipe's number of steps")
    t.add_argument("--restart", action="store_true", help="ignore an existing checkpoint")
    t.add_argument("--init", help="fine-tune a saved pair (a folder with target/ and drafter/, e.g. assets/models), "
                                  "keeping its tokenizer, instead of training from random weights")
    t.add_argument("--until", type=int, help="stop at this step, keeping the checkpoint (resume later)")
    t.add_argument("--micro", action="store_true", help="a tiny recipe that runs in seconds (smoke test)")
    t.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    t.add_argument("--device", help="cpu or cuda (default: cuda where there is one)")
    t.add_argument("--workers", type=int, help="processes drawing batches (default: 0 on a CPU, 4 beside a GPU)")
    e = sub.add_parser("eval", help="accuracy, block efficiency and where drafts miss, on held-out splits")
    e.add_argument("--models", default="assets/models")
    e.add_argument("--cases", type=int, default=50, help="dialogues per scenario (default: 50)")
    e.add_argument("--drafting", default="M,T,MT,tabed-MT")
    e.add_argument("--threads", type=int)
    e.add_argument("--device", default="cpu", help="where to measure (default: cpu, the pair's home)")
    x = sub.add_parser("examples", help="write the example pictures and prompts used by the app")
    x.add_argument("--out", default="assets/examples")
    x.add_argument("--size", type=int, default=256, help="picture size in pixels (default: 256)")
    b = sub.add_parser("suite", help="write the benchmark suite (held-out cases of every scenario)")
    b.add_argument("--out", default="assets/bench")
    b.add_argument("--cases", type=int, default=24, help="cases per scenario (default: 24)")
    b.add_argument("--size", type=int, default=96, help="picture size in pixels (default: 96)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    commands = {"train": train_command, "eval": eval_command, "examples": examples_command, "suite": suite_command}
    return commands[args.command](args)
