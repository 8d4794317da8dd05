"""The core paper's claims (seed 003, docs/paper.md §6) checked against a set of runs, by the rules registered
before the seed study (docs/preregistration.md): one module per family of claims, the registry of claim records
and the run status beside them. Tidy tables, no I/O but reads.

    registry       registry.toml, loaded and checked: each claim's quote, statistic, thresholds and decision
    registration   the registered rules as a table: version, changed after their runs or not, what changed
    status         what a run can show: learned, settled, diverged, at the ceiling (registry `[status]`)
    runs           the run table (training and data seed, status) and Table 1
    rules          the registered decisions: the share rule (Wilson interval vs 1/2), both thresholds,
                   specificity, which runs count, the outcomes
    orderings      Table 1's orderings (paired t interval) and the other accuracy claims
    deposits       RoPE's first-layer deposit, "no deposit" claims, absolute PE's heads, RoPE+absolute
    mla            MLA's "no indispensable single head"
    partial_rope   appendix C.3: the largest deposit in layer 1 or 2 on Task 1
    one_field      one setting at a time
    questions      the questions asked of the reproduction
    judge          `claims(store, runs)`: every claim row at one preset
    scale_ladder   every claim at each rung of the scale ladder; `base_claims`, what COMPARISON.md shows
    study          the registered seed study: tier 1's `study_table`, `study_readouts`; tier 2's `tier2_pairs`,
                   `tier2_readouts` (NoPE vs RoPE on Task 2, the ordering rule), `tier2_title`; the share
                   tiers (`share_tiers`: 3, NoPE and Relative on Task 1; 4, Relative at 24 epochs), each read by
                   `nope-no-generalise-t1` (`tier_readouts`, `tier_runs`, `by_construction_note`)

    runs = run_table(store)            one row per finished run
    status_of_run(run)["status"]       what one run can show (learned, still learning, ceiling ...); every surface
                                       reads runs through it (`index_statuses`: a store index's rows)
    as_read(sentence, reading)         a run's deposit sentence as its status lets it be read ("cannot tell, the run
                                       did not learn (...): ...", "... (provisional: the run is still learning ...)")
    t1 = table1(runs)                  Table 1: the paper's numbers next to the mean and range over seeds
    cl = claims(store, runs)           one row per (claim, setting): verdict, evidence, the registered rule it reads
    st = study_table(store, runs)      the seed study, one row per run
"""
from ..settings import SETTINGS, setting_of  # noqa: F401 (the one definition of a run's setting)
from .registry import REGISTRY, Registry, load_registry, parse_registry
from .status import (COUNTS, NOT_LEARNED, STATUSES, as_read, read_runs, reading_note, StatusRules, run_status,
                     settle_window, wilson)
from .runs import (STATUS_COLUMNS, TASKS, BASE, base_preset, cpu_time_share, run_table, status_of_run, reading_of,
                   index_statuses, DEFAULT_DATA_SEED, seeds_text, mean_ci, accuracy_ci, table1, is_study,
                   status_counts, accuracy_text)
from .rules import (Thresholds, TESTS, UNRANKED, NOT_SPECIFIC, UNSHOWN_SPECIFIC, FEW_SEEDS, OUTCOMES, OUTCOME_RULES,
                    verdict_summary, share, specificity, ROW_COLUMNS, largest_deposit, largest_layer,
                    thresholds_table, json_value)
from .orderings import PAPER_SIX, paired, ORDER_IDS
from .deposits import ROPE_SHALLOW, concentrated, CAUSAL_METHODS, decodable_layers, scheme_overview, all_deposits
from .mla import largest_drop
from .partial_rope import DEEPER_LAYERS, partial_rope_pairs
from .one_field import PAD_FIELDS, config_changes, one_setting, one_setting_effect
from .questions import QUESTIONS, ANSWER_OF, answer_of, answers
from .judge import claims
from .scale_ladder import (LADDER_QUESTIONS, ladder_answers, ladder, EVERY_COLUMNS, every_seed_claims, rung_claims,
                           ONE_SEED, seed_verdict, holds_across_scale, ladder_rungs, BaseClaims, base_claims,
                           ladder_table1, PASSES_STATUS, GAP_CLOSER, ladder_gaps, rung_seed_cells, status_settled)
from .registration import REGISTRATION_COLUMNS, registration_changes, registration_table
from .study import (STUDY_COLUMNS, TIER2_COLUMNS, TIER_COLUMNS, by_construction_note, planned_runs, registered_tiers,
                    share_tiers, study_runs, study_table, study_readouts, tier2_pairs,
                    tier2_readouts, tier2_title, tier_readouts, tier_runs, TIER_RUN_COLUMNS, study_title)
