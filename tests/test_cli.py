"""`python -m tabed generate`: JSON keys, text output, one-line errors with exit code 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tabed.cli import main
from tabed.engine.session import Clock

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def image_file(tmp_path_factory, image):
    path = tmp_path_factory.mktemp("img") / "scene.png"
    image.save(path)
    return path


def on_finish(generate, change):
    """`generate` with `change` applied to its finished result, as if the run had measured that."""
    from tabed.engine.events import Finished

    def wrapped(*args, **kwargs):
        for event in generate(*args, **kwargs):
            if isinstance(event, Finished):
                change(event.result)
            yield event
    return wrapped


def run_cli(capsys, *args):
    code = main(["generate", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_with_compare_ar(capsys, pair_dirs, image_file):
    code, out, err = run_cli(
        capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--image", image_file,
        "--prompt", "w1 w2 w3", "--drafting", "tabed-MT", "--gamma", 3, "--max-new-tokens", 16,
        "--compare-ar", "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    assert isinstance(report["text"], str) and len(report["token_ids"]) == 16
    assert report["blocks"] and {"weights", "accepted", "drafts", "draft"} <= set(report["blocks"][0])
    assert set(report["blocks"][0]["drafts"]) == {"M", "T"}
    assert report["metrics"]["block_efficiency"] > 1.0
    assert report["metrics"]["walltime_s"] > 0 and report["metrics"]["speedup"] > 0
    assert report["ar"]["token_ids"] == report["token_ids"] and report["same_output"] is True
    assert report["ar"]["walltime_s"] > 0 and report["dtype"] == "float32" and report["device"] == "cpu"
    busy = report["metrics"]["busy"] or report["ar"]["busy"]  # a starved run's timings explain nothing
    assert busy or report["why"].endswith(f"measured {report['metrics']['speedup']:.2f}×")


def test_several_images_go_with_the_first_prompt(capsys, pair_dirs, image_file):
    code, out, err = run_cli(
        capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--image", image_file,
        "--image", image_file, "--prompt", "w1 w2", "--prompt", "w3", "--max-new-tokens", 8, "--compare-ar",
        "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    assert [turn["images"] for turn in report["turns"]] == [2, 0]
    assert report["same_output"] is True


def test_text_output_shows_each_prompt_and_its_answer(capsys, pair_dirs):
    code, out, err = run_cli(
        capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter",
        "--prompt", "w1 w2", "--prompt", "w7", "--max-new-tokens", 8, "--drafting", "MT",
    )
    assert code == 0, err
    assert out.startswith("> w1 w2\n") and "\n\n> w7\n" in out and "block efficiency" in err
    first, second = out.removeprefix("> w1 w2\n").split("\n\n> w7\n")
    assert first.strip() and second.strip()  # each prompt's answer


def test_inspect_records_what_each_block_decided_in_the_json(capsys, pair_dirs, image_file):
    pair = ["--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--image", image_file]
    reports = {}
    for extra in ((), ("--inspect",)):
        code, out, err = run_cli(capsys, *pair, "--prompt", "w1 w2", "--max-new-tokens", 12, "--json", *extra)
        assert code == 0, err
        reports[bool(extra)] = json.loads(out)
    assert all(not b["positions"] and b["weight_update"] is None for b in reports[False]["blocks"])
    inspected = reports[True]["blocks"]
    assert reports[True]["token_ids"] == reports[False]["token_ids"]
    assert all(len(b["positions"]) == min(b["accepted"] + 1, len(b["draft"])) for b in inspected)
    assert {"draft", "methods", "ensemble", "target", "test"} <= set(inspected[0]["positions"][0])
    assert any(b["weight_update"] for b in inspected[1:]) and "accepted_histogram" in reports[True]["metrics"]


def test_a_busy_run_says_its_timings_are_unreliable(capsys, pair_dirs, monkeypatch):
    monkeypatch.setattr(Clock, "cpu_share", lambda self: 0.2)
    code, _, err = run_cli(capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter",
                           "--prompt", "w1 w2", "--max-new-tokens", 4, "--compare-ar")
    assert code == 0 and "timings unreliable: the machine was busy" in err


def test_a_busy_runs_speed_is_not_explained(capsys, pair_dirs, monkeypatch):
    """A starved run's costs say nothing of the method: no 'why' beside its figure, in the JSON or the line; a
    quiet run of the same request has one."""
    args = ["--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--prompt", "w1 w2",
            "--max-new-tokens", 12, "--compare-ar"]
    monkeypatch.setattr(Clock, "cpu_share", lambda self: 1.0)
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0 and "why" in json.loads(out)
    monkeypatch.setattr(Clock, "cpu_share", lambda self: 0.2)
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0 and "why" not in json.loads(out) and json.loads(out)["metrics"]["busy"]
    code, _, err = run_cli(capsys, *args)
    assert code == 0 and "why:" not in err and "timings unreliable" in err


def test_plain_decodings_own_speed_and_starving_are_reported_as_its_own(capsys, pair_dirs, monkeypatch):
    """Plain decoding alone starved (TABED's run quiet) and at a speed of its own: the JSON gives plain decoding's
    figures, not TABED's; its timings are said unreliable and its speed not explained, in the JSON and the line."""
    import tabed.cli as cli

    def starved(result) -> None:
        result.metrics.busy, result.metrics.tokens_per_s = True, 123.0

    monkeypatch.setattr(Clock, "cpu_share", lambda self: 1.0)
    monkeypatch.setattr(cli, "autoregressive_generate", on_finish(cli.autoregressive_generate, starved))
    args = ["--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--prompt", "w1 w2",
            "--max-new-tokens", 12, "--compare-ar"]
    code, out, err = run_cli(capsys, *args, "--json")
    report = json.loads(out)
    assert code == 0 and report["ar"]["busy"] and not report["metrics"]["busy"] and "why" not in report
    assert report["ar"]["tokens_per_s"] == 123.0 != report["metrics"]["tokens_per_s"]
    code, _, err = run_cli(capsys, *args)
    assert code == 0 and "AR 123.0 tok/s" in err and "why:" not in err and "timings unreliable" in err


def test_loading_is_told_on_stderr_unless_the_output_is_json(capsys, pair_dirs):
    args = ["--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--prompt", "w1",
            "--max-new-tokens", 2]
    code, _, err = run_cli(capsys, *args)
    assert code == 0 and "[tabed] models ready" in err
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0 and "[tabed]" not in err and json.loads(out)["token_ids"]


def test_ctrl_c_exits_with_130_and_no_traceback(capsys, monkeypatch):
    import tabed.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "generate", interrupted)
    monkeypatch.setattr(cli, "overhead", interrupted)
    assert main(["generate", "--prompt", "w1"]) == 130
    assert main(["overhead"]) == 130
    assert capsys.readouterr().err == ""


def test_one_prompt_prints_its_answer_alone(capsys, pair_dirs):
    code, out, err = run_cli(capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter",
                             "--prompt", "w1 w2", "--max-new-tokens", 8, "--json")
    assert code == 0, err
    text = json.loads(out)["text"]
    code, out, err = run_cli(capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter",
                             "--prompt", "w1 w2", "--max-new-tokens", 8)
    assert code == 0, err
    assert out == text + "\n"


@pytest.mark.parametrize("extra, message", [
    (["--image", "/no/such.png"], "image not found"),
    (["--drafting", "XYZ"], "unknown drafting spec"),
    (["--gamma", "0"], "gamma"),
    (["--tree-width", "7"], "tree width"),
    (["--prompt", " "], "turn 2 is empty"),  # before the models load (their progress would be more lines)
])
def test_errors_are_one_line_with_exit_code_2(capsys, pair_dirs, extra, message):
    code, out, err = run_cli(capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter",
                             "--prompt", "w1", *extra)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and out == ""


@pytest.mark.parametrize("device, message", [
    ("cuda", "this machine has no CUDA GPU"), ("cuda:1", "this machine has no CUDA GPU"), ("foo", "unknown device"),
])
def test_a_device_that_is_not_here_is_one_line(capsys, pair_dirs, monkeypatch, device, message):
    """Not torch's assertion from deep inside the first `.to()`."""
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 0)
    code, out, err = run_cli(capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter",
                             "--prompt", "w1", "--device", device)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1 and out == ""


def test_a_gpu_index_past_the_last_gpu_is_named(monkeypatch):
    from tabed.errors import InputError
    from tabed.models.pair import resolve_device

    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
    assert resolve_device("cuda:1").index == 1
    with pytest.raises(InputError, match="has 2 CUDA GPU"):
        resolve_device("cuda:2")


@pytest.mark.parametrize("extra, message", [
    (["--drafting", "M,tabed-XY"], "unknown drafting spec 'tabed-XY'"),
    (["--suite", "/no/such.jsonl"], "suite not found"),
])
def test_a_bench_with_a_bad_spec_or_suite_stops_before_loading_the_pair(capsys, monkeypatch, tmp_path, extra, message):
    """Loading a pair takes seconds (a 7B one minutes): nothing is loaded for a bench that cannot run."""
    import tabed.cli

    def load(*args, **kwargs):
        raise AssertionError("the pair was loaded")

    monkeypatch.setattr(tabed.cli, "_load", load)
    code = main(["bench", "--out", str(tmp_path / "out"), *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_widening_a_folder_that_is_not_there_says_so(capsys, tmp_path):
    code = main(["widen", "--model", str(tmp_path / "missing"), "--hidden", "64", "--layers", "2", "--heads", "2",
                 "--intermediate", "128", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "model folder not found" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("blocks", ["all", "first"])
def test_token_trees_in_the_json(capsys, pair_dirs, image_file, blocks):
    code, out, err = run_cli(
        capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--image", image_file,
        "--prompt", "w1 w2 w3", "--tree-width", 3, "--tree-blocks", blocks, "--gamma", "auto:4",
        "--max-new-tokens", 24, "--compare-ar", "--json",
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["same_output"]
    nodes = report["blocks"][0]["tree"]
    assert nodes and {"token", "parent", "proposer", "accepted", "draft_prob", "target_prob"} == set(nodes[0])
    kept = [node["token"] for node in nodes if node["accepted"]]
    assert kept == report["blocks"][0]["draft"][:report["blocks"][0]["accepted"]]
    later = [bool(block["tree"]) for block in report["blocks"][1:]]
    assert later and all(later) == (blocks == "all") and any(later) == (blocks == "all")


@pytest.mark.parametrize("hedge", [True, False])
def test_the_first_block_hedges_unless_told_not_to(capsys, pair_dirs, image_file, hedge):
    code, out, err = run_cli(
        capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--image", image_file,
        "--prompt", "w1 w2 w3", "--max-new-tokens", 24, "--compare-ar", "--json",
        *([] if hedge else ["--no-hedge-first"]),
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["same_output"] and len(report["blocks"]) > 1
    assert bool(report["blocks"][0]["tree"]) == hedge and not any(block["tree"] for block in report["blocks"][1:])


def test_only_target_is_an_error(capsys, pair_dirs):
    code, _, err = run_cli(capsys, "--target", pair_dirs / "target", "--prompt", "w1")
    assert code == 2 and "--drafter" in err


@pytest.mark.slow
def test_module_entry_point(pair_dirs, tmp_path):
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"nope")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "tabed", "generate", "--target", str(pair_dirs / "target"),
               "--drafter", str(pair_dirs / "drafter"), "--prompt", "w1", "--image", str(broken)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.startswith("error: cannot read image")
    done = subprocess.run(command[:-2] + ["--max-new-tokens", "4", "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["token_ids"]) == 4
    bad = subprocess.run([sys.executable, "-m", "tabed", "generate"], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2


def test_static_cache_gives_the_dynamic_caches_answer(capsys, pair_dirs, image_file):
    outputs = {}
    for cache in ("dynamic", "static"):
        code, out, err = run_cli(
            capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--image", image_file,
            "--prompt", "w1 w2 w3", "--max-new-tokens", 16, "--cache", cache, "--compare-ar", "--json")
        assert code == 0, err
        outputs[cache] = json.loads(out)
    assert outputs["static"]["token_ids"] == outputs["dynamic"]["token_ids"]
    assert outputs["static"]["same_output"] is True


def test_overhead_reports_per_step_costs(capsys, pair_dirs):
    code = main(["overhead", "--target", str(pair_dirs / "target"), "--drafter", str(pair_dirs / "drafter"),
                 "--steps", "4", "--rounds", "1"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cache"] == "dynamic" and report["1"] == 1.0
    assert {"cpu", "cores", "torch_threads", "blas", "torch"} <= set(report["machine"])
    for key in ("target_ms", "target_library_ms", "verify_ms", "verify_tree_ms", "draft_k1_ms", "draft_k2_ms",
                "draft_k4_ms", "draft_tree2_ms", "draft_tree3_ms", "verify_members_ms"):
        assert report[key] > 0
    assert report["speedup_bound_per_tau"] == pytest.approx(
        report["target_ms"] / (report["verify_ms"] + 5 * report["draft_k2_ms"]))
    assert report["draft_members_ms"] == pytest.approx(report["draft_k2_ms"] + 4 * report["draft_tree3_ms"])
    assert report["members_bound_per_tau"] == pytest.approx(
        report["target_ms"] / (report["verify_members_ms"] + report["draft_members_ms"]))
    assert set(report["row_ms"]) == {"T", "M", "T,T", "M,T", "T unfused", "M,T unfused", "T library", "M,T library",
                                     "M,T whole", "T fed 2", "M,T fed 2"}
    assert all(ms > 0 for ms in report["row_ms"].values())


def test_overhead_times_the_gamma_rounds_and_picture_it_is_given(capsys, pair_dirs, monkeypatch):
    """`--gamma 3 --rounds 1 --steps 5`: each measurement is asked for exactly that, on a turn with one picture,
    and the report keeps every figure it got back and the pair's notes."""
    import tabed.bench.overhead as overhead

    asked = {}

    def recorder(name, result):
        def record(pair, turns, *args, **kwargs):
            asked[name] = (len(turns), [len(turn.images) for turn in turns], args, kwargs)
            return result
        return record

    monkeypatch.setattr(overhead, "batching_overhead", recorder("ratios", {1: 1.0, 2: 1.5}))
    monkeypatch.setattr(overhead, "step_costs", recorder("steps", {"target_ms": 7.0}))
    monkeypatch.setattr(overhead, "row_costs", recorder("rows", {"T": 2.0}))
    code = main(["overhead", "--target", str(pair_dirs / "target"), "--drafter", str(pair_dirs / "drafter"),
                 "--gamma", "3", "--rounds", "1", "--steps", "5"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["1"] == 1.0 and report["2"] == 1.5 and report["target_ms"] == 7.0
    assert report["row_ms"] == {"T": 2.0} and report["notes"] == [] and report["device"] == "cpu"
    assert asked == {"ratios": (1, [1], (), {"steps": 5, "rounds": 1}), "steps": (1, [1], (3, 5), {}),
                     "rows": (1, [1], (), {"steps": 5, "rounds": 1})}


@pytest.mark.parametrize("extra, message", [
    (["--steps", 2], "--steps must be at least 3 (the first 2 warm up), got 2"),
    (["--rounds", 0], "--rounds must be at least 1, got 0"),
    (["--gamma", 0], "gamma must be between 1 and 64, got 0"),
    (["--gamma", -1], "gamma must be between 1 and 64, got -1"),
    (["--gamma", 65], "gamma must be between 1 and 64, got 65"),
])
def test_overhead_refuses_numbers_it_cannot_time_in_one_line(capsys, monkeypatch, extra, message):
    """Once `--steps 2` and `--rounds 0` ended in a StatisticsError's traceback and `--gamma -1` in a reshape's,
    after the models had loaded; `--gamma 0` timed a verify of one token. Now each is one line, exit 2, at once."""
    import tabed.cli as cli

    monkeypatch.setattr(cli, "_load", lambda args, quiet=False: pytest.fail("loaded the models"))
    code = main(["overhead", *map(str, extra)])
    out = capsys.readouterr()
    assert code == 2 and out.err.strip() == f"error: {message}" and out.out == ""


@pytest.mark.parametrize("tokens", [1, 1024])
def test_the_ends_of_max_new_tokens_on_the_bundled_pair(capsys, tokens):
    """As a new user tried it: `--prompt hi --max-new-tokens 1` once printed a traceback and exited 1."""
    code, out, err = run_cli(capsys, "--prompt", "hi", "--max-new-tokens", tokens, "--compare-ar", "--json")
    assert code == 0 and "Traceback" not in err, err
    report = json.loads(out)
    assert 1 <= len(report["token_ids"]) <= tokens and report["same_output"] is True


@pytest.mark.slow
def test_the_entry_points_turn_cudnn_attention_off_and_loading_does_not(pair_dirs):
    """A process-wide choice is the entry point's (the CLI here, app.py alike), never a side effect of loading
    a pair: the flag is still on after `load_pair` and off once the CLI has run."""
    pair = [str(pair_dirs / "target"), str(pair_dirs / "drafter")]
    script = ("import torch\n"
              "from tabed.cli import main\n"
              "from tabed.models.loading import load_pair\n"
              f"load_pair(*{pair!r}, device='cpu')\n"
              "print('cudnn', torch.backends.cuda.cudnn_sdp_enabled())\n"
              f"main(['generate', '--target', {pair[0]!r}, '--drafter', {pair[1]!r}, '--prompt', 'w1'])\n"
              "print('cudnn', torch.backends.cuda.cudnn_sdp_enabled())\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    flags = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("cudnn ")]
    assert flags == ["True", "False"], done.stderr


def test_every_option_reaches_the_config_by_its_name():
    """The options that are config fields are read by the config's own names: each one given, each one set."""
    from tabed.cli import _config, build_parser
    from tabed.engine.config import GenerationConfig
    from tabed.engine.settings import Settings

    args = build_parser().parse_args(
        ["generate", "--prompt", "x", "--gamma", "auto:7", "--rule", "kld", "--window", "9", "--top-p", "0.5",
         "--seed", "3", "--temperature", "0.7", "--max-new-tokens", "11", "--tree-width", "2", "--tree-policy",
         "methods", "--tree-blocks", "first", "--no-hedge-first", "--no-resting", "--inspect"])
    expected = GenerationConfig(max_new_tokens=11, temperature=0.7, top_p=0.5, seed=3, gamma=7, adaptive=True,
                                rule="kld", window=9, tree_width=2, tree_policy="methods", tree_blocks="first",
                                hedge_first=False, may_rest=False, inspect=True)
    assert Settings.parse(args.drafting, args.gamma, **_config(args)).config == expected
    bench = build_parser().parse_args(["bench", "--out", "x", "--seed", "5", "--no-resting"])
    assert Settings.parse(gamma=bench.gamma, **_config(bench)).config == GenerationConfig(seed=5, may_rest=False)


def test_a_preset_beside_a_target_or_a_drafter_alone_is_refused(capsys, pair_dirs):
    both = ["--preset", "teaching", "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter"]
    code, _, err = run_cli(capsys, *both, "--prompt", "w1")
    assert code == 2 and "not both" in err
    code, _, err = run_cli(capsys, "--drafter", pair_dirs / "drafter", "--prompt", "w1")
    assert code == 2 and "give both --target and --drafter" in err


def test_plain_decodings_decode_time_leaves_out_its_prefill(capsys, pair_dirs, image_file):
    code, out, err = run_cli(capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter",
                             "--image", image_file, "--prompt", "w1 w2", "--max-new-tokens", 8, "--compare-ar",
                             "--json")
    assert code == 0, err
    ar = json.loads(out)["ar"]
    assert 0 < ar["decode_s"] < ar["walltime_s"]


def test_samples_that_differ_are_not_explained(capsys, pair_dirs):
    """The speed's 'why' compares the same answer's costs: two different samples have none to compare."""
    code, out, err = run_cli(capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter",
                             "--prompt", "w1 w2", "--max-new-tokens", 16, "--temperature", 1.0, "--seed", 3,
                             "--compare-ar", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["same_output"] is False and "why" not in report


def summary_report(**changes) -> dict:
    metrics = {"new_tokens": 10, "block_efficiency": 2.0, "acceptance_rate": 0.5, "tokens_per_s": 40.0,
               "weights_s": 0.1, "decode_s": 1.0, "walltime_s": 2.0, "speedup": 1.5, "busy": False}
    report = {"spec": "tabed-MT", "metrics": metrics, "ar": {"tokens_per_s": 25.0, "busy": False}, "why": "because"}
    for key, value in changes.items():
        (metrics if key in metrics else report["ar"])[key.removeprefix("ar_")] = value
    return report


def test_the_summary_line_says_each_figure_from_its_own_field():
    from tabed.cli import _summary

    line = _summary(summary_report())
    assert "acceptance 50%" in line and "weights 10.0% of decode" in line  # the share of decode time, not walltime
    assert "AR 25.0 tok/s, speedup 1.50x" in line and "why: because" in line and "unreliable" not in line
    assert "timings unreliable" in _summary(summary_report(ar_busy=True))  # plain decoding starved is enough
    assert "timings unreliable" in _summary(summary_report(busy=True))


def test_a_conversation_pairs_each_prompt_with_its_own_answer():
    from tabed.cli import _conversation

    turns = [{"prompt": f"q{i}", "answer": f"a{i}"} for i in range(3)]
    report = {"turns": turns, "text": "last"}
    assert _conversation(report) == "> q0\na0\n\n> q1\na1\n\n> q2\nlast"


def test_the_bench_options_reach_its_settings(capsys, monkeypatch, tmp_path):
    import tabed.bench.runner
    import tabed.cli

    seen = {}
    row = {"block_efficiency": 2.5, "speedup_vs_ar": 1.5, "mismatches": 1, "walltime_s": 9.0}
    monkeypatch.setattr(tabed.cli, "_load", lambda args: "pair")
    monkeypatch.setattr(tabed.bench.runner, "run_bench", lambda pair, settings, progress: seen.setdefault(
        "settings", settings) and {"scenarios": {"image": {"specs": {"M": row}}}})
    for extra, expected in (((), (None, True, 1)), (("--limit", 2, "--no-overhead", "--repeat", 3), (2, False, 3))):
        seen.clear()
        assert main(["bench", "--out", str(tmp_path / "out"), *map(str, extra)]) == 0, capsys.readouterr().err
        settings = seen["settings"]
        assert (settings.limit, settings.overhead, settings.repeat) == expected
        # what it prints: each row's block efficiency, speedup and mismatches, nothing else
        assert json.loads(capsys.readouterr().out) == {"scenarios": {"image": {"M": {
            "block_efficiency": 2.5, "speedup_vs_ar": 1.5, "mismatches": 1}}}}
    seen.clear()  # a stray comma or space between the rows is no row
    assert main(["bench", "--out", str(tmp_path / "out"), "--drafting", " M, T,"]) == 0, capsys.readouterr().err
    assert seen["settings"].specs == ["M", "T"]


def test_repeat_reports_the_median_run_and_every_runs_speedup(capsys, pair_dirs, monkeypatch):
    """`--repeat 3`: plain decoding and TABED three times each, in turn; TABED's decode times set to 0.5, 1.0 and
    2.0 s against plain decoding's 1.5 s (speedups 3.00, 1.50, 0.75): the report is the median run's (the
    second), every run's speedup listed, and the summary line gives the median with the range; a run whose
    answer is not the first's is named."""
    import tabed.cli as cli

    order, altered = [], set()

    def timed(side: str, times: list[float], generate):
        def change(result) -> None:
            run = len([s for s in order if s == side])
            result.metrics.decode_s = times[run]
            if (side, run) in altered:
                result.token_ids.append(result.token_ids[-1])
            order.append(side)
        return on_finish(generate, change)

    monkeypatch.setattr(Clock, "cpu_share", lambda self: 1.0)
    monkeypatch.setattr(cli, "speculative_generate", timed("tabed", [0.5, 1.0, 2.0], cli.speculative_generate))
    monkeypatch.setattr(cli, "autoregressive_generate", timed("plain", [1.5] * 3, cli.autoregressive_generate))
    args = ["--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter", "--prompt", "w1 w2",
            "--max-new-tokens", 12, "--compare-ar", "--repeat", 3]
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert order == ["plain", "tabed"] * 3
    assert report["repeats"] == {"asked": 3, "finished": 3, "speedups": pytest.approx([3.0, 1.5, 0.75]),
                                 "runs": [1, 2, 3], "median_run": 2, "differing": []}
    assert report["metrics"]["speedup"] == pytest.approx(1.5) and report["metrics"]["decode_s"] == 1.0
    order.clear()
    code, _, err = run_cli(capsys, *args)
    assert code == 0 and "speedup 1.50x (the median of 3 runs, 0.75-3.00x)" in err
    order.clear()
    altered.add(("plain", 2))  # a greedy answer that changes between runs: a bug, said
    code, out, err = run_cli(capsys, *args, "--json")
    assert code == 0 and json.loads(out)["repeats"]["differing"] == [3]


@pytest.mark.parametrize("extra, message", [
    (["--repeat", 0, "--compare-ar"], "--repeat must be from 1 to 9, got 0"),
    (["--repeat", 10, "--compare-ar"], "--repeat must be from 1 to 9, got 10"),
    (["--repeat", 2], "--repeat repeats the comparison with plain decoding: give --compare-ar too"),
])
def test_a_repeat_out_of_bounds_is_one_line(capsys, pair_dirs, extra, message):
    code, out, err = run_cli(capsys, "--target", pair_dirs / "target", "--drafter", pair_dirs / "drafter",
                             "--prompt", "w1", *extra)
    assert code == 2 and err.strip() == f"error: {message}" and out == ""


@pytest.mark.parametrize("repeat", [1, 9])
def test_a_repeat_at_its_ends_is_taken(capsys, pair_dirs, monkeypatch, repeat):
    import tabed.cli as cli
    from tabed.errors import TabedError

    def loaded(args, quiet=False):
        raise TabedError("past the checks")

    monkeypatch.setattr(cli, "_load", loaded)
    code, _, err = run_cli(capsys, "--prompt", "w1", "--repeat", repeat, "--compare-ar")
    assert code == 2 and err.strip() == "error: past the checks"


def test_the_summary_line_says_the_repeats_and_a_run_that_differs():
    from tabed.cli import _summary

    report = summary_report()
    report["repeats"] = {"speedups": [1.4, 1.5, 1.7], "runs": [1, 2, 3], "median_run": 2, "differing": [3]}
    line = _summary(report)
    assert "speedup 1.50x (the median of 3 runs, 1.40-1.70x)" in line
    assert "run 3 answered differently from run 1: a bug, please report it" in line
    report["repeats"]["differing"] = []
    assert "differently" not in _summary(report)
    report["repeats"] = {"speedups": [1.4, 1.6], "runs": [1, 2], "median_run": 1, "differing": []}
    assert "(the median of 2 runs, 1.40-1.60x)" in _summary(report)  # two runs are a range too
    report["repeats"] = {"speedups": [1.4], "runs": [1], "median_run": 1, "differing": []}
    assert "median" not in _summary(report)
