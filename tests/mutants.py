"""A mutation check the project keeps: each mutant is one small fault in the engine's core or the page's
figures, the kind a maintainer could make by accident; applied alone to a scratch copy of the repository,
it must make the tests named beside it fail. A mutant that survives marks a promise no test defends. The
named tests first run on the clean copy, where they must pass (once per set of tests and invocation): a test
that fails or is skipped there would count any fault as caught.

    python tests/mutants.py            # every mutant, a few minutes on 2 cores
    python tests/mutants.py tree-walk-depth-1 chain-rollback   # some, by name
    python tests/mutants.py --list

Not part of the normal test run (its name is not test_*.py); `tests/test_mutants.py` checks that every
mutant still applies to today's source. The tests named here run on the tiny pairs conftest builds, never
on a case of the bundled teaching pair, which would go blind the day that pair is retrained.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("tabed", "tests", "app.py", "pyproject.toml")  # assets are linked, read only


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # the file, from the repository's root
    before: str  # source that occurs exactly once in it
    after: str
    tests: tuple[str, ...]  # pytest node ids that must fail with the mutant


LOSSLESS = "tests/engine/test_lossless.py"
WALK = "tests/engine/test_tree_walk.py"
MEMBERS = "tests/engine/test_members_tree.py"
INSPECT = "tests/engine/test_inspection.py"
CACHE = "tests/engine/test_drafter_cache.py"
LOOP = "tests/engine/test_loop.py"
RENDER = "tests/page/test_render.py"
BENCH = "tests/bench/test_bench.py"
APP = "tests/page/test_app.py"
CONTROLS = "tests/page/test_controls.py"
BROWSER = "tests/page/test_browser.py"
REPEAT = "tests/page/test_repeat.py"
QUIET = "tests/page/test_quiet.py"
RUN_COSTS = "tests/engine/test_speed.py::test_a_runs_costs_are_held_against_the_same_forwards_on_the_quiet_machine"
MODES_KEPT = "tests/models/test_models.py::test_every_image_mode_keeps_what_it_shows"
SPEC_READ = "tests/models/test_models.py::test_a_drafting_spec_reads_its_methods_and_its_ensemble"
SPEC_REFUSED = "tests/models/test_models.py::test_a_drafting_spec_without_methods_is_refused_with_what_to_type"
OWN_LENGTHS = "tests/engine/test_drafter.py::test_rows_are_prefilled_at_their_own_lengths"
WIDEN_REFUSED = "tests/models/test_widen.py::test_a_model_the_widening_cannot_keep_exact_is_refused_with_why"
QUEUED_RUN = f"{APP}::test_run_pressed_while_a_run_decodes_is_said_by_that_runs_frames"
FAR_OFF = f"{REPEAT}::test_a_run_far_off_the_quiet_costs_gives_no_figure_and_names_the_machine"
CHECKS_SLOWER = f"{REPEAT}::test_when_the_checks_are_the_slower_kind_the_warning_and_the_record_say_so"
REPORT = "tabed/bench/report.py"
ACCEPTANCE_TABLE = f"{BENCH}::test_the_acceptance_table_gives_each_specs_own_counts_from_the_first_position"
WIDEST_GAP = f"{BENCH}::test_the_mismatch_goal_names_the_widest_gap_whatever_its_sign"
FAILED_SPEC = f"{BENCH}::test_a_spec_that_failed_names_its_first_three_errors_and_the_weights_share_is_a_percentage"
RENDERING = "tabed/page/render.py"
SIDES = f"{APP}::test_the_status_counts_each_sides_own_tokens_and_the_most_starved_share"
TITLES = f"{RENDER}::test_each_tokens_title_says_what_it_is"
TREE_HOVERS = f"{RENDER}::test_the_trees_chart_hovers_the_ensembles_probability_and_names_its_proposers"
CLI = "tabed/cli.py"
CLI_TESTS = "tests/test_cli.py"
SUMMARY = f"{CLI_TESTS}::test_the_summary_line_says_each_figure_from_its_own_field"
PRESET_OR_PAIR = f"{CLI_TESTS}::test_a_preset_beside_a_target_or_a_drafter_alone_is_refused"
BENCH_OPTIONS = f"{CLI_TESTS}::test_the_bench_options_reach_its_settings"
VIEW = "tabed/page/view.py"
NEVER_COVERS = f"{BROWSER}::TestWithTheTinyPair::test_a_tokens_detail_never_covers_it_and_a_phone_reads_and_taps_whole"
REASONS_HOLD = f"{APP}::test_a_runs_view_says_each_of_its_reasons_only_where_it_holds"
DRAFT_LENGTH = f"{RENDER}::test_the_block_tables_draft_length_says_how_many_and_why_only_when_it_stopped_early"

MACHINE = "tests/bench/test_machine.py"
HAND_MADE = f"{BENCH}::test_the_markdown_report_says_each_part_of_a_hand_made_report"
MISSING_SCENARIO = f"{BENCH}::test_a_spec_missing_from_a_scenario_has_no_overall_speed_against_the_peers"
TREE_ROW = f"{BENCH}::test_a_tree_row_reads_its_width_and_never_hedges_its_first_block"
UNMODELLED = f"{BENCH}::test_a_starved_mismatched_or_short_answer_has_no_speed_model_and_a_pass_leaves_the_prefill_out"
MODEL_GOAL = f"{BENCH}::test_the_model_goal_is_met_at_nine_answers_in_ten_and_the_report_lists_twelve_misses"
MACHINE_LINE = f"{MACHINE}::test_the_report_line_names_the_gpu_first_then_its_host"
BLAS = f"{MACHINE}::test_the_blas_says_whether_onednn_is_there"
STARVED_SIDE = f"{BENCH}::test_a_run_is_starved_when_either_side_was"
PEER_SIDE = f"{BENCH}::test_a_peers_plain_side_is_its_walltime_and_a_sample_never_mismatches"
ANY_REPEAT = f"{BENCH}::test_a_failure_in_any_repeat_fails_the_case"
SHARE_AND_TURN = f"{BENCH}::test_only_tabed_specs_have_a_weights_share_and_cases_run_in_turn"
REPEAT_BOUNDS = f"{CLI_TESTS}::test_a_repeat_out_of_bounds_is_one_line"

OVERHEAD = "tabed/bench/overhead.py"
TIMINGS = "tests/bench/test_overhead.py"
BATCHING = f"{TIMINGS}::test_batching_times_one_two_and_four_rows_and_gives_each_against_one"
ROW_WAYS = f"{TIMINGS}::test_each_row_cost_is_timed_its_own_way_and_given_in_milliseconds"
STEP_KINDS = f"{TIMINGS}::test_step_costs_time_each_step_as_named_and_the_bounds_add_them_up"
DRAFT_STEP = f"{TIMINGS}::test_a_timed_draft_step_feeds_what_it_names_and_forgets_what_it_added"
VERIFY_STEP = f"{TIMINGS}::test_a_timed_verify_scores_its_tokens_and_takes_them_back"
MEDIAN_STEP = f"{TIMINGS}::test_a_timing_is_the_median_of_the_steps_after_the_warm_up"
TWO_THREADS = "tests/page/test_quiet.py::test_a_probe_on_two_threads_needs_two_cores"
PEERS = "tabed/bench/peers.py"
PEER_TESTS = "tests/bench/test_peers.py"
GAMMA5 = f"{PEER_TESTS}::test_the_papers_setting_drafts_five_with_no_confidence_stop_and_gives_the_drafter_back"
PEER_FORWARDS = f"{PEER_TESTS}::test_a_peers_forwards_are_the_targets_own_count_prefill_included"
PEER_SEED = f"{PEER_TESTS}::test_a_sampled_peer_draws_from_the_runs_seed_whatever_came_before"
DIVERGENCE = "tabed/bench/divergence.py"
ENDED = f"{BENCH}::test_where_one_answer_ended_the_other_goes_on_with_no_gap_to_read"
OVERHEAD_ASKED = f"{CLI_TESTS}::test_overhead_times_the_gamma_rounds_and_picture_it_is_given"
OVERHEAD_REFUSED = f"{CLI_TESTS}::test_overhead_refuses_numbers_it_cannot_time_in_one_line"
PLAIN_OWN = f"{CLI_TESTS}::test_plain_decodings_own_speed_and_starving_are_reported_as_its_own"
LOADING_TOLD = f"{CLI_TESTS}::test_loading_is_told_on_stderr_unless_the_output_is_json"
REPEAT_ENDS = f"{CLI_TESTS}::test_a_repeat_at_its_ends_is_taken"
REPEATS_LINE = f"{CLI_TESTS}::test_the_summary_line_says_the_repeats_and_a_run_that_differs"
CTRL_C = f"{CLI_TESTS}::test_ctrl_c_exits_with_130_and_no_traceback"
JSON_AR = f"{CLI_TESTS}::test_json_with_compare_ar"

MUTANTS = (
    # the ten faults of issue 52's audit
    Mutant("tree-residual-unnormalised", "tabed/engine/sampling.py", "return left / total if total > 0 else p",
           "return left if total > 0 else p", (WALK,)),
    Mutant("counterfactual-counts-after-a-miss", "tabed/engine/loop.py",
           "        if guess != token:\n            break", "        if guess != token:\n            continue",
           (f"{LOOP}::test_each_methods_counterfactual_is_its_run_of_guesses_before_its_first_miss",)),
    Mutant("page-method-row-shows-another", "tabed/page/render.py",
           'alone had drafted", f"{efficiency:.2f}"',
           'alone had drafted", f"{max(speculative.method_block_efficiency.values()):.2f}"', (RENDER,)),
    Mutant("page-bonus-and-corrected-swapped", "tabed/page/render.py",
           'kind = "bonus" if block.bonus else "corrected"', 'kind = "corrected" if block.bonus else "bonus"',
           (RENDER,)),
    Mutant("page-weight-lines-all-the-first-method", "tabed/page/render.py",
           "y=[group_weight(b, members) for b in blocks]", "y=[group_weight(b, groups[0][1]) for b in blocks]",
           (RENDER,)),
    Mutant("chain-rollback-one-too-many", "tabed/engine/chain.py", "drafter.rollback(gamma - 1 - accepted)",
           "drafter.rollback(gamma - accepted)", (CACHE,)),
    Mutant("tree-walk-depth-1", "tabed/engine/tree.py",
           "    while (child := tree.child(at, choices[at + 1])) is not None:",
           "    if (child := tree.child(at, choices[at + 1])) is not None:", (WALK,)),
    Mutant("gamma-bound-164", "tabed/engine/config.py", '"gamma": (1, MAX_GAMMA),', '"gamma": (1, MAX_GAMMA + 100),',
           ("tests/engine/test_settings.py::test_the_bounds_are_the_promised_ones",)),
    Mutant("bench-best-may-be-a-peer", "tabed/bench/report.py",
           'best_of({s: r["block_efficiency"] for s, r in rows.items() if not is_peer(s)})',
           'best_of({s: r["block_efficiency"] for s, r in rows.items()})', ("tests/bench/test_bench.py",)),
    Mutant("history-target-shifted", "tabed/engine/loop.py",
           "p, q = verdict.target_probs[:verified], torch.stack(draft.row_probs[:verified])",
           "p, q = verdict.target_probs[1:verified + 1], torch.stack(draft.row_probs[:verified])",
           (f"{LOOP}::test_the_weight_history_learns_the_targets_own_distributions_at_the_verified_positions",)),
    # ten more on the core: acceptance, sampling, weights, caches, trees, resting, draft length, figures
    Mutant("sampling-accepts-q-over-p", "tabed/engine/sampling.py", "accept = (u * q < p).long()",
           "accept = (u * p < q).long()",
           (f"{LOSSLESS}::test_rejection_sampling_reproduces_the_target_distribution",)),
    Mutant("a-zero-draw-accepts-what-the-target-cannot-emit", "tabed/engine/sampling.py",
           "accept = (u * q < p).long()", "accept = (u * q <= p).long()",
           (f"{LOSSLESS}::test_a_draw_of_exactly_zero_never_accepts_a_draft_the_target_cannot_emit",)),
    Mutant("a-zero-draw-keeps-a-tree-token-the-target-cannot-emit", "tabed/engine/tree.py",
           "kept = bool(u * q_x < p_x)", "kept = bool(u * q_x <= p_x)",
           ("tests/engine/test_tree_walk.py::test_a_draw_of_exactly_zero_never_accepts_a_token_the_target_cannot_emit",)),
    Mutant("a-catch-up-forgets-the-temperature", "tabed/engine/resting.py",
           "probs = logits_to_probs(logits, config.temperature, config.top_p)",
           "probs = logits_to_probs(logits, 1.0, config.top_p)",
           ("tests/engine/test_resting.py::test_a_catch_up_owes_the_history_the_resting_rows_distributions_at_the_runs_"
            "temperature_and_top_p",)),
    Mutant("a-catch-up-owes-no-log-softmax", "tabed/engine/resting.py",
           "log_probs = logits_to_log_probs(logits, config.temperature) if self.history.needs_log_q else None",
           "log_probs = None",
           ("tests/engine/test_resting.py::test_a_catch_up_owes_the_history_the_resting_rows_distributions_at_the_runs_"
            "temperature_and_top_p",)),
    Mutant("every-drafter-row-may-rest", "tabed/engine/resting.py", "if tired and len(tired) < self.models:",
           "if tired and len(tired) <= self.models:", ("tests/engine/test_resting.py::test_the_rows_never_all_rest",)),
    Mutant("a-chain-verified-at-temperature-one", "tabed/engine/chain.py",
           "logits_to_probs(target_logits, config.temperature, config.top_p)",
           "logits_to_probs(target_logits, 1.0, config.top_p)",
           (f"{LOSSLESS}::test_a_chain_is_verified_against_the_targets_distribution_at_the_runs_temperature_and_"
            "top_p",)),
    Mutant("an-adaptive-chain-at-its-cap-says-fixed", "tabed/engine/chain.py",
           "stop=StopReason.CAP if adaptive else StopReason.FIXED)", "stop=StopReason.FIXED)",
           (f"{LOOP}::test_every_block_says_why_its_drafting_stopped_with_a_stop_reason",)),
    Mutant("an-unsure-chain-forks-at-its-threshold", "tabed/engine/chain.py",
           "float(q.max()) < fork_below", "float(q.max()) <= fork_below",
           ("tests/engine/test_tree.py::test_an_unsure_chain_forks_only_below_its_threshold",)),
    Mutant("a-trees-tries-listed-by-node", "tabed/engine/inspection.py",
           'children.sort(key=lambda node: draws[node]["order"])', "children.sort()",
           (f"{INSPECT}::test_a_trees_children_are_listed_in_the_order_tried_each_with_its_last_test",)),
    Mutant("an-inspected-tvd-run-read-as-hedge", "tabed/engine/inspection.py",
           'elif history.rule in ("kld", "tvd"):', 'elif history.rule == "kld":',
           (f"{INSPECT}::test_each_blocks_weights_are_the_rules_choice_from_the_recorded_statistics",)),
    Mutant("a-cut-chain-forgets-its-log-softmax", "tabed/engine/drafts.py",
           "self.row_log_probs = self.row_log_probs[:count]", "self.row_log_probs = []",
           (f"{LOOP}::test_a_cut_chain_keeps_its_first_drafts_in_every_list_the_log_softmax_too",)),
    Mutant("n-with-all-the-weight-divides-by-zero", "tabed/engine/drafts.py",
           "return weights / total if float(total) > 0 else", "return weights / total if float(total) >= 0 else",
           ("tests/engine/test_lookup.py::test_where_n_has_no_match_the_ensemble_is_the_renormalised_model_mixture_"
            "and_sums_to_1",)),
    Mutant("the-drafts-drawn-at-temperature-one", "tabed/engine/drafts.py",
           "logits_to_probs(logits, temperature, self.config.top_p)", "logits_to_probs(logits, 1.0, self.config.top_p)",
           (f"{LOSSLESS}::test_the_drafts_are_drawn_from_each_methods_distribution_at_the_runs_temperature_and_top_p",)),
    Mutant("top-p-of-one-still-cuts", "tabed/engine/sampling.py", "if top_p < 1.0:", "if top_p <= 1.0:",
           (f"{LOSSLESS}::test_top_p_keeps_the_smallest_set_of_tokens_whose_mass_reaches_it",)),
    Mutant("top-p-renormalises-the-rows-together", "tabed/engine/sampling.py",
           "probs = probs / probs.sum(dim=-1, keepdim=True)", "probs = probs / probs.sum()",
           (f"{LOSSLESS}::test_top_p_keeps_the_smallest_set_of_tokens_whose_mass_reaches_it",)),
    Mutant("greedy-counts-matches-after-a-miss", "tabed/engine/sampling.py",
           "accepted = int(agree.cumprod(dim=0).sum()) if gamma else 0", "accepted = int(agree.sum()) if gamma else 0",
           (f"{LOSSLESS}::test_greedy_verification_by_hand",)),
    Mutant("ensemble-ignores-weights", "tabed/engine/ensemble.py",
           "return torch.tensordot(weights.to(q.device, q.dtype), q, dims=1)", "return q.mean(dim=0)",
           ("tests/engine/test_ensemble.py::test_ensemble_is_the_weighted_average",)),
    Mutant("w-grid-ignores-top-1-matches", "tabed/engine/ensemble.py",
           'kls = torch.where(matches == matches.max(), kls, float("inf"))',
           'kls = torch.where(matches >= 0, kls, float("inf"))', ("tests/engine/test_ensemble.py",)),
    Mutant("a-greedy-answer-that-differs-said-identical", "tabed/page/status.py",
           "if self.sampled or not self.same:", "if self.sampled and not self.same:",
           ("tests/page/test_reasons.py::test_the_verdict_says_identical_only_for_a_greedy_answer_equal_to_plain_decodings",)),
    Mutant("hedge-rate-over-the-horizon-despite-a-window", "tabed/engine/ensemble.py",
           "hedge_rate(num_methods, window or horizon)", "hedge_rate(num_methods, horizon)",
           ("tests/engine/test_ensemble.py::test_hedge_learns_at_the_rate_of_its_window_or_else_its_horizon",)),
    Mutant("a-window-total-is-its-newest-position", "tabed/engine/ensemble.py",
           "self._total = row.clone() if self._total is None else self._total + row", "self._total = row.clone()",
           ("tests/engine/test_ensemble.py::test_blocks_added_at_once_sum_as_blocks_added_one_by_one",)),
    Mutant("a-graph-takes-the-clamped-log", "tabed/engine/ensemble.py", "self.summed.add(p, q, log_q)",
           "self.summed.add(p, q)",
           ("tests/engine/test_ensemble.py::test_a_graphed_history_measures_with_the_log_softmax_it_is_given",)),
    Mutant("inverse-distance-of-zero-negative", "tabed/engine/ensemble.py", "inverse = 1.0 / (total + 1e-6)",
           "inverse = 1.0 / (total - 1e-6)", ("tests/engine/test_ensemble.py",)),
    Mutant("kl-sign", "tabed/engine/ensemble.py", "return (torch.xlogy(p, p) - p * log_q.clamp_min(LOG_FLOOR))",
           "return (torch.xlogy(p, p) + p * log_q.clamp_min(LOG_FLOOR))", ("tests/engine/test_ensemble.py",)),
    Mutant("dynamic-rewind-keeps-positions", "tabed/models/caches.py",
           "            self.lengths = self.lengths - count\n", "            self.lengths = self.lengths - count + 1\n",
           (CACHE,)),
    Mutant("tree-commit-drops-the-last-committed-token", "tabed/engine/drafts.py",
           "session.keep(1 + count, [0] + [1 + node for node in kept])",
           "session.keep(1 + count, [1 + node for node in kept])",
           ("tests/engine/test_tree.py::test_greedy_trees_equal_plain_decoding",)),
    Mutant("resting-catch-up-skips-a-token", "tabed/engine/resting.py", "drafter.catch_up(out[self.seen:seen])",
           "drafter.catch_up(out[self.seen + 1:seen])",
           (f"{CACHE}::test_rows_that_rest_catch_up_and_wake_hold_exactly_the_tokens_they_saw",)),
    Mutant("draft-length-learns-the-rejection-as-accepted", "tabed/engine/draft_length.py",
           "self.accepted[b] += index < accepted", "self.accepted[b] += index <= accepted",
           ("tests/engine/test_draft_length.py",)),
    Mutant("page-speedup-inverted", "tabed/page/render.py",
           'times is None else f"{times:.2f}×")', 'times is None else f"{1 / times:.2f}×")', (RENDER,)),
    Mutant("speedup-per-token-counts-the-first-token", "tabed/engine/speed.py",
           "steps, plain_steps = ours.new_tokens - 1, plain.new_tokens - 1",
           "steps, plain_steps = ours.new_tokens, plain.new_tokens",
           ("tests/engine/test_speed.py",
            f"{APP}::test_two_samples_of_different_lengths_compare_per_token_and_say_why")),
    Mutant("bonus-flag-on-an-ended-answer", "tabed/engine/loop.py",
           "bonus=accepted == gamma and answered,", "bonus=accepted == gamma,",
           ("tests/engine/test_loop.py::test_an_answer_that_ends_on_a_draft_has_no_bonus_token_and_no_phantom_efficiency",)),
    # tree behaviours once seen only on cases of the teaching pair, now on the tiny ones first
    Mutant("tree-children-allotted-per-node", "tabed/engine/tree.py", 'self.pooled = greedy and policy == "ensemble"',
           "self.pooled = False",
           ("tests/engine/test_tree.py::test_a_width_2_tree_keeps_a_third_choice_where_the_depth_has_room",)),
    # the members tree: every member's own chain, each grown and stopped as it would be alone
    Mutant("members-tree-holds-the-ensembles-chain-only", "tabed/engine/tree.py",
           "self.tips = dict.fromkeys([ENSEMBLE, *members], ROOT)", "self.tips = dict.fromkeys([ENSEMBLE], ROOT)",
           (f"{MEMBERS}::test_every_block_keeps_at_least_what_each_member_and_the_mix_keep_alone",)),
    Mutant("members-methods-take-the-ensembles-token", "tabed/engine/tree.py",
           "picks = torch.cat([ensemble_picks[:, None], tops.indices], dim=1)",
           "picks = torch.cat([ensemble_picks[:, None], ensemble_picks[:, None].expand_as(tops.indices)], dim=1)",
           (f"{MEMBERS}::test_each_chain_grows_under_its_own_tip_and_agreeing_chains_share_a_node",)),
    Mutant("members-chains-stop-by-the-ensembles-confidence", "tabed/engine/tree.py",
           "return picks.tolist(), mixed_probs.tolist(), own.tolist()",
           "return picks.tolist(), mixed_probs.tolist(), mixed_probs.tolist()",
           (f"{MEMBERS}::test_adaptive_chains_stop_where_each_would_alone_and_the_tree_with_the_last",)),
    Mutant("members-resting-method-drafts", "tabed/engine/tree.py",
           "members = [k for k in range(drafting.method_count) if k not in resting]",
           "members = list(range(drafting.method_count))",
           (f"{MEMBERS}::test_a_resting_method_drafts_no_chain_and_an_end_token_ends_one",)),
    Mutant("members-chain-grows-past-an-end-token", "tabed/engine/tree.py",
           "if self.tree.tokens[tip] not in ends}", "if True}",
           (f"{MEMBERS}::test_a_resting_method_drafts_no_chain_and_an_end_token_ends_one",)),
    Mutant("members-methods-token-tried-as-the-ensembles-draw", "tabed/engine/tree.py",
           "        if sampled:\n            return context.mixed\n", "        return context.mixed\n",
           (f"{MEMBERS}::test_sampled_chains_try_the_ensembles_draw_then_each_methods_token_all_on_it",)),
    Mutant("members-node-probability-of-the-ensembles-token", "tabed/engine/tree.py",
           "token, prob = picks[column][1 + member], probs[column][1 + member]",
           "token, prob = picks[column][1 + member], probs[column][0]",
           (f"{MEMBERS}::test_each_chain_grows_under_its_own_tip_and_agreeing_chains_share_a_node",)),
    Mutant("members-sampled-chain-goes-on-by-the-top-token", "tabed/engine/tree.py",
           "own = torch.cat([mixed_probs[:, :1], tops.values], dim=1)",
           "own = torch.cat([mixed.max(-1).values[:, None], tops.values], dim=1)",
           (f"{MEMBERS}::test_a_sampled_ensemble_chain_stops_on_its_draws_own_chance_as_a_chain_would",)),
    Mutant("overhead-members-tree-a-level-short", "tabed/bench/overhead.py",
           "target_step_seconds(pair, turns, 0, steps, member_chains(gamma))",
           "target_step_seconds(pair, turns, 0, steps, member_chains(gamma - 1))",
           (f"{MEMBERS}::test_the_overhead_times_the_members_tree_of_its_gamma",)),
    Mutant("nodes-a-block-a-mean-of-ratios", REPORT,
           '"nodes_per_block": pooled((r.nodes for r in mine), (r.blocks for r in mine)),',
           '"nodes_per_block": mean(r.nodes / r.blocks for r in mine if r.blocks),',
           (f"{BENCH}::test_nodes_a_block_are_pooled_over_the_runs",)),
    Mutant("spare-nodes-past-gamma", "tabed/engine/tree.py", "and tree.depths[node] < gamma and", "and",
           ("tests/engine/test_tree.py::test_spare_nodes_are_unexpanded_ones_that_could_still_grow",)),
    Mutant("frontier-never-takes-spare-nodes", "tabed/engine/tree.py",
           "if self.pooled and len(frontier) < self.width:", "if False:",
           ("tests/engine/test_tree.py::test_a_frontier_left_short_grows_on_from_a_node_an_earlier_depth_left_unexpanded",)),
    Mutant("unsure-tree-never-branches", "tabed/engine/tree.py",
           "if policy == \"unsure\" and (context.ranked[0][1] if context.ranked else float(q.max())) >= UNSURE:",
           "if policy == \"unsure\":",
           ("tests/engine/test_tree.py::test_the_default_hedges_the_first_block_where_the_unweighted_methods_disagree",)),
    Mutant("hedge-with-one-row", "tabed/engine/settings.py", "spec.tabed and pictures and", "spec.tabed and",
           ("tests/engine/test_tree.py::test_only_tabeds_first_block_with_a_picture_hedges_and_the_answers_stay_the_targets",)),
    Mutant("drafter-forgets-the-last-accepted-draft", "tabed/engine/drafts.py", "+ path[fed:] +", "+ path[fed + 1:] +",
           ("tests/engine/test_drafter_cache.py::test_the_drafters_cache_is_the_committed_tokens_after_every_block",
            "tests/engine/test_drafter_cache.py::"
            "test_what_the_drafter_has_not_seen_after_a_block_is_at_most_the_last_draft_and_the_targets_token")),
    Mutant("busy-run-never-flagged", "tabed/engine/session.py", "return self.cpu and share < BUSY_SHARE",
           "return False",
           ("tests/engine/test_loop.py::test_a_run_that_got_too_little_of_the_cpu_says_its_timings_are_unreliable",
            "tests/test_cli.py::test_a_busy_run_says_its_timings_are_unreliable")),
    Mutant("acceptance-counts-the-first-rejected-draft-as-kept", "tabed/engine/acceptance.py",
           "self.positions[j].kept += j < block.accepted", "self.positions[j].kept += j <= block.accepted",
           ("tests/engine/test_acceptance.py::test_the_counts_on_hand_made_blocks",
            "tests/engine/test_acceptance.py::test_each_positions_rate_is_recomputed_from_plain_decodings_answer")),
    Mutant("method-match-against-the-ensembles-draft", "tabed/engine/acceptance.py",
           "rows[j].kept += guesses[j] == block.emitted[j]", "rows[j].kept += guesses[j] == block.draft[j]",
           ("tests/engine/test_acceptance.py::test_the_counts_on_hand_made_blocks",
            "tests/engine/test_acceptance.py::test_each_positions_rate_is_recomputed_from_plain_decodings_answer")),
    Mutant("inspected-kept-off-by-one", "tabed/engine/inspection.py", "kept = j < verdict.accepted",
           "kept = j <= verdict.accepted", (f"{INSPECT}::test_each_recorded_test_is_the_one_the_draft_met",)),
    Mutant("inspected-methods-swapped", "tabed/engine/inspection.py", "top_k(draft.row_probs[j][k])",
           "top_k(draft.row_probs[j][-1 - k])", (f"{INSPECT}::test_each_recorded_test_is_the_one_the_draft_met",)),
    Mutant("inspected-w-grid-winner-has-the-most-kl", "tabed/engine/inspection.py",
           '"winner": min(tied, key=lambda index: (kls[index], index))',
           '"winner": max(tied, key=lambda index: (kls[index], index))',
           (f"{INSPECT}::test_each_blocks_weights_are_the_rules_choice_from_the_recorded_statistics",)),
    Mutant("inspected-draws-shifted", "tabed/engine/inspection.py", "u=verdict.draws[j] if",
           "u=verdict.draws[j - 1] if", (f"{INSPECT}::test_each_recorded_test_is_the_one_the_draft_met",
                                                 f"{INSPECT}::test_each_chain_position_records_its_own_uniform_draw")),
    # what the page explains (issue 55)
    Mutant("shared-row-split-by-the-rule", "tabed/engine/ensemble.py", "shared[rows] = weights[rows].mean()",
           "shared[rows] = weights[rows]",
           (f"{LOOP}::test_methods_that_read_the_same_text_share_one_weight_equally",)),
    Mutant("speed-model-forgets-the-drafting", "tabed/engine/speed.py",
           "return self.tokens_per_pass / (self.verify + self.drafting)", "return self.tokens_per_pass / self.verify",
           ("tests/engine/test_speed.py::test_the_model_in_numbers_a_student_can_check",
            "tests/page/test_app.py::test_the_status_and_the_metrics_say_why_this_speed")),
    Mutant("refused-request-clears-the-page", "tabed/page/view.py",
           "        if not view.started:  # the engine may still refuse", "        if False:  #",
           ("tests/page/test_app.py::test_a_refused_request_changes_nothing_but_the_status",)),
    Mutant("target-token-reported-after-the-end", "tabed/engine/loop.py",
           "target_token=target_token if answered else None,", "target_token=target_token,",
           (f"{RENDER}::test_the_block_table_shows_no_target_token_after_the_end_of_the_answer",)),
    Mutant("a-method-alone-feeds-the-plain-answer", "tabed/page/view.py",
           "if item.phase == ALONE:  # a method alone", "if False:  #",
           ("tests/page/test_app.py::test_each_method_run_alone_shows_its_real_figures_beside_the_ensembles",)),
    Mutant("cli-leaves-cudnn-attention-on", "tabed/cli.py", "    skip_cudnn_attention()  #", "    #",
           ("tests/test_cli.py::test_the_entry_points_turn_cudnn_attention_off_and_loading_does_not",)),
    # cheaper drafter steps (issue 56)
    Mutant("step-mask-shows-the-padding", "tabed/models/caches.py", "return self._bias[..., :length]",
           "return self._bias[..., :length] * 0",
           ("tests/engine/test_drafter.py::test_one_batched_forward_equals_separate_forwards",)),
    Mutant("resting-rows-share-the-batchs-layers", "tabed/models/caches.py",
           "part.cache.layers = [copy.copy(layer) for layer in self.cache.layers]", "pass",
           ("tests/engine/test_resting.py::test_a_row_that_rested_and_caught_up_scores_as_if_it_never_left",)),
    Mutant("resting-catch-ups-never-back-off", "tabed/engine/resting.py",
           "self.probe_every = min(2 * self.probe_every, PROBE_AT_MOST)",
           "self.probe_every = min(self.probe_every, PROBE_AT_MOST)",
           ("tests/engine/test_resting.py::test_the_wait_between_catch_ups_doubles_while_a_row_earns_nothing_and_"
            "starts_again_when_it_wakes",)),
    # the faster order of multiplication (issue 56)
    Mutant("weight-first-drops-the-bias", "tabed/models/matmul.py", "out = out + self.bias", "out = out",
           ("tests/models/test_matmul.py::test_weight_first_gives_the_layers_outputs",)),
    Mutant("weight-first-leaves-its-product-column-major", "tabed/models/matmul.py",
           "out = torch.mm(self.weight, rows.t())[:, :count].t().contiguous()",
           "out = torch.mm(self.weight, rows.t())[:, :count].t()",
           ("tests/models/test_matmul.py::test_weight_first_gives_the_layers_outputs",)),
    Mutant("auto-swaps-whatever-the-timing", "tabed/models/matmul.py",
           "if weight_first < CLEARLY_FASTER * library)", "if True)",
           ("tests/models/test_matmul.py::test_auto_takes_weight_first_only_for_the_row_counts_where_it_was_"
            "clearly_faster",)),
    Mutant("a-close-timing-is-trusted", "tabed/models/matmul.py", "    if close:\n", "    if False:\n",
           ("tests/models/test_matmul.py::test_a_close_timing_is_timed_again_for_longer_at_its_row_count_only",)),
    Mutant("weight-first-at-every-row-count", "tabed/models/matmul.py", "if count not in self.rows:",
           "if count > WEIGHT_FIRST_ROWS:",
           ("tests/models/test_matmul.py::test_weight_first_multiplies_only_its_row_counts_its_way",)),
    Mutant("weights-kept-after-an-addition", "tabed/engine/ensemble.py", "        self._weights = None\n        if",
           "        if", ("tests/engine/test_ensemble.py::test_the_weights_follow_every_addition",)),
    Mutant("growing-cache-loses-its-entries-when-it-moves", "tabed/models/growing.py", "        if filled:",
           "        if False:",
           ("tests/models/test_growing.py::test_every_operation_leaves_what_a_dynamic_layer_holds",)),
    Mutant("growing-cache-copies-at-every-step", "tabed/models/growing.py",
           "if not self._in_room() or end > self.room_keys.shape[-2]:", "if True:",
           ("tests/models/test_growing.py::test_steps_write_into_the_room_instead_of_copying_the_cache",)),
    Mutant("a-copied-layer-shares-its-room", "tabed/models/growing.py",
           "twin.room_keys = twin.room_values = None", "pass",
           ("tests/models/test_growing.py::test_a_copied_layer_takes_its_own_room",)),
    Mutant("drafter-forward-never-compiled", "tabed/models/caches.py", "            return self._sequence(ids)",
           "            return self._run(ids)",
           ("tests/models/test_compiled.py::test_a_compiled_forward_gives_the_uncompiled_logits",)),
    Mutant("lean-verify-without-a-causal-mask", "tabed/models/caches.py",
           "            if mask is None and ids.shape[1] > 1:", "            if False:",
           ("tests/models/test_lean.py::test_a_target_step_verify_and_tree_give_the_library_logits",)),
    Mutant("lean-decoder-forgets-the-rotary-embedding", "tabed/models/lean.py",
           "        query, key = apply_rotary_pos_emb(query, key, *rotary)", "        pass",
           ("tests/models/test_lean.py::test_a_target_step_verify_and_tree_give_the_library_logits",
            "tests/models/test_lean.py::test_a_left_padded_drafter_batch_gives_the_library_logits")),
    Mutant("lean-prefill-rotates-the-last-query-as-the-first-position", "tabed/models/lean.py",
           "            query = apply_rotary_pos_emb(query, query, cos[:, -last:], sin[:, -last:])[0]",
           "            query = apply_rotary_pos_emb(query, query, cos[:, :last], sin[:, :last])[0]",
           ("tests/models/test_lean.py::test_a_drafter_prefill_gives_the_library_cache_and_last_logits",)),
    Mutant("lean-prefill-without-causality", "tabed/models/lean.py",
           "causal=last is None, last=last)", "causal=False, last=last)",
           ("tests/models/test_lean.py::test_a_drafter_prefill_gives_the_library_cache_and_last_logits",)),
    Mutant("fused-keys-from-the-value-projection", "tabed/models/lean.py",
           "weight, bias = stacked(query, key)", "weight, bias = stacked(query, value)",
           ("tests/models/test_lean.py::test_a_fused_drafter_gives_the_library_logits_to_rounding",
            "tests/models/test_lean.py::test_fused_projections_keep_biases_and_grouped_heads")),
    Mutant("fused-projections-drop-their-biases", "tabed/models/lean.py",
           "    if all(bias is None for _, bias in parts):", "    if True:",
           ("tests/models/test_lean.py::test_fused_projections_keep_biases_and_grouped_heads",)),
    Mutant("fused-rotation-turns-without-negating", "tabed/models/lean.py",
           "torch.cat([-heads[:, half:]", "torch.cat([heads[:, half:]",
           ("tests/models/test_lean.py::test_a_fused_drafter_gives_the_library_logits_to_rounding",
            "tests/models/test_lean.py::test_fused_projections_keep_biases_and_grouped_heads")),
    Mutant("fused-rotary-table-never-grows", "tabed/models/lean.py",
           "self._rope[0].shape[0] < end:", "self._rope[0].shape[0] < 0:",
           ("tests/models/test_lean.py::test_fused_projections_keep_biases_and_grouped_heads",)),
    Mutant("bench-goal-against-the-slower-single", "tabed/bench/report.py",
           'behind = {name: min(s["specs"][m]["decode_s"]', 'behind = {name: max(s["specs"][m]["decode_s"]',
           (f"{BENCH}::test_goals_say_where_the_default_is_behind_a_single_method_or_plain_decoding",)),
    Mutant("bench-goal-overall-ignores-walltime", "tabed/bench/report.py",
           '"met": all(min(pair) >= 1.0 for pair', '"met": all(pair[0] >= 1.0 for pair',
           (f"{BENCH}::test_goals_say_where_the_default_is_behind_a_single_method_or_plain_decoding",)),
    Mutant("bench-goal-slowest-answer-is-the-fastest", "tabed/bench/report.py",
           'speed, case = min(((r["ar_decode_s"]', 'speed, case = max(((r["ar_decode_s"]',
           (f"{BENCH}::test_goals_say_where_the_default_is_behind_a_single_method_or_plain_decoding",
            f"{BENCH}::test_goals_report_each_measured_value")),
    Mutant("host-w-grid-choice-negates-its-index", "tabed/engine/ensemble.py",
           "return min((kl, index) for", "return min((kl, -index) for",
           ("tests/engine/test_ensemble.py::test_the_host_chooses_the_devices_w_grid_candidate",)),
    Mutant("fused-norms-drop-their-weights", "tabed/models/lean.py",
           "norm.weight.shape, norm.weight,", "norm.weight.shape, None,",
           ("tests/models/test_lean.py::test_a_fused_drafter_gives_the_library_logits_to_rounding",
            "tests/models/test_lean.py::test_fused_projections_keep_biases_and_grouped_heads")),
    Mutant("a-fused-drafter-prefills-fused", "tabed/models/lean.py", "causal=last is None, last=last)",
           "causal=last is None, last=last, fused=None if last else self.fused_layers()[index])",
           ("tests/models/test_lean.py::test_a_fused_drafter_gives_the_library_logits_to_rounding",)),
    Mutant("batched-rows-multiply-the-first-rows-input", "tabed/models/lean.py",
           "torch.bmm(x, self.weight.expand(", "torch.bmm(x[:1].expand_as(x), self.weight.expand(",
           ("tests/models/test_lean.py::test_a_fused_drafter_gives_the_library_logits_to_rounding",)),
    Mutant("the-drafter-runs-unfused", "tabed/models/pair.py", 'fused=role == "drafter"', "fused=False",
           ("tests/models/test_lean.py::test_a_pair_fuses_its_drafters_forwards_not_its_targets",)),
    Mutant("a-cpu-drafts-to-the-gpus-minimum", "tabed/engine/draft_length.py",
           'return CPU_MIN_SURVIVAL if device_type == "cpu" else MIN_SURVIVAL', "return MIN_SURVIVAL",
           ("tests/engine/test_draft_length.py::test_the_minimum_is_the_devices_unless_the_config_gives_one",
            "tests/engine/test_draft_length.py::test_adaptive_blocks_stop_when_the_ensemble_is_unsure_and_say_so")),
    # issue 74's audit
    Mutant("n-leaves-the-model-weights-unnormalised", "tabed/engine/drafts.py",
           "self.model_weights = _renormalized(weights[:self.models]) if lookup is not None else None",
           "self.model_weights = weights[:self.models] if lookup is not None else None",
           ("tests/engine/test_lookup.py::"
            "test_where_n_has_no_match_the_ensemble_is_the_renormalised_model_mixture_and_sums_to_1",)),
    Mutant("top-p-drops-the-token-that-crosses-it", "tabed/engine/sampling.py",
           "before = sorted_probs.cumsum(dim=-1) - sorted_probs", "before = sorted_probs.cumsum(dim=-1)",
           (f"{LOSSLESS}::test_top_p_keeps_the_smallest_set_of_tokens_whose_mass_reaches_it",)),
    Mutant("sampling-counts-acceptances-after-a-rejection", "tabed/engine/sampling.py",
           "accepted = int(accept.cumprod(dim=0).sum())", "accepted = int(accept.sum())",
           (f"{LOSSLESS}::test_a_draft_after_a_rejected_one_is_never_counted_and_the_token_comes_from_the_residual",)),
    Mutant("chain-verified-against-one-methods-distribution", "tabed/engine/chain.py",
           "q = torch.stack(draft.mixed_probs)", "q = torch.stack([rows[0] for rows in draft.row_probs])",
           (f"{LOSSLESS}::test_a_chain_is_verified_against_the_mixture_that_drafted_it_not_one_methods_distribution",)),
    Mutant("bench-scenario-speedup-is-a-mean-of-ratios", "tabed/bench/report.py",
           '"speedup_vs_ar": pooled((r.ar_decode_s for r in mine), (r.decode_s for r in mine)),',
           '"speedup_vs_ar": mean(r.ar_decode_s / r.decode_s for r in mine),',
           (f"{BENCH}::test_speedups_pool_the_seconds_of_a_scenarios_cases_and_of_every_scenario",)),
    Mutant("bench-overall-speedup-is-a-mean-of-scenarios", "tabed/bench/report.py",
           '{"speedup_vs_ar": pooled((r["ar_decode_s"] for r in rows), (r["decode_s"] for r in rows)),',
           '{"speedup_vs_ar": mean(r["speedup_vs_ar"] for r in rows),',
           (f"{BENCH}::test_speedups_pool_the_seconds_of_a_scenarios_cases_and_of_every_scenario",)),
    Mutant("bench-token-goal-against-the-worse-single", "tabed/bench/report.py",
           'max(s["specs"][m]["block_efficiency"] for m in singles)',
           'min(s["specs"][m]["block_efficiency"] for m in singles)',
           (f"{BENCH}::test_the_token_goal_is_judged_against_the_better_single_method_of_each_scenario",)),
    Mutant("plain-tokens-per-second-on-decode-time", "tabed/engine/loop.py",
           "tokens_per_s=len(tokens) / walltime if walltime > 0 else 0.0,",
           "tokens_per_s=len(tokens) / (walltime - prefill_s) if walltime > prefill_s else 0.0,",
           (f"{LOOP}::test_tokens_per_second_count_the_whole_walltime_for_both_kinds_of_decoding",)),
    Mutant("page-too-short-to-time-at-timed-tokens", "tabed/page/render.py",
           "return autoregressive.new_tokens < TIMED_TOKENS", "return autoregressive.new_tokens <= TIMED_TOKENS",
           (f"{RENDER}::test_an_answer_of_timed_tokens_shows_its_speedup_and_one_token_fewer_is_too_short",)),
    Mutant("method-efficiency-counts-resting-blocks-as-0", "tabed/engine/loop.py",
           "runs = [b.method_accepted[m] for b in blocks if m in b.method_accepted]",
           "runs = [b.method_accepted.get(m, 0) for b in blocks]",
           ("tests/engine/test_resting.py::test_a_methods_efficiency_alone_averages_only_the_blocks_it_drafted_in",)),
    # issue 74's own audit: the download writer, the checked values, the stepper's block, the run's number
    Mutant("downloads-pile-up-per-session", "tabed/page/downloads.py", "    forget_downloads(conversation)\n    folder",
           "    folder", (f"{APP}::test_each_run_replaces_the_last_runs_downloads_named_and_titled_for_it",)),
    Mutant("chart-title-unescaped", "tabed/page/downloads.py", "<title>{html.escape(title)}</title>",
           "<title>{title}</title>",
           (f"{APP}::test_each_run_replaces_the_last_runs_downloads_named_and_titled_for_it",)),
    Mutant("every-run-is-run-one", "tabed/page/view.py", "conversation.runs = view.run", "conversation.runs = 1",
           (f"{APP}::test_each_run_replaces_the_last_runs_downloads_named_and_titled_for_it",)),
    Mutant("a-new-run-counts-from-one-again", "tabed/page/conversation.py", ", runs=conversation.runs,", ",",
           (f"{APP}::test_each_run_replaces_the_last_runs_downloads_named_and_titled_for_it",)),
    Mutant("downloads-outside-gradios-cache", "tabed/page/downloads.py", 'prefix="tabed-downloads-", dir=cache,',
           'prefix="tabed-downloads-",', ("tests/page/test_app_memory.py",)),
    Mutant("a-fraction-passes-as-a-whole-number", "tabed/page/controls.py",
           "if self.kind is int and value != int(value):", "if False:", (CONTROLS,)),
    Mutant("top-p-0-accepted", "tabed/page/controls.py", "self.low < number if self.above_low",
           "self.low <= number if self.above_low",
           (CONTROLS,)),
    Mutant("an-emptied-box-goes-unsaid", "tabed/page/controls.py",
           "                notes.append(", "                (", (CONTROLS,)),
    Mutant("a-ninth-picture-is-taken", "tabed/page/conversation.py", "if len(value) > MAX_PICTURES:",
           "if len(value) > MAX_PICTURES + 1:",
           (f"{APP}::test_eight_pictures_are_taken_and_a_ninth_is_left_out",)),
    Mutant("stepper-past-the-last-block", "tabed/page/stepper.py", "min(int(index), count - 1)",
           "min(int(index), count)",
           (f"{APP}::test_the_block_stepper_shows_the_last_answers_blocks_one_at_a_time",)),
    Mutant("gradio-checks-the-apis-values", "app.py", 'trigger_mode="always_last", preprocess=False)',
           'trigger_mode="always_last")',
           ("tests/page/test_app_server.py::test_bad_values_from_an_api_client_are_one_named_line_not_an_error",)),
    Mutant("a-follow-ups-pictures-unread", "tabed/page/conversation.py",
           "            open_picture(path)\n        raise", "            pass\n        raise",
           (f"{APP}::test_a_refused_request_changes_nothing_but_the_status",)),
    # issue 74's own audit of earlier sessions' newer code: the speed model, the stepper, the bench's goals
    Mutant("speed-model-counts-the-first-token-as-replaced", "tabed/engine/speed.py",
           "return SpeedModel(tokens_per_pass=steps / passes,",
           "return SpeedModel(tokens_per_pass=(steps + 1) / passes,",
           ("tests/engine/test_speed.py::test_the_model_in_numbers_a_student_can_check",)),
    Mutant("speed-model-share-of-the-wrong-whole", "tabed/engine/speed.py",
           "share = self.other / self.pass_cost", "share = self.other / (self.verify + self.drafting)",
           ("tests/engine/test_speed.py::test_the_model_in_numbers_a_student_can_check",)),
    Mutant("speed-model-counts-the-prompts-pass", "tabed/engine/speed.py",
           "ours.target_forwards - 1, ours.drafted", "ours.target_forwards, ours.drafted",
           ("tests/engine/test_speed.py::test_on_a_real_run_the_parts_add_up_to_the_measured_speedup",)),
    Mutant("stepper-greedy-verdict-inverted", "tabed/page/reasons.py",
           '        if test.kept:\n            return f"the target\'s top-1',
           '        if not test.kept:\n            return f"the target\'s top-1',
           ("tests/page/test_stepper.py::test_each_verdict_says_why_in_one_line",)),
    Mutant("stepper-sampling-comparison-inverted", "tabed/page/reasons.py",
           '    if tried.kept:\n        if ratio >= 1:', '    if not tried.kept:\n        if ratio >= 1:',
           ("tests/page/test_stepper.py::test_each_verdict_says_why_in_one_line",)),
    Mutant("stepper-bonus-called-corrected", "tabed/page/stepper.py", "    elif block.bonus:",
           "    elif not block.bonus:",
           ("tests/page/test_stepper.py",)),
    Mutant("method-alone-speedup-inverted", "tabed/page/render.py",
           'speedup = f" · {times:.2f}× plain decoding" if times is not None else ""',
           'speedup = f" · {1 / times:.2f}× plain decoding" if times is not None else ""',
           (f"{APP}::test_each_method_run_alone_shows_its_real_figures_beside_the_ensembles", RENDER)),
    Mutant("bench-goal-scenario-floor-lowered", "tabed/bench/report.py", '"met": behind[worst] >= 0.95}',
           '"met": behind[worst] >= 0.9}', (BENCH,)),
    Mutant("bench-goal-peer-margin-dropped", "tabed/bench/report.py", '"met": whole["speedup_vs_peer"] >= 1.2}',
           '"met": whole["speedup_vs_peer"] >= 1.0}', (BENCH,)),
    Mutant("identical-answers-never-said", "tabed/page/status.py", "    elif exact.same:\n", "    elif False:\n",
           (f"{APP}::test_the_status_shows_lossless_and_names_what_decoded",)),
    Mutant("discarded-drafts-said-rejected", "tabed/page/render.py",
           'kind = "rejected" if j == block.accepted else "discarded"', 'kind = "rejected"',
           (f"{RENDER}::test_each_token_is_coloured_by_what_the_target_did_with_it",)),
    Mutant("rejected-drafts-lose-their-spaces", "tabed/page/render.py", "after=struck[:j - block.accepted])",
           "after=())", (f"{RENDER}::test_rejected_drafts_keep_the_spaces_they_were_drafted_with",)),
    Mutant("token-detail-tests-the-discarded", "tabed/page/reasons.py", "    if j > block.accepted:\n",
           "    if j > block.accepted + 1:\n",
           (f"{RENDER}::test_a_tokens_detail_says_why_it_was_kept_rejected_or_never_tested",)),
    Mutant("guesses-counted-past-the-first-rejection", "tabed/page/reasons.py",
           "    return truth[:len(block.draft)]", "    return block.draft",
           ("tests/page/test_reasons.py::test_each_methods_guesses_are_counted_at_the_positions_the_target_verified",)),
    Mutant("only-m-right-counted-for-t", "tabed/page/reasons.py", '(True, False): "M", (False, True): "T"',
           '(True, False): "T", (False, True): "M"',
           ("tests/page/test_reasons.py::test_where_neither_led_each_kind_of_position_says_its_cause",)),
    Mutant("a-resting-method-compared-on-a-few-positions", "tabed/page/reasons.py",
           "if matched[m][1] >= min(FEW, most / 4)}", "if matched[m][1] >= 0}",
           ("tests/page/test_reasons.py::test_a_method_that_rested_is_not_compared_on_a_few_positions",)),
    Mutant("a-comparison-rounded-to-equals", "tabed/page/words.py", "for digits in (2, 3, 4):",
           "for digits in (2,):", (f"{RENDER}::test_counts_take_their_plural_and_a_stated_comparison_is_visible",)),
    Mutant("cli-option-never-reaches-the-config", "tabed/cli.py", 'if f.name not in ("gamma", "adaptive")',
           'if f.name not in ("gamma", "adaptive", "window")',
           ("tests/test_cli.py::test_every_option_reaches_the_config_by_its_name",)),
    Mutant("whole-speed-leaves-out-the-other-time", "tabed/engine/speed.py",
           "return self.verify + self.drafting + self.other", "return self.verify + self.drafting",
           (f"{APP}::test_the_status_and_the_metrics_say_why_this_speed",)),
    # the first block as a behaviour (`drafts.AfterPrompt`), and the stepper's count while a method rests
    Mutant("first-block-at-the-later-minimum", "tabed/engine/drafts.py", "return length.first_min_survival",
           "return length.min_survival",
           ("tests/engine/test_draft_length.py::test_adaptive_blocks_stop_when_the_ensemble_is_unsure_and_say_so",)),
    Mutant("first-tree-laid-out-one-position-late", "tabed/engine/drafts.py",
           "return session.prefill(self.prompt, tokens, layout(nodes, nodes, -1) if layout else None)",
           "return session.prefill(self.prompt, tokens, layout(nodes, nodes, 0) if layout else None)",
           ("tests/engine/test_tree.py::test_a_tree_is_scored_as_each_of_its_paths_would_be_alone",)),
    Mutant("later-trees-laid-out-one-position-late", "tabed/engine/drafts.py",
           "return session.forward([self.last] + tokens, layout(nodes, nodes, 0) if layout else None)",
           "return session.forward([self.last] + tokens, layout(nodes, nodes, 1) if layout else None)",
           ("tests/engine/test_tree.py::test_a_tree_is_scored_as_each_of_its_paths_would_be_alone",)),
    Mutant("later-trees-follow-the-first-blocks-shape", "tabed/engine/drafts.py",
           'trees = config.tree_width > 1 and config.tree_blocks == "all"', "trees = config.tree_width > 1",
           ("tests/engine/test_tree.py",)),
    Mutant("drafters-prefill-left-out-of-the-drafting", "tabed/engine/loop.py",
           "event, done = _block(run, start, began)", "event, done = _block(run, start, run.clock.now())",
           ("tests/engine/test_loop.py::test_the_drafters_prefill_is_the_first_blocks_drafting",)),
    Mutant("an-examples-pictures-matched-by-name", "tabed/page/examples.py",
           "digests = [_digest(Path(path)) for path in pictures]",
           "digests = [self._digests.get(Path(path).name, '') for path in pictures]",
           ("tests/page/test_examples.py",)),
    Mutant("a-follow-up-told-the-first-turns-lesson", "tabed/page/examples.py",
           "(row.prompt, row.follow_up): row.follow_up_lesson", "(row.prompt, row.follow_up): row.lesson",
           ("tests/page/test_examples.py",)),
    Mutant("resting-positions-never-wait", "tabed/engine/resting.py",
           "return sum(block.target_probs.shape[0] for block in self.waiting)", "return 0",
           ("tests/page/test_stepper.py::test_while_a_method_rests_the_stepper_says_its_blocks_positions_wait",)),
    # why, in words: the positions quoted, an answer about something else, the tie's closeness, the phone
    Mutant("only-m-quoted-beside-its-own-guess", "tabed/page/reasons.py", '"M": f" (T guessed {word(by_t)})"',
           '"M": f" (T guessed {word(by_m)})"',
           ("tests/page/test_reasons.py::test_where_they_differed_is_quoted_in_the_answers_own_words",)),
    Mutant("a-quoted-token-one-place-late", "tabed/page/words.py",
           "context, token = answer[max(0, index - CONTEXT):index], answer[index]",
           "context, token = answer[max(0, index - CONTEXT):index], answer[min(index + 1, len(answer) - 1)]",
           ("tests/page/test_reasons.py",)),
    Mutant("every-answer-on-topic", "tabed/page/reasons.py",
           "return [] if asked & words(answer) else sorted(asked)", "return []",
           (f"{APP}::test_an_answer_holding_none_of_the_questions_words_is_said_to_maybe_be_about_something_else",)),
    Mutant("a-tie-told-farthest-first", "tabed/page/stepper.py", "key=lambda k: candidates[k].kl)",
           "key=lambda k: -candidates[k].kl)",
           ("tests/page/test_stepper.py::test_a_tie_on_matches_is_said_to_tell_nothing_and_the_kl_to_decide",)),
    Mutant("a-new-conversation-counts-runs-from-one", "app.py",
           "state=Conversation(runs=session_state(conversation).runs)", "state=Conversation()",
           (f"{APP}::test_a_new_conversation_leaves_nothing_of_the_last_run_on_the_page",)),
    Mutant("a-phones-mouse-overwrites-its-tap", "tabed/page/texts.py",
           "addEventListener('pointermove', (event) => event.pointerType === 'mouse' && say(event, false))",
           "addEventListener('mouseover', (event) => say(event, false))",
           (f"{BROWSER}::TestWithTheTinyPair::test_a_tapped_token_keeps_its_own_detail_on_a_phone",)),
    Mutant("phone-block-cells-fully-padded", "tabed/page/texts.py",
           '"  #blocks .body-cell .cell-wrap { padding-left: 2px !important; padding-right: 2px !important; }\\n"',
           '""', (f"{BROWSER}::TestWithTheTinyPair::test_the_page_reads_on_a_wide_screen_and_a_phone",)),
    # a word with struck drafts kept on one line; a tap steps to the token's block
    Mutant("a-word-with-drafts-may-break", "tabed/page/render.py",
           "whole = self.boxed and len(self.word_text.strip()) <= WHOLE_WORD_CHARS", "whole = False",
           (f"{BROWSER}::test_a_word_with_struck_drafts_in_it_never_breaks_over_two_lines",)),
    Mutant("a-trees-later-draw-said-as-the-first", "tabed/page/reasons.py", "_drawn(word, t) if k == 0 else",
           "_drawn(word, t) if True else",
           ("tests/page/test_stepper.py::test_a_trees_second_draw_is_said_to_meet_what_the_first_left",)),
    Mutant("a-finished-answer-never-steps", "tabed/page/view.py", "    tabed_html = STEPPABLE + tabed_html\n", "",
           (f"{BROWSER}::TestWithTheTinyPair::test_a_tapped_token_keeps_its_own_detail_on_a_phone",)),
    Mutant("a-chart-click-steps-one-block-past", "tabed/page/texts.py", "String(Math.round(data.points[0].x))",
           "String(Math.round(data.points[0].x) + 1)",
           (f"{BROWSER}::TestWithTheTinyPair::test_step_through_every_block_at_1400_and_390_px",)),
    # issue 87's audit: faults no test was told about
    Mutant("n-never-matches-at-the-contexts-start", "tabed/engine/lookup.py",
           "for start in range(len(context) - n - 1, -1, -1):", "for start in range(len(context) - n - 1, 0, -1):",
           ("tests/engine/test_lookup.py::test_a_suffix_is_found_wherever_it_occurred_the_contexts_first_token_included",)),
    Mutant("n-ignores-the-blocks-drafts", "tabed/engine/lookup.py", "self.prompt_ids + self.answer + drafted,",
           "self.prompt_ids + self.answer,",
           ("tests/engine/test_lookup.py::test_n_looks_its_guess_up_in_the_blocks_own_drafts_too",)),
    Mutant("a-chain-never-tells-n-its-drafts", "tabed/engine/chain.py",
           "drafted.append(int(token))  # N looks its next guess up in what was drafted too", "pass",
           ("tests/engine/test_lookup.py::test_each_draft_positions_n_guess_follows_the_prompt_the_answer_and_the_"
            "drafts_before_it",)),
    Mutant("a-last-drafted-end-token-said-to-stop-the-chain", "tabed/engine/chain.py",
           "enumerate(draft.tokens[:-1]) if token in ends", "enumerate(draft.tokens) if token in ends",
           (f"{LOOP}::test_a_fixed_chain_whose_last_draft_is_the_end_token_stopped_at_its_length_not_at_the_end_"
            "token",)),
    Mutant("a-trees-chain-takes-the-least-likely-child", "tabed/engine/tree.py",
           "node = max({child for child, _ in context.draws}, key=self.scores.__getitem__)",
           "node = min({child for child, _ in context.draws}, key=self.scores.__getitem__)",
           (f"{WALK}::test_the_chain_shown_below_a_node_follows_its_likeliest_child_at_each_depth",)),
    Mutant("target-token-prob-read-after-the-last-draft", "tabed/engine/loop.py",
           "float(verdict.target_probs[accepted, target_token])", "float(verdict.target_probs[-1, target_token])",
           (INSPECT,)),
    Mutant("padded-vocabulary-filled-with-zero", "tabed/models/caches.py",
           'vocab_size - logits.shape[-1]), float("-inf"))', "vocab_size - logits.shape[-1]), 0.0)",
           ("tests/models/test_caches.py::test_logits_are_fitted_to_the_pairs_vocabulary_and_padding_is_never_drawn",)),
    Mutant("two-different-samples-said-the-same", "tabed/page/status.py", '"the same sample" if exact.same else',
           '"the same sample" if True else',
           (f"{APP}::test_a_sampled_answer_says_whether_its_sample_is_plain_decodings",)),
    Mutant("every-method-missed-where-one-did", "tabed/page/reasons.py", "if max(rate.values()) < 0.5:",
           "if min(rate.values()) < 0.5:",
           ("tests/page/test_reasons.py::test_every_method_missed_is_said_only_where_every_method_missed",)),
    Mutant("a-kept-tree-node-hovers-as-rejected", "tabed/page/render.py",
           "f\"{'accepted' if node.accepted else 'rejected'}\")", "f\"{'rejected'}\")",
           (f"{RENDER}::test_a_tree_nodes_hover_says_whether_the_target_kept_it",)),
    Mutant("bench-markdown-seconds-swapped", "tabed/bench/report.py",
           "f\"{row['walltime_s']:.2f}\",\n                     f\"{row['ar_walltime_s']:.2f}\"",
           "f\"{row['ar_walltime_s']:.2f}\",\n                     f\"{row['walltime_s']:.2f}\"",
           (f"{BENCH}::test_each_speed_rows_cells_are_its_own_figures",)),
    Mutant("cli-explains-a-busy-runs-speed", "tabed/cli.py",
           'report["same_output"] and not (result.metrics.busy or ar.metrics.busy):', 'report["same_output"]:',
           ("tests/test_cli.py::test_a_busy_runs_speed_is_not_explained",)),
    Mutant("zerogpu-budget-forgets-the-methods-alone", "app.py",
           "(2 * repeat if request.compare_ar is not False else 1) + (len(request.methods) if alone else 0)",
           "(2 * repeat if request.compare_ar is not False else 1)",
           (f"{APP}::test_the_zerogpu_budget_counts_every_run_a_request_makes",)),
    Mutant("a-session-steps-with-the-processs-pair", "app.py", "page = stepper.step_html(last.tokenizer,",
           "page = stepper.step_html(PAIRS.pair.tokenizer,",
           (f"{APP}::test_each_session_words_its_own_answer_with_its_own_pairs_tokenizer",)),
    Mutant("a-step-asked-while-one-is-on-its-way-is-dropped", "app.py",
           'trigger_mode="always_last", concurrency_id="stepper"', 'concurrency_id="stepper"',
           (f"{BROWSER}::TestWithTheTinyPair::test_the_block_asked_last_is_the_one_shown_while_steps_are_slow",)),
    Mutant("a-step-puts-back-the-number-it-was-asked", "app.py",
           "return (gr.skip() if shown == index else shown), page", "return shown, page",
           (f"{BROWSER}::TestWithTheTinyPair::test_the_block_asked_last_is_the_one_shown_while_steps_are_slow",
            f"{APP}::test_the_block_stepper_shows_the_last_answers_blocks_one_at_a_time")),
    Mutant("the-trees-words-all-above-the-path", RENDERING,
           'above.append("top center" if depth[index] % 2 else "bottom center")', 'above.append("top center")',
           (f"{BROWSER}::test_the_kept_paths_words_in_the_trees_chart_read_apart",)),
    Mutant("repeat-shows-the-first-run", "tabed/page/view.py",
           "self.results = runs[spread.median_run]", "self.results = runs[0]",
           (f"{REPEAT}::test_three_runs_headline_the_median_run_and_the_range",)),
    Mutant("repeat-runs-once", "tabed/page/worker.py", "for repeat in range(self.repeat if self.compare_ar else 1):",
           "for repeat in range(1):", (f"{REPEAT}::test_three_runs_headline_the_median_run_and_the_range",)),
    Mutant("repeat-never-compares-answers", "tabed/engine/speed.py",
           "return [run for run, sides in enumerate(answers, start=1) if sides != answers[0]]", "return []",
           (f"{REPEAT}::test_a_greedy_answer_that_changes_between_runs_is_said_to_be_a_bug",
            "tests/test_cli.py::test_repeat_reports_the_median_run_and_every_runs_speedup")),
    Mutant("the-repeats-record-forgets-the-differing-runs", "tabed/engine/speed.py",
           '"differing": list(differing)}', '"differing": []}',
           (f"{REPEAT}::test_a_greedy_answer_that_changes_between_runs_is_said_to_be_a_bug",
            "tests/test_cli.py::test_repeat_reports_the_median_run_and_every_runs_speedup")),
    Mutant("the-repeats-record-counts-runs-from-0", "tabed/engine/speed.py",
           '"median_run": spread.median_run + 1 if spread', '"median_run": spread.median_run if spread',
           (f"{REPEAT}::test_three_runs_headline_the_median_run_and_the_range",
            "tests/test_cli.py::test_repeat_reports_the_median_run_and_every_runs_speedup")),
    Mutant("repeat-counts-starved-runs", "tabed/engine/speed.py",
           "if index not in disturbed and not any(m.busy for m in sides)] or", "if index not in disturbed] or",
           (f"{REPEAT}::test_a_run_the_machine_starved_is_left_out_of_the_median",)),
    Mutant("repeat-range-from-the-median", "tabed/page/status.py", "runs, {spread.low:.2f}–{spread.high:.2f}×",
           "runs, {spread.median:.2f}–{spread.high:.2f}×",
           (f"{REPEAT}::test_three_runs_headline_the_median_run_and_the_range",)),
    Mutant("zerogpu-budget-forgets-the-repeats", "app.py", "runs = (2 * repeat if request.compare_ar",
           "runs = (2 if request.compare_ar",
           (f"{REPEAT}::test_the_zerogpu_budget_counts_every_repeat",)),
    Mutant("repeat-median-of-an-even-count-the-upper", "tabed/engine/speed.py", "middle = order[(len(order) - 1) // 2]",
           "middle = order[len(order) // 2]",
           ("tests/engine/test_speed.py::test_repeats_show_the_median_runs_figure_and_the_range_of_all",)),
    Mutant("the-race-ignores-its-pace", "tabed/page/view.py", "scale = max(1.0, end / 20.0) * pace",
           "scale = max(1.0, end / 20.0)",
           (f"{APP}::test_the_race_replays_at_a_half_or_a_quarter_of_the_measured_pace_and_says_so",)),
    Mutant("the-race-takes-any-pace", "app.py", "if isinstance(pace, bool) or pace not in RACE_PACES.values():",
           "if False:", (f"{APP}::test_the_race_replays_at_a_half_or_a_quarter_of_the_measured_pace_and_says_so",)),
    Mutant("a-stop-before-plain-decoding-says-done", "tabed/page/view.py",
           "return AUTOREGRESSIVE if self.racing else None", "return None",
           (f"{APP}::test_the_status_counts_each_sides_own_tokens_and_the_most_starved_share",)),
    Mutant("whose-guesses-as-rates-hiding-their-counts", "tabed/page/status.py",
           """line = ", ".join(f"{m}'s {hit} of {total}" for _, m, hit, total in rates)""",
           """line = ", ".join(f"{m}'s {hit / total:.0%}" for _, m, hit, total in rates)""",
           ("tests/test_golden.py::test_the_teaching_pairs_bundled_example_records",)),
    Mutant("the-report-leaves-out-the-answers", "tabed/page/downloads.py",
           """answers = "".join(f'<h2>{html.escape(label)}</h2><div id="{element}">{answer}</div>'""",
           """answers = "".join(f'<h2>{html.escape(label)}</h2>'""",
           (f"{APP}::test_each_run_replaces_the_last_runs_downloads_named_and_titled_for_it",)),
    # a fault audit of this session's repeats, race pace, report and stepper: survivors, now caught
    Mutant("repeat-one-counted-run-shown-as-a-range", "tabed/page/view.py",
           "self.spread = spread if len(spread.speedups) > 1 else None", "self.spread = spread",
           (f"{REPEAT}::test_one_quiet_run_among_starved_ones_is_the_figure",)),
    Mutant("repeat-one-quiet-run-thrown-away", "tabed/page/view.py",
           "if spread is not None:  # one quiet run", "if spread is not None and len(spread.speedups) > 1:  #",
           (f"{REPEAT}::test_one_quiet_run_among_starved_ones_is_the_figure",)),
    Mutant("repeat-said-without-plain-decoding", "app.py", "runs=repeat if compare else 1)", "runs=repeat)",
           (f"{REPEAT}::test_one_run_says_no_range_and_a_repeat_needs_plain_decoding",)),
    Mutant("repeat-said-of-the-methods-alone", "tabed/page/view.py",
           "if self.runs > 1 and self.phase != ALONE else None", "if self.runs > 1 else None",
           (f"{REPEAT}::test_methods_alone_after_the_repeats_are_not_said_to_be_a_run_of_them",)),
    Mutant("repeat-block-table-of-the-first-run", "tabed/page/view.py",
           "            self.blocks = list(self.results[SPECULATIVE].blocks)\n", "",
           (f"{REPEAT}::test_three_runs_headline_the_median_run_and_the_range",)),
    Mutant("repeat-range-row-at-the-bottom", "tabed/page/view.py", "rows.insert(1, [f\"speedup over",
           "rows.append([f\"speedup over", (f"{REPEAT}::test_three_runs_headline_the_median_run_and_the_range",)),
    Mutant("repeat-a-stop-during-the-repeats-unsaid", "tabed/page/status.py", "if facts.cut is not None:",
           "if False:", (f"{REPEAT}::test_a_stop_during_the_repeats_keeps_the_runs_that_finished_and_says_so",)),
    Mutant("repeat-left-out-of-the-download", "tabed/page/view.py", "    if view.runs > 1:  # the results are",
           "    if False:  # the results are", (f"{REPEAT}::test_three_runs_headline_the_median_run_and_the_range",)),
    Mutant("the-race-paces-long-races-wrong", "tabed/page/view.py", "scale = max(1.0, end / 20.0) * pace",
           "scale = max(pace, end / 20.0)",
           (f"{APP}::test_the_race_replays_at_a_half_or_a_quarter_of_the_measured_pace_and_says_so",)),
    Mutant("the-report-drops-the-settings", "tabed/page/view.py", '**request["config"], "repeat": view.runs}',
           '"repeat": view.runs}', (f"{APP}::test_each_run_replaces_the_last_runs_downloads_named_and_titled_for_it",)),
    Mutant("the-report-drops-the-machine", "tabed/page/view.py", 'f"{view.where}; {machine}")', 'f"{view.where}; ")',
           (f"{APP}::test_each_run_replaces_the_last_runs_downloads_named_and_titled_for_it",)),
    Mutant("previous-steps-forward", "app.py", "((step.previous, -1), (step.next, 1))",
           "((step.previous, 1), (step.next, 1))",
           (f"{BROWSER}::TestWithTheTinyPair::test_the_block_asked_last_is_the_one_shown_while_steps_are_slow",)),
    Mutant("previous-past-block-0", "tabed/page/texts.py",
           "box.value = String(Math.max(0, (parseInt(box.value, 10) || 0) + ({by})));",
           "box.value = String((parseInt(box.value, 10) || 0) + ({by}));",
           (f"{BROWSER}::TestWithTheTinyPair::test_the_block_asked_last_is_the_one_shown_while_steps_are_slow",)),
    Mutant("a-follow-up-changes-its-pair", "tabed/page/conversation.py",
           "if conversation.preset not in (None, preset):", "if False:",
           (f"{APP}::test_each_session_words_its_own_answer_with_its_own_pairs_tokenizer",)),
    Mutant("a-finished-run-keeps-its-state-in-the-worker", "tabed/page/view.py",
           "weights=view.figure(), blocks=view.block_table(), chat=chat_history(conversation), state=conversation,",
           "weights=view.figure(), blocks=view.block_table(), chat=chat_history(conversation),",
           ("tests/page/test_zerogpu.py::test_a_run_and_its_follow_up_cross_the_fork_whole",)),
    # a fresh audit of the bench's report: survivors, now caught
    Mutant("bench-acceptance-positions-from-the-second", REPORT,
           'row["acceptance_by_position"][:ACCEPTANCE_POSITIONS])',
           'row["acceptance_by_position"][1:ACCEPTANCE_POSITIONS + 1])', (ACCEPTANCE_TABLE,)),
    Mutant("bench-drafts-kept-shows-the-acceptance-rate", REPORT, "{row['mean_accepted']:.2f} | {histogram}",
           "{row['acceptance_rate']:.2f} | {histogram}", (ACCEPTANCE_TABLE,)),
    Mutant("bench-one-acceptance-row-hidden", REPORT, "return lines if len(lines) > 5 else []",
           "return lines if len(lines) > 6 else []", (ACCEPTANCE_TABLE,)),
    Mutant("bench-widest-gap-is-the-narrowest", REPORT, "(the widest gap {max(gaps):.4f} logits)",
           "(the widest gap {min(gaps):.4f} logits)", (WIDEST_GAP,)),
    Mutant("bench-widest-gap-signed", REPORT, 'gaps = [abs(d["gap"]) for d in', 'gaps = [d["gap"] for d in',
           (WIDEST_GAP,)),
    Mutant("bench-slowest-answer-of-any-spec", REPORT, 'if r["spec"] == tabed and not r["error"] and r["decode_s"]]',
           'if not r["error"] and r["decode_s"]]',
           (f"{BENCH}::test_the_slowest_answer_goal_reads_the_default_specs_answers_only",)),
    Mutant("bench-html-without-plotly-js", REPORT, "include_plotlyjs=not figures", "include_plotlyjs=False",
           (f"{BENCH}::test_the_html_report_opens_offline_with_its_charts",)),
    Mutant("bench-weights-share-not-a-percentage", REPORT, "{share:.2%} of its decode time",
           "{share:.2f}% of its decode time", (FAILED_SPEC,)),
    Mutant("bench-names-one-error-of-a-failed-spec", REPORT, "if r.error))[:3],", "if r.error))[:1],", (FAILED_SPEC,)),
    # the same audit of the page's rendering
    Mutant("a-plain-tokens-title-counts-from-0", RENDERING, 'title = f"token {event.index + 1} · {what}',
           'title = f"token {event.index} · {what}', (TITLES,)),
    Mutant("the-targets-token-title-bonus-swapped", RENDERING,
           "{'all drafts accepted' if block.bonus else 'replaces the first rejected draft'}",
           "{'replaces the first rejected draft' if block.bonus else 'all drafts accepted'}", (TITLES,)),
    Mutant("a-discarded-draft-not-struck-through", RENDERING, "    if kind in STRUCK:\n        style +=",
           '    if kind == "rejected":\n        style +=', (TITLES,)),
    Mutant("struck-drafts-counted-only-where-rejected", RENDERING, "            self.rejected += 1\n",
           "            self.rejected += j == block.accepted\n", (TITLES,)),
    Mutant("a-tree-nodes-ensemble-p-is-the-targets", RENDERING, "ensemble p={node.draft_prob:.2f}",
           "ensemble p={node.target_prob:.2f}", (TREE_HOVERS,)),
    Mutant("two-proposers-not-several-methods", RENDERING, '("several methods" if len(proposer) > 1 else',
           '("several methods" if len(proposer) > 2 else', (TREE_HOVERS,)),
    Mutant("a-fixed-draft-length-says-fixed", RENDERING,
           'f"{count}, {STOP_WORDS.get(block.stop, block.stop)}" if block.stop != StopReason.FIXED else str(count)',
           'f"{count}, {STOP_WORDS.get(block.stop, block.stop)}"', (DRAFT_LENGTH,)),
    Mutant("a-trees-depth-is-its-chains-length", RENDERING, 'f"{tree_depth(block.tree)} deep,',
           'f"{len(block.draft)} deep,', (DRAFT_LENGTH,)),
    # the same audit of a run's view
    Mutant("the-least-starved-share-said", "tabed/page/view.py", "return min(shares) if shares else None",
           "return max(shares) if shares else None", (SIDES,)),
    Mutant("plain-progress-counts-tabeds-tokens", VIEW, "else len(self.plain.ids)", "else len(self.tabed.ids)",
           (SIDES,)),
    Mutant("a-stopped-plain-side-counts-tabeds-tokens", VIEW, "else len(plain.token_ids) if plain else 0",
           "else len(self.results[SPECULATIVE].token_ids) if plain else 0", (SIDES,)),
    Mutant("bfloat16-said-unexpected", VIEW, "return self.pair.dtype in (torch.float16, torch.bfloat16)",
           "return self.pair.dtype == torch.float16",
           (f"{APP}::test_an_answer_that_differs_says_why_only_as_its_precision_allows",)),
    Mutant("bench-accepts-limit-0", "tabed/cli.py", "args.limit < 1:", "args.limit < 0:",
           (f"{BENCH}::test_bench_refuses_a_limit_under_one_case",)),
    # the same audit of the command line
    Mutant("cli-preset-beside-a-target-allowed", CLI, "    if args.target and args.preset:\n        raise",
           "    if False:\n        raise", (PRESET_OR_PAIR,)),
    Mutant("cli-drafter-alone-allowed", CLI, "if (args.target is None) != (args.drafter is None):",
           "if args.target is not None and args.drafter is None:",
           (PRESET_OR_PAIR,)),
    Mutant("cli-weights-share-of-walltime", CLI, "m['weights_s'] / m['decode_s']", "m['weights_s'] / m['walltime_s']",
           (SUMMARY,)),
    Mutant("cli-acceptance-not-a-percentage", CLI, "acceptance {m['acceptance_rate']:.0%}",
           "acceptance {m['acceptance_rate']:.0f}%", (SUMMARY,)),
    Mutant("cli-ar-speed-is-tabeds", CLI, "AR {report['ar']['tokens_per_s']", "AR {m['tokens_per_s']", (SUMMARY,)),
    Mutant("cli-busy-plain-side-unsaid", CLI, 'if m["busy"] or report.get("ar", {}).get("busy"):', 'if m["busy"]:',
           (SUMMARY,)),
    Mutant("cli-ar-decode-time-is-walltime", CLI, '"decode_s": ar.metrics.decode_s,',
           '"decode_s": ar.metrics.walltime_s,',
           (f"{CLI_TESTS}::test_plain_decodings_decode_time_leaves_out_its_prefill",)),
    Mutant("cli-answers-shifted-by-a-turn", CLI, 'turn["answer"] for turn in turns[:-1]]',
           'turn["answer"] for turn in turns[1:]]',
           (f"{CLI_TESTS}::test_a_conversation_pairs_each_prompt_with_its_own_answer",)),
    Mutant("cli-no-overhead-inverted", CLI, "overhead=not args.no_overhead", "overhead=args.no_overhead",
           (BENCH_OPTIONS,)),
    Mutant("cli-limit-dropped", CLI, "limit=args.limit, overhead", "limit=None, overhead", (BENCH_OPTIONS,)),
    Mutant("cli-repeat-dropped", CLI, "repeat=args.repeat)", "repeat=1)", (BENCH_OPTIONS,)),
    Mutant("cli-explains-different-samples", CLI, 'report["same_output"] and not', "not",
           (f"{CLI_TESTS}::test_samples_that_differ_are_not_explained",)),
    # the rest of the audit's survivors in the view, the rendering and the report
    Mutant("one-row-weighs-nothing-beside-n", VIEW, "if spec.tabed and len(self.shared) == len(spec.methods):",
           "if spec.tabed and self.shared:", (REASONS_HOLD,)),
    Mutant("a-stopped-method-alone-has-a-speedup", VIEW, "in self.alone.items() if not result.stopped}",
           "in self.alone.items()}", (REASONS_HOLD,)),
    Mutant("what-each-method-sees-without-a-picture", "tabed/page/status.py",
           "if facts.pictures and len(facts.seen) > 1:", "if len(facts.seen) > 1:", (REASONS_HOLD,)),
    Mutant("a-side-not-run-reads-as-racing", VIEW, 'missing = "…" if self.racing else "not run"', 'missing = "…"',
           (REASONS_HOLD,)),
    Mutant("a-run-not-raced-says-it-was-stopped", VIEW, 'race them." if view.racing else "")',
           'race them." if True else "")', (f"{APP}::test_no_race_note_when_the_run_was_not_raced",)),
    Mutant("a-method-alone-timed-by-its-whole-decode", VIEW, "decode_speedup(result.metrics, plain)",
           "plain.decode_s / result.metrics.decode_s",
           (f"{APP}::test_a_method_alone_has_one_speedup_in_the_status_and_the_metrics",)),
    Mutant("one-position-past-the-shown-ones-as-a-range", RENDERING, 'if more == 1 else f"positions',
           'if more == SHOWN_POSITIONS else f"positions',
           (f"{RENDER}::test_the_metrics_say_how_the_drafts_fared_block_by_block_and_position_by_position",)),
    Mutant("bench-failed-spec-against-the-peers", REPORT, 'and not out[spec]["failed"] and None not in best',
           "and None not in best",
           (f"{BENCH}::test_a_spec_that_failed_a_case_has_no_overall_speed_against_the_peers",)),
    Mutant("bench-decode-speedup-titled-walltime", REPORT, '"Speedup over the target alone (decode time)")',
           '"Walltime speedup over the target alone")',
           (f"{BENCH}::test_the_html_report_opens_offline_with_its_charts",)),
    # the point first (issue 88): the verdict and what it must say, typed text as typed, a fact in one place
    Mutant("a-verdict-without-exactness", "tabed/page/status.py",
           "is {exact.verdict()}\" if exact is not None else \"\")", "is {exact.verdict()}\" if False else \"\")",
           (f"{APP}::test_the_status_shows_lossless_and_names_what_decoded",)),
    Mutant("a-starved-runs-speedup-headlined", "tabed/page/status.py",
           "elif facts.unreliable and exact is not None:", "elif False:",
           (f"{APP}::test_a_starved_run_headlines_no_speedup",)),
    Mutant("the-status-shows-markup", "tabed/page/status.py", "    return html.escape(said, quote=False)",
           "    return said", (f"{APP}::test_the_status_shows_every_text_as_written",)),
    Mutant("the-conversation-shows-markup", "tabed/page/conversation.py",
           'return html.escape(text, quote=False).replace("\\n", "<br>")', "return text",
           (f"{APP}::test_what_a_user_typed_shows_as_typed_in_the_conversation",
            f"{BROWSER}::TestWithTheTinyPair::test_typed_markup_is_shown_as_text_everywhere")),
    Mutant("a-quote-loses-the-space-before-its-token", "tabed/page/words.py",
           'if text[0].isspace() or before[-1:].isspace() else', "if text[0].isspace() else",
           ("tests/page/test_reasons.py::test_a_quoted_token_after_a_space_of_its_own_keeps_the_space",)),
    Mutant("a-tokens-detail-covers-it", "tabed/page/texts.py", "if (covered > 0) window.scrollBy(",
           "if (false) window.scrollBy(", (NEVER_COVERS,)),
    Mutant("a-struck-draft-a-small-target-on-a-phone", "tabed/page/texts.py",
           "{ display: inline-block; min-height: 24px;\n  line-height: 24px; }", "{ }", (NEVER_COVERS,)),
    Mutant("a-run-at-the-far-line-is-disturbed", "tabed/engine/speed.py", "return self.slower > FAR",
           "return self.slower >= FAR", (RUN_COSTS,)),
    Mutant("run-costs-count-the-prompts-pass", "tabed/engine/speed.py", "passes, steps = ours.blocks[1:],",
           "passes, steps = ours.blocks,", (RUN_COSTS,)),
    Mutant("run-costs-count-the-prompts-step", "tabed/engine/speed.py", "for token in plain.tokens[1:]]",
           "for token in plain.tokens]", (RUN_COSTS,)),
    Mutant("run-costs-forget-a-trees-nodes", "tabed/engine/speed.py", "(len(block.tree) or len(block.draft)) + 1",
           "len(block.draft) + 1", (RUN_COSTS,)),
    Mutant("run-costs-mean-steps", "tabed/engine/speed.py", "statistics.median(steps)", "statistics.mean(steps)",
           (RUN_COSTS,)),
    Mutant("run-costs-mean-checks", "tabed/engine/speed.py", "statistics.median(checks)", "statistics.mean(checks)",
           (RUN_COSTS,)),
    Mutant("run-costs-see-only-the-checks", "tabed/engine/speed.py", "return max(self.steps, self.checks)",
           "return self.checks", (RUN_COSTS,)),
    Mutant("run-costs-see-only-the-plain-steps", "tabed/engine/speed.py", "return max(self.steps, self.checks)",
           "return self.steps", (RUN_COSTS,)),
    Mutant("a-slowed-repeat-counts-in-the-median", "tabed/page/view.py",
           "if (costs := self.costs(run)) is not None and costs.far)", "if False)",
           (f"{REPEAT}::test_a_repeat_far_off_the_quiet_costs_is_left_out_of_the_median",)),
    Mutant("a-slowed-run-headlined", "tabed/page/view.py",
           "return self.starved() is not None or self.slowed() is not None or self.unmeasured()",
           "return self.starved() is not None or self.unmeasured()", (FAR_OFF,)),
    Mutant("a-run-never-measured-headlined", "tabed/page/view.py",
           "return self.probe is not None and self.probe.busy and self.probe.costs is None", "return False",
           (f"{REPEAT}::test_a_machine_busy_since_the_pair_was_loaded_gives_no_figure",)),
    Mutant("a-busy-machines-race-plays", "tabed/page/view.py",
           "raceable = compared and not view.unreliable()", "raceable = compared", (FAR_OFF,)),
    Mutant("the-slowed-reason-swaps-its-costs", "tabed/page/status.py", 'f"Plain decoding\'s steps took {costs.step_s',
           'f"Plain decoding\'s steps took {costs.quiet.step_s', (FAR_OFF,)),
    Mutant("quiet-costs-never-refreshed", "tabed/page/pairs.py",
           "if self.at is not None and self.clock() - self.at < REFRESH_S:", "if self.at is not None:", (QUIET,)),
    Mutant("quiet-costs-probed-every-run", "tabed/page/pairs.py",
           "if self.at is not None and self.clock() - self.at < REFRESH_S:", "if False:", (QUIET,)),
    Mutant("a-busy-probe-forgets-the-costs", "tabed/page/pairs.py", "return Probe(self.costs, busy=True)",
           "return Probe(None, busy=True)", (QUIET,)),
    Mutant("a-busy-probes-costs-kept", "tabed/bench/overhead.py",
           'if pair.device.type == "cpu" and share < QUIET_SHARE:', "if False:", (QUIET,)),
    Mutant("the-worker-never-probes", "tabed/page/worker.py",
           "if self.quiet is not None and self.compare_ar:", "if False:", (QUIET,)),
    Mutant("a-slow-answer-blames-the-drafts-whatever-they-paid", "tabed/page/status.py",
           "                        speed.verify + speed.drafting)", "                        None)",
           ("tests/page/test_reasons.py::test_a_slow_answer_whose_drafts_paid_for_their_checks_blames_the_rest_of_the_pass",)),
    Mutant("a-slow-answer-never-blames-the-drafts", "tabed/page/reasons.py",
           "elif checking is not None and tokens_per_pass > checking:", "elif checking is not None:",
           ("tests/page/test_reasons.py::test_fast_or_slow_in_one_sentence",)),
    Mutant("another-pair-keeps-the-costs", "tabed/page/pairs.py", "self.costs = self.at = None", "self.at = None",
           (QUIET,)),
    Mutant("a-gpu-probe-finds-the-machine-busy", "tabed/bench/overhead.py",
           'if pair.device.type == "cpu" and share < QUIET_SHARE:', "if share < QUIET_SHARE:", (QUIET,)),
    Mutant("the-probe-swaps-its-costs", "tabed/bench/overhead.py", "StepCosts(step_s, verify_s, QUIET_TOKENS)",
           "StepCosts(verify_s, step_s, QUIET_TOKENS)", (QUIET,)),
    Mutant("the-repeats-record-swaps-asked-and-finished", "tabed/page/view.py",
           "repeats_record(view.spread, view.runs, view.timed_runs,",
           "repeats_record(view.spread, view.timed_runs, view.runs,",
           (f"{REPEAT}::test_a_stop_during_the_repeats_keeps_the_runs_that_finished_and_says_so",)),
    Mutant("a-busy-probe-after-quiet-ones-judges-nothing", "tabed/page/view.py",
           "self.probe is not None and self.probe.busy and self.probe.costs is None",
           "self.probe is not None and self.probe.busy",
           (f"{REPEAT}::test_a_busy_probe_after_quiet_ones_still_judges_the_run_by_the_costs_it_kept",)),
    Mutant("a-stopped-run-judged", "tabed/page/view.py",
           "if self.probe is None or self.probe.costs is None or not self._finished(run):",
           "if self.probe is None or self.probe.costs is None:",
           (f"{REPEAT}::test_a_stop_as_tabed_ends_is_no_run_to_judge",)),
    Mutant("the-warning-names-the-plain-steps-factor", "tabed/page/status.py", "the big model took {costs.slower:.1f}×",
           "the big model took {costs.steps:.1f}×", (CHECKS_SLOWER,)),
    Mutant("the-costs-record-the-slower-as-the-steps", "tabed/page/view.py", '"steps": costs.steps,',
           '"steps": costs.slower,', (CHECKS_SLOWER,)),
    Mutant("the-costs-record-the-quiet-step", "tabed/page/view.py", '"step_s": costs.step_s,',
           '"step_s": costs.quiet.step_s,', (CHECKS_SLOWER,)),
    Mutant("a-cut-block-counts-a-position-it-never-verified", "tabed/page/reasons.py",
           "([] if block.target_token is None else [block.target_token])", "[block.target_token]",
           ("tests/page/test_reasons.py::test_a_block_cut_before_its_target_token_verified_only_its_kept_drafts",)),
    Mutant("an-unlisted-top-1-said-at-nothing", "tabed/page/reasons.py",
           "top1, top = test.target_top1, position.target[0][1]",
           "top1 = test.target_top1; top = target.get(top1, 0.0)",
           ("tests/page/test_stepper.py::test_each_verdict_says_why_in_one_line",)),
    Mutant("a-draft-proposed-by-the-methods-that-guessed-otherwise", "tabed/page/reasons.py",
           "if j < len(guesses) and guesses[j] == token)", "if j < len(guesses) and guesses[j] != token)",
           ("tests/page/test_reasons.py::test_a_drafts_detail_says_its_place_who_proposed_it_and_its_verdict",)),
    Mutant("a-lead-of-exactly-the-margin-is-none", "tabed/page/reasons.py",
           "if rate[leader] - rate[behind] >= LEAD:", "if rate[leader] - rate[behind] > LEAD:",
           ("tests/page/test_reasons.py::test_a_lead_of_exactly_the_margin_leads_and_a_sole_method_is_compared_with_none",)),
    Mutant("the-history-stops-at-a-block-without-an-update", "tabed/page/reasons.py",
           """update.rule != "w-grid" or update.shared:
            continue""", """update.rule != "w-grid" or update.shared:
            break""",
           ("tests/page/test_reasons.py::test_the_history_figures_are_the_last_w_grid_choice_of_rows_of_their_own",)),
    Mutant("the-steppers-discarded-rows-a-column-short", "tabed/page/stepper.py",
           "block.draft[j], j, 2 + len(methods) + 3,", "block.draft[j], j, 2 + len(methods) + 2,",
           ("tests/page/test_stepper.py::test_every_row_of_the_steppers_table_is_as_wide_as_its_header",)),
    Mutant("a-fraction-of-a-block-shown-as-another", "tabed/page/stepper.py",
           "or not math.isfinite(index) or index % 1:", "or not math.isfinite(index):",
           ("tests/page/test_stepper.py::test_the_block_asked_for_is_a_whole_number_of_the_answers_blocks",)),
    Mutant("a-block-with-no-room-said-to-keep-every-draft", "tabed/page/stepper.py",
           "    elif not block.draft:  #", "    elif False:  #",
           ("tests/page/test_stepper.py::test_a_block_with_no_room_to_draft_says_the_target_made_its_token_alone",)),
    Mutant("tvds-weights-explained-as-hedges", "tabed/page/stepper.py", 'if update.rule in ("kld", "tvd"):',
           'if update.rule == "kld":',
           ("tests/page/test_stepper.py::test_each_rules_weights_are_explained_by_its_own_figures",)),
    Mutant("a-grafted-chain-loses-its-log-softmax", "tabed/engine/tree.py",
           "chain.row_log_probs[position] if chain.row_log_probs else None)", "None)",
           ("tests/engine/test_tree.py::test_a_chain_grafted_onto_a_tree_keeps_its_log_softmax",)),
    Mutant("a-members-chain-at-the-minimum-stops", "tabed/engine/tree.py",
           "if self.survival[member] >= length.threshold}", "if self.survival[member] > length.threshold}",
           ("tests/engine/test_members_tree.py::test_a_nodes_score_is_its_calibrated_chance_and_a_chain_at_the_minimum_goes_on",)),
    Mutant("a-depths-tied-children-go-to-the-last-node", "tabed/engine/tree.py",
           "candidates.sort(key=lambda candidate: candidate[0], reverse=True)", "candidates.sort(reverse=True)",
           ("tests/engine/test_tree.py::test_a_depths_children_at_their_edges",)),
    Mutant("greedy-methods-children-read-across-rows", "tabed/engine/tree.py",
           "context.row_probs.argmax(-1)[order]", "context.row_probs.argmax(-2)[order]",
           ("tests/engine/test_tree.py::test_a_greedy_nodes_methods_children_and_an_unsure_node_at_the_line",)),
    Mutant("a-tree-nodes-target-probability-from-the-row-before", "tabed/engine/tree.py",
           "target = probs[rows + 1, tokens]", "target = probs[rows - 1, tokens]",
           ("tests/engine/test_tree.py::test_a_verified_trees_nodes_say_who_proposed_them_what_was_kept_and_both_probabilities",)),
    Mutant("a-tree-verified-without-the-runs-top-p", "tabed/engine/tree.py",
           "probs = logits_to_probs(logits, config.temperature, config.top_p)  # row 1 + n",
           "probs = logits_to_probs(logits, config.temperature)  # row 1 + n",
           ("tests/engine/test_lossless.py::test_a_tree_is_verified_against_the_targets_distribution_at_the_runs_temperature_and_top_p",)),
    Mutant("a-tree-ended-by-end-tokens-gives-no-reason", "tabed/engine/tree.py", "tree.stop = StopReason.EOS",
           "tree.stop = None",
           ("tests/engine/test_tree.py::test_a_tree_whose_every_newest_node_is_an_end_token_stops_there",)),
    Mutant("a-trees-resting-method-proposes-its-nodes", "tabed/engine/tree.py",
           "resting_rows=list(drafting.drafter.resting_rows))", "resting_rows=[])",
           ("tests/engine/test_tree.py::test_a_resting_method_proposes_none_of_a_trees_nodes",)),
    # a fresh audit of the bench and the command line (issue 87's promise: faults of the same kinds, tried again)
    Mutant('busy-runs-counted-as-one', 'tabed/bench/report.py',
           '"busy": sum(r.busy for r in mine),',
           '"busy": any(r.busy for r in mine),', (HAND_MADE,)),
    Mutant('a-spec-missing-a-scenario-compared-to-the-peers-overall', 'tabed/bench/report.py',
           'if len(rows) == len(scenarios) and not',
           'if not', (MISSING_SCENARIO,)),
    Mutant('a-failed-row-a-cell-wider-than-its-header', 'tabed/bench/report.py',
           'failed on every case |" + " |" * (len(header) - 3))',
           'failed on every case |" + " |" * (len(header) - 2))', (HAND_MADE,)),
    Mutant('peers-listed-among-the-overall-rows', 'tabed/bench/report.py',
           '        if is_peer(spec):\n            continue\n        peer = [f"{row[\'speedup_vs_peer\']',
           '        peer = [f"{row[\'speedup_vs_peer\']', (HAND_MADE,)),
    Mutant('a-missed-goal-not-in-bold', 'tabed/bench/report.py',
           "{'yes' if g['met'] else '**no**'}",
           "{'yes' if g['met'] else 'no'}", (HAND_MADE,)),
    Mutant('a-tree-rows-width-unchecked', 'tabed/bench/rows.py',
           '        if not width.isdigit():\n            raise',
           '        if False:\n            raise', (TREE_ROW,)),
    Mutant('a-tree-row-hedges-its-first-block', 'tabed/bench/rows.py',
           'tree_width=int(width), hedge_first=False,',
           'tree_width=int(width),', (TREE_ROW,)),
    Mutant('a-mismatched-answer-speed-modelled', 'tabed/bench/explained.py',
           'run.busy or run.mismatch or run.new_tokens',
           'run.busy or run.new_tokens', (UNMODELLED,)),
    Mutant('a-starved-answer-speed-modelled', 'tabed/bench/explained.py',
           'run.error or run.busy or run.mismatch',
           'run.error or run.mismatch', (UNMODELLED,)),
    Mutant('an-answers-passes-count-the-prefill', 'tabed/bench/explained.py',
           'return speed_model(run.emitted, run.target_forwards - 1,',
           'return speed_model(run.emitted, run.target_forwards,', (UNMODELLED,)),
    Mutant('the-model-goal-missed-at-nine-in-ten', 'tabed/bench/explained.py',
           '"met": within >= 0.9 * answers}',
           '"met": within > 0.9 * answers}', (MODEL_GOAL,)),
    Mutant('cores-and-threads-swapped-in-the-header', 'tabed/bench/machine.py',
           "{machine['cores']} cores, {machine['torch_threads']} torch threads",
           "{machine['torch_threads']} cores, {machine['cores']} torch threads", (MACHINE_LINE,)),
    Mutant('onednn-never-named', 'tabed/bench/machine.py',
           'return name + (", oneDNN" if torch.backends.mkldnn.is_available() else "")',
           'return name', (BLAS,)),
    Mutant('a-starved-plain-side-ignored', 'tabed/bench/runner.py',
           'busy=m.busy or ar.metrics.busy,',
           'busy=m.busy,', (STARVED_SIDE,)),
    Mutant('a-peers-plain-side-leaves-out-the-prefill', 'tabed/bench/runner.py',
           'ar_decode_s=ar.metrics.walltime_s,',
           'ar_decode_s=ar.metrics.decode_s,', (PEER_SIDE,)),
    Mutant('a-trailing-comma-is-a-bench-row', 'tabed/cli.py',
           '[s.strip() for s in args.drafting.split(",") if s.strip()]',
           '[s.strip() for s in args.drafting.split(",")]', (BENCH_OPTIONS,)),
    Mutant('generate-repeat-2-without-compare-ar', 'tabed/cli.py',
           'if args.repeat > 1 and not args.compare_ar:',
           'if args.repeat > 2 and not args.compare_ar:', (REPEAT_BOUNDS,)),
    Mutant('an-interrupted-bench-not-said-so', 'tabed/bench/report.py',
           '("" if report["complete"] else " (interrupted: partial results)")',
           '("" if not report["complete"] else " (interrupted: partial results)")', (HAND_MADE,)),
    Mutant('the-html-report-escapes-twice', 'tabed/bench/report.py',
           '.replace("&", "&amp;").replace("<", "&lt;")',
           '.replace("<", "&lt;").replace("&", "&amp;")', (HAND_MADE,)),
    Mutant('every-run-listed-as-a-mismatch', 'tabed/bench/report.py',
           'for run in report["runs"] if run.get("mismatch")]',
           'for run in report["runs"]]', (HAND_MADE,)),
    Mutant('every-model-miss-listed', 'tabed/bench/explained.py',
           '*misses[:SHOWN_MISSES]]',
           '*misses]', (MODEL_GOAL,)),
    Mutant('a-differing-sample-called-a-mismatch', 'tabed/bench/runner.py',
           'if not is_greedy(config.temperature) or ids == plain:',
           'if ids == plain:', (PEER_SIDE,)),
    Mutant('a-later-repeats-failure-forgotten', 'tabed/bench/runner.py',
           'error=next((r.error for r in runs if r.error), ""))',
           'error=first.error)', (ANY_REPEAT,)),
    Mutant('a-single-method-given-a-weights-share', 'tabed/bench/runner.py',
           'if spec.startswith("tabed") and rows:',
           'if rows:', (SHARE_AND_TURN,)),
    Mutant('bench-cases-not-taken-in-turn', 'tabed/bench/runner.py',
           'return in_turn(limit_cases(load_suite(settings.suite), settings.limit))',
           'return limit_cases(load_suite(settings.suite), settings.limit)', (SHARE_AND_TURN,)),
    Mutant('bench-prints-no-mismatches', 'tabed/cli.py',
           '("block_efficiency", "speedup_vs_ar",\n' + " " * 80 + '"mismatches")',
           '("block_efficiency", "speedup_vs_ar")', (BENCH_OPTIONS,)),
    # a fresh audit of the overhead, the peers, the divergence and the rest of the command line
    Mutant('overhead-k-ratios-inverted', OVERHEAD, '{k: seconds[k] / seconds[1] for k in ROW_SETS}',
           '{k: seconds[1] / seconds[k] for k in ROW_SETS}', (BATCHING,)),
    Mutant('overhead-k4-three-rows', OVERHEAD, '4: ("M", "T", "C", "P")',
           '4: ("M", "T", "C")', (BATCHING,)),
    Mutant('overhead-row-costs-in-seconds', OVERHEAD, '{name: statistics.median(seconds) * 1e3 for',
           '{name: statistics.median(seconds) for', (ROW_WAYS,)),
    Mutant('overhead-rows-each-the-lean-way', OVERHEAD, 'draft_step_seconds(pair, turns, methods, steps, **how)',
           'draft_step_seconds(pair, turns, methods, steps)', (ROW_WAYS,)),
    Mutant('overhead-whole-llava-row-is-the-library', OVERHEAD, '"M,T whole": (("M", "T"), {"path": "whole"})',
           '"M,T whole": (("M", "T"), {"path": "library"})', (ROW_WAYS,)),
    Mutant('overhead-verify-a-token-short', OVERHEAD, 'target_step_seconds(pair, turns, gamma + 1, steps) * 1e3',
           'target_step_seconds(pair, turns, gamma, steps) * 1e3', (STEP_KINDS,)),
    Mutant('overhead-library-step-the-lean-way', OVERHEAD,
           'target_step_seconds(pair, turns, 1, steps, path="library") * 1e3',
           'target_step_seconds(pair, turns, 1, steps) * 1e3', (STEP_KINDS,)),
    Mutant('overhead-tree-drafting-one-row', OVERHEAD, 'draft_step_seconds(pair, turns, ROW_SETS[2], steps, width)',
           'draft_step_seconds(pair, turns, ROW_SETS[1], steps, width)', (STEP_KINDS,)),
    Mutant('overhead-fed-two-feeds-one', OVERHEAD, 'drafter.step([token] * fed)',
           'drafter.step([token])', (DRAFT_STEP,)),
    Mutant('overhead-fed-two-never-forgotten', OVERHEAD, 'if layout is not None or fed > 1:',
           'if layout is not None:', (DRAFT_STEP,)),
    Mutant('overhead-tree-step-forgets-one-node', OVERHEAD, 'drafter.rollback(nodes if layout is not None else fed)',
           'drafter.rollback(fed)', (DRAFT_STEP,)),
    Mutant('overhead-two-nodes-not-a-tree', OVERHEAD, 'if nodes > 1 else None',
           'if nodes > 2 else None', (DRAFT_STEP,)),
    Mutant('overhead-tree-verify-without-the-committed-token', OVERHEAD,
           'entries = [ROOT] + list(range(len(tree.tokens)))',
           'entries = list(range(len(tree.tokens)))', (VERIFY_STEP,)),
    Mutant('overhead-verify-forgets-one-token', OVERHEAD, '        session.rollback(count)',
           '        session.rollback(1)', (VERIFY_STEP,)),
    Mutant('overhead-timing-a-mean', OVERHEAD, '    return statistics.median(times[WARM_STEPS:])\n\n\nQUIET',
           '    return statistics.mean(times[WARM_STEPS:])\n\n\nQUIET', (MEDIAN_STEP,)),
    Mutant('quiet-probe-share-not-per-thread', OVERHEAD, '(time.perf_counter() - wall) / torch.get_num_threads()',
           '(time.perf_counter() - wall)', (TWO_THREADS,)),
    Mutant('peer-gamma5-drafts-twenty', PEERS,
           'settings.num_assistant_tokens, settings.num_assistant_tokens_schedule = 5, "constant"',
           'settings.num_assistant_tokens, settings.num_assistant_tokens_schedule = 20, "constant"', (GAMMA5,)),
    Mutant('peer-gamma5-keeps-the-confidence-stop', PEERS, '        settings.assistant_confidence_threshold = 0.0\n',
           '', (GAMMA5,)),
    Mutant('peer-settings-never-given-back', PEERS, '            setattr(settings, name, value)',
           '            pass', (GAMMA5,)),
    Mutant('peer-forwards-without-the-prefill', PEERS, 'seconds, len(forwards)',
           'seconds, len(forwards) - 1', (PEER_FORWARDS,)),
    Mutant('peer-sampling-unseeded', PEERS, '            torch.manual_seed(config.seed)\n',
           '            pass\n', (PEER_SEED,)),
    Mutant('divergence-an-ended-answer-a-gap-of-zero', DIVERGENCE, 'return Divergence(index, *names, gap=None)',
           'return Divergence(index, *names, gap=0.0)', (ENDED,)),
    Mutant('divergence-plain-read-past-its-end', DIVERGENCE, 'plain[index] if index < len(plain) else None',
           'plain[index] if index <= len(plain) else None', (ENDED,)),
    Mutant('divergence-other-ended-by-plains-length', DIVERGENCE, 'other[index] if index < len(other) else None]',
           'other[index] if index < len(plain) else None]', (ENDED,)),
    Mutant('overhead-gamma-ignored', CLI, '**step_costs(pair, turns, args.gamma, args.steps)',
           '**step_costs(pair, turns, steps=args.steps)', (OVERHEAD_ASKED,)),
    Mutant('overhead-rounds-ignored-for-k', CLI,
           'ratios = batching_overhead(pair, turns, steps=args.steps, rounds=args.rounds)',
           'ratios = batching_overhead(pair, turns, steps=args.steps)', (OVERHEAD_ASKED,)),
    Mutant('overhead-notes-dropped', CLI, ', "notes": pair.notes}',
           '}', (OVERHEAD_ASKED,)),
    Mutant('overhead-timed-without-the-picture', CLI, 'turns = [Turn(args.prompt, [image])]',
           'turns = [Turn(args.prompt, [])]', (OVERHEAD_ASKED,)),
    Mutant('overhead-two-steps-accepted', CLI, 'if args.steps < WARM_STEPS + 1:',
           'if args.steps < WARM_STEPS:', (OVERHEAD_REFUSED,)),
    Mutant('overhead-no-rounds-accepted', CLI, 'if args.rounds < 1:',
           'if args.rounds < 0:', (OVERHEAD_REFUSED,)),
    Mutant('overhead-any-gamma-accepted', CLI,
           "    GenerationConfig(gamma=args.gamma)  # the bounds a run's draft length has\n",
           '', (OVERHEAD_REFUSED,)),
    Mutant('plain-busy-is-tabeds', CLI, '"busy": ar.metrics.busy,',
           '"busy": result.metrics.busy,', (PLAIN_OWN,)),
    Mutant('why-given-when-plain-starved', CLI, 'not (result.metrics.busy or ar.metrics.busy)',
           'not result.metrics.busy', (PLAIN_OWN,)),
    Mutant('plain-speed-is-tabeds', CLI, '"tokens_per_s": ar.metrics.tokens_per_s,',
           '"tokens_per_s": result.metrics.tokens_per_s,', (PLAIN_OWN,)),
    Mutant('json-output-tells-the-loading', CLI, 'pair = _load(args, quiet=args.json)',
           'pair = _load(args)', (LOADING_TOLD,)),
    Mutant('text-output-silent-while-loading', CLI, 'pair = _load(args, quiet=args.json)',
           'pair = _load(args, quiet=True)', (LOADING_TOLD,)),
    Mutant('ctrl-c-exits-1', CLI, '        return 130',
           '        return 1', (CTRL_C,)),
    Mutant('repeat-9-refused', CLI, 'REPEATS[0] <= args.repeat <= REPEATS[1]',
           'REPEATS[0] <= args.repeat < REPEATS[1]', (REPEAT_ENDS,)),
    Mutant('two-repeats-no-range', CLI, 'if len(repeats.get("speedups", [])) > 1 else ""',
           'if len(repeats.get("speedups", [])) > 2 else ""', (REPEATS_LINE,)),
    Mutant('dtype-with-torchs-prefix', CLI, 'str(pair.dtype).removeprefix("torch.")',
           'str(pair.dtype)', (JSON_AR,)),
    # a new user's trial: a question of one's own was said under "The example"
    Mutant('a-question-of-ones-own-said-as-the-example', 'tabed/page/status.py',
           'key = "The question" if lesson in (OWN_QUESTION, LATER_TURN) else "The example"', 'key = "The example"',
           ("tests/page/test_reasons.py::test_a_question_not_an_examples_is_said_as_the_question",)),
    Mutant('the-race-clock-ends-when-the-loop-looked', VIEW, '            clock = end  #', '            pass  #',
           (f"{APP}::test_replay_race_plays_both_answers",
            f"{APP}::test_the_race_replays_at_a_half_or_a_quarter_of_the_measured_pace_and_says_so")),
    Mutant('an-ensemble-picked-while-the-last-is-pending-dropped', 'app.py',
           '[methods], queue=False,\n               api_name=False, trigger_mode="always_last")',
           '[methods], queue=False,\n               api_name=False)',
           (f"{BROWSER}::TestWithTheTinyPair::test_the_ensemble_picked_last_sets_the_methods_while_the_last_pick_is_on_its_way",)),
    # a fresh audit of the drafter, the widening, the spec and the chat's pictures: survivors, now caught
    Mutant('a-16-bit-picture-clipped-to-white', 'tabed/models/chat.py',
           'image = image.point(lambda v: v * (1 / 256)).convert("L")', 'image = image.convert("L")', (MODES_KEPT,)),
    Mutant('a-float-picture-left-unscaled', 'tabed/models/chat.py',
           'image = image.point(lambda v: v * 255).convert("L")', 'image = image.convert("L")', (MODES_KEPT,)),
    Mutant('a-palettes-clear-colour-kept', 'tabed/models/chat.py',
           ' or (image.mode == "P" and "transparency" in image.info)', '', (MODES_KEPT,)),
    Mutant('a-clear-grey-picture-black', 'tabed/models/chat.py', 'if image.mode in ("RGBA", "LA", "PA")',
           'if image.mode in ("RGBA", "PA")', (MODES_KEPT,)),
    Mutant('a-clear-palette-picture-black', 'tabed/models/chat.py', 'if image.mode in ("RGBA", "LA", "PA")',
           'if image.mode in ("RGBA", "LA")', (MODES_KEPT,)),
    Mutant('a-spec-with-spaces-refused', 'tabed/engine/spec.py', "raw = text.strip()", "raw = text", (SPEC_READ,)),
    Mutant('an-empty-spec-said-to-want-a-model-method', 'tabed/engine/spec.py', "if not letters or any(", "if any(",
           (SPEC_REFUSED,)),
    Mutant('tabed-with-n-refused', 'tabed/engine/spec.py', "if self.tabed and len(self.methods) < 2:",
           "if self.tabed and len(self.model_methods) < 2:", (SPEC_READ,)),
    Mutant('a-static-mix-with-n-read-as-one-method', 'tabed/engine/spec.py',
           'return "single" if len(self.methods) == 1 else "static"',
           'return "single" if len(self.model_methods) == 1 else "static"', (SPEC_READ,)),
    Mutant('shared-key-value-heads-widened', 'tabed/models/widen.py', "if text.num_key_value_heads != small_heads:",
           "if False:", (WIDEN_REFUSED,)),
    Mutant('biased-projections-widened', 'tabed/models/widen.py',
           'if getattr(text, "attention_bias", False) or getattr(text, "mlp_bias", False):',
           'if getattr(text, "attention_bias", False):', (WIDEN_REFUSED,)),
    Mutant('a-scaled-rope-widened', 'tabed/models/widen.py',
           'if (text.rope_parameters or {}).get("rope_type", "default") != "default":', 'if False:', (WIDEN_REFUSED,)),
    Mutant('a-widened-model-in-the-small-ones-dtype', 'tabed/models/widen.py', "dtype=dtype or model.dtype)",
           "dtype=model.dtype)", ("tests/models/test_widen.py::test_a_widened_model_takes_the_dtype_asked_for",)),
    Mutant('the-t-rows-newline-a-space-on-llama', 'tabed/engine/drafter.py',
           "return torch.tensor(ids[-1:], dtype=torch.long)", "return torch.tensor(ids[:1], dtype=torch.long)",
           ("tests/engine/test_drafter.py::test_the_t_row_stands_a_newline_for_the_picture_where_a_llama_tokenizer_"
            "splits_it",)),
    Mutant('two-rows-of-two-lengths-prefilled-padded', 'tabed/engine/drafter.py',
           "len({e.shape[0] for e in embeds}) > 1", "len({e.shape[0] for e in embeds}) > 2", (OWN_LENGTHS,)),
    Mutant('rows-of-one-length-prefilled-one-by-one', 'tabed/engine/drafter.py',
           "len({e.shape[0] for e in embeds}) > 1", "len(embeds) > 1", (OWN_LENGTHS,)),
    Mutant('a-huge-pictures-line-wrapped-as-unreadable', 'tabed/models/chat.py',
           "        if isinstance(exc, InputError):\n            raise\n", "",
           ("tests/models/test_models.py::test_a_huge_picture_is_refused_in_one_line_that_says_so",)),
    Mutant('a-turn-of-pictures-alone-refused', 'tabed/models/chat.py',
           "if not turn.text.strip() and not turn.images:", "if not turn.text.strip():",
           ("tests/models/test_models.py::test_a_turn_of_pictures_alone_is_a_question_and_a_turn_of_nothing_is_refused",)),
    Mutant('a-bench-row-with-two-tree-policies-read-as-one', 'tabed/bench/rows.py',
           "if len(blocks) > 1 or len(policies) > 1:", "if False:",
           ("tests/engine/test_tree.py::test_a_bench_row_with_two_tree_policies_is_refused_not_read_as_one",)),
    # Run pressed during a run: the running run's frames say the new one waits behind it
    Mutant('a-queued-run-never-said', 'app.py', 'if STOPS.waiting(session) and', 'if False and', (QUEUED_RUN,)),
    Mutant('a-queued-run-never-said-on-the-page', 'app.py', 'if STOPS.waiting(session) and', 'if False and',
           (f"{BROWSER}::TestWithTheTinyPair::test_run_pressed_during_a_run_says_the_new_run_waits_then_runs_it[390]",)),
    Mutant('a-queued-run-said-after-it-began', 'app.py', '    STOPS.taken(session)\n', '', (QUEUED_RUN,)),
    Mutant('a-run-queued-with-nothing-running', 'tabed/page/stops.py', 'if session and self.flags.get(session):',
           'if session:', (QUEUED_RUN,)),
)


def apply(root: Path, mutant: Mutant) -> None:
    """Write the mutant into the copy at `root`; its source must occur exactly once."""
    path = root / mutant.path
    source = path.read_text()
    count = source.count(mutant.before)
    if count != 1:
        raise ValueError(f"{mutant.name}: {mutant.before!r} occurs {count} times in {mutant.path}")
    path.write_text(source.replace(mutant.before, mutant.after))


def scratch_copy(into: Path) -> Path:
    """The repository's code and tests copied, its assets linked."""
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, into / name)
    (into / "assets").symlink_to(ROOT / "assets")
    return into


HUNG = -1  # `pytest_run`'s status for tests still running at their time limit


def pytest_run(root: Path, tests: tuple[str, ...], limit_s: float | None = None) -> tuple[int, dict[str, int], str]:
    """Run `tests` in the copy at `root`: pytest's exit status (`HUNG` past `limit_s`), its counts (tests,
    skipped, failures, errors) and the tail of its output. No bytecode is written: a source edited after a run
    is read afresh."""
    with tempfile.TemporaryDirectory(prefix="tabed-mutant-report-") as reports:
        junit = Path(reports) / "junit.xml"
        try:
            done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider",
                                   f"--junitxml={junit}", *tests], cwd=root, capture_output=True, text=True,
                                  env=os.environ | {"HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"},
                                  timeout=limit_s)
        except subprocess.TimeoutExpired:
            return HUNG, {}, f"still running after {limit_s:.0f} s"
        counts = {"tests": 0, "skipped": 0, "failures": 0, "errors": 0}
        if junit.exists():
            for suite in ElementTree.parse(junit).getroot().iter("testsuite"):
                for key in counts:
                    counts[key] += int(suite.get(key, 0))
    return done.returncode, counts, f"{done.stdout[-2000:]}{done.stderr[-2000:]}"


CLEAN: dict[tuple[str, ...], float] = {}  # tests that passed on clean code in this invocation, and their seconds


def passes_clean(root: Path, mutant: Mutant) -> None:
    """The mutant's tests pass on the clean copy at `root` (run once per set of tests in an invocation): a
    failing, flaky or skipped test would otherwise count as a catch."""
    if mutant.tests in CLEAN:
        return
    started = time.perf_counter()
    status, counts, output = pytest_run(root, mutant.tests)
    passed = counts["tests"] - counts["skipped"] - counts["failures"] - counts["errors"]
    if status != 0 or passed <= 0:
        why = f"pytest exited {status}" if status != 0 else "every test was skipped"
        raise RuntimeError(f"{mutant.name}: its tests do not pass on clean code ({why}, {counts}): "
                           f"a fault cannot be caught by them\n{output}")
    CLEAN[mutant.tests] = time.perf_counter() - started


def caught(mutant: Mutant) -> tuple[bool, float]:
    """Whether the mutant's tests, passing on a clean scratch copy, fail on it with the mutant applied, and
    the seconds the mutated run took."""
    with tempfile.TemporaryDirectory(prefix="tabed-mutant-") as folder:
        root = scratch_copy(Path(folder))
        passes_clean(root, mutant)
        apply(root, mutant)
        started = time.perf_counter()
        # a mutant that makes its tests hang is caught (a suite that never ends fails CI), once they have run
        # ten times as long as on clean code, and two minutes at least
        status, _, output = pytest_run(root, mutant.tests, max(120.0, 10 * CLEAN[mutant.tests]))
        if status not in (0, 1, HUNG):  # 1: tests failed; anything else is the check's own failure
            raise RuntimeError(f"{mutant.name}: pytest exited {status} with the mutant\n{output}")
        return status != 0, time.perf_counter() - started


def unchecked_report(mutant: Mutant, error: RuntimeError, lines: int = 15) -> str:
    """What a mutant left unchecked says: why, and the end of its tests' output, so that a failure on clean
    code (a busy machine, a flaky test) can be told apart without running it again."""
    why, *output = str(error).splitlines()
    return "\n".join([f"UNCHECKED {mutant.name}: {why}", *(f"    {line}" for line in output[-lines:])])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.names or m.name in args.names]
    unknown = set(args.names) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"unknown mutants: {', '.join(sorted(unknown))}")
    if args.list:
        print("\n".join(f"{m.name}: {m.path}" for m in chosen))
        return 0
    survived, unchecked = [], []
    for mutant in chosen:
        try:
            killed, seconds = caught(mutant)
        except RuntimeError as error:  # its tests failed on clean code (a busy machine?): said, and the rest run
            print(unchecked_report(mutant, error), flush=True)
            unchecked.append(mutant.name)
            continue
        print(f"{'caught  ' if killed else 'SURVIVED'} {mutant.name} ({seconds:.0f} s)", flush=True)
        survived += [] if killed else [mutant.name]
    print(f"{len(chosen) - len(survived) - len(unchecked)} caught, {len(survived)} survived"
          + (f", {len(unchecked)} unchecked: {', '.join(unchecked)}" if unchecked else ""))
    return 1 if survived or unchecked else 0


if __name__ == "__main__":
    sys.exit(main())
