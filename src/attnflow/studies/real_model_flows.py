r"""Study ``real_model_flows``: flows that explain the layers of real transformers (issue 26 part 3).

For each model family (all-MiniLM-L6-v2 from safetensors, paraphrase-MiniLM-L3-v2 from ONNX, SmolLM2-135M
from GGUF; tiny random BERT / Llama models for the quick variant) and each sentence of a corpus subsample,
the model's own layers are put side by side with five flows of :mod:`attnflow.bridge.flows`, all started
from the model's embeddings :math:`z_0`:

* (a) ``attention``: the bias-free heads, attention only (the flow of ``real_model``);
* (b) ``biases``: the heads with the attention biases and the LayerNorm shift kept;
* (c) ``fitted_time``: (a) with one time T_l per layer, fitted on one half of the sentences to the model's
  layer output (teacher-forced: layer l's flow from the model's z_l against the model's z_{l+1}) and
  reported on the other half;
* (d) ``model_scores``: the model's own attention weights moving the values of the bias-free heads;
* (e) ``mlp``: attention + each layer's MLP as a drift;
* (f) ``frames``: (a) with the block's LayerNorm affine maps applied where the network applies them (the
  continuous analogue of the no-MLP network; pre-LN: (a) itself);
* (g) ``frames_mlp``: (f) + the MLP flow after the attention flow (the analogue of the full model);

and, as the reference the flows are judged against since the review, (n) ``no_mlp``: the network itself with
every MLP output 0 (:func:`attnflow.bridge.flows.without_mlp`). Pre-LN models divide by a stream scale
rho_l (``scale_estimator``, the robustness check "scale estimator" over ``scale_alternatives``); (c) has a
free-running variant (``free_running_fit``); a cluster radius where the model's count is saturated (config
``saturation_tolerance``, ``saturation_depth_share``) is reported, not tested. Nulls: ``*-random``
(``transformers``' initialisation) and ``*-permuted`` (:func:`attnflow.bridge.nulls.permuted_null`).

Per depth and per sentence: mean pairwise cosine, effective rank (Gram form), single-linkage cluster
counts over ``thresholds`` and the token-wise agreement :math:`\frac1n\sum_i\langle z_i, x_i\rangle` with
the model, each in two representations: the **sphere tokens** (what the norms project, what the flows
move) and the **hidden states** (what the model outputs; a flow's hidden state is the model's own norm
applied to its tokens, :func:`~attnflow.bridge.hidden_readout`), normalised row by row. Per layer: the
attention mass on the special tokens (BERT: [CLS] and [SEP]; decoder: the first token) of the model, of
the bias-free and bias-kept heads at the model's tokens and of flows (a), (b) at their own tokens.

The verdicts (``records``) are tests with criteria declared in the config before the data; their
intervals are percentile bootstraps over sentences, their robustness the two halves of the corpus
subsample, the time-fit split (both directions, two split seeds), the representation, for cluster
counts the cluster radius. Since review 2 also, on every tested record: the joined sentences
(``join_alternatives``: k x ``sentences`` drawn, k consecutive ones joined per input, the model, (n) and
every flow rerun on them; "sentence length" on 1/k as many inputs before review round 3, F6) and, for a null
family, its seed (``null_seeds``: the robustness check "permutation seed" / "init seed", the same sentences
through the null built with each other seed; the permuted null keeps the trained embeddings,
``permuted_embeddings``, F6b); both on sphere tokens, (c) fitted on the main split seed's halves of those
inputs.

The step (review round 3, F2): the Euler steps per unit time K of every flow, record and variant are chosen
per family by the step rule (``step_candidates``, ``step_tolerance_share``; :func:`choose_step`): the flows
are run at each candidate in turn until the records' quantities move by less than 1/4 of their criterion's
threshold to the next candidate; a record whose quantity has not converged at the last rung is inconclusive.
The rungs are reported in each record (``result.step_ladder``). Runs without the rule (``step_candidates =
[]``, the runs before it) use ``steps_per_layer`` and the robustness check "step count" over
``steps_alternatives``. One computation task per family (the model is loaded once).

Review round 4 (analysis only, from the stored per-sentence data): the records call a quantity converged
only if its outcome under the criterion is also the same at the chosen K and the next rung, and report the
main value at the finest rung computed (F4); the stand-still control and, for 'follows' records, the
collapse control (``collapse_control``: every token equal from depth 1) are scored on every robustness
value, a value that a control does not fail is unmeasured, and the main outcome combined is inconclusive
where a main control does not fail (F1, F2, F6); the paired flow - stand-still difference and, for
'follows' records, gap(flow) / gap(stand-still) are kept in ``result.stand_still`` (F3, descriptive).

Review round 5 (analysis, and the SmolLM2 rerun): every value is decided by its paired stand-still test
(flow - stand-still against the declared ``control_margin_*``, :func:`paired_outcome`: 'better / no better /
worse than standing still' for the 'follows' records) together with the criterion (F1-F3); values the
collapse control makes unmeasured leave the combination and are listed, a record whose main value is
unmeasured (collapse, step not converged) is inconclusive with that reason (F4, F6); a null's failing flow
fails before the description rule (F5); ``combine`` names only the checks whose own values disagree (F7);
trained 'holds' say whether a null holds the same claim and a null's over-clustering fail says 'too slow
at T_l = 1' (``null_specificity``, F8). The step rule runs per flow (``step_per_flow``): only the flows not
yet converged go to the next rung.

Review round 6 (analysis of the stored data; the lead's decisions, declared 2026-12-04): the paired test's
margin is also a robustness check at x0.5 and x1.5 (``control_margin_variants``, F1); 'worse than standing
still' needs the margin as 'better' does (``control_paired_rule``, F2); each test record says its verdict in
words (``verdict_reading``: 'main fails; undecided: ...', 'fails where measurable (...)', F3, F6); a flow is
converged only when every quantity of it is (F4); a 'follows' value that is the collapse reads 'collapses',
whatever the step, every 'follows' value is paired against the collapse too, and an over-clusters paired
test that cannot fail says so (``collapse_outcome``, ``collapse_depth1_cos``, F4, F5); 'specificity untested'
where the nulls cannot speak, and a null run without the step ladder never labels a trained record (F7).
"""

from __future__ import annotations

import math
import time
from functools import partial
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from pydantic import Field, PositiveFloat, PositiveInt, field_validator

from ..analysis.verdicts import (
    Criterion,
    RobustnessCheck,
    VerdictRecord,
    combine,
    record_description,
    record_identity,
    record_test,
)
from ..bridge import (
    attention_sublayer,
    encode,
    fit_layer_times,
    forward,
    from_hf_model,
    hidden_readout,
    layer_flow,
    layer_time_curve,
)
from ..bridge.flows import fit_free_running_times, stream_scales, without_mlp
from ..bridge.nulls import permuted_null
from ..bridge.theta import attention_layer_norm
from ..observables import cluster_count_sensitivity, gram_effective_rank, mean_pairwise_inner_product
from .base import Study, StudyConfig, StudyResult, StudyRuns
from .multihead_common import jsonable, one_thread
from .real_model import load_corpus
from .registry import study
from .render import Column, Table
from .tasks import ComputeTask

__all__ = ["FAMILIES", "FlowsConfig", "RealModelFlowsStudy", "family_task", "records", "tables"]

#: model families: the trained ones (real weights from offline packages) and tiny random ones (quick variant)
FAMILIES = (
    "minilm", "minilm-l3", "smollm2", "minilm-random", "minilm-l3-random", "smollm2-random",
    "minilm-permuted", "minilm-l3-permuted", "smollm2-permuted", "tiny-bert", "tiny-llama",
)  # fmt: skip
#: the flows, in the order of the issue: (a) .. (e), then (f), (g) (the LayerNorm frames kept; review)
FLOWS = ("attention", "biases", "fitted_time", "model_scores", "mlp", "frames", "frames_mlp")
#: the sources of the tables: the model, the exact no-MLP network (n) and the flows
SOURCES = ("model", "no_mlp", *FLOWS)
LABELS = {
    "no_mlp": "(n) no-MLP network",
    "attention": "(a) bias-free attention",
    "biases": "(b) biases + LN shift",
    "fitted_time": "(c) fitted time",
    "model_scores": "(d) model's scores",
    "mlp": "(e) attention + MLP",
    "frames": "(f) attention + LN frames",
    "frames_mlp": "(g) (f) + MLP",
}
#: the flows recomputed with each alternative step count (every flow of a verdict; (c) is refitted apart)
STEP_FLOWS = ("attention", "biases", "model_scores", "mlp", "frames", "frames_mlp")
#: the flows recomputed with each alternative scale estimator (pre-LN models; review: SmolLM2's rho_l)
SCALE_FLOWS = ("attention", "model_scores", "mlp", "frames", "frames_mlp")
REPS = ("sphere", "hidden")
#: per-sentence cost estimate (s, one thread) of each family, measured on the shared 2-core machine
_COST = {"minilm": 3.0, "minilm-l3": 1.5, "smollm2": 8.0, "tiny-bert": 0.05, "tiny-llama": 0.05}
_LOAD = {"minilm": 5.0, "minilm-l3": 5.0, "smollm2": 80.0, "tiny-bert": 1.0, "tiny-llama": 1.0}
for _f in ("minilm", "minilm-l3", "smollm2"):  # the same architecture, randomly initialised / permuted: nulls
    _COST[f"{_f}-random"], _LOAD[f"{_f}-random"] = _COST[_f], _LOAD[_f] + 5.0
    _COST[f"{_f}-permuted"], _LOAD[f"{_f}-permuted"] = _COST[_f], _LOAD[_f] + 5.0


class FlowsConfig(StudyConfig):
    families: list[str] = Field(
        ["minilm", "minilm-l3", "smollm2"], min_length=1,
        description="model families: minilm (all-MiniLM-L6-v2, safetensors), minilm-l3 "
        "(paraphrase-MiniLM-L3-v2, ONNX), smollm2 (SmolLM2-135M-Instruct, GGUF), each with '-random' (the "
        "same architecture with transformers' random initialisation, seed null_seeds[0]: the null) and "
        "with '-permuted' (the trained weights, every tensor's entries permuted, seed null_seeds[0]: the "
        "null at the trained weights' scale, bridge.nulls.permuted_null), tiny-bert / tiny-llama (tiny "
        "random models)",
    )  # fmt: skip
    sentences: PositiveInt = Field(
        48, description="corpus subsample: this many sentences drawn without replacement", examples=[48]
    )
    corpus_seed: int = Field(0, description="seed of the corpus subsample")
    max_tokens: PositiveInt = Field(24, description="only sentences of at most this many tokens are drawn")
    steps_per_layer: PositiveInt = Field(
        4,
        description="Euler steps per unit time (per layer at T_l = 1) when step_candidates is empty (the "
        "runs before review round 3, F2); with the step rule it is only the first rung's cost row",
    )
    step_candidates: list[PositiveInt] = Field(
        [4, 16, 64],
        description="the step rule (declared after review round 3, F2, before any rerun): candidate Euler "
        "step counts K per unit time, ascending. Per family, the flows (a)-(g) ((c) refitted at K on the "
        "main split) are run on all sentences at each K in turn (sphere tokens), and the step of EVERY flow "
        "record and EVERY robustness variant (split seeds, free-running fit, scale estimator, joined "
        "sentences, null seeds) is the smallest K whose move to the next candidate changes every tested "
        "quantity's point estimate by less than step_tolerance_share x its margin; the ladder stops there. "
        "Where no K qualifies the largest is used, and a record whose quantity moved by at least that "
        "between the last two candidates is inconclusive ('step count: not converged'). The other K are "
        "reported (values, moves, CPU time), never a check that can flip a verdict. Empty: the old "
        "behaviour (steps_per_layer, with the check steps_alternatives). Amended after review round 4 "
        "(F4, 2026-12-03; analysis only, the run's chosen K unchanged): in the records a quantity counts as "
        "converged at the chosen K only if, besides the move < share x threshold, its outcome under the "
        "criterion (holds / fails / inconclusive, with its bootstrap interval) is the same at K and at the "
        "next rung; the record reports its main value at the finest rung computed (result.step_ladder."
        "reported_K), and says in a note that the values of the checks the ladder does not compute "
        "(hidden states, other splits / fits, joined sentences, null seeds, scale estimator) are at the "
        "chosen K",
    )
    step_per_flow: bool = Field(
        True,
        description="(declared 2026-12-03, review round 5, before the SmolLM2 rerun) the step rule per flow: "
        "each flow ((a), (b), (d), (e), (f), (g) and (c)'s refit) climbs the ladder on its own and stops at "
        "the smallest candidate K whose move to the next candidate is < step_tolerance_share x margin for "
        "every watched quantity OF THAT FLOW; only the flows not yet converged are run at the next rung. "
        "The rule (tolerance, outcome, candidates) is otherwise unchanged; every record and robustness "
        "variant then runs each flow at its own K (result.step_ladder.chosen: flow -> K). False: one K per "
        "family (every flow at every rung; the runs before 2026-12-03). Applied in the records since review "
        "round 6 (F4, 2026-12-04, the lead's decision): a flow is converged at its K only when EVERY "
        "quantity of that flow (every record of it the rule watches) has converged (move < tolerance, "
        "outcome unchanged); every record of a flow that has not is inconclusive 'step not converged' (also "
        "in the runs without the ladder, whose check 'step count' is the ladder they have)",
    )
    step_tolerance_share: PositiveFloat = Field(
        0.25,
        description="the step rule's tolerance: a quantity is converged at K when |q(K') - q(K)| < this x "
        "margin, K' the next candidate; margin = the record's criterion threshold, i.e. the distance from "
        "'no difference' (0) to the criterion: 0.1 (criterion_overcluster, criterion_cos_gap: tolerance "
        "0.025 in mean cosine), 0.25 (criterion_rel_gap: tolerance 0.0625 in relative gap)",
    )
    max_time: PositiveFloat = Field(
        8.0,
        description="largest T_l of the time fit's grid (step 1/steps); 8 since the review (4 was hit by "
        "SmolLM2's teacher-forced fit in 16 layers)",
    )
    steps_alternatives: list[PositiveInt] = Field(
        [],
        description="(runs without the step rule only: step_candidates empty; ignored otherwise) the "
        "other Euler step counts per unit time each flow of a verdict ((a)-(g); not the "
        "discrete network (n)) is rerun with, sphere tokens only, (c) refitted on the main split at that "
        "step: the robustness check 'step count' (added after review 2 saw MiniLM-L6's '(f) follows (n)' "
        "and SmolLM2's (e), (g) records move between K = 4 and K = 16)",
    )
    free_running_fit: bool = Field(
        True,
        description="also fit T_l to the free-running mean-cosine profile (greedy, on the fit half of the "
        "main split, bridge.flows.fit_free_running_times): the robustness variant 'time fit' of (c)",
    )
    scale_estimator: Literal["mean", "median_rest"] = Field(
        "mean",
        description="pre-LN models: the scale rho_l of the residual stream the flows divide by "
        "(bridge.flows.stream_scales): mean token norm (declared default) or median norm of tokens 2..n",
    )
    scale_alternatives: list[Literal["mean", "median_rest"]] = Field(
        ["median_rest"],
        description="pre-LN models: the other scale estimators each flow (but (b), (c)) is rerun with: the "
        "robustness check 'scale estimator' (added after the review found SmolLM2's first token inflating "
        "the mean)",
    )
    split_seeds: list[int] = Field(
        [0, 1], min_length=1, description="seeds of the fit/report halves; the first is the main split"
    )
    thresholds: list[PositiveFloat] = Field(
        [0.6, 1.0, 1.2], min_length=1, description="cluster radii (radians, single linkage)"
    )
    cluster_threshold: PositiveFloat = Field(1.0, description="the radius of the main cluster-count verdict")
    bootstrap: PositiveInt = Field(1000, description="bootstrap resamples over sentences")
    seed: int = Field(0, description="seed of the bootstrap and of the tiny random models")
    null_seeds: list[int] = Field(
        [0, 1, 2],
        min_length=1,
        description="seeds of a null family's weights ('-permuted': the permutation of every tensor's "
        "entries, '-random': transformers' initialisation); the first is the main null, each other one "
        "reruns the model, (n) and every flow on the same sentences (sphere tokens, declared step; (c) "
        "refitted on the main split): the robustness check 'permutation seed' / 'init seed' on every "
        "record of a null family (added after review 2 saw the permuted MiniLM-L6's (a) over-clustering "
        "move by ten interval half-widths between permutation seeds 0, 1, 2; before, the null's seed was "
        "`seed`, i.e. 0)",
    )
    permuted_embeddings: Literal["keep", "permute"] = Field(
        "keep",
        description="'-permuted' nulls: 'keep' the trained embeddings (word, position, type, embedding "
        "LayerNorm) and the final norm, permuting only the blocks' tensors, in every draw (main seed and "
        "the seed check), so that a null seed changes the weights, not the start z_0 (review round 3, "
        "F6b); 'permute': every tensor (the runs before it)",
    )
    join_alternatives: list[int] = Field(
        [3],
        description="longer inputs: for each k, k x sentences sentences drawn (the same draw continued: the "
        "first `sentences` are the main ones) and taken k consecutive ones at a time, joined by a space: "
        "`sentences` inputs, as many as the main run (review round 3, F6; before: the main sentences "
        "joined, sentences // k inputs). The model, (n) and every flow rerun on them (sphere tokens, the "
        "rule's step; (c) fitted and reported on the halves of the main split seed): the robustness check "
        "'joined sentences' on every record (before F6: 'sentence length'). It changes the content, not "
        "only the length: k unrelated sentences in one input add cross-sentence token pairs. The joined "
        "inputs are not capped by max_tokens (only by the model's maximum length)",
    )
    # -- criteria, declared before the data (commit 'real_model_flows: config, criteria') --
    criterion_overcluster: PositiveFloat = Field(
        0.1,
        description="a flow over-clusters when the mean over depths 1..L of (mean cosine of the flow - mean "
        "cosine of the model) is >= this",
    )
    criterion_cos_gap: PositiveFloat = Field(
        0.1,
        description="a flow follows the model's mean cosine when the mean over depths 1..L of |mean cosine "
        "(flow) - mean cosine (model)| is <= this (as real_model's criterion_cos_gap)",
    )
    criterion_rel_gap: PositiveFloat = Field(
        0.25,
        description="a flow follows the model's cluster count / effective rank when the mean over depths "
        "1..L of |flow - model|, divided by the model's mean over the same depths, is <= this",
    )

    stand_still_control: bool = Field(
        True,
        description="score the stand-still control on every tested record: the 'flow' that does not move "
        "(every depth = the depth-0 tokens z_0, where every flow and the model start), by the record's own "
        "quantity, criterion and paired bootstrap (on the reference's depth-0 statistic). Rule, the same for "
        "every record kind ('follows', 'over-clusters'): a record can hold only if the stand-still FAILS the "
        "criterion; where it does not fail (holds or inconclusive) and the flow does not fail, the record "
        "gets the check 'stand-still control' with no measurable value (outcome inconclusive: the criterion "
        "cannot tell the flow from standing still), so it cannot hold; a flow that fails the criterion "
        "fails whatever the stand-still does. In a null family ('-random', '-permuted') a record whose "
        "stand-still does not fail is a description (the null probes nothing there). The stand-still's "
        "value and interval and the paired difference flow - stand-still are kept in every tested record's "
        "result (declared after review round 3, F1, before the regenerated records were looked at). "
        "Amended after review round 4 (F1, F2, 2026-12-03): the control is scored on EVERY value of every "
        "robustness check too (the same variant's reference depth-0 statistic, the same depth summary, "
        "criterion and bootstrap); a value whose own stand-still does not fail, and which does not fail "
        "itself, is unmeasured (None, inconclusive); and the main outcome the verdict combines is "
        "'inconclusive' where the main stand-still does not fail (the flow's own outcome is kept in "
        "result.outcome_flow). Amended after review round 5 (F1-F5, 2026-12-03, before the SmolLM2 rerun): "
        "the stand-still no longer makes a value unmeasured; every value (main and robustness) is decided "
        "by its own paired test flow - stand-still against control_margin_* (see there) together with the "
        "criterion; the null families' description rule applies only where the flow does not fail (a "
        "failing flow fails first); values the collapse control makes unmeasured leave the combination and "
        "are listed (result.unmeasured), and a record whose main value is unmeasured (collapse, or the step "
        "not converged) is inconclusive with that reason",
    )
    collapse_control: bool = Field(
        True,
        description="(declared after review round 4, F6, 2026-12-03) the collapse control of every "
        "'follows' record (quantity kinds gap / rel: mean cosine, effective rank, cluster count): the 'flow' "
        "whose tokens are all equal from depth 1 on (mean cosine 1, effective rank 1, one cluster), scored "
        "like the stand-still control at each value (each depth summary, variant, radius). A value that the "
        "collapse control also passes (does not fail) and that does not fail itself is unmeasured, as for "
        "the stand-still: the criterion cannot tell the flow from a collapse there (the saturation rule of "
        "the cluster counts, extended to mean cosine and effective rank at each depth summary). Not applied "
        "to 'over-clusters' records, whose claim a collapsing flow meets by construction",
    )

    # -- review round 5 (2026-12-03), declared before the SmolLM2 rerun --
    control_margin_overcluster: PositiveFloat = Field(
        0.1,
        description="post-review amendment of 2026-12-03, review round 5 (F1, F2); declared before the "
        "SmolLM2 rerun; the MiniLM data had been seen by the reviewer, who proposed the rule, not a number "
        "tuned to them: the margin of the paired stand-still test of an 'over-clusters' record. Each value "
        "(main and every robustness value) is decided by its own paired difference d = q(flow) - "
        "q(stand-still) = (mean over the depths of the flow's mean cosine) - (z_0's), same sentences, same "
        "bootstrap resamples: it holds only if the flow's own criterion holds AND d >= this margin (its "
        "whole interval); it fails if either fails; else inconclusive. The value: the criterion's own "
        "threshold (criterion_overcluster), the size of effect the criterion calls over-clustering",
    )
    control_margin_cos_gap: PositiveFloat = Field(
        0.1,
        description="post-review amendment of 2026-12-03, review round 5 (F1, F3); declared before the "
        "SmolLM2 rerun; the MiniLM data had been seen by the reviewer, who proposed the rule, not a number "
        "tuned to them: the margin of the paired stand-still test of a 'follows' record in mean cosine "
        "(criterion_cos_gap's own threshold). d = gap(flow) - gap(stand-still), paired: 'better than "
        "standing still' when d <= -margin (whole interval), 'worse than standing still' when d > 0 (whole "
        "interval), 'no better than standing still' when d > -margin (whole interval, not worse). A value "
        "holds only if its own criterion holds and it is better than standing still; it fails if its own "
        "criterion fails, if it is worse than standing still, or if it is no better than standing still "
        "where the stand-still itself fails the criterion (the model moves from z_0 by more than the margin, "
        "so a flow that follows it could have been better by the margin); where the stand-still does not "
        "fail, 'no better' is inconclusive (no flow could be better by the margin: not evidence against "
        "the flow)",
    )
    control_margin_rel_gap: PositiveFloat = Field(
        0.25,
        description="post-review amendment of 2026-12-03, review round 5 (F1, F3); declared before the "
        "SmolLM2 rerun; the MiniLM data had been seen by the reviewer, who proposed the rule, not a number "
        "tuned to them: as control_margin_cos_gap for the relative gaps of effective rank and cluster count "
        "(criterion_rel_gap's own threshold). The collapse control ('follows' records) keeps the round-4 "
        "rule (a value it does not fail, and that does not fail itself, is unmeasured): it is not a paired "
        "test",
    )
    null_specificity: bool = Field(
        True,
        description="post-review amendment of 2026-12-03, review round 5 (F8); declared before the SmolLM2 "
        "rerun: a trained family's record that holds is labelled, in its result (null_specificity) and "
        "notes, 'holds, not specific to training (also holds in null ...)' where the same record (same id "
        "after the family name) also holds in one of its nulls ('-permuted', '-random') computed in the "
        "same records() call; and a null's 'over-clusters' record that fails states its guard: the flow "
        "runs one time unit per layer, and a flow that does not over-cluster in that time may still cluster "
        "later (random MiniLM heads reach 0.561 with ten units), so the fail says 'too slow at T_l = 1', "
        "and is not evidence that the null's heads cannot cluster. Amended 2026-12-04 (review round 6, F7, "
        "the lead's decision): 'specificity untested' where every null's record of the claim fails only by "
        "that guard or is a description; a null run without the step ladder (SmolLM2's nulls at K = 4) "
        "never labels a trained record: 'specificity untested (nulls not run under the step ladder)' where "
        "no laddered null is left",
    )

    # -- review round 6 (2026-12-04), the lead's decisions on notes6.md, applied to the stored data --
    control_margin_variants: list[PositiveFloat] = Field(
        [0.5, 1.5],
        description="post-review amendment of 2026-12-04, review round 6 (F1); the lead's decision, applied "
        "to the stored data (no rerun): the margin of the paired stand-still test (control_margin_*) stays "
        "the criterion's threshold for the main decision and is also a declared robustness check, 'stand-"
        "still margin': the main value decided again with the margin times each factor here (its own "
        "criterion, the paired test at that margin, the collapse pairing). A record holds only if it "
        "survives them, as every other robustness check (verdicts.combine); the whole record's verdict at "
        "each factor (every value re-decided) is reported in result.margin_variants. Empty: no check",
    )
    control_paired_rule: Literal["symmetric", "asymmetric"] = Field(
        "symmetric",
        description="post-review amendment of 2026-12-04, review round 6 (F2); the lead's decision, applied "
        "to the stored data: the 'follows' records' paired stand-still test d = gap(flow) - "
        "gap(stand-still). 'symmetric': 'better than standing still' (holds) when d <= -margin (whole "
        "interval), 'worse than standing still' (fails) when d >= +margin (whole interval), 'no better than "
        "standing still' (inconclusive) when the whole interval is above -margin but not worse, else 'not "
        "decided against standing still' (inconclusive). 'asymmetric': the round-5 rule (worse when d > 0; "
        "'no better' fails where the stand-still itself fails the criterion), kept to report the verdicts "
        "under it beside the new ones (review/round6_applied.md)",
    )
    collapse_outcome: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 6 (F4, F5); the lead's decision, "
        "applied to the stored data: (i) a flow 'collapses' when its mean cosine (sphere tokens, mean over "
        "the sentences) at depth 1 is >= collapse_depth1_cos (1.000 to 3 decimals) at the step its value is "
        "reported at; a 'follows' record whose flow collapses and whose value's 95% interval overlaps the "
        "collapse control's is reported as 'collapses: the flow drives every token to one point', whatever "
        "the step (the value cannot move past the collapse): outcome 'fails' where the collapse control "
        "fails the criterion (a flow that collapses does not follow a model that does not), else "
        "'inconclusive'; its checks are kept apart (result.checks_not_combined). A 'follows' record whose "
        "flow collapses cannot hold (a main 'holds' becomes inconclusive). (ii) every 'follows' value is "
        "paired against the collapse as against the stand-still (d = gap(flow) - gap(collapse), same "
        "resamples, the record's margin): the value holds only if it is also 'better than a collapse' (d <= "
        "-margin, whole interval); otherwise the pairing cannot make it fail. 'better than standing still' "
        "is named only where the collapse itself is not better than standing still by the same test. "
        "(iii) an 'over-clusters' value whose stand-still lies at or below criterion - margin (whole "
        "interval) says 'paired test uninformative here' (wherever the criterion holds the paired test "
        "holds too). False: the round-5 records",
    )
    collapse_depth1_cos: PositiveFloat = Field(
        0.9995,
        description="post-review amendment of 2026-12-04, review round 6 (F4): the depth-1 mean cosine at or "
        "above which a flow collapses (config collapse_outcome): 1.000 to three decimals",
    )
    verdict_reading: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 6 (F3, F6); the lead's decision: each "
        "test record gets result.reading, its verdict in words, the class unchanged (combine's): where "
        "combine gives 'inconclusive' from a decided main outcome and undecided values, 'main fails; "
        "undecided: joined sentences 3' (every undecided value named); where a record fails and values the "
        "collapse control cannot measure were left out, 'fails where measurable (k values unmeasured, which "
        "would hold on their own)' (counted apart in the summary counts)",
    )

    saturation_tolerance: PositiveFloat = Field(
        0.1,
        description="a cluster radius is saturated (uninformative) for a family when the model's mean "
        "count is <= (1 + this) or >= (1 - this) * mean n at more than saturation_depth_share of the depths "
        "1..L (declared after the review saw counts at 0.6 / 1.2 rad sit at n / 1)",
    )
    saturation_depth_share: PositiveFloat = Field(
        0.5, description="share of the depths 1..L (strictly more than) of the saturation rule"
    )

    # -- review round 7 (2026-12-04), review7_findings.md, applied to the stored data --
    specificity_every_verdict: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 7 (F2, F7); declared before the "
        "records were regenerated: the null specificity (does a null of the same architecture give the same "
        "outcome?) is computed and printed for EVERY test record of a trained family, not only for those "
        "that hold: 'X, not specific to training (also X in null ...)' where a laddered null's record of the "
        "same claim has the trained record's outcome X (holds, or fails), for a 'depends on ...' record with "
        "its main outcome ('whichever way ... is settled' where the null holds at every check); 'X; specific "
        "to training (... in null ...)' where every usable null has the other decided outcome; 'specificity "
        "untested (...)' where the nulls cannot speak (guard, no headroom, description, inconclusive); 'no "
        "outcome to compare' where the trained record is inconclusive. A null whose record cannot test the "
        "claim by construction (null_same_flow_tol) says 'null cannot test this' instead. False: the "
        "round-6 labels, on records that hold only",
    )
    null_same_flow_tol: PositiveFloat = Field(
        1e-4,
        description="post-review amendment of 2026-12-04, review round 7 (F7): a null's 'model's scores' "
        "record (flow (d)) cannot test the claim about the model's own scores when its value equals the "
        "null's bias-free attention record's (flow (a)) within this (|v(d) - v(a)| <= tol): the null's "
        "attention weights are then the heads' own (random initialisation: near-uniform attention), so (d) "
        "is (a) and says nothing about scores taken from a model. 1e-4: two orders of magnitude below the "
        "bootstrap half-widths (>= 0.005) and the step rule's tolerance (0.025), the study's resolution. "
        "(The values had been seen: random SmolLM2 3e-7, random MiniLM-L6 3e-5, -L3 1e-5, permuted nulls "
        ">= 1.6e-3.)",
    )

    collapse_symmetric: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 7 (F6), declared before the records "
        "were regenerated: the collapse counts the same way both ways. (i) A 'follows' record whose flow "
        "collapses (collapse_outcome (i)) is 'unmeasured (collapses)' (inconclusive, its checks kept apart) "
        "whatever the collapse control's outcome: before, 'fails' where the collapse failed the criterion "
        "and 'inconclusive' where it did not. (ii) Every 'follows' value (main and robustness) whose paired "
        "difference to the collapse, q(flow) - q(collapse), lies with its whole 95% interval within +-(step_"
        "tolerance_share x margin) -- the study's resolution, 0.025 in mean cosine, 0.0625 in relative gap "
        "-- is the collapse's value: unmeasured (collapses), whichever way the criterion goes (the depth-1 "
        "detector collapse_depth1_cos alone missed flows at 0.996-0.999). A main value so found makes the "
        "record 'unmeasured (collapses)' as (i). The round-4 rule (a value the collapse control does not "
        "fail, "
        "and that does not fail itself, is unmeasured: the criterion cannot tell it from a collapse) stays. "
        "Records that change (stored data): SmolLM2's mlp-cos, mlp-erank, frames-mlp-cos, frames-mlp-erank "
        "(fails (collapses) -> unmeasured) and every record review/round7_applied.md lists under F6",
    )

    mlp_jump_factor: PositiveFloat = Field(
        3.0,
        description="post-review amendment of 2026-12-04, review round 7 (F1), declared before the rule's "
        "effect on the records was computed (the round-6 table review/round6/mlp_field.json had been seen: "
        "flow speed / network turn 0.8-1.8 in MiniLM-L6 and -L3, 11 at SmolLM2's layer 0): layer l's MLP is "
        "a jump where the MLP flow's displacement per unit time (flow_speed: |P_perp m_l(z)| at the token, "
        "rad per unit time as t -> 0) exceeds this x the network's own turn at that layer (network_angle: "
        "the angle between the state and state + MLP output), per layer medians over tokens and sentences "
        "(mlp_layer_table, stored per family as verdict_data.mlp_layers): such a layer has no small-step "
        "limit at T_l = 1. A 'follows' record of a flow with the MLP ((e), (g)) is decided only through "
        "jump layers where the first jump layer is layer 0 and the flow's mean cosine (sphere tokens, the "
        "reported step) is >= collapse_depth1_cos at every depth 1..L (every depth is the jump's sink): it "
        "is inconclusive, 'layer 0's MLP is a jump (x rad per unit time against y)'. Where the first jump "
        "layer j > 0, or the flow does not stay at the sink, the record keeps its verdict and says which "
        "layers are jumps (result.mlp_jump). A family without the table: no rule",
    )

    after_jump_check: bool = Field(
        True,
        description="post-review amendment of 2026-12-04 round 8 (review round 7, F1 (ii); "
        "review/round8/after_jump.md), declared before any study dir was rerun with it: where the family has "
        "MLP jump layers (mlp_jump_factor), the flows with the MLP ((e), (g)) are also run with those layers "
        "taken from the network (bridge.layer_flow network_layers: at a jump layer the tokens after it are "
        "the model's own and the flow goes on from them; each flow at its own step of the step rule, the "
        "family's sentences, sphere tokens). Each 'follows' record of (e) and (g) (mean cosine, cluster "
        "count, effective rank) gets the robustness value 'after jump': its own quantity over depths s..L, "
        "s = 1 + the last layer of the leading run 0, 1, .. of jump layers, scored with the same criterion "
        "and controls, the stand-still holding the model's depth s - 1 (result.after_jump). Layer 0 no "
        "jump, or s > L: no value (a later jump layer is also taken from the network: the depth after it is "
        "the model's by construction). False: the round-7 records",
    )

    headroom_rule: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 7 (F3), declared before the records "
        "were regenerated: an 'over-clusters' value (main or robustness, every family) that does not hold, "
        "where the model leaves no headroom -- 1 - the model's mean cosine over the value's depths (the "
        "collapse's value of the same quantity: the most any flow can exceed the model by) is below the "
        "criterion's threshold (point estimate) -- is 'no headroom', unmeasured, not 'fails' (a main value: "
        "the record is inconclusive, 'no headroom'). And a null's 'over-clusters' fail carries the guard "
        "'too slow at T_l = 1' (null_specificity) only where the flow is slow: its mean cosine (sphere "
        "tokens, mean over the sentences) at the last depth L is below 1 - the criterion's threshold (it "
        "has not itself come within the threshold of one cluster); a fast flow's fail is a fail (the record "
        "says so, result.null_fail_not_slow). False: the round-6 records",
    )

    # -- review round 8 (2026-12-04), review8_findings.md, applied to the stored data --
    guard_time_flows_only: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 8 (F5), a bug fix: a null's "
        "'over-clusters' fail carries the guard 'too slow at T_l = 1' only for a flow with a time convention "
        "(every flow but the no-MLP network (n), which is the discrete network with its MLP outputs set to 0 "
        "and has no time to run longer): a fail of (n) is a fail. False: round 7 (the guard on (n) too)",
    )

    margin_within_threshold: bool = Field(
        False,
        description="post-review amendment of 2026-12-04, review round 9 (F7), declared after reading the "
        "reviewer's count (the x1.5 margin decides 4 of MiniLM's 8 'depends'): the check 'stand-still "
        "margin' combines only the factors of control_margin_variants whose margin (margin x factor) is <= "
        "the criterion's threshold; a larger one tests a stronger claim than the one declared (the reading "
        "said so since round 7) and is reported in result.margin_variants and "
        "result.margin_variants_not_combined, not combined. Off by default since review round 10 (F5): "
        "the paired test is monotone in the margin, so with x1.5 dropped the check keeps only x0.5, "
        "which can never challenge a 'holds' (a one-sided check). False (default): every factor "
        "combined, as in round 8",
    )
    room_fail_stands: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 9 (F2), declared after reading the "
        "reviewer's finding on SmolLM2 (f) vs (n) (0.255 [0.222, 0.284] against the threshold 0.1, read as "
        "'no headroom'): where too few depths have room (room_per_depth), a 'follows' value (gap or relative "
        "gap) whose all-depth criterion fails (its whole 95% interval above the threshold) is measured and "
        "fails: a reference with no room is one a collapse follows, so only a 'holds' is void there, not a "
        "flow that leaves it by more than the threshold. 'Over-clusters' values are unchanged (no room voids "
        "their non-holds, as before). False: round 8 (any outcome void)",
    )
    fit_grid_check: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 9 (F1), revised after review round 10 "
        "(F1-F3; both reviewers had read the values): the time fit of flow (c) maximises token-wise "
        "agreement, layer by layer from the model's tokens, and its grid holds the constant times T = 0 "
        "(standing still) and T = 1 (flow (a) at (c)'s step count where stored, else at (a)'s own). The "
        "fitted-time record stores both on the record's own quantity and sentences (the fit's report half), "
        "each with its bootstrap interval and the criterion's outcome (result.fit_grid), and says where the "
        "fit is worse than one of them. Where the record fails and a constant time **holds** the criterion "
        "(its whole interval, the standard the fitted value is held to), the fail is the fit objective's: "
        "inconclusive ('fit objective'). Round 9's first version cancelled a fail on a constant time's point "
        "estimate within the threshold, a condition added after the data (review round 10, F1). False: "
        "round 8",
    )
    holds_reachable_check: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 11 (F5), revised after review round "
        "12 "
        "(F7); declared after reading the reviewer's finding (MiniLM-L6 fitted-time-cos: standing still "
        "scores 0.094 [0.085, 0.102], within the stand-still margin 0.1); no new margin or threshold: a "
        "'follows' record (gap or relative gap) whose perfect flow (the reference itself, value 0) would not "
        "pass the paired stand-still test (its flow - stand-still interval, the same resamples, not wholly "
        "<= -margin) could not have held: a one-sided test, which can only fail or be inconclusive. The "
        "record says so (result.holds_reachable, reading, notes); its verdict and its null-specificity label "
        "are unchanged (round 11's first version called a null that holds 'no contrast'; a fail's contrast "
        "is a null that does not fail, which needs no reachable hold: review round 12, F7). False: round 10",
    )
    scale_source_rule: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 11 (F1), revised after review round "
        "12 "
        "(F1, F3, F5); declared after the reviewer's hypothesis was measured (review/round11/scale_check.md: "
        "SmolLM2's (f) vs (n) gap 0.255 at the full model's stream scale, 0.030 [0.023, 0.038] with flow (a) "
        "at (n)'s own stream scale, where a collapse scores 0.046): in a pre-LN model every flow divides by "
        "the full model's stream scale rho_l, while the no-MLP network (n) runs on its own stream (14.7x "
        "smaller at SmolLM2's layer 1, the MLP's writes; 6.8-9.9x at layers 12-15, mostly the first token's "
        "norm in the mean estimator). A record whose reference is (n) in a pre-LN model names that scale in "
        "its statement, and its reading gives the scale check where the summary carries it "
        "(families[fam].scale_source_check, written by review/round11/regen.py from the committed check). "
        "It changes no outcome: round 11's first version also kept such a record's all-depth fail from "
        "standing without room, a rule that could only remove fails (review round 12, F1); the fail is the "
        "flow's as the statement names it. False: round 10's statement and reading",
    )
    room_value_named: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 12 (F2), a bug: where too few depths "
        "have room (room_per_depth) and the value is void ('no headroom'), the value named beside its "
        "outcome (the notes) is the one over the depths with room, whose outcome it is. Round 11 printed the "
        "all-depth value beside the masked value's outcome (SmolLM2 (f) vs (n): '0.255 (holds by the "
        "criterion)', the 'holds' of 0.070 at depth 1). Revised after review round 13 (F2): the record's "
        "value stays the declared one (round 12 had replaced it by the value over the depths with room); "
        "that value is named beside its outcome and kept in result.value_over_room. False: round 11. (Review "
        "round 14, F1, a reading fix outside this flag: a check value void for lack of room is not read as a "
        "decided outcome of its choice, e.g. 'depends on scale estimator'; the room depends on the "
        "reference, not on the estimator.)",
    )
    null_seeds_check: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 14 (F2); the reading rule was "
        "declared before the data (review/round15/null_seeds_smollm2_declared.md, committed before seeds "
        "3..9 were run): a null record whose summary carries a check over more seeds "
        "(families[fam].null_seeds_check, written by review/round15/regen.py from the committed "
        "check, each seed scored by the study's own rules) names its outcomes per seed in its "
        "reading; a trained record's null-specificity label counts that null as failing (or "
        "holding) only if every checked seed at the check's main K is a measured fail (hold); "
        "otherwise the null is named with its counts and does not speak. Where a null record has "
        "no such check, the same rule reads the seeds its run has (null_seeds: controls_per_value "
        "'permutation seed' / 'init seed', each at the step it was computed at); applied so after "
        "the data, it changes no other committed label (every other null that speaks repeats its "
        "verdict at its three seeds). The null record's own verdict is unchanged. False: the "
        "labels of round 14",
    )
    specificity_same_depths: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 16 (F1, F2, F3, F5, F6), declared "
        "after the reviewer's numbers were read: a null-specificity label compares like with "
        "like. (F1) Where a null's value is taken over its depths with room only, the trained "
        "record is scored over the same depths (its own controls); a null whose outcome differs "
        "from the trained record's only outside those depths cannot make the record specific "
        "(or not) to training, and is named with both outcomes. (F2) A 'depends on X' record is "
        "compared at its main setting only, and says so; a main outcome that is neither holds "
        "nor fails has nothing to compare. (F6) Where one null that speaks holds and another "
        "fails, specificity is undecided and both are named. (F3) A null value names how many "
        "seeds agree and at which steps; (F5) a seed check names, per K, how the seeds' "
        "all-depth intervals lie against the threshold. False: the labels of review round 15",
    )
    statement_names_fit: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 11 (F3, F8), a label change (no "
        "outcome changes): the statement of the fitted-time record names the fit that defines it, the "
        "teacher-forced one (T_l maximising token-wise agreement with the model's layer output, layer by "
        "layer from the model's own tokens, on the fit half), since its fail is the fail of that procedure, "
        "not of every per-layer time (the free-running fit to the mean-cosine profile, a description, "
        "scores lower in MiniLM-L6 and SmolLM2). False: round 10's statement",
    )
    room_per_depth: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 8 (F1, F2, F10), the reviewer's rule, "
        "declared before its effect on the stored records was computed (the reviewer's own re-scoring of "
        "permuted MiniLM-L6 at depths 1-3 -- (a) 0.107, (b) 0.131, (d) 0.104 -- had been read): the room of "
        "a depth is 1 - the reference's mean cosine there (point estimate, all sentences of the value): the "
        "collapse's value at that depth, the most any flow can exceed the model by, and the least a collapse "
        "misses it by. An 'over-clusters' value, and a 'follows' value in mean cosine (the (c), (e), (g) "
        "and (f)-vs-(n) cosine records), is taken over the depths of its summary (1..L, or L) whose room is "
        ">= the criterion's threshold only; the other depths are unmeasured for it (no flow can exceed the "
        "model by the threshold there; a collapse follows it within the threshold there). Where fewer than "
        "room_min_depth_share of the summary's depths (rounded up) have room, the value is 'no headroom' "
        "(unmeasured whichever way it goes; a main value: the record is inconclusive and, in a null, does "
        "not speak for the specificity label). Every family, trained and null, by the same rule; a value "
        "whose depths all have room is unchanged. The step rule stays on the declared quantity (all "
        "depths). Robustness variant (descriptive, not deciding): result.excess_over_room, the value over "
        "the declared depths / the collapse's value there (review round 8's alternative). False: round 7",
    )
    mlp_jump_reading: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 8 (F4): the records the jump rule "
        "(mlp_jump_factor) decides keep the class 'inconclusive' (verdicts.combine) and are counted apart as "
        "unmeasured; their reading compares like with like: 'unmeasured (collapses at layer 0)', the flow's "
        "turn after one unit of time against the network's (flow_angle_T1 against network_angle: a match) "
        "and the direction (the flow's depth-1 mean cosine against the model's: every token to one point), "
        "and it names the range of factors that flag the same layers (summary key mlp_factor_range, from "
        "every family's table: above the largest ratio flow speed / network turn of a layer that is not a "
        "jump, up to the smallest of one that is). The rule is kept (decided: a relabel of a collapse, not "
        "a new outcome; the reviewer showed it cannot change a class). False: round 7's reading",
    )
    caps_named: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 8 (F3, F9), descriptive, no new "
        "threshold: a record whose reading depends on the scale estimator names the declared estimator's "
        "largest layer-to-layer jump of rho (and the other estimator's rho there), where under the other "
        "estimator the flow sits at one cluster (mean cosine >= collapse_depth1_cos from some depth on) and "
        "its value as a share of the collapse's (result.scale_caps); a fitted-time record names the layers "
        "where a fitted T_l is max_time (result.time_cap: the grid binds there). False: round 7",
    )
    room_min_depth_share: PositiveFloat = Field(
        0.5,
        description="post-review amendment of 2026-12-04, review round 8 (F1): the least share of a depth "
        "summary's depths that must have room (room_per_depth) for the value to be measured: ceil(share x "
        "n) of n (MiniLM-L6: 3 of 6; the last depth alone: 1 of 1); declared before the effect was computed",
    )

    free_running_description: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 7 (F8): the free-running time fit of "
        "(c) (free_running_fit: L times T_l fitted to the L numbers of the fit half's mean-cosine profile, "
        "whose held-out profile differs from the fit half's by about 0.01) is a description, not a test: it "
        "can fail only where the flow cannot lower the cosine. Its entry in the (c) record "
        "(result.free_running_fit) carries class 'description' and no outcome; the teacher-forced fit (T_l "
        "fitted to the layer outputs, the record's own value) stays the test. False: the round-6 entry with "
        "the criterion's outcome",
    )

    reading_names_choice: bool = Field(
        True,
        description="post-review amendment of 2026-12-04, review round 7 (F4, F5), declared before the "
        "records were regenerated; no new margin or threshold: (F4) where a value of the check 'scale "
        "estimator' (measured, or left unmeasured by the collapse control: its outcome on its own) has a "
        "decided outcome (holds / fails) other than the main value's, and the main value is measured, the "
        "record's reading is 'depends on scale estimator: mean (declared) X v, median_rest Y v'"
        " (result.depends_on_estimator); (F5) where the hidden-state value of the check 'representation' has "
        "one decided outcome at the margin and at every factor of control_margin_variants, and the record's "
        "verdict (sphere tokens, the declared representation) is not that outcome, the reading names the "
        "representation: 'sphere tokens (declared): <verdict>; hidden states: <X> at every margin (v)' "
        "(result.representation_reading); a record whose verdict depends on the stand-still margin says "
        "where a factor's margin exceeds the criterion's threshold (it then tests a stronger claim than the "
        "one declared; result.margin_above_threshold); and every 'over-clusters' record keeps the flow's "
        "mean cosine minus z_0's per depth (result.flow_minus_z0_per_depth, sphere tokens, descriptive)",
    )

    @field_validator("families")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if f not in FAMILIES]
        if bad or len(set(v)) != len(v):
            raise ValueError(f"families must be distinct names among {', '.join(FAMILIES)}: got {v}")
        return v

    @field_validator("steps_alternatives")
    @classmethod
    def _distinct_steps(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"steps_alternatives must be distinct: got {v}; list each step count once")
        return v

    @field_validator("step_candidates")
    @classmethod
    def _ladder(cls, v: list[int]) -> list[int]:
        if v and (len(v) < 2 or any(b <= a for a, b in zip(v, v[1:], strict=False))):
            raise ValueError(
                f"step_candidates must be >= 2 strictly ascending step counts (or [] for no step rule): got "
                f"{v}; e.g. [4, 16, 64]"
            )
        return v

    @field_validator("null_seeds")
    @classmethod
    def _distinct_seeds(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError(f"null_seeds must be distinct: got {v}; list each seed once (the first is main)")
        return v

    @field_validator("join_alternatives")
    @classmethod
    def _joins(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v) or any(k < 2 for k in v):
            raise ValueError(
                f"join_alternatives must be distinct integers >= 2 (sentences joined per input): got {v}; "
                "e.g. [3], or [] for no sentence-length check"
            )
        return v

    @field_validator("thresholds")
    @classmethod
    def _sorted(cls, v: list[float]) -> list[float]:
        if len(set(v)) != len(v):
            raise ValueError(f"thresholds must be distinct: got {v}; list each once")
        return sorted(v)


# -- models ------------------------------------------------------------------------------------------------
def _tiny(family: str, seed: int):
    """A tiny random BERT or Llama (transformers, float64), the quick variant's stand-in for a family."""
    import transformers

    torch.manual_seed(seed)
    if family == "tiny-bert":
        cfg = transformers.BertConfig(
            vocab_size=64, hidden_size=24, num_hidden_layers=3, num_attention_heads=3, intermediate_size=48,
            max_position_embeddings=32, type_vocab_size=2, attn_implementation="eager",
        )  # fmt: skip
        model = transformers.BertModel(cfg, add_pooling_layer=False)
    else:
        cfg = transformers.LlamaConfig(
            vocab_size=64, hidden_size=24, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=48, max_position_embeddings=32, rope_theta=100.0, attn_implementation="eager",
        )  # fmt: skip
        model = transformers.LlamaModel(cfg)
    model = model.double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "LayerNorm.weight" in name:
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.normal_(0, 0.1)
    w = from_hf_model(model)

    def tokenize(s: str) -> list[int]:
        ids = [sum(word.encode("utf-8")) % 60 + 4 for word in s.split()]  # one id per word
        return [1, *ids, 2] if w.arch == "post_ln" else ids

    return w, tokenize


def null_base(family: str) -> str | None:
    """The trained family a null family ('<family>-random', '<family>-permuted') is built from; else None."""
    for suffix in ("-random", "-permuted"):
        if family.endswith(suffix):
            return family.removesuffix(suffix)
    return None


def null_weights(family: str, trained, seed: int, *, keep_embeddings: bool = False):
    """The weights of the null family ``family`` from its trained family's weights: the same architecture
    with ``transformers``' random initialisation (``-random``) or every tensor's entries permuted
    (``-permuted``, :func:`attnflow.bridge.nulls.permuted_null`; ``keep_embeddings``: the blocks' only,
    config ``permuted_embeddings``), under ``seed``."""
    from .. import bridge

    if family.endswith("-random"):  # the trained family's tokenizer and architecture, random weights
        from ..analysis.probe import random_like

        return from_hf_model(random_like(bridge.to_hf_model(trained), seed).double())
    if family.endswith("-permuted"):  # the trained weights, every tensor's entries shuffled
        return permuted_null(trained, seed, keep_embeddings=keep_embeddings)
    raise ValueError(f"{family!r} is not a null family: a null family ends in '-random' or '-permuted'")


def load_family(family: str, seed: int = 0, *, keep_embeddings: bool = False):
    """(weights in float64, tokenize: text -> ids, positions of the special tokens: n -> list); ``seed``:
    the tiny models' and a null family's weights (``keep_embeddings``: a '-permuted' null's, see
    :func:`null_weights`)."""
    from .. import bridge

    if family in ("tiny-bert", "tiny-llama"):
        w, tokenize = _tiny(family, seed)
    elif null_base(family) is not None:
        trained, tokenize, _ = load_family(null_base(family), seed)
        w = null_weights(family, trained, seed, keep_embeddings=keep_embeddings)
    elif family in ("minilm", "minilm-l3"):
        w = bridge.load_minilm() if family == "minilm" else bridge.load_minilm_l3()
        tok = bridge.load_tokenizer(bridge.minilm_path())  # the ONNX package ships no tokenizer

        def tokenize(s: str) -> list[int]:
            return encode(tok, s, w.max_length)
    elif family == "smollm2":
        w = bridge.load_smollm2()
        tok = bridge.gguf_tokenizer(bridge.smollm2_path())

        def tokenize(s: str) -> list[int]:
            return list(tok(s, add_special_tokens=True)["input_ids"])
    else:
        raise ValueError(f"unknown family {family!r}; valid: {', '.join(FAMILIES)}")

    def special(n: int) -> list[int]:  # BERT: [CLS] first, [SEP] last; a decoder: its first token
        return [0, n - 1] if w.arch == "post_ln" else [0]

    return w, tokenize, special


# -- the MLP per layer: network against flow (review round 7, F1) -----------------------------------------
def mlp_layer_table(w, ids: list[list[int]], scale_estimator: str = "mean", K: int = 64) -> dict:
    """Per layer l, at the state the network's MLP reads (pre-LN: the stream r after the attention sub-layer;
    post-LN: u = h + Attn(h), the first LayerNorm's input), per token (pre-LN: tokens 2..n, the first is the
    attention sink), medians over tokens and sentences (review round 7, F1; round 6's mlp_field.py):

    * ``network_angle``: the angle (rad) between the state and state + MLP output: what the network's MLP
      sub-layer turns a token by in its one step (T_l = 1);
    * ``flow_speed``: |P_perp(z) m_l(z)| at the sphere token z of that state, m_l the MLP drift of flows (e),
      (g) (:func:`attnflow.bridge.mlp_drift`, pre-LN divided by rho_l of ``scale_estimator``): radians per
      unit time as t -> 0, the flow's displacement per unit time in the small-step limit;
    * ``flow_angle_T1``: the angle the MLP flow alone (dz/dt = P_perp m_l(z), ``K`` projected Euler steps)
      turns z by in T = 1 (bounded by pi, whatever the speed); ``K = 0``: not computed (None; the study's
      own run, where the K MLP steps per layer would cost minutes for SmolLM2: the rule reads only the
      other two).
    """
    from ..bridge.passes import layer_norm, mlp
    from ..bridge.theta import mlp_drift

    pre = w.arch == "pre_ln"
    keys = ("network_angle", "flow_speed", "flow_angle_T1")
    rows = {k: [[] for _ in range(w.depth)] for k in keys}

    def ang(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        cs = (a * b).sum(-1) / (torch.linalg.vector_norm(a, dim=-1) * torch.linalg.vector_norm(b, dim=-1))
        return torch.arccos(cs.clamp(-1.0, 1.0))

    with torch.no_grad():
        for t in ids:
            fp = forward(w, t)
            rho = stream_scales(w, fp.hidden_states, scale_estimator) if pre else None
            for l in range(w.depth):
                lw, h = w.layers[l], fp.hidden_states[l]
                if pre:
                    state = h + attention_sublayer(layer_norm(h, lw.ln_attn), w, l)[0]
                    ref, mo, skip = state, mlp(layer_norm(state, lw.ln_mlp), lw, w.activation), 1
                else:
                    state = h + attention_sublayer(h, w, l)[0]
                    ref = layer_norm(state, lw.ln_attn)
                    mo, skip = mlp(ref, lw, w.activation), 0
                cen = state - state.mean(-1, keepdim=True) if w.norm == "layer" else state
                z0 = cen / torch.linalg.vector_norm(cen, dim=-1, keepdim=True)
                m = mlp_drift(w, l, residual_norm=None if rho is None else rho[l])

                def tangent(z, m=m):
                    v = m(z)
                    return v - (v * z).sum(-1, keepdim=True) * z

                z = z0
                for _ in range(K):
                    z = z + tangent(z) / K
                    z = z / torch.linalg.vector_norm(z, dim=-1, keepdim=True)
                rows["network_angle"][l].extend(ang(ref, ref + mo)[skip:].tolist())
                rows["flow_speed"][l].extend(torch.linalg.vector_norm(tangent(z0), dim=-1)[skip:].tolist())
                if K:
                    rows["flow_angle_T1"][l].extend(ang(z0, z)[skip:].tolist())
    return {
        "sentences": len(ids), "K": K, "scale_estimator": scale_estimator if pre else None,
        "tokens_skipped": "the first (attention sink)" if pre else "none",
        **{k: [float(np.median(v)) if v else None for v in rows[k]] for k in keys},
    }  # fmt: skip


def after_jump_start(jumps: list[int]) -> int:
    """The first depth the 'after jump' value reads (config ``after_jump_check``): 1 + the last layer of the
    leading run 0, 1, ..., j of jump layers (1: layer 0 is no jump, nothing is taken from the network)."""
    s = 0
    while s in jumps:
        s += 1
    return s + 1


def after_jump_flows(w, ids: list[list[int]], c: FlowsConfig, K, jumps: list[int]) -> dict:
    """The flows (e), (g) with the jump layers ``jumps`` taken from the network (config
    ``after_jump_check``; :func:`attnflow.bridge.layer_flow` ``network_layers``) on sentences ``ids``, each at
    its own step (``K``: one number or flow -> K), sphere tokens: per flow the stacked profiles
    (:func:`_profile`, against the model's tokens; shape [S, L + 1] per statistic), with ``layers`` and
    ``start_depth`` (:func:`after_jump_start`)."""
    pre = w.arch == "pre_ln"
    rows = {v: [] for v in ("mlp", "frames_mlp")}
    with torch.no_grad():
        for t in ids:
            fp = forward(w, t)
            rho = stream_scales(w, fp.hidden_states, c.scale_estimator) if pre else None
            for v in rows:
                x = layer_flow(w, fp.tokens[0], variant=v, steps_per_layer=_k_of(K, v), residual_norms=rho,
                               network_layers=jumps, model_tokens=fp.tokens)  # fmt: skip
                rows[v].append(_profile(x, fp.tokens, c.thresholds))
    return {"layers": list(jumps), "start_depth": after_jump_start(jumps),
            "sphere": {v: _stack(p) for v, p in rows.items()}}  # fmt: skip


def mlp_jumps(table: dict | None, factor: float) -> list[int]:
    """The layers whose MLP is a jump (config ``mlp_jump_factor``; review round 7, F1): the flow's
    displacement per unit time (``flow_speed``) exceeds ``factor`` x the network's own turn at that layer
    (``network_angle``), so the flow has no small-step limit at T_l = 1 there."""
    if not table:
        return []
    return [l for l, (v, a) in enumerate(zip(table["flow_speed"], table["network_angle"], strict=True))
            if v > factor * a]  # fmt: skip


# -- one sentence ------------------------------------------------------------------------------------------
def mlp_factor_range(tables: dict[str, dict | None], factor: float) -> dict | None:
    """The range of ``mlp_jump_factor`` values that flag the same layers as ``factor`` in every family's
    table (review round 8, F4): from the largest ratio flow speed / network turn of a layer that is not a
    jump (low) up to the smallest ratio of a layer that is (high). None without any table."""
    rows = [(t["flow_speed"][i] / t["network_angle"][i], fam, i) for fam, t in tables.items() if t
            for i in range(len(t["network_angle"])) if t["network_angle"][i] > 0]  # fmt: skip
    if not rows:
        return None
    below = [r for r in rows if r[0] <= factor]
    above = [r for r in rows if r[0] > factor]
    lo, hi = max(below) if below else None, min(above) if above else None
    return {"low": lo[0] if lo else 0.0, "low_at": f"{lo[1]} layer {lo[2]}" if lo else None,
            "high": hi[0] if hi else float("inf"), "high_at": f"{hi[1]} layer {hi[2]}" if hi else None,
            "factor": float(factor)}  # fmt: skip


def _unit(y: torch.Tensor) -> torch.Tensor:
    return y / torch.linalg.vector_norm(y, dim=-1, keepdim=True)


def _k_of(K, flow: str) -> int:
    """The Euler steps per unit time of ``flow``: ``K`` itself (one step for every flow) or ``K[flow]`` (the
    step rule per flow, config ``step_per_flow``)."""
    return int(K[flow]) if isinstance(K, dict) else int(K)


def _hidden(w, x: torch.Tensor) -> torch.Tensor:
    """The hidden-state representation of a flow's tokens at every depth, normalised row by row."""
    return _unit(torch.stack([hidden_readout(w, k, x[k]) for k in range(x.shape[0])]))


def _profile(x: torch.Tensor, ref: torch.Tensor, thresholds: list[float]) -> dict:
    """Statistics at depths 0..L of tokens x (K, n, d) against the model's ref (same representation)."""
    return {
        "cos": mean_pairwise_inner_product(x).numpy(),
        "erank": gram_effective_rank(x).numpy(),
        "clusters": cluster_count_sensitivity(x, thresholds).values.astype(float),
        "agree": (x * ref).sum(-1).mean(-1).numpy(),
    }


def _sink(w, tokens: torch.Tensor, special: list[int], *, biases: bool) -> np.ndarray:
    """Attention mass on the special positions of each layer's heads at tokens[l] (mean over heads, rows)."""
    out = []
    for layer in range(w.depth):
        ln = attention_layer_norm(w, layer)
        a = math.sqrt(w.d) * ln.weight
        h = tokens[layer] * a + ln.bias if biases else tokens[layer] * a
        _, A = attention_sublayer(h, w, layer, biases=biases)
        out.append(float(A[..., special].sum(-1).mean()))
    return np.asarray(out)


def _sentence(w, w_nomlp, ids: list[int], special: list[int], c: FlowsConfig, K, known=None) -> dict:
    """Every statistic of one sentence, the flows at ``K`` Euler steps per unit time (the step rule's: one
    number, or flow -> K with ``step_per_flow``); ``known``: flow -> trajectory already computed at that
    flow's K by the step ladder on this sentence (the same call, reused, not recomputed)."""
    known = known or {}
    fp = forward(w, ids)
    z, L = fp.tokens, w.depth
    pre = w.arch == "pre_ln"
    rho = stream_scales(w, fp.hidden_states, c.scale_estimator) if pre else None
    hid = _unit(fp.hidden_states)
    out = {"n": len(ids), "rho": rho, "stats": {r: {} for r in REPS}}
    out["stats"]["sphere"]["model"] = _profile(z, z, c.thresholds)
    out["stats"]["hidden"]["model"] = _profile(hid, hid, c.thresholds)
    nm = forward(w_nomlp, ids)  # (n): the exact network with every MLP output 0
    out["stats"]["sphere"]["no_mlp"] = _profile(nm.tokens, z, c.thresholds)
    out["stats"]["hidden"]["no_mlp"] = _profile(_unit(nm.hidden_states), hid, c.thresholds)
    flows = {}
    for v in ("attention", "biases", "model_scores", "mlp", "frames", "frames_mlp"):
        if v == "frames" and pre and _k_of(K, v) == _k_of(K, "attention"):
            flows[v] = flows["attention"]  # pre-LN: (f) runs the code path of (a) (bridge.flows docstring)
        elif v in known:
            flows[v] = known[v]
        else:
            flows[v] = layer_flow(w, z[0], variant=v, steps_per_layer=_k_of(K, v),
                                  attentions=fp.attentions, residual_norms=rho)  # fmt: skip
        out["stats"]["sphere"][v] = _profile(flows[v], z, c.thresholds)
        out["stats"]["hidden"][v] = _profile(_hidden(w, flows[v]), hid, c.thresholds)
    out["scale_alt"] = {}
    for est in c.scale_alternatives if pre else ():
        if est == c.scale_estimator:
            continue
        rho2, xs, alt = stream_scales(w, fp.hidden_states, est), {}, {}
        for v in SCALE_FLOWS:
            same = v == "frames" and _k_of(K, v) == _k_of(K, "attention")
            xs[v] = xs["attention"] if same else layer_flow(
                w, z[0], variant=v, steps_per_layer=_k_of(K, v), attentions=fp.attentions,
                residual_norms=rho2,
            )  # fmt: skip
            alt[v] = _profile(xs[v], z, c.thresholds)
        out["scale_alt"][est] = {"rho": rho2, "sphere": alt}
    out["steps_alt"] = {}
    for Ka in _alt_steps(
        c
    ):  # robustness check "step count" (no step rule): sphere tokens, cos/erank/clusters
        xs = {}
        for v in STEP_FLOWS:
            same = torch.equal(flows["biases"], flows["attention"])
            if (v == "frames" and pre) or (v == "biases" and same):
                xs[v] = xs["attention"]  # the same flow by construction (identities of the records)
            else:
                xs[v] = layer_flow(w, z[0], variant=v, steps_per_layer=Ka, attentions=fp.attentions,
                                   residual_norms=rho)  # fmt: skip
        out["steps_alt"][Ka] = {v: _profile(x, z, c.thresholds) for v, x in xs.items()}
    out["curves"] = np.stack(
        [
            layer_time_curve(
                w,
                z[k],
                z[k + 1],
                k,
                steps_per_layer=_k_of(K, "fitted_time"),
                max_time=c.max_time,
                residual_norm=None if rho is None else rho[k],
            )  # fmt: skip
            for k in range(L)
        ]
    )
    out["sink"] = {
        "model": fp.attentions[..., special].sum(-1).mean((-1, -2)).numpy(),
        "heads_biasfree": _sink(w, z, special, biases=False),
        "heads_biases": _sink(w, z, special, biases=True),
        "flow_attention": _sink(w, flows["attention"], special, biases=False),
        "flow_biases": _sink(w, flows["biases"], special, biases=True),
    }
    return out


def _lite(w, ids: list[list[int]], c: FlowsConfig, K: int | None = None) -> dict:
    """The data of a robustness check that changes the inputs or the weights: on inputs ``ids``, the sphere
    tokens' statistics of the model, the no-MLP network (n) and every flow of :data:`STEP_FLOWS` at ``K``
    Euler steps per unit time (the step rule's: one number or flow -> K; None: ``steps_per_layer``), and
    flow (c) with T_l fitted
    (teacher-forced) on the fit half of the main split seed's halves of these inputs and reported on the
    other half -- the same code paths as the main computation."""
    K = c.steps_per_layer if K is None else K
    pre = w.arch == "pre_ln"
    w_nomlp = without_mlp(w)
    stats, zs, rhos = [], [], []
    for t in ids:
        fp = forward(w, t)
        z = fp.tokens
        rho = stream_scales(w, fp.hidden_states, c.scale_estimator) if pre else None
        st = {"model": _profile(z, z, c.thresholds),
              "no_mlp": _profile(forward(w_nomlp, t).tokens, z, c.thresholds)}  # fmt: skip
        flows = {}
        for v in STEP_FLOWS:
            if v == "frames" and pre and _k_of(K, v) == _k_of(K, "attention"):  # (f) is (a) for pre-LN
                flows[v] = flows["attention"]
            else:
                flows[v] = layer_flow(w, z[0], variant=v, steps_per_layer=_k_of(K, v),
                                      attentions=fp.attentions, residual_norms=rho)  # fmt: skip
            st[v] = _profile(flows[v], z, c.thresholds)
        stats.append(st)
        zs.append(z)
        rhos.append(rho)
    A, B = _halves(len(ids), c.split_seeds[0])
    Kt = _k_of(K, "fitted_time")
    cur = np.stack([np.stack([
        layer_time_curve(w, zs[i][k], zs[i][k + 1], k, steps_per_layer=Kt, max_time=c.max_time,
                         residual_norm=None if rhos[i] is None else rhos[i][k])
        for k in range(w.depth)]) for i in A])  # fmt: skip
    T = fit_layer_times(cur, Kt)
    st = [_profile(layer_flow(w, zs[i][0], variant="fitted_time", steps_per_layer=Kt,
                              layer_times=T.tolist(), residual_norms=rhos[i]), zs[i], c.thresholds)
          for i in B]  # fmt: skip
    return {
        "tokens": [len(t) for t in ids],
        "sphere": {src: _stack([x[src] for x in stats]) for src in stats[0]},
        "fitted": {"split_seed": c.split_seeds[0], "direction": "A->B", "report": B, "times": T,
                   "stats": {"sphere": _stack(st)}},
    }  # fmt: skip


def joined_inputs(texts: list[str], join: int) -> list[str]:
    """``join`` consecutive texts joined by a space: ``len(texts) // join`` longer inputs (the robustness
    check "sentence length"; the shipped corpus's sentences have 9-19 tokens)."""
    if join < 1:
        raise ValueError(f"join must be >= 1 sentences per input: got {join}")
    return [" ".join(texts[i : i + join]) for i in range(0, len(texts) - join + 1, join)]


#: the robustness check a null family's other seeds give ("-permuted", "-random")
NULL_CHECK = {"-permuted": "permutation seed", "-random": "init seed"}


def _null_check(family: str) -> str | None:
    return next((v for k, v in NULL_CHECK.items() if family.endswith(k)), None)


def _alt_steps(c: FlowsConfig) -> list[int]:
    """The alternative step counts of the robustness check "step count" (the declared one left out); none
    under the step rule (``step_candidates``), whose ladder replaces the check."""
    if c.step_candidates:
        return []
    return [K for K in c.steps_alternatives if K != c.steps_per_layer]


def _ladder_level(w, fps: list, rhos: list, c: FlowsConfig, K: int, A: list[int], B: list[int],
                  flows=None, keep: list | None = None) -> dict:  # fmt: skip
    """One rung of the step rule's ladder (config ``step_candidates``): every flow of :data:`STEP_FLOWS` at
    ``K`` Euler steps per unit time on every sentence (forward passes ``fps``, sphere tokens) and flow (c)
    with T_l refitted at K (teacher-forced, grid step 1/K) on the fit half ``A`` of the main split and
    reported on ``B`` -- the code paths of the main computation -- with the CPU seconds it took. ``flows``:
    only these flows (names of :data:`STEP_FLOWS` and ``"fitted_time"``; None: all; the step rule per flow
    runs only the flows not yet converged); ``keep``: a list that gets each sentence's trajectories."""
    t0 = time.process_time()
    pre = w.arch == "pre_ln"
    flows = [*STEP_FLOWS, "fitted_time"] if flows is None else list(flows)
    run = [v for v in STEP_FLOWS if v in flows]
    st = []
    for fp, rho in zip(fps, rhos, strict=True):
        z, xs = fp.tokens, {}
        for v in run:
            if v == "frames" and pre and "attention" in xs:  # (f) is (a) for pre-LN (as in _sentence)
                xs[v] = xs["attention"]
            else:
                xs[v] = layer_flow(w, z[0], variant=v, steps_per_layer=K, attentions=fp.attentions,
                                   residual_norms=rho)  # fmt: skip
        st.append({v: _profile(x, z, c.thresholds) for v, x in xs.items()})
        if keep is not None:
            keep.append(xs)
    out = {"sphere": {v: _stack([x[v] for x in st]) for v in run}} if run else {"sphere": {}}
    if "fitted_time" not in flows:
        return {**out, "cpu_s": time.process_time() - t0}
    cur = np.stack([np.stack([
        layer_time_curve(w, fps[i].tokens[k], fps[i].tokens[k + 1], k, steps_per_layer=K, max_time=c.max_time,
                         residual_norm=None if rhos[i] is None else rhos[i][k])
        for k in range(w.depth)]) for i in A])  # fmt: skip
    T = fit_layer_times(cur, K)
    fst = [_profile(layer_flow(w, fps[i].tokens[0], variant="fitted_time", steps_per_layer=K,
                               layer_times=T.tolist(), residual_norms=rhos[i]), fps[i].tokens, c.thresholds)
           for i in B]  # fmt: skip
    return {
        **out,
        "fitted": {"split_seed": c.split_seeds[0], "direction": "A->B", "report": B, "times": T,
                   "stats": {"sphere": _stack(fst)}},
        "cpu_s": time.process_time() - t0,
    }  # fmt: skip


def _step_verdicts(res: dict, c: FlowsConfig) -> list[tuple]:
    """The :data:`VERDICTS` entries the step rule watches: every record whose flow has a step (not (n)),
    but a cluster-count record at a saturated declared radius (a description, not tested)."""
    k_main = c.thresholds.index(min(c.thresholds, key=lambda t: abs(t - c.cluster_threshold)))
    sat = c.thresholds[k_main] in saturated_radii(res, c)
    return [v for v in VERDICTS if v[1] in (*STEP_FLOWS, "fitted_time") and not (v[3] == "clusters" and sat)]


def step_values(res: dict, c: FlowsConfig, K: int) -> dict[str, float]:
    """The point estimate of every quantity the step rule watches (:func:`_step_verdicts`), with the flows
    at rung ``K`` of the ladder (``res["step_ladder"]["levels"]``): sphere tokens, all sentences ((c): the
    report half of the main split), the declared depth summary -- each record's own quantity; only the
    flows run at that rung (config ``step_per_flow``)."""
    k_main = c.thresholds.index(min(c.thresholds, key=lambda t: abs(t - c.cluster_threshold)))
    out = {}
    lv = _level(res, K)
    for vid, flow, ref, stat, kind, _, _ in _step_verdicts(res, c):
        if ("fitted" not in lv) if flow == "fitted_time" else (flow not in lv["sphere"]):
            continue  # the step rule per flow: this flow converged at a lower rung, not run at K
        m, f = _pair(res, flow, stat, "sphere", k=k_main if stat == "clusters" else None, ref=ref, steps=K)
        out[vid] = _quantity(kind)(m, f)
    return out


def step_tolerances(c: FlowsConfig) -> dict[str, float]:
    """Per verdict id: the step rule's tolerance, ``step_tolerance_share`` x the margin (the criterion's
    threshold: its distance from 'no difference', 0)."""
    return {v[0]: c.step_tolerance_share * float(getattr(c, v[5])) for v in VERDICTS}


def choose_step(values: dict[int, dict[str, float]], tolerance: dict[str, float], candidates: list[int]):
    """The step rule (config ``step_candidates``, ``step_tolerance_share``) on the rungs computed so far.

    Parameters
    ----------
    values : dict
        K -> {verdict id: point estimate at K}, for the first rungs of ``candidates`` (ascending).
    tolerance : dict
        Verdict id -> tolerance (:func:`step_tolerances`).
    candidates : list of int
        The declared ladder.

    Returns
    -------
    dict or None
        None while the rungs computed do not decide (no converged K yet and rungs left). Else ``chosen``:
        the smallest K whose move to the next candidate is below the tolerance for every quantity (or the
        largest candidate if none is); ``moves`` (K -> id -> |q(next) - q(K)|); ``converged`` (id -> whether
        the quantity moved by less than its tolerance from the chosen K to the next candidate, or between
        the last two candidates where the largest is chosen).
    """
    Ks = [K for K in candidates if K in values]
    if Ks != candidates[: len(Ks)] or not Ks:
        raise ValueError(f"the rungs must be the first ones of the ladder {candidates}: got {sorted(values)}")
    moves = {}
    for a, b in zip(Ks, Ks[1:], strict=False):
        moves[a] = {v: abs(values[b][v] - values[a][v]) for v in values[a]}
        if all(moves[a][v] < tolerance[v] for v in moves[a]):
            return {"chosen": a, "moves": moves, "converged": dict.fromkeys(moves[a], True)}
    if len(Ks) < len(candidates):
        return None
    if len(Ks) == 1:  # a ladder of one rung cannot check anything (the config requires >= 2)
        return {"chosen": Ks[0], "moves": {}, "converged": dict.fromkeys(values[Ks[0]], False)}
    last = moves[Ks[-2]]
    return {"chosen": Ks[-1], "moves": moves, "converged": {v: last[v] < tolerance[v] for v in last}}


def _step_groups(res: dict, c: FlowsConfig) -> dict[str, list[str]]:
    """Flow -> the verdict ids the step rule watches for it (:func:`_step_verdicts`); every flow of
    :data:`STEP_FLOWS` and ``"fitted_time"`` is a key (an empty list: nothing watched)."""
    out = {f: [] for f in (*STEP_FLOWS, "fitted_time")}
    for v in _step_verdicts(res, c):
        out[v[1]].append(v[0])
    return out


def step_ladder(level, values, levels: dict, groups: dict[str, list[str]], tol: dict[str, float],
                c: FlowsConfig):  # fmt: skip
    """Climb the step ladder (config ``step_candidates``) with :func:`choose_step`.

    Parameters
    ----------
    level : callable
        ``level(K, flows, kept)``: the rung K for those flows (:func:`_ladder_level`), appending each
        sentence's trajectories to the list ``kept``.
    values : callable
        ``values(K)``: verdict id -> point estimate at rung K of the flows run there (:func:`step_values`).
    levels : dict
        Filled with str(K) -> the rung's data.
    groups : dict
        Flow -> watched verdict ids (:func:`_step_groups`).
    tol : dict
        Verdict id -> tolerance (:func:`step_tolerances`).
    c : FlowsConfig
        ``step_per_flow``: each flow climbs on its own and only the flows not yet decided run at the next
        rung; else every flow runs at every rung until every quantity is decided (one K).

    Returns
    -------
    picks, vals, keep
        Flow -> :func:`choose_step`'s answer for its quantities (per family: the same answer for every
        flow); K -> values; K -> per sentence {flow: trajectory} of the flows whose chosen K is K.
    """
    flows = list(groups)
    pending, picks, vals, keep = list(flows), {}, {}, {}
    for Kc in c.step_candidates:
        keep[Kc] = []
        levels[str(Kc)] = level(Kc, pending, keep[Kc])
        vals[Kc] = values(Kc)
        if not c.step_per_flow:
            pick = choose_step(vals, tol, c.step_candidates)
            if pick is not None:
                picks = dict.fromkeys(flows, pick)
        else:
            for f in list(pending):
                if not groups[f]:  # nothing watched: the first rung
                    picks[f] = {"chosen": Kc, "moves": {}, "converged": {}}
                else:
                    gv = {K: {v: x[v] for v in groups[f]} for K, x in vals.items() if groups[f][0] in x}
                    pick = choose_step(gv, tol, c.step_candidates)
                    if pick is None:
                        continue
                    picks[f] = pick
                pending.remove(f)
        done = set(picks) == set(flows)
        last2 = list(keep)[-2:]
        for K, per in keep.items():  # keep only the trajectories that may still be chosen
            for xs in per:
                for f in list(xs):
                    if (f in picks and int(picks[f]["chosen"]) != K) or (f not in picks and K not in last2):
                        del xs[f]
        if done:
            break
    return picks, vals, keep


def _halves(S: int, seed: int) -> tuple[list[int], list[int]]:
    perm = np.random.default_rng(seed).permutation(S)
    return sorted(perm[: S // 2].tolist()), sorted(perm[S // 2 :].tolist())


def family_task(config: dict, family: str) -> dict:
    """The computation of one family: every sentence's model pass and flows (a), (b), (d), (e), the
    time-fit curves, then flow (c) on each report half of every split. Pure: the corpus subsample and
    the splits are drawn from the config's seeds; the weights are read from installed files."""
    c = FlowsConfig(**config)
    t0, cpu0 = time.perf_counter(), time.process_time()
    keep = c.permuted_embeddings == "keep"
    with one_thread(), torch.no_grad():
        base = null_base(family)
        if base is None:
            w, tokenize, special = load_family(family, c.seed)
        else:  # the trained weights are kept for the other null seeds (robustness check)
            trained, tokenize, special = load_family(base, c.seed)
            w = null_weights(family, trained, c.null_seeds[0], keep_embeddings=keep)
        w_nomlp = without_mlp(w)
        corpus = load_corpus()
        order = np.random.default_rng(c.corpus_seed).permutation(len(corpus))
        # the main draw, continued to k x sentences for the joined check (F6: as many inputs as the main run)
        need = c.sentences * max([1, *c.join_alternatives])
        drawn, drawn_ids = [], []
        for k in order:
            t = tokenize(corpus[k])
            if 3 <= len(t) <= min(c.max_tokens, w.max_length):
                drawn.append(int(k))
                drawn_ids.append(t)
            if len(drawn) == need:
                break
        if c.join_alternatives and len(drawn) < need:
            raise ValueError(
                f"joined sentences: join {max(c.join_alternatives)} draws {need} sentences (join x "
                f"sentences, so that the check has as many inputs as the main run); the corpus has "
                f"{len(drawn)} of 3.."
                f"{min(c.max_tokens, w.max_length)} tokens: lower sentences to <= "
                f"{len(drawn) // max(c.join_alternatives)} or drop the join from join_alternatives"
            )
        chosen, ids = drawn[: c.sentences], drawn_ids[: c.sentences]
        t_load = time.perf_counter() - t0
        pre = w.arch == "pre_ln"
        ladder, K = None, c.steps_per_layer
        if c.step_candidates:  # the step rule: rungs in turn until one is converged (F2, review round 3)
            fps = [forward(w, t) for t in ids]
            rhos = [stream_scales(w, fp.hidden_states, c.scale_estimator) if pre else None for fp in fps]
            refs = {"model": _stack([_profile(fp.tokens, fp.tokens, c.thresholds) for fp in fps]),
                    "no_mlp": _stack([_profile(forward(w_nomlp, t).tokens, fp.tokens, c.thresholds)
                                      for t, fp in zip(ids, fps, strict=True)])}  # fmt: skip
            A, B = _halves(len(ids), c.split_seeds[0])
            levels = {}
            probe = {
                "tokens": [len(t) for t in ids],
                "stats": {"sphere": refs},
                "step_ladder": {"levels": levels},
            }
            tol = step_tolerances(c)
            picks, vals, kept = step_ladder(
                lambda Kc, run, kept: _ladder_level(w, fps, rhos, c, Kc, A, B, flows=run, keep=kept),
                lambda Kc: step_values(probe, c, Kc), levels, _step_groups(probe, c), tol, c,
            )  # fmt: skip
            if c.step_per_flow:
                K = {f: int(p["chosen"]) for f, p in picks.items()}
                moves, conv = {}, {}
                for p in picks.values():
                    for a, mv in p["moves"].items():
                        moves.setdefault(a, {}).update(mv)
                    conv |= p["converged"]
            else:
                pick = next(iter(picks.values()))
                K, moves, conv = pick["chosen"], pick["moves"], pick["converged"]
            ladder = {"candidates": c.step_candidates, "chosen": K, "per_flow": c.step_per_flow,
                      "values": vals, "moves": moves, "converged": conv,
                      "tolerance": {v: tol[v] for v in vals[c.step_candidates[0]]},
                      "cpu_s": {x: lv.pop("cpu_s") for x, lv in levels.items()},
                      "levels": levels}  # fmt: skip
            known = [{f: kept[_k_of(K, f)][i][f] for f in STEP_FLOWS if f in kept[_k_of(K, f)][i]}
                     for i in range(len(ids))]  # fmt: skip
            del fps, kept
        else:
            known = [None] * len(ids)
        rows = [_sentence(w, w_nomlp, t, special(len(t)), c, K, kn) for t, kn in zip(ids, known, strict=True)]
        Kt = _k_of(K, "fitted_time")
        curves = np.stack([r["curves"] for r in rows])  # (S, L, M + 1)
        fitted = []
        for s in c.split_seeds:
            A, B = _halves(len(rows), s)
            for name, fit, rep in (("A->B", A, B), ("B->A", B, A)):
                T = fit_layer_times(curves[fit], Kt)
                stats = {r: [] for r in REPS}
                for i in rep:
                    fp = forward(w, ids[i])
                    x = layer_flow(w, fp.tokens[0], variant="fitted_time", steps_per_layer=Kt,
                                   layer_times=T.tolist(), residual_norms=rows[i]["rho"])  # fmt: skip
                    stats["sphere"].append(_profile(x, fp.tokens, c.thresholds))
                    stats["hidden"].append(_profile(_hidden(w, x), _unit(fp.hidden_states), c.thresholds))
                fitted.append({"split_seed": s, "direction": name, "fit": fit, "report": rep, "times": T,
                               "stats": {r: _stack(stats[r]) for r in REPS}})  # fmt: skip
        free = None
        if c.free_running_fit:  # (c)'s robustness variant: T_l fitted to the free-running mean cosine
            A, B = _halves(len(rows), c.split_seeds[0])
            zs = {i: forward(w, ids[i]) for i in (*A, *B)}
            target = np.mean([rows[i]["stats"]["sphere"]["model"]["cos"] for i in A], axis=0)
            T = fit_free_running_times(
                w, [zs[i].tokens[0] for i in A], target.tolist(), steps_per_layer=Kt,
                max_time=c.max_time, residual_norms=None if not pre else [rows[i]["rho"] for i in A],
            )  # fmt: skip
            stats = {r: [] for r in REPS}
            for i in B:
                x = layer_flow(w, zs[i].tokens[0], variant="fitted_time", steps_per_layer=Kt,
                               layer_times=T.tolist(), residual_norms=rows[i]["rho"])  # fmt: skip
                stats["sphere"].append(_profile(x, zs[i].tokens, c.thresholds))
                stats["hidden"].append(_profile(_hidden(w, x), _unit(zs[i].hidden_states), c.thresholds))
            free = {"split_seed": c.split_seeds[0], "direction": "A->B", "fit": A, "report": B, "times": T,
                    "stats": {r: _stack(stats[r]) for r in REPS}}  # fmt: skip
        # "step count" for (c): T_l refitted at each alternative step on the fit half of the main split
        # (teacher-forced, grid step 1/K), flow (c) at that step on its report half; sphere tokens only
        steps_fit = {}
        A, B = _halves(len(rows), c.split_seeds[0])
        zs = {i: forward(w, ids[i]) for i in (*A, *B)} if _alt_steps(c) else {}
        for Ka in _alt_steps(c):
            cur = np.stack([np.stack([
                layer_time_curve(w, zs[i].tokens[k], zs[i].tokens[k + 1], k, steps_per_layer=Ka,
                                 max_time=c.max_time, residual_norm=None if rows[i]["rho"] is None
                                 else rows[i]["rho"][k])
                for k in range(w.depth)]) for i in A])  # fmt: skip
            T = fit_layer_times(cur, Ka)
            st = [_profile(layer_flow(w, zs[i].tokens[0], variant="fitted_time", steps_per_layer=Ka,
                                      layer_times=T.tolist(), residual_norms=rows[i]["rho"]),
                           zs[i].tokens, c.thresholds) for i in B]  # fmt: skip
            steps_fit[Ka] = {"split_seed": c.split_seeds[0], "direction": "A->B", "report": B, "times": T,
                            "stats": {"sphere": _stack(st)}}  # fmt: skip
        # robustness checks on other inputs / weights: "joined sentences" (k x sentences drawn, k joined per
        # input), and for a null family "permutation seed" / "init seed" (its other seeds, the same sentences)
        variants = {}
        t_var = time.perf_counter()
        if c.join_alternatives:
            variants["joined sentences"] = {}
            for k in c.join_alternatives:
                texts = [corpus[i] for i in drawn[: k * c.sentences]]
                toks = [tokenize(x) for x in joined_inputs(texts, k)]
                toks = [t for t in toks if 3 <= len(t) <= w.max_length]
                if len(toks) < 2:
                    raise ValueError(
                        f"join {k}: {len(toks)} joined input(s) within the model's maximum length from "
                        f"{len(texts)} sentences; the check needs >= 2 (a fit and a report half): raise "
                        f"sentences to >= 2 or drop {k} from join_alternatives"
                    )
                variants["joined sentences"][str(k)] = _lite(w, toks, c, K)
        check = _null_check(family)
        if check is not None and len(c.null_seeds) > 1:
            variants[check] = {
                str(s): _lite(null_weights(family, trained, s, keep_embeddings=keep), ids, c, K)
                for s in c.null_seeds[1:]
            }
        t_var = time.perf_counter() - t_var
    stats = {
        r: {src: _stack([row["stats"][r][src] for row in rows]) for src in rows[0]["stats"][r]} for r in REPS
    }
    steps_alt = {
        str(K): {"sphere": {v: _stack([row["steps_alt"][K][v] for row in rows]) for v in STEP_FLOWS},
                 "fitted": steps_fit[K]}
        for K in _alt_steps(c)
    }  # fmt: skip
    scale_alt = {
        est: {"rho": [row["scale_alt"][est]["rho"] for row in rows],
              "sphere": {v: _stack([row["scale_alt"][est]["sphere"][v] for row in rows])
                         for v in SCALE_FLOWS}}
        for est in rows[0]["scale_alt"]
    }  # fmt: skip
    mlp_table = mlp_layer_table(w, ids, c.scale_estimator, K=0)
    jumps = mlp_jumps(mlp_table, c.mlp_jump_factor) if c.after_jump_check else []
    after_jump = None
    if 0 in jumps and after_jump_start(jumps) <= w.depth:  # review round 8: the jump layers from the network
        with one_thread():
            after_jump = after_jump_flows(w, ids, c, K, jumps)
    return jsonable(
        {
            "family": family,
            "model": {
                "name": w.name, "arch": w.arch, "norm": w.norm, "positions": w.positions, "layers": w.depth,
                "d": w.d, "heads": w.num_heads, "kv_heads": w.kv_heads, "causal": w.causal,
            },
            "corpus_index": chosen,
            "tokens": [len(t) for t in ids],
            "stats": stats,
            "curves_mean": curves.mean(0),
            "curve_grid": np.arange(curves.shape[-1]) / Kt,
            "step": K,
            "step_ladder": ladder,
            "permuted_embeddings": c.permuted_embeddings if family.endswith("-permuted") else None,
            "fitted": fitted,
            "fitted_free": free,
            "scale_alt": scale_alt,
            "steps_alt": steps_alt,
            "variants": variants,
            "rho": [row["rho"] for row in rows],
            "sink": {k: np.stack([r["sink"][k] for r in rows]) for k in rows[0]["sink"]},
            # review round 7, F1: the network's MLP turn against the MLP flow's (config mlp_jump_factor)
            "mlp_layers": mlp_table,
            "after_jump": after_jump,  # review round 8 (config after_jump_check)
            "timing_s": {
                "load": t_load, "variants": t_var, "total": time.perf_counter() - t0,
                "cpu": time.process_time() - cpu0,
            },
        }
    )  # fmt: skip


def _stack(profiles: list[dict]) -> dict:
    return {k: np.stack([p[k] for p in profiles]) for k in profiles[0]}


# -- analysis ----------------------------------------------------------------------------------------------
def _level(res: dict, K: int) -> dict:
    """The flows at ``K`` steps: the step rule's ladder rung (``res["step_ladder"]["levels"]``) or, in a run
    without the rule, the check "step count" (``res["steps_alt"]``)."""
    levels = (res.get("step_ladder") or {}).get("levels") or {}
    return levels[str(K)] if str(K) in levels else res["steps_alt"][str(K)]


def _arr(res: dict, rep: str, src: str, key: str, k: int | None, est: str | None = None,
         steps: int | None = None) -> np.ndarray:  # fmt: skip
    """Per-sentence values (S, L + 1) of ``key`` for ``src`` (a flow, the model or the no-MLP network);
    clusters at radius k; ``est``: the flow rerun with that scale estimator, ``steps``: with that step count
    (sphere tokens only; the model and (n) have no step)."""
    if steps is not None and src in STEP_FLOWS:
        a = np.asarray(_level(res, steps)["sphere"][src][key], float)
    elif est is not None and src in SCALE_FLOWS:
        a = np.asarray(res["scale_alt"][est]["sphere"][src][key], float)
    else:
        a = np.asarray(res["stats"][rep][src][key], float)
    return a[..., k] if key == "clusters" else a


def _fitted_pair(res: dict, rep: str, key: str, k: int | None, fit: dict) -> tuple[np.ndarray, np.ndarray]:
    """(model, flow (c)) on the report half of the time fit ``fit`` (an entry of ``res["fitted"]`` or
    ``res["fitted_free"]``)."""
    a = np.asarray(fit["stats"][rep][key], float)
    return _arr(res, rep, "model", key, k)[fit["report"]], (a[..., k] if key == "clusters" else a)


class StepPair(tuple):
    """A (reference, flow) pair of per-sentence arrays with the Euler step count ``K`` per unit time its flow
    was computed at (None: not known to the caller); it unpacks as the plain pair (review round 14, F6)."""

    K: int | None

    def __new__(cls, pair, K: int | None = None):
        obj = super().__new__(cls, pair)
        obj.K = K
        return obj


def _pair(res: dict, flow: str, stat: str, rep: str, *, k: int | None, ref: str = "model", j: int = 0,
          idx=None, est: str | None = None, free: bool = False, steps: int | None = None,
          var: tuple[str, str] | None = None):  # fmt: skip
    """(reference, flow) per-sentence arrays of ``stat``; the reference is the model or the no-MLP network
    (flow (c): the model on the report half of the j-th fit, of the free-running fit, or of the main
    split's fit at ``steps``); ``steps``: the flow at that alternative step count (sphere tokens);
    ``var = (check, value)``: on the inputs / weights of that robustness check (``res["variants"]``)."""
    if var is not None:
        d = res["variants"][var[0]][var[1]]

        def get(a):
            a = np.asarray(a, float)
            return a[..., k] if stat == "clusters" else a

        if flow == "fitted_time":
            fit = d["fitted"]
            return get(d["sphere"]["model"][stat])[fit["report"]], get(fit["stats"]["sphere"][stat])
        return get(d["sphere"][ref][stat]), get(d["sphere"][flow][stat])
    if flow == "fitted_time":
        if steps is not None:
            return _fitted_pair(res, rep, stat, k, _level(res, steps)["fitted"])
        return _fitted_pair(res, rep, stat, k, res["fitted_free"] if free else res["fitted"][j])
    m, f = _arr(res, rep, ref, stat, k, est), _arr(res, rep, flow, stat, k, est, steps)
    return (m, f) if idx is None else (m[idx], f[idx])


def _quantity(kind: str, depths: str = "all"):
    """The verdict quantities, from paired per-sentence arrays (S, L + 1), over depths 1..L (``depths =
    "all"``, the declared criterion) or at the last depth L only (``"last"``, a robustness check: a mean
    over depths dilutes a gap that grows with depth, since every flow starts on the model's z_0)."""
    if depths not in ("all", "last"):
        raise ValueError(f"depths must be 'all' (1..L) or 'last' (L): got {depths!r}")
    sl = slice(1, None) if depths == "all" else slice(-1, None)

    def q(m: np.ndarray, f: np.ndarray) -> float:
        return _depth_value(kind, m.mean(0)[sl], f.mean(0)[sl])

    q.kind, q.depths = kind, depths
    return q


def _depth_value(kind: str, mm: np.ndarray, fm: np.ndarray) -> float:
    """A verdict quantity from the per-depth means of the reference ``mm`` and the flow ``fm`` (the depths
    already selected): ``over`` the mean excess, ``gap`` the mean absolute gap, ``rel`` that gap over the
    reference's mean."""
    if kind == "over":
        return float(np.mean(fm - mm))
    gap = float(np.mean(np.abs(fm - mm)))
    return gap if kind == "gap" else gap / float(np.mean(mm))


def room_of(q, m: np.ndarray, threshold: float, share: float):
    """The depths with room of a value (config ``room_per_depth``, ``room_min_depth_share``; review round
    8, F1, F2): the depths of ``q``'s summary (1..L or L) where 1 - the reference's mean cosine (all
    sentences of ``m``) is >= ``threshold``. Returns (q over those depths only -- ``q`` itself where every
    depth has room -- and the record of it: depths, room per depth, depths kept, the least number needed,
    whether that many have room)."""
    mm = np.asarray(m, float).mean(0)
    L = mm.shape[0] - 1
    sel = list(range(1, L + 1)) if q.depths == "all" else [L]
    room = [float(1.0 - mm[d]) for d in sel]
    keep = [d for d, r in zip(sel, room, strict=True) if r >= threshold]
    need = int(np.ceil(share * len(sel) - 1e-9))
    info = {"depths": sel, "room": room, "kept": keep, "min_depths": need, "enough": len(keep) >= need,
            "threshold": float(threshold), "masked": len(keep) < len(sel),
            "rule": "config room_per_depth, room_min_depth_share (review round 8, F1, F2)"}  # fmt: skip
    if not info["masked"] or not keep:
        return q, info
    return _over_depths(q, keep, q.depths), info


def _over_depths(q, depths: list[int], summary: str = "all"):
    """The quantity ``q`` (its kind) taken over the given depths only, the per-depth means over all sentences
    (``_depth_value``); ``summary``: the depth summary the result reports as its own (``q.depths``)."""
    kind, idx = q.kind, np.asarray(depths)

    def qd(a: np.ndarray, f: np.ndarray) -> float:
        return _depth_value(kind, np.asarray(a, float).mean(0)[idx], np.asarray(f, float).mean(0)[idx])

    qd.kind, qd.depths = kind, summary
    return qd


def no_room_text(nh: dict, kind: str) -> str:
    """Why a value has no headroom (review round 7, F3; round 8, F1, F2), in words."""
    if "depths_with_room" in nh:
        what = ("no flow can exceed the model by the threshold at the others" if kind == "over" else
                "a collapse follows the reference within the threshold at the others")  # fmt: skip
        return (f"only {nh['depths_with_room']} of {nh['depths']} depths have room 1 - the reference's mean "
                f"cosine >= {nh['threshold']:g} (at least {nh['min_depths']} needed; {what}; config "
                "room_per_depth, room_min_depth_share; review round 8, F1, F2)")  # fmt: skip
    return (f"1 - the model's mean cosine {nh['headroom']:.3f} < {nh['threshold']:g} (review round 7, F3)")


def _boot(q, m: np.ndarray, f: np.ndarray, B: int, seed: int) -> tuple[float, tuple[float, float]]:
    """q on all sentences and its 95% percentile bootstrap interval over sentences (paired resampling);
    the interval is widened to contain the estimate where the percentile interval misses it."""
    v = q(m, f)
    idx = np.random.default_rng(seed).integers(0, len(m), size=(B, len(m)))
    vals = np.array([q(m[i], f[i]) for i in idx])
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return v, (float(min(lo, v)), float(max(hi, v)))


#: the fitted-time record's statement naming its fit (config ``statement_names_fit``; review round 11, F3, F8)
FITTED_STATEMENT = (
    "with one time per layer fitted on one half of the sentences by the teacher-forced fit (T_l maximising "
    "token-wise agreement with the model's layer output, layer by layer from the model's own tokens) and "
    "scored on the other half, the attention-only flow run from z_0 follows the model's mean cosine (a fail "
    "is this fit's, not that of every per-layer time)"
)

#: the verdicts of each family: (id, flow, reference, statistic, quantity kind, criterion field, statement);
#: the reference is the model, or (n) the no-MLP network for "(f) follows (n)"
VERDICTS = (
    ("attention-overclusters", "attention", "model", "cos", "over", "criterion_overcluster",
     "the bias-free attention-only flow of the model's heads over-clusters the tokens (mean cosine above "
     "the model's)"),
    ("biases-overclusters", "biases", "model", "cos", "over", "criterion_overcluster",
     "with the attention biases and the LayerNorm shift kept, the attention-only flow still over-clusters "
     "the tokens (mean cosine above the model's; review round 3, F7: 'as the bias-free one' is untested)"),
    ("model-scores-overclusters", "model_scores", "model", "cos", "over", "criterion_overcluster",
     "driven by the model's own attention weights (moving the values of the bias-free heads), the flow "
     "still over-clusters the tokens (review round 3, F7: the criterion does not test which of scores and "
     "values makes it cluster)"),
    ("fitted-time-cos", "fitted_time", "model", "cos", "gap", "criterion_cos_gap",
     "with one time per layer fitted on held-out sentences, the attention-only flow follows the model's "
     "mean cosine"),
    ("mlp-cos", "mlp", "model", "cos", "gap", "criterion_cos_gap",
     "the attention + MLP flow follows the model's mean cosine (the MLP closes the gap in mean cosine)"),
    ("mlp-clusters", "mlp", "model", "clusters", "rel", "criterion_rel_gap",
     "the attention + MLP flow follows the model's cluster count (the MLP closes the gap in clusters)"),
    ("mlp-erank", "mlp", "model", "erank", "rel", "criterion_rel_gap",
     "the attention + MLP flow follows the model's effective rank (the MLP closes the gap in rank)"),
    ("no-mlp-network-overclusters", "no_mlp", "model", "cos", "over", "criterion_overcluster",
     "the attention-only NETWORK (the model with every MLP output 0; every norm, bias and residual kept) "
     "over-clusters the tokens (mean cosine above the model's)"),
    ("frames-overclusters", "frames", "model", "cos", "over", "criterion_overcluster",
     "the attention-only flow with the LayerNorm frames kept ((f): the continuous analogue of the no-MLP "
     "network) over-clusters the tokens"),
    ("frames-follows-network-cos", "frames", "no_mlp", "cos", "gap", "criterion_cos_gap",
     "the attention-only flow with the LayerNorm frames kept (f) follows the discrete no-MLP network (n) "
     "in mean cosine"),
    ("frames-mlp-cos", "frames_mlp", "model", "cos", "gap", "criterion_cos_gap",
     "the flow with the LayerNorm frames and the MLP (g) follows the model's mean cosine"),
    ("frames-mlp-clusters", "frames_mlp", "model", "clusters", "rel", "criterion_rel_gap",
     "the flow with the LayerNorm frames and the MLP (g) follows the model's cluster count"),
    ("frames-mlp-erank", "frames_mlp", "model", "erank", "rel", "criterion_rel_gap",
     "the flow with the LayerNorm frames and the MLP (g) follows the model's effective rank"),
)  # fmt: skip
_OPS = {"over": ">=", "gap": "<=", "rel": "<="}
_QUANT = {
    "over": "mean over depths 1..L of (mean cosine of the flow - mean cosine of the {ref})",
    "gap": "mean over depths 1..L of |mean {stat} (flow) - mean {stat} ({ref})|",
    "rel": "mean over depths 1..L of |mean {stat} (flow) - mean {stat} ({ref})| / mean {stat} ({ref})",
}
_REF = {"model": "model", "no_mlp": "no-MLP network"}
#: the depth summaries of the robustness check "depth summary" (the first is the declared criterion)
_DEPTHS = {"all": "mean over depths 1..L", "last": "last depth L"}
_REP_NAME = {"sphere": "sphere tokens", "hidden": "hidden states"}
#: the values of the check "depth summary": (depths, representation); the last depth in both
#: representations (review round 3, F5: on sphere tokens alone the last depth is confounded with the
#: model's last-layer drop in mean cosine, which the hidden states do not show)
_DEPTH_CHECK = (("all", "sphere"), ("last", "sphere"), ("last", "hidden"))
#: flows that equal another one by construction where ``_same_flow`` finds them bit-identical
_IDENTITIES = {
    "biases": ("attention", "the weights have no nonzero attention/projection bias and no norm shift (Llama: "
               "none exist; transformers' random init of BERT: all zero), so flow (b) is flow (a) and a "
               "test of (b) would only repeat the one of (a) (bridge.flows module docstring; test "
               "test_llama_has_no_biases_so_flow_b_is_flow_a)"),
    "frames": ("attention", "pre-LN / RMSNorm: the only LayerNorm affine map on the attention's path is the "
               "gain on its read, which flow (a) already applies, so flow (f) is flow (a) (bridge.flows "
               "module docstring; test test_frames_is_attention_for_pre_ln)"),
}  # fmt: skip


#: why (f) is (a) in a post-LN model whose LayerNorms are the identity (review rounds 4, 5: the random-init
#: MiniLM records gave the pre-LN reason)
_FRAMES_POST_LN_IDENTITY = (
    "post-LN with every LayerNorm gain 1 and shift 0 (transformers' random initialisation of BERT): the "
    "LayerNorm affine maps are the identity, so flow (f) is flow (a) (bridge.flows module docstring)"
)


def _identity_why(res: dict, flow: str) -> str:
    """Why ``flow`` equals its :data:`_IDENTITIES` partner in this family: for (f) the reason depends on the
    architecture (pre-LN: no frame on the attention's path; post-LN: identity LayerNorms)."""
    if flow == "frames" and (res.get("model") or {}).get("arch") == "post_ln":
        return _FRAMES_POST_LN_IDENTITY
    return _IDENTITIES[flow][1]


def _same_flow(res: dict, flow: str, other: str) -> bool:
    """Whether ``flow`` and ``other`` gave bit-identical statistics on every sentence and representation
    (a Llama model has no biases and no norm shift: flow (b) is flow (a) by construction)."""
    st = res["stats"]
    return all(
        np.array_equal(np.asarray(st[r][flow][k], float), np.asarray(st[r][other][k], float))
        for r in REPS
        for k in ("cos", "erank", "clusters")
    )


def _verdict_data(res: dict) -> dict:
    """What the verdicts need of a family's result (per-sentence cosine, rank, clusters; the fits'
    report halves; the flows with the other scale estimators), kept in the summary so that
    ``records(summary, config)`` rebuilds them (``scripts/regen_verdicts.py``) without rerunning the study."""
    keys = ("cos", "erank", "clusters")

    def rnd(d):
        return {k: np.round(np.asarray(d[k], float), 6) for k in keys}

    def fit(f):
        return {"split_seed": f["split_seed"], "direction": f["direction"], "report": f["report"],
                "times": f["times"], "stats": {r: rnd(f["stats"][r]) for r in REPS}}  # fmt: skip

    free = res.get("fitted_free")
    fit_keys = ("split_seed", "direction", "report", "times")
    return {
        "tokens": res["tokens"],
        "stats": {r: {src: rnd(v) for src, v in d.items()} for r, d in res["stats"].items()},
        "fitted": [fit(f) for f in res["fitted"]],
        "fitted_free": None if free is None else fit(free),
        "scale_alt": {est: {"sphere": {v: rnd(x) for v, x in a["sphere"].items()}}
                      for est, a in res.get("scale_alt", {}).items()},
        "steps_alt": {K: {"sphere": {v: rnd(x) for v, x in a["sphere"].items()},
                          "fitted": {**{k: a["fitted"][k] for k in ("split_seed", "direction", "report",
                                                                     "times")},
                                     "stats": {"sphere": rnd(a["fitted"]["stats"]["sphere"])}}}
                      for K, a in (res.get("steps_alt") or {}).items()},
        "step": res.get("step"),
        "mlp_layers": res.get("mlp_layers"),
        "after_jump": None if not res.get("after_jump") else {
            **{k: res["after_jump"][k] for k in ("layers", "start_depth")},
            "sphere": {v: rnd(x) for v, x in res["after_jump"]["sphere"].items()}},
        "step_ladder": None if not res.get("step_ladder") else {
            "candidates": res["step_ladder"]["candidates"], "chosen": res["step_ladder"]["chosen"],
            "cpu_s": res["step_ladder"]["cpu_s"],
            "levels": {K: {"sphere": {v: rnd(x) for v, x in a["sphere"].items()},
                           **({} if "fitted" not in a else {  # per flow: (c) not run at every rung
                               "fitted": {**{k: a["fitted"][k] for k in fit_keys},
                                          "stats": {"sphere": rnd(a["fitted"]["stats"]["sphere"])}}})}
                       for K, a in res["step_ladder"]["levels"].items()}},
        "variants": {check: {v: {"tokens": d["tokens"],
                                 "sphere": {src: rnd(x) for src, x in d["sphere"].items()},
                                 "fitted": {**{k: d["fitted"][k] for k in fit_keys},
                                            "stats": {"sphere": rnd(d["fitted"]["stats"]["sphere"])}}}
                             for v, d in a.items()}
                     for check, a in (res.get("variants") or {}).items()},
    }  # fmt: skip


def saturated_radii(res: dict, config: FlowsConfig) -> list[float]:
    """The cluster radii that are uninformative for a family (config ``saturation_tolerance``,
    ``saturation_depth_share``): the model's mean count (sphere tokens) is within the tolerance of 1
    (<= 1 + tol) or of the mean token count n (>= (1 - tol) n) at more than the share of the depths 1..L.
    Declared after the review saw every count at 0.6 rad sit at n and at 1.2 rad at 1."""
    c = config
    n = float(np.mean(res["tokens"]))
    counts = np.asarray(res["stats"]["sphere"]["model"]["clusters"], float).mean(0)[1:]  # (L, radii)
    tol = c.saturation_tolerance
    sat = (counts <= 1.0 + tol) | (counts >= (1.0 - tol) * n)
    return [t for i, t in enumerate(c.thresholds) if sat[:, i].mean() > c.saturation_depth_share]


def _still(m: np.ndarray) -> np.ndarray:
    """The stand-still 'flow': the reference's depth-0 statistic at every depth."""
    return np.repeat(m[:, :1], m.shape[1], axis=1)


def _collapse(m: np.ndarray) -> np.ndarray:
    """The collapse 'flow' (config ``collapse_control``): the reference's depth 0, then every token equal
    from depth 1 on -- mean cosine 1, effective rank 1, one cluster (the value 1 for each statistic)."""
    out = np.array(m, float, copy=True)
    out[:, 1:] = 1.0
    return out


def controls_of(kind: str, c: FlowsConfig) -> tuple[str, ...]:
    """The controls scored on a record's values: the stand-still (config ``stand_still_control``) and, for
    a 'follows' record (kinds gap / rel), the collapse (``collapse_control``; review round 4, F1, F6)."""
    out = ("stand-still",) if c.stand_still_control else ()
    return out + (("collapse",) if c.collapse_control and kind in ("gap", "rel") else ())


#: the margin field of the paired stand-still test of each quantity kind (review round 5)
_MARGIN = {
    "over": "control_margin_overcluster",
    "gap": "control_margin_cos_gap",
    "rel": "control_margin_rel_gap",
}


def paired_outcome(kind: str, d: float, dci, margin: float, still_outcome: str, *,
                   rule: str = "symmetric", against: str = "standing still") -> dict:  # fmt: skip
    """The paired test of one value against a trivial flow (config ``control_margin_*``; review rounds 5,
    6): ``d`` = q(flow) - q(``against``: the stand-still, or the collapse) with its paired interval ``dci``.

    'over-clusters' (kind ``over``): holds when the whole interval is >= ``margin`` (the flow raises the
    mean cosine above z_0 by at least the margin), fails when all of it is below, else inconclusive.
    'follows' (``gap``, ``rel``), ``rule`` (config ``control_paired_rule``) 'symmetric' (review round 6, F2):
    'better than ...' (holds) when the whole interval is <= -margin; 'worse than ...' (fails) when it is
    >= +margin; 'no better than ...' (inconclusive) when it is above -margin, not worse; else 'not decided
    against ...' (inconclusive). 'asymmetric' (round 5): worse when all of it is > 0, and 'no better' fails
    where the stand-still itself fails the criterion (``still_outcome``).
    """
    if rule not in ("symmetric", "asymmetric"):
        raise ValueError(
            f"rule must be 'symmetric' or 'asymmetric' (config control_paired_rule): got {rule!r}"
        )
    lo, hi = float(dci[0]), float(dci[1])
    if kind == "over":
        out = "holds" if lo >= margin else "fails" if hi < margin else "inconclusive"
        named = {"holds": "over-clusters more than standing still by the margin",
                 "fails": "no more than standing still by the margin",
                 "inconclusive": "not decided against standing still"}[out]  # fmt: skip
    elif hi <= -margin:
        out, named = "holds", f"better than {against}"
    elif (lo >= margin) if rule == "symmetric" else (lo > 0):
        out, named = "fails", f"worse than {against}"
    elif lo > -margin:
        out = "fails" if rule == "asymmetric" and still_outcome == "fails" else "inconclusive"
        named = f"no better than {against}"
    else:
        out, named = "inconclusive", f"not decided against {against}"
    return {"value": float(d), "ci95": [lo, hi], "margin": float(margin), "outcome": out, "named": named}


def _paired_boot(q, m: np.ndarray, f: np.ndarray, x: np.ndarray, B: int, seed: int):
    """q(m, f) - q(m, x) on all sentences with its paired bootstrap interval (the same resamples)."""
    both = np.stack([np.asarray(f, float), np.asarray(x, float)], axis=-1)
    return _boot(lambda a, b: q(a, b[..., 0]) - q(a, b[..., 1]), m, both, B, seed)


def _value_outcome(own: str, tests: list[str]) -> str:
    """A value's outcome from its criterion's (``own``) and the paired tests' outcomes that may fail it."""
    return "fails" if "fails" in (own, *tests) else "holds" if all(t == "holds" for t in (own, *tests)) else (
        "inconclusive")  # fmt: skip


def fit_grid_reading(res: dict, m: np.ndarray, q, ms: dict, stat: str, k: int | None,
                     steps: int | None, crit: Criterion, B: int, seed: int,
                     f: np.ndarray | None = None) -> tuple[str | None, dict]:  # fmt: skip
    """The fitted-time record against the constant times its fit's grid holds (config ``fit_grid_check``;
    review rounds 9 and 10, F1): the record's quantity ``q`` on the report half ``m`` for T = 0 (standing
    still) and T = 1 (flow (a) on the same sentences, at ``steps`` where stored, else at the run's step),
    each with its bootstrap interval and the criterion's outcome -- the standard the fitted value is held
    to. Returns (the reason the fail is the fit objective's -- None unless a constant time **holds** the
    criterion (its whole interval) where the fit fails -- and the record of both values)."""
    report = np.asarray(res["fitted"][0]["report"])
    a = None
    if steps is not None:
        try:
            a = _arr(res, "sphere", "attention", stat, k, steps=steps)
        except KeyError:
            a = None
    at = steps if a is not None else "the run's"
    if a is None:
        a = _arr(res, "sphere", "attention", stat, k)
    grid = {}
    for g, x in (("T = 0 (standing still)", _still(m)), ("T = 1 (flow (a))", a[report])):
        v, ci = _boot(q, m, x, B, seed)
        grid[g] = {"value": v, "ci95": list(ci), "outcome": crit.decide(v, ci)}
        if f is not None:  # review round 12, F8: fit - constant time, paired (the same resamples)
            dv, dci = _paired_boot(q, m, f, x, B, seed)
            grid[g]["fit_minus_this"] = {"value": dv, "ci95": list(dci)}
    lo = float(ms["ci95"][0])
    if f is not None:  # worse than a constant time: the paired interval wholly above 0
        better = sorted(g for g, x in grid.items() if x["fit_minus_this"]["ci95"][0] > 0)
    else:
        better = sorted(g for g, x in grid.items() if x["value"] < lo)
    holding = sorted(g for g, x in grid.items() if x["outcome"] == "holds")
    rec = {"values": grid, "fitted": float(ms["value"]), "fitted_ci95": list(ms["ci95"]),
           "flow_a_steps": at, "better_than_fit": better, "holds_the_criterion": holding,
           "rule": "config fit_grid_check (review rounds 9 and 10, F1)"}  # fmt: skip
    vals = ", ".join(f"{g} {x['value']:.3f} [{x['ci95'][0]:.3f}, {x['ci95'][1]:.3f}] ({x['outcome']})"
                     for g, x in grid.items())  # fmt: skip
    rec["reading"] = (
        f"the fitted times (token-wise agreement, layer by layer from the model's tokens) score "
        f"{ms['value']:.3f} [{lo:.3f}, {ms['ci95'][1]:.3f}]; constant times of the fit's own grid, same "
        f"sentences: {vals}" + (f"; the fit is worse than {' and '.join(better)}" if better else "")
        + ("" if f is None or not better else " (paired fit - constant: " + ", ".join(
            f"{g.split(' (')[0]} {grid[g]['fit_minus_this']['value']:+.3f} "
            f"[{grid[g]['fit_minus_this']['ci95'][0]:+.3f}, {grid[g]['fit_minus_this']['ci95'][1]:+.3f}]"
            for g in better) + ")"))  # fmt: skip
    if not holding:
        return None, rec
    why = (f"fit objective: {rec['reading']}: a constant time holds where the fitted times fail, so the "
           "fail is the fit objective's, not fitted time's (config fit_grid_check; review rounds 9 and 10, "
           "F1)")
    return why, rec


def scored(q, m: np.ndarray, f: np.ndarray, crit: Criterion, B: int, seed: int, controls, *,
           kind: str = "over", margin: float | None = None, rule: str = "symmetric",
           margin_factors=(), collapse_pair: bool = False,
           collapse_eps: float | None = None, headroom: float | None = None,
           room: tuple | None = None, room_fail_stands: bool = False) -> dict:  # fmt: skip
    """One value of a record (main or a robustness value): q(m, f) with its paired bootstrap interval and
    the criterion's outcome (``outcome_flow``), and each control of ``controls`` (:func:`controls_of`)
    scored on the same reference ``m`` by the same q, criterion and resamples.

    The stand-still control decides by the paired difference (review round 5, F1-F3; ``margin``, config
    ``control_margin_*``; :func:`paired_outcome` under ``rule``, config ``control_paired_rule``): the
    value's ``outcome`` is ``fails`` if the criterion or the paired test fails, ``holds`` if both hold, else
    ``inconclusive``. With ``collapse_pair`` (config ``collapse_outcome``; review round 6, F5) a 'follows'
    value is also paired against the collapse: it holds only if it is better than a collapse too, and the
    stand-still test is named 'better than standing still' only where the collapse is not (the collapse's
    own test against the stand-still, ``controls['collapse']['vs_stand_still']``). ``margin_factors``
    (config ``control_margin_variants``; F1): the outcome with the margin times each factor, in
    ``outcome_margin``. The collapse control keeps the round-4 rule: ``measured`` is False where it does
    not fail the criterion and the value does not fail either (``blocked_by``). A reference without a
    finite depth-0 statistic cannot be controlled (``missing_depth0``: the criterion alone decides).
    ``room`` (threshold, share; config ``room_per_depth``; review round 8, F1, F2): the value is taken over
    the depths with room only (:func:`room_of`); too few such depths: 'no headroom', unmeasured -- but with
    ``room_fail_stands`` (config; review round 9, F2) a 'follows' value (kind gap / rel) whose all-depth
    criterion fails is measured and fails (``room_fail_stands`` in the result)."""
    rinfo = None
    if room is not None and getattr(q, "depths", None):
        full = q
        q, rinfo = room_of(q, m, *room)
        if rinfo["masked"] and kind == "over":  # the reviewer's alternative, descriptive (F1)
            h_all = float(full(m, _collapse(m)))
            rinfo["excess_over_room"] = float(full(m, f)) / h_all if h_all > 0 else None
    v, ci = _boot(q, m, f, B, seed)
    own = crit.decide(v, ci)
    out = {"value": v, "ci95": list(ci), "outcome": own, "outcome_flow": own, "controls": {},
           "blocked_by": [], "measured": True,
           "outcome_margin": {s: own for s in margin_factors}}  # fmt: skip
    if controls and not np.all(np.isfinite(np.asarray(m, float)[:, 0])):
        out["missing_depth0"] = True
        return out
    diffs = {}
    for name in controls:
        x = (_still if name == "stand-still" else _collapse)(m)
        cv, cci = _boot(q, m, x, B, seed)
        ctl = {"value": cv, "ci95": list(cci), "outcome": crit.decide(cv, cci)}
        if margin is not None and (name == "stand-still" or collapse_pair):
            diffs[name] = _paired_boot(q, m, f, x, B, seed)
            ctl["paired"] = paired_outcome(
                kind,
                *diffs[name],
                margin,
                ctl["outcome"],
                rule=rule,
                against="standing still" if name == "stand-still" else "a collapse",
            )
        out["controls"][name] = ctl
    ss, col = out["controls"].get("stand-still"), out["controls"].get("collapse")
    if ss is not None and col is not None and "paired" in col and "paired" in ss:
        # the collapse's own paired test against the stand-still (F5): where it is 'better than standing
        # still' too, the flow's 'better than standing still' says nothing about following
        x_ss, x_col = _still(m), _collapse(m)
        cs = paired_outcome(kind, *_paired_boot(q, m, x_col, x_ss, B, seed), margin, ss["outcome"], rule=rule)
        col["vs_stand_still"] = cs
        if ss["paired"]["outcome"] == "holds" and cs["outcome"] == "holds":
            ss["paired"]["named"] = "closer than standing still, but so is a collapse"

    def decide(mg: float, names=("stand-still", "collapse")) -> str:
        tests = []
        for name, (dv, dci) in ((n, d) for n, d in diffs.items() if n in names):
            y = out["controls"][name]
            p = paired_outcome(kind, dv, dci, mg, y["outcome"], rule=rule)
            tests.append(p["outcome"] if name == "stand-still" else
                         "holds" if p["outcome"] == "holds" else "inconclusive")  # fmt: skip
        return _value_outcome(own, tests)

    if diffs:
        out["outcome"] = decide(margin)
        out["outcome_without_collapse"] = decide(margin, ("stand-still",))  # F6: 'would hold on its own'
        out["outcome_margin"] = {s: decide(margin * s) for s in margin_factors}
    if col is not None and col["outcome"] != "fails" and out["outcome"] != "fails":
        out["blocked_by"] = ["collapse"]
        out["measured"] = False
    if headroom is not None and kind == "over":  # review round 7, F3: the model's ceiling
        h = float(q(m, _collapse(m)))
        out["headroom"] = h
        if h < headroom and out["outcome"] != "holds":
            out["no_headroom"] = {"headroom": h, "threshold": float(headroom)}
            out["blocked_by"] = ["no headroom"]
            out["measured"] = False
    if rinfo is not None:  # review round 8, F1, F2: the depths with room
        out["room"] = rinfo
        if rinfo["masked"]:  # review round 14, F6: the value over all the summary's depths, beside it
            out["value_all_depths"] = float(full(m, f))
        if not rinfo["enough"] and out["measured"] and room_fail_stands and kind != "over":
            # review round 9, F2: a follow-claim's fail over all depths stands; the value and every control
            # scored again on that all-depth quantity (review round 10, F4: not the kept depths' controls)
            whole = scored(full, m, f, crit, B, seed, controls, kind=kind, margin=margin, rule=rule,
                           margin_factors=margin_factors, collapse_pair=collapse_pair,
                           collapse_eps=collapse_eps, headroom=headroom)  # fmt: skip
            if whole["outcome_flow"] == "fails" and whole["measured"]:
                whole["room"] = rinfo
                whole["room_fail_stands"] = {
                    "value": whole["value"], "ci95": list(whole["ci95"]),
                    "depths_with_room": len(rinfo["kept"]), "depths": len(rinfo["depths"]),
                    "min_depths": rinfo["min_depths"], "rule": "config room_fail_stands (review round 9, F2)"}
                return whole
        if not rinfo["enough"] and out["measured"]:  # an earlier reason first
            out["no_headroom"] = {"headroom": float(np.mean(rinfo["room"])), "threshold": rinfo["threshold"],
                                  "depths_with_room": len(rinfo["kept"]), "depths": len(rinfo["depths"]),
                                  "min_depths": rinfo["min_depths"]}  # fmt: skip
            out["blocked_by"] = ["no headroom"]
            out["measured"] = False
    if collapse_eps is not None and "collapse" in diffs:  # review round 7, F6 (ii): the collapse's value
        lo, hi = diffs["collapse"][1]
        if -collapse_eps <= lo and hi <= collapse_eps:
            out["is_collapse"] = {"flow_minus_collapse": float(diffs["collapse"][0]), "ci95": [lo, hi],
                                  "eps": float(collapse_eps)}  # fmt: skip
            out["blocked_by"] = ["collapse"]
            out["measured"] = False
    return out


def _describe(x: dict) -> str:
    """One value's controls in words (the notes and the 'unmeasured' list)."""
    parts = []
    for n, y in x["controls"].items():
        t = f"{n} {y['value']:.3f} [{y['ci95'][0]:.3f}, {y['ci95'][1]:.3f}] {y['outcome']}"
        if "paired" in y:
            p = y["paired"]
            t += (f"; flow - {n} {p['value']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]: "
                  f"{p['named']} (margin {p['margin']:g})")  # fmt: skip
        parts.append(t)
    return "; ".join(parts)


def _k_tag(p) -> str:
    """' (K = 4)': the step count a check's value was computed at, where its pair carries one (review round
    14, F6)."""
    K = getattr(p, "K", None)
    return "" if K is None else f" (K = {K})"


def _over_room(x: dict) -> str:
    """Where a value is taken over the depths with room only: which depths, and its value over all the
    summary's depths (review round 14, F6); '' otherwise."""
    if "value_all_depths" not in x or not x["room"]["kept"]:
        return ""
    kept, dep = x["room"]["kept"], x["room"]["depths"]
    span = f"{dep[0]}..{dep[-1]}" if len(dep) > 1 else f"{dep[0]}"
    return (f" over depth{'s' * (len(kept) > 1)} {', '.join(map(str, kept))}, the {len(kept)} with room (all "
            f"depths {span}: {x['value_all_depths']:.3f})")


def _check(rob: list, crit: Criterion, q, B: int, seed: int, choice: str, values, pairs, controls=(),
           log: dict | None = None, qs=None, *, kind: str = "over", margin: float | None = None,
           unmeasured: list | None = None, rule: str = "symmetric", rob_alt: dict | None = None,
           collapse_pair: bool = False, unmeasured_outcomes: list | None = None,
           collapse_eps: float | None = None, headroom: float | None = None,
           room: tuple | None = None, room_fail_stands: bool = False) -> None:  # fmt: skip
    """Append the robustness check ``choice``: q (or ``qs[i]`` for the i-th value) with its bootstrap
    interval for each (ref, flow) pair, each value's outcome decided with its own controls
    (:func:`scored`). Review round 5, F4: a value that its collapse control makes unmeasured leaves the
    check (it is listed in ``unmeasured`` with its reason, its outcome without the collapse rule in
    ``unmeasured_outcomes``, not entered as inconclusive); a check with no measured value is left out.
    ``rob_alt`` (margin factor -> list; review round 6, F1): the same check with every value decided at the
    margin times that factor. ``log`` (choice -> per value: value, outcomes, controls) keeps what the
    controls did."""
    qs = [q] * len(pairs) if qs is None else qs
    factors = tuple(rob_alt or ())
    xs = [scored(qq, *p, crit, B, seed, controls, kind=kind, margin=margin, rule=rule, margin_factors=factors,
                 collapse_pair=collapse_pair, collapse_eps=collapse_eps, headroom=headroom, room=room,
                 room_fail_stands=room_fail_stands)
          for qq, p in zip(qs, pairs, strict=True)]  # fmt: skip
    keep = [i for i, x in enumerate(xs) if x["measured"]]
    if unmeasured is not None:
        unmeasured.extend(
            (f"{choice} {values[i]}{_k_tag(pairs[i])}: {xs[i]['value']:.3f} ({xs[i]['outcome_flow']} by the "
             "criterion) is the "
             f"collapse's value: flow - collapse {xs[i]['is_collapse']['flow_minus_collapse']:+.3f} "
             f"[{xs[i]['is_collapse']['ci95'][0]:+.3f}, {xs[i]['is_collapse']['ci95'][1]:+.3f}] within "
             f"+-{xs[i]['is_collapse']['eps']:g}: unmeasured (collapses; review round 7, F6)")
            if xs[i].get("is_collapse") else
            (f"{choice} {values[i]}{_k_tag(pairs[i])}: {xs[i]['value']:.3f}{_over_room(xs[i])} "
             f"({xs[i]['outcome']}): no headroom, " + no_room_text(xs[i]["no_headroom"], kind))
            if xs[i].get("no_headroom") else
            f"{choice} {values[i]}{_k_tag(pairs[i])}: {xs[i]['value']:.3f} ({xs[i]['outcome_flow']} by the "
            "criterion), because "
            f"the collapse control does not fail there ({_describe(xs[i])}): the criterion cannot tell the "
            "flow from a collapse"
            for i in range(len(xs)) if i not in keep
        )  # fmt: skip
    if unmeasured_outcomes is not None:
        unmeasured_outcomes.extend(
            xs[i].get("outcome_without_collapse", xs[i]["outcome"]) for i in range(len(xs)) if i not in keep
        )
    if keep:
        rob.append(RobustnessCheck.from_values(
            crit, choice, [values[i] for i in keep], [xs[i]["value"] for i in keep],
            ci95=[xs[i]["ci95"] for i in keep], outcomes=[xs[i]["outcome"] for i in keep]))  # fmt: skip
        for s, lst in (rob_alt or {}).items():
            lst.append(RobustnessCheck.from_values(
                crit, choice, [values[i] for i in keep], [xs[i]["value"] for i in keep],
                ci95=[xs[i]["ci95"] for i in keep],
                outcomes=[xs[i]["outcome_margin"][s] for i in keep]))  # fmt: skip
    if log is not None and controls:
        log[choice] = [
            {"choice_value": val, "value": x["value"], "outcome": x["outcome"],
             "outcome_flow": x["outcome_flow"], "measured": x["measured"],
             **({"K": p.K} if getattr(p, "K", None) is not None else {}),
             **({"depths": x["room"]["kept"], "value_all_depths": x["value_all_depths"]}
                if "value_all_depths" in x else {}),
             **({"outcome_without_collapse": x["outcome_without_collapse"]}
                if "outcome_without_collapse" in x else {}),
             **({"missing_depth0": True} if x.get("missing_depth0") else {}),
             **({"no_headroom": True} if x.get("no_headroom") else {}),
             **({"outcome_margin": {f"x{s:g}": o for s, o in x["outcome_margin"].items()}}
                if x["outcome_margin"] else {}),
             "controls": {n: {k: y[k] for k in ("value", "outcome", "paired", "vs_stand_still") if k in y}
                          for n, y in x["controls"].items()}}
            for val, x, p in zip(values, xs, pairs, strict=True)
        ]  # fmt: skip


def records(summary: dict, config: FlowsConfig, results: dict[str, dict] | None = None) -> list:
    """The verdict records of every family (ids ``flows-<family>-<verdict>``; :data:`VERDICTS`), from the
    families' results or (None) from the per-sentence data the summary keeps (``verdict_data``)."""
    c = config
    if results is None:
        results = {f: {**s["verdict_data"], "model": s["model"]} for f, s in summary["families"].items()}
    k_main = c.thresholds.index(min(c.thresholds, key=lambda t: abs(t - c.cluster_threshold)))
    out = []
    src_text = ("issue 26 part 3 (flows that explain the layers); flows: docs/real_models.md; 2605.18870, "
                "eq. (10) for the attention flow")  # fmt: skip
    # review round 6, F4: a flow is converged only when every quantity of it is; where a family's first build
    # finds a flow converged in some records and not in others, the family is built again with that flow
    # marked (the same records in the same order, so the same bootstrap seeds)
    todo = [(fam, res, {}) for fam, res in results.items()]
    while todo:
        fam, res, flow_bad = todo.pop(0)
        n0 = len(out)
        S = len(res["tokens"])
        A, B = _halves(S, c.split_seeds[0])
        name = res["model"]["name"]
        sat = saturated_radii(res, c)
        alts = [e for e in res.get("scale_alt") or {} if e != c.scale_estimator]
        steps = [int(K) for K in res.get("steps_alt") or {}]
        lad = res.get("step_ladder")
        if lad:  # the step rule (F2): the rungs computed, their values, the chosen K (what the run used)
            Ks_all = sorted(int(K) for K in lad["levels"])
            lad_vals = {K: step_values(res, c, K) for K in Ks_all}
            lad_tol = step_tolerances(c)
        z0 = {}
        for choice, vals in (res.get("variants") or {}).items():  # a null's seeds: z_0's mean cosine each
            if choice in NULL_CHECK.values():
                cos0 = {str(c.null_seeds[0]): res["stats"]["sphere"]["model"]["cos"],
                        **{x: d["sphere"]["model"]["cos"] for x, d in vals.items()}}  # fmt: skip
                z0 = {
                    "check": choice,
                    "mean_cos_z0": {x: float(np.asarray(a, float)[:, 0].mean()) for x, a in cos0.items()},
                }
        # pre-LN: (f) is (a) bit for bit, so the records that still test (f) -- against (n), or inside (g) --
        # must say that no LayerNorm frame acts (review 2 of issue 26 part 3: their statements claimed frames)
        f_is_a = "frames" in res["stats"]["sphere"] and _same_flow(res, "frames", "attention")
        flow_conv: dict[str, dict[str, tuple | None]] = {}  # flow -> vid -> None / (K, why not)
        for vid, flow, ref, stat, kind, field, what in VERDICTS:
            if any(src not in res["stats"]["sphere"] for src in (flow, ref) if src != "fitted_time"):
                continue  # a summary older than the flow (round-2 random SmolLM2 predates (n), (f), (g))
            q = _quantity(kind)
            # review round 11, F1: in a pre-LN model the flows run at the full model's stream scale, (n) on
            # its own
            scale_mismatch = c.scale_source_rule and ref == "no_mlp" and (res.get("model") or {}).get(
                "arch") == "pre_ln"  # fmt: skip
            if flow == "fitted_time" and c.statement_names_fit:  # review round 11, F3, F8
                what = FITTED_STATEMENT
            if f_is_a and flow in ("frames", "frames_mlp") and not (flow in _IDENTITIES and ref == "model"):
                why = _identity_why(res, "frames").split(", so")[0]
                what += f" -- here flow (f) is flow (a) bit for bit (no LayerNorm frame acts: {why})"
                if flow == "frames_mlp":
                    what += "; (g) is flow (a) then the MLP flow in each layer"
            if scale_mismatch:
                what += (" -- the flow divides by the full model's stream scale rho_l (its "
                         f"'{c.scale_estimator}' token norm), while (n) runs on its own stream, without the "
                         "MLPs' writes (config scale_source_rule; review rounds 11, 13)")  # fmt: skip
            if flow in _IDENTITIES and ref == "model" and _same_flow(res, flow, _IDENTITIES[flow][0]):
                out.append(record_identity(
                    id=f"flows-{fam}-{vid}", statement=f"{name}: {what}", source=src_text,
                    why=f"flow {LABELS[flow][:3]} is flow {LABELS[_IDENTITIES[flow][0]][:3]} bit for bit on "
                    f"every sentence and representation: {_identity_why(res, flow)}",
                    result={"same_as": f"flows-{fam}-{_IDENTITIES[flow][0]}-overclusters"},
                ))  # fmt: skip
                continue
            crit = Criterion(
                quantity=_QUANT[kind].format(stat={"cos": "cosine", "clusters": "cluster count",
                                                   "erank": "effective rank"}[stat], ref=_REF[ref])
                + (f" (clusters at {c.thresholds[k_main]:g} rad)" if stat == "clusters" else "")
                + ", sphere tokens",
                op=_OPS[kind], threshold=float(getattr(c, field)), declared_in=f"config: {field}",
                note="declared in the config before the data (commit 'real_model_flows: config, criteria'; "
                "the (n), (f), (g) records reuse the same fields)",
            )  # fmt: skip
            if stat == "clusters" and c.thresholds[k_main] in sat:
                m, f = _pair(res, flow, stat, "sphere", k=k_main, ref=ref)
                out.append(record_description(
                    id=f"flows-{fam}-{vid}", statement=f"{name}: {what} -- not decided: the model's count at "
                    f"the declared radius {c.thresholds[k_main]:g} rad is saturated (config "
                    "saturation_tolerance, saturation_depth_share)", source=src_text,
                    result={"value": q(m, f), "saturated_radii": sat},
                ))  # fmt: skip
                continue
            k = k_main if stat == "clusters" else None
            seed = c.seed + len(out)
            ctl = controls_of(kind, c)
            watched, lad_pair = bool(lad) and flow in (*STEP_FLOWS, "fitted_time"), None
            if watched:  # the step rule per flow (config step_per_flow): this flow's K and rungs
                Kc = _k_of(lad["chosen"], flow)
                Ks = [K for K in Ks_all if vid in lad_vals[K]]
                watched = Kc in Ks
            if watched:
                i = Ks.index(Kc)
                lad_pair = (
                    (Ks[i], Ks[i + 1]) if i + 1 < len(Ks) else (Ks[-2], Ks[-1]) if len(Ks) > 1 else None
                )
            # review round 4, F4: the main value at the finest rung computed (the ladder's sphere tokens,
            # all sentences / the main split's fit); None: the stored flows at the run's step
            Kf = Ks[-1] if watched and lad_pair is not None and Ks[-1] != Kc else None
            pair0 = partial(_pair, res, flow, stat, k=k, ref=ref)

            def pair(rep, Kf=Kf, pair0=pair0, flow=flow, Kr=Kc if watched else None, **kw):
                if Kf is not None and rep == REPS[0] and set(kw) <= {"idx", "k", "j"} and not kw.get("j"):
                    if not (flow == "fitted_time" and "idx" in kw):
                        kw = {x: y for x, y in kw.items() if x != "j"} | {"steps": Kf}
                # review round 14, F6: each value carries the step count it was computed at, where known
                return StepPair(pair0(rep, **kw), kw.get("steps", Kr))

            main_pair = pair("sphere")
            v, ci = _boot(q, *main_pair, c.bootstrap, seed)
            rob, ctl_log = [], {}

            margin = float(getattr(c, _MARGIN[kind])) if c.stand_still_control else None
            unmeasured, unmeasured_o = [], []
            factors = tuple(c.control_margin_variants) if margin is not None else ()
            rob_alt = {s: [] for s in factors}  # F1 (review round 6): every value at margin x factor
            cpair = c.collapse_outcome and kind in ("gap", "rel")
            scoring = {"kind": kind, "margin": margin, "rule": c.control_paired_rule,
                       "collapse_pair": cpair,
                       "headroom": float(getattr(c, field)) if kind == "over" and c.headroom_rule else None,
                       "room": (float(getattr(c, field)), c.room_min_depth_share) if c.room_per_depth and (
                           kind == "over" or (kind == "gap" and stat == "cos")) else None,
                       "room_fail_stands": c.room_fail_stands,
                       "collapse_eps": c.step_tolerance_share * margin
                       if cpair and c.collapse_symmetric and margin is not None else None}  # fmt: skip
            check = partial(_check, rob, crit, q, c.bootstrap, seed, controls=ctl, log=ctl_log,
                            unmeasured=unmeasured, unmeasured_outcomes=unmeasured_o, rob_alt=rob_alt,
                            **scoring)  # fmt: skip

            check("representation", REPS, [pair(r) for r in REPS])
            if flow == "fitted_time":
                check("time-fit split", [f"seed {f['split_seed']} {f['direction']}" for f in res["fitted"]],
                      [pair("sphere", j=j) for j in range(len(res["fitted"]))])  # fmt: skip
                n_used, how = len(res["fitted"][0]["report"]), "report half of the main split"
            else:
                check("corpus subsample", ["half A", "half B"], [pair("sphere", idx=h) for h in (A, B)])
                n_used, how = S, "all sentences of the subsample"
            check(
                "depth summary",
                [f"{_DEPTHS[d]}, {_REP_NAME[r]}" for d, r in _DEPTH_CHECK],
                [pair(r) for _, r in _DEPTH_CHECK],
                qs=[_quantity(kind, d) for d, _ in _DEPTH_CHECK],
            )
            if steps and flow in (*STEP_FLOWS, "fitted_time"):  # (n) is a discrete network: no step
                check("step count", [c.steps_per_layer, *steps],
                      [pair("sphere"), *[pair("sphere", steps=K) for K in steps]])  # fmt: skip
            for choice, vals in (res.get("variants") or {}).items():  # joined sentences, null seed
                main = 1 if choice in ("sentence length", "joined sentences") else c.null_seeds[0]
                check(choice, [main, *[int(x) for x in vals]],
                      [pair("sphere"), *[pair("sphere", var=(choice, x)) for x in vals]])  # fmt: skip
            if alts and (flow in SCALE_FLOWS or ref in SCALE_FLOWS):
                check("scale estimator", [f"{c.scale_estimator} (declared)", *alts],
                      [pair("sphere"), *[pair("sphere", est=e) for e in alts]])  # fmt: skip
            aj = res.get("after_jump") if c.after_jump_check else None
            m_all = _arr(res, "sphere", ref, stat, k)
            after = None
            if aj and kind in ("gap", "rel") and flow in aj["sphere"] and aj["start_depth"] < m_all.shape[1]:
                st = aj["start_depth"]  # review round 8: the jump layers from the network, depths st..L
                fa = np.asarray(aj["sphere"][flow][stat], float)
                after = (m_all[:, st - 1 :], (fa[..., k] if stat == "clusters" else fa)[:, st - 1 :])
                check("after jump", ["every layer a flow, depths 1..L (declared)",
                                     f"layers {aj['layers']} from the network, depths {st}..L"],
                      [pair("sphere"), after])  # fmt: skip
            extra = {}
            if after is not None:
                extra["after_jump"] = {
                    "layers": aj["layers"], "start_depth": aj["start_depth"], "value": q(*after),
                    "rule": "config after_jump_check (2026-12-04 round 8; review round 7, F1 (ii)): the jump "
                    "layers taken from the network, the record's quantity over depths start_depth..L",
                }  # fmt: skip
            if z0:
                extra["null_seed_z0"] = z0
            notes = []
            if stat == "clusters":
                keep = [i for i, t in enumerate(c.thresholds) if t not in sat]
                check("cluster radius", [c.thresholds[i] for i in keep], [pair("sphere", k=i) for i in keep])
                extra |= {"saturated_radii": sat,
                         "saturation_rule": "model's mean count <= 1 + saturation_tolerance or >= (1 - "
                         "saturation_tolerance) n at more than saturation_depth_share of the depths 1..L: "
                         "reported, not tested (declared after the review)"}  # fmt: skip
            step_bad = None
            if watched:
                a, b = lad_pair if lad_pair is not None else (Kc, None)
                move = None if b is None else abs(lad_vals[b][vid] - lad_vals[a][vid])
                # F4 (review round 4): the outcome (value and interval under the criterion) at both rungs
                outs = {}
                for K in (a, b) if b is not None else ():
                    kv, kci = _boot(q, *pair0("sphere", steps=K), c.bootstrap, seed)
                    outs[K] = {"value": kv, "ci95": list(kci), "outcome": crit.decide(kv, kci)}
                same = b is not None and outs[a]["outcome"] == outs[b]["outcome"]
                conv = move is not None and move < lad_tol[vid] and same
                extra["step_ladder"] = {
                    "K": Ks, "values": [lad_vals[K][vid] for K in Ks], "chosen": Kc,
                    "move": move, "between": None if lad_pair is None else list(lad_pair),
                    "tolerance": lad_tol[vid], "converged": conv,
                    "outcomes": {str(K): x for K, x in outs.items()},
                    "reported_K": Ks[-1] if Kf is not None else Kc,
                    "cpu_s": {str(K): lad["cpu_s"][str(K)] for K in Ks},
                    "rule": "config step_candidates / step_tolerance_share: the family's step is the "
                    "smallest candidate K whose move to the next one is < share x threshold for every "
                    "watched quantity; amended after review round 4 (F4): converged only if the outcome "
                    "is also the same at K and at the next rung; the main value is reported at the finest "
                    "rung computed (reported_K)",
                }  # fmt: skip
                flow_conv.setdefault(flow, {})[vid] = None
                if not conv:
                    why = ("no next rung" if move is None else
                           f"moved the value by {move:.3f}" + (" >=" if move >= lad_tol[vid] else " <")
                           + f" {lad_tol[vid]:g}" + ("" if same else f", outcome {outs[a]['outcome']} -> "
                                                     f"{outs[b]['outcome']}"))  # fmt: skip
                    step_bad = (f"step not converged at K = {b if b is not None else a}: K = {a} -> {b} "
                                f"{why} (tolerance {lad_tol[vid]:g}; review round 4, F4: the outcome must "
                                "not change either; config step_candidates)")  # fmt: skip
                    flow_conv[flow][vid] = (b if b is not None else a, f"{vid}: K = {a} -> {b} {why}")
                extra["robustness_K"] = {
                    "main value": Kf or Kc,
                    "checks on the ladder's data (sphere tokens: corpus halves, depth summaries on sphere "
                    "tokens, cluster radii, the main fit) and the stand-still margin (the main value at "
                    "other margins)": Kf or Kc,
                    "the other checks (hidden states, other fits, joined sentences, null seeds, scale "
                    "estimator), except their first value, the declared choice, which is the main value":
                    Kc,
                    "per value": "controls_per_value[choice][i].K (review round 15, F4)",
                }  # fmt: skip
                if Kf is not None:
                    notes.append(
                        f"main value at the finest rung computed, K = {Kf} (review round 4, F4; the run's "
                        f"step K = {Kc}); the values of the checks on the ladder's data (sphere tokens: "
                        f"corpus halves, depth summaries on sphere tokens, the main fit) and of the "
                        f"stand-still margin are at K = {Kf}, the others "
                        f"(hidden states, the other fits, joined sentences, null seeds, scale estimator) at "
                        f"K = {Kc} except their first value (the declared choice: the main value), so they "
                        "may disagree with the main value by the step's move"
                        + ("" if move is None else f" ({move:.3f} here)"))  # fmt: skip
            if step_bad is None and not lad and steps and flow in (*STEP_FLOWS, "fitted_time"):
                # a run without the step rule (review round 5, F6): its check "step count" is the ladder it
                # has; a value that moves by >= the tolerance, or changes outcome, to the largest step is
                # not reported at the run's step: the record is inconclusive "step not converged"
                K1 = max(steps)
                v1, ci1 = _boot(q, *pair("sphere", steps=K1), c.bootstrap, seed)
                tol1 = step_tolerances(c)[vid]
                o0, o1 = crit.decide(v, ci), crit.decide(v1, ci1)
                flow_conv.setdefault(flow, {})[vid] = None
                if abs(v1 - v) >= tol1 or o0 != o1:
                    step_bad = (f"step not converged at K = {K1}: the run's K = {c.steps_per_layer} -> "
                                f"{K1} moved the value {v:.3f} -> {v1:.3f} (tolerance {tol1:g}), outcome "
                                f"{o0} -> {o1} (a run without the step rule; round 5, F6)")  # fmt: skip
                    flow_conv[flow][vid] = (K1, f"{vid}: K = {c.steps_per_layer} -> {K1} moved the value "
                                                f"{v:.3f} -> {v1:.3f} (tolerance {tol1:g})")  # fmt: skip
                    extra["step_unconverged"] = {"K": [c.steps_per_layer, K1], "values": [v, v1],
                                                 "outcomes": [o0, o1], "tolerance": tol1}  # fmt: skip
            if step_bad is None and flow in flow_bad:  # F4 (review round 6): per flow, as declared
                Kb, other = flow_bad[flow]
                step_bad = (f"step not converged at K = {Kb}: flow {LABELS[flow][:3]} has not converged "
                            f"({other}); review round 6, F4: a flow is converged only when every quantity "
                            "of it is (config step_per_flow)")  # fmt: skip
            if flow == "fitted_time" and res.get("fitted_free") is not None:
                fv, fci = _boot(q, *pair("sphere", free=True), c.bootstrap, seed)
                extra["free_running_fit"] = {
                    "value": fv, "ci95": list(fci), "outcome": crit.decide(fv, fci),
                    "times": np.asarray(res["fitted_free"].get("times", []), float).tolist(),
                    "note": "T_l fitted to the mean cosine profile on the fit half of the same sentences, "
                    "the quantity this record tests: a description, not a robustness value (review 3, F3)",
                }  # fmt: skip
                if c.free_running_description:  # review round 7, F8: L parameters for L numbers
                    fr = extra["free_running_fit"]
                    del fr["outcome"]
                    fr["class"] = "description"
                    fr["why"] = (
                        f"{len(fr['times'])} times fitted to the {len(fr['times'])} numbers of the fit "
                        "half's mean-cosine profile, which the report half repeats to about 0.01: it can "
                        "fail only where the flow cannot lower the cosine, so it is a description, not a "
                        "test; the teacher-forced fit (this record's value) is the test (config "
                        "free_running_description; review round 7, F8)")  # fmt: skip
                    notes.append(f"free-running fit {fv:.3f}: a description ({fr['why']})")
            ms = scored(q, *main_pair, crit, c.bootstrap, seed, ctl, margin_factors=factors, **scoring)
            main, main_flow = ms["outcome"], ms["outcome_flow"]
            q_main = q
            shown = f"{v:.3f}"  # the value beside main_flow in the notes (review round 12, F2)
            if ms.get("room"):  # review round 8, F1, F2: the value over the depths with room
                extra["room_per_depth"] = ms["room"]
                if ms["room"]["masked"] and ms["room"]["enough"]:
                    q_main = room_of(q, main_pair[0], *scoring["room"])[0]
                    notes.append(f"value over the depths with room {ms['room']['kept']} only (declared: "
                                 f"{v:.3f} over {ms['room']['depths']}; config room_per_depth; review round "
                                 "8, F1, F2)")  # fmt: skip
                    extra["value_all_depths"] = v
                    v, ci = ms["value"], tuple(ms["ci95"])
                    shown = f"{v:.3f}"  # review round 15, F1: the value whose outcome is reported
                elif ms["room"]["masked"] and not ms.get("room_fail_stands") and c.room_value_named:
                    # review rounds 12 (F2) and 13 (F2): too few depths with room: the value stays the
                    # declared one; the value whose outcome is reported (over the depths with room) is named
                    rr = ms["room"]
                    extra["value_over_room"] = {"value": ms["value"], "ci95": list(ms["ci95"]),
                                                "depths": rr["kept"], "outcome": main_flow}  # fmt: skip
                    shown = (f"{ms['value']:.3f} over the depths with room {rr['kept']} (the declared value "
                             f"over {rr['depths']}: {v:.3f})")  # fmt: skip
                if ms["room"].get("excess_over_room") is not None:
                    extra["excess_over_room"] = ms["room"]["excess_over_room"]
            if ms.get("room_fail_stands"):  # review round 9, F2
                rf = ms["room_fail_stands"]
                extra["room_fail_stands"] = rf
                notes.append(f"only {rf['depths_with_room']} of {rf['depths']} depths have room (at least "
                             f"{rf['min_depths']} needed), but the value fails over all depths "
                             f"({rf['value']:.3f} [{rf['ci95'][0]:.3f}, {rf['ci95'][1]:.3f}]): a reference "
                             "with no room voids a 'holds', and a fail over its depths with room alone, not "
                             "a fail over all depths (config room_fail_stands; review round 9, F2; round "
                             "14, F2)")  # fmt: skip
            fit_why = None
            if c.fit_grid_check and flow == "fitted_time" and kind in ("gap", "rel") and main == "fails":
                # review round 9, F1: the fit's own grid holds T = 0 (standing still) and T = 1 (flow (a))
                fit_why, grid = fit_grid_reading(res, main_pair[0], q_main, ms, stat, k, Kf, crit,
                                                 c.bootstrap, seed, f=main_pair[1])
                extra["fit_grid"] = grid
                if fit_why is None:
                    notes.append(grid["reading"] + " (config fit_grid_check; review rounds 9 and 10, F1)")
            collapsed = None
            if cpair and "collapse" in ms["controls"]:  # F4 (review round 6): the outcome 'collapses'
                Kr = Kf or (Kc if watched else res.get("step", c.steps_per_layer))
                fcos = np.asarray(_pair(res, flow, "cos", "sphere", k=None, ref=ref,
                                        **({"steps": Kf} if Kf else {}))[1], float)  # fmt: skip
                d1 = float(np.mean(fcos[:, 1]))
                if d1 >= c.collapse_depth1_cos:
                    cc = ms["controls"]["collapse"]
                    same_as = ci[0] <= cc["ci95"][1] and cc["ci95"][0] <= ci[1]
                    extra["flow_collapses"] = {
                        "depth1_mean_cos": d1, "K": Kr if not isinstance(Kr, dict) else _k_of(Kr, flow),
                        "value_equals_collapse": bool(same_as), "collapse": cc["value"],
                        "collapse_ci95": cc["ci95"],
                        "rule": "config collapse_outcome, collapse_depth1_cos (review round 6, F4)",
                    }  # fmt: skip
                    if same_as:
                        collapsed = "fails" if cc["outcome"] == "fails" else "inconclusive"
                        if c.collapse_symmetric:  # review round 7, F6 (i): unmeasured whichever way
                            collapsed = "unmeasured"
                        notes.append(
                            f"collapses: the flow drives every token to one point (depth-1 mean cosine "
                            f"{d1:.3f}; the value {v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}] is the collapse "
                            f"control's {cc['value']:.3f} [{cc['ci95'][0]:.3f}, {cc['ci95'][1]:.3f}], "
                            f"which {cc['outcome']} the criterion): reported whatever the step (a value "
                            "cannot move past the collapse); the record's checks are kept apart "
                            "(review round 6, F4)")  # fmt: skip
                        main = "inconclusive" if collapsed == "unmeasured" else collapsed
                    elif main == "holds":
                        main = "inconclusive"
                        notes.append(f"the flow collapses (depth-1 mean cosine {d1:.3f}): a 'follows' record "
                                     "whose flow collapses cannot hold (review round 6, F4)")  # fmt: skip
            if collapsed is None and ms.get("is_collapse"):  # review round 7, F6 (ii): the main value
                collapsed, main = "unmeasured", "inconclusive"
                ic = ms["is_collapse"]
                notes.append(
                    f"collapses: the value {v:.3f} is the collapse control's (flow - collapse "
                    f"{ic['flow_minus_collapse']:+.3f} [{ic['ci95'][0]:+.3f}, {ic['ci95'][1]:+.3f}] within "
                    f"+-{ic['eps']:g}): unmeasured whichever way the criterion goes (review round 7, F6; "
                    "config collapse_symmetric)")  # fmt: skip
                extra["value_is_collapse"] = ic
            jump_why = None
            tab = res.get("mlp_layers")
            if kind in ("gap", "rel") and flow in ("mlp", "frames_mlp") and mlp_jumps(tab, c.mlp_jump_factor):
                jl = mlp_jumps(
                    tab, c.mlp_jump_factor
                )  # review round 7, F1: the MLP layers with no small step
                fc = np.asarray(_pair(res, flow, "cos", "sphere", k=None, ref=ref,
                                      **({"steps": Kf} if Kf else {}))[1], float).mean(0)  # fmt: skip
                # the turn after T = 1 is None where the table was made without that integration (K = 0:
                # the study's own run, review round 7, F1)
                a1 = tab.get("flow_angle_T1") or [None] * len(tab["network_angle"])
                only = jl[0] == 0 and bool(np.all(fc[1:] >= c.collapse_depth1_cos))
                extra["mlp_jump"] = {
                    "layers": jl, "factor": c.mlp_jump_factor,
                    "flow_speed": [tab["flow_speed"][i] for i in jl],
                    "network_angle": [tab["network_angle"][i] for i in jl],
                    "flow_angle_T1": [a1[i] for i in jl],
                    "flow_mean_cos_per_depth": fc.tolist(), "decided_only_through_jumps": only,
                    "rule": "config mlp_jump_factor (review round 7, F1)",
                }  # fmt: skip
                j = jl[0]
                head = (f"layer {j}'s MLP is a jump ({tab['flow_speed'][j]:.1f} rad per unit time against "
                        f"{tab['network_angle'][j]:.2f})")  # fmt: skip
                rng_ = summary.get("mlp_factor_range") if c.mlp_jump_reading else None
                if rng_:
                    extra["mlp_jump"]["factor_range_same_layers"] = rng_
                extra["mlp_jump"]["flow_angle_T1_over_network"] = [
                    None if a1[i] is None or not tab["network_angle"][i] else a1[i] / tab["network_angle"][i]
                    for i in jl]  # fmt: skip
                if only and c.mlp_jump_reading:  # review round 8, F4: like with like
                    m1 = float(np.asarray(_pair(res, flow, "cos", "sphere", k=None, ref=ref)[0], float)[:, 1]
                               .mean())  # the reference's mean cosine (not the record's statistic)
                    na = tab["network_angle"][j]
                    turn = (
                        f"after one unit of time layer {j}'s MLP flow turns each token by {a1[j]:.2f} rad, "
                        f"the network by {na:.2f}" if a1[j] is not None else
                        f"the network turns each token by {na:.2f} rad in layer {j} (the flow's turn after "
                        "one unit of time is not in this run's table: made at K = 0)")  # fmt: skip
                    rr = (f"; any mlp_jump_factor in ({rng_['low']:.2f}, {rng_['high']:.2f}) flags the same "
                          "layers in every family" if rng_ else "")  # fmt: skip
                    jump_why = (
                        f"unmeasured (collapses at layer {j}): {turn}; the direction differs: every token "
                        f"goes to one point (depth-1 mean cosine {fc[1]:.3f} against the model's {m1:.3f})"
                        f" -- its speed as t -> 0 ({tab['flow_speed'][j]:.1f} rad per unit time) exceeds "
                        f"{c.mlp_jump_factor:g} x the network's turn{rr}; from depth 1 on the flow sits at "
                        f"that field's sink (mean cosine >= {c.collapse_depth1_cos:g} at every depth): the "
                        "record is decided by that layer alone (config mlp_jump_factor, mlp_jump_reading; "
                        "review round 7, F1; round 8, F4)")  # fmt: skip
                elif only:
                    jump_why = (
                        f"{head}: the flow's displacement per unit time exceeds {c.mlp_jump_factor:g} x "
                        "the network's turn, so the flow has no small-step limit at T_l = 1 there, and "
                        "from depth 1 on the flow sits at that field's sink (mean cosine >= "
                        f"{c.collapse_depth1_cos:g} at every depth): the record is decided by that layer "
                        "alone (config mlp_jump_factor; review round 7, F1)")  # fmt: skip
                else:
                    notes.append(f"{head}; jump layers {jl} (config mlp_jump_factor; review round 7, F1): "
                                 "the record is not decided by them alone")  # fmt: skip
            if ctl:
                if c.stand_still_control:
                    ss = stand_still(*main_pair, q=q_main, B=c.bootstrap, seed=seed)
                    ss["outcome"] = crit.decide(ss["value"], ss["ci95"])
                    if "paired" in ms["controls"].get("stand-still", {}):
                        ss["paired_test"] = ms["controls"]["stand-still"]["paired"]
                    if kind != "over":  # F3 (review round 4): descriptive
                        ss["gap_ratio_flow_over_stand_still"] = v / ss["value"] if ss["value"] else None
                    extra["stand_still"] = ss
                    if kind != "over" and margin is not None and c.holds_reachable_check:  # round 11, F5
                        extra["holds_reachable"] = holds_reachable(*main_pair, q=q_main, B=c.bootstrap,
                                                                   seed=seed, margin=margin)  # fmt: skip
                        hr, rr = extra["holds_reachable"], ms.get("room")
                        if hr["reachable"] and rr and rr["masked"] and not rr["enough"]:  # round 13, F3
                            hr["reachable"] = False
                            hr["short"] = (f"only {len(rr['kept'])} of {len(rr['depths'])} depths have room, "
                                           f"{rr['min_depths']} needed: a value can only fail or be void")
                            hr["reading"] = (f"could not have held: {hr['short']} (config "
                                             "holds_reachable_check, room_per_depth; review round 13, "
                                             "F3)")  # fmt: skip
                        if not hr["reachable"]:
                            notes.append(hr["reading"])
                if "collapse" in ms["controls"]:
                    extra["collapse"] = ms["controls"]["collapse"]
                extra["controls_per_value"] = ctl_log
                extra["outcome_flow"] = main_flow
                if not ms.get("missing_depth0"):
                    notes.append(f"controls of the main value: {_describe(ms)}; the value {shown} is "
                                 f"{main_flow} by the criterion alone, {main} with its controls (review "
                                 "round 5: the paired stand-still test decides)")  # fmt: skip
                missing = [f"{ch} {x['choice_value']}" for ch, xs in ctl_log.items() for x in xs
                           if x.get("missing_depth0")]  # fmt: skip
                if missing or ms.get("missing_depth0"):
                    notes.append("no finite depth-0 statistic stored for " + ", ".join(
                        missing + (["the main value"] if ms.get("missing_depth0") else []))
                        + ": those values are decided by the criterion alone")  # fmt: skip
            # F5 (review round 5): a flow that fails fails before the null's description rule
            if null_base(fam) is not None and main != "fails" and ctl and not ms.get("missing_depth0"):
                blocked = [n for n, y in ms["controls"].items() if y["outcome"] != "fails"]
                if blocked:
                    like = " or ".join({"stand-still": "standing still", "collapse": "a collapse"}[n]
                                       for n in blocked)  # fmt: skip
                    out.append(record_description(
                        id=f"flows-{fam}-{vid}", statement=f"{name}: {what} -- not tested: in this "
                        f"null the {' and '.join(blocked)} control does not fail the criterion (config "
                        "stand_still_control, collapse_control)",
                        source=src_text, result={"value": v, "ci95": list(ci), "outcome_if_tested": main,
                                                 **extra},
                        notes=_describe(ms) + f": the criterion cannot tell this null's flow from {like}"
                        + ("; " + "; ".join(notes) if notes else ""),
                    ))  # fmt: skip
                    continue
            # F4 (review round 5): an unmeasured main value makes the record inconclusive with its reason;
            # unmeasured robustness values leave the combination and are listed. Review round 6, F4: a
            # value that is the collapse is reported as such whatever the step
            why_main = jump_why or fit_why or (step_bad if collapsed is None else None)
            if step_bad is not None and collapsed is not None:
                notes.append(f"the step rule alone would say: {step_bad}")
            if why_main is None and collapsed is None and ms.get("no_headroom"):  # review round 7, F3
                nh = ms["no_headroom"]
                why_main = (
                    f"no headroom (1 - the model's mean cosine {nh['headroom']:.3f} < {nh['threshold']:g}): "
                    f"no flow can exceed the model by the criterion's threshold, so the value {v:.3f} "
                    f"({main_flow} by the criterion) cannot fail the claim (config headroom_rule; review "
                    "round 7, F3)" if "depths_with_room" not in nh else
                    f"no headroom: {no_room_text(nh, kind)}, so the value {shown} ({main_flow} by the "
                    "criterion) does not test the claim")  # fmt: skip
                extra["no_headroom"] = nh
            elif why_main is None and collapsed is None and not ms["measured"]:
                why_main = (f"main value unmeasured: {v:.3f} ({main_flow} by the criterion), the collapse "
                            f"control does not fail there ({_describe(ms)}): the criterion cannot tell the "
                            "flow from a collapse")  # fmt: skip
            if unmeasured:
                extra["unmeasured"] = unmeasured
                extra["unmeasured_outcomes"] = unmeasured_o
                notes.append("unmeasured (left out of the combination; review round 5, F4): "
                             + "; ".join(unmeasured))  # fmt: skip
            if why_main is not None or collapsed is not None:
                extra = {**({"unmeasured_value": v, "unmeasured_ci95": list(ci), "outcome_if_measured": main,
                             "unmeasured_main": why_main} if why_main is not None else
                            {"collapses": "the flow drives every token to one point"}),
                         **extra,
                         "checks_not_combined": [x.model_dump(mode="json") for x in rob]}  # fmt: skip
                if why_main is not None:
                    notes.insert(0, f"inconclusive: {why_main}")
                rob = []
            elif factors and ctl and not ms.get("missing_depth0"):
                # F1 (review round 6): the margin is a robustness check of the main value; the whole record
                # at each factor (every value re-decided) is reported
                cap = "flow_collapses" in extra  # a 'follows' record whose flow collapses cannot hold

                def at(s, cap=cap, ms=ms):
                    o = ms["outcome_margin"][s]
                    return "inconclusive" if cap and o == "holds" else o

                labels = [f"x{s:g} ({margin * s:g})" for s in factors]
                extra["margin_variants"] = {
                    x: combine(at(s), rob_alt[s]) for x, s in zip(labels, factors, strict=True)
                }
                # review round 9, F7: a factor whose margin exceeds the criterion's threshold tests a stronger
                # claim than the one declared: reported (margin_variants), not combined
                thr = float(getattr(c, field))
                use = [i for i, s in enumerate(factors)
                       if not c.margin_within_threshold or margin * s <= thr + 1e-12]  # fmt: skip
                if len(use) < len(factors):
                    extra["margin_variants_not_combined"] = {
                        "variants": [labels[i] for i in range(len(factors)) if i not in use],
                        "why": f"the margin exceeds the criterion's threshold {thr:g}: a stronger claim than "
                        "the one declared (config margin_within_threshold; review round 9, F7)",
                    }
                if use:
                    rob.append(RobustnessCheck.from_values(
                        crit, "stand-still margin", [labels[i] for i in use], [v] * len(use),
                        ci95=[list(ci)] * len(use), outcomes=[at(factors[i]) for i in use]))  # fmt: skip
            if kind == "over" and ms.get("headroom") is not None:  # F3 (review round 7): the model's ceiling
                extra["headroom"] = ms["headroom"]
            if kind == "over" and c.reading_names_choice:  # F5 (review round 7): descriptive
                mz, fz = (np.asarray(a, float) for a in main_pair)
                extra["flow_minus_z0_per_depth"] = (fz.mean(0) - mz[:, 0].mean()).tolist()
            if kind == "over" and "stand_still" in extra and margin is not None:
                ssx = extra["stand_still"]
                extra["paired_test_tests"] = (
                    f"the flow raises the mean cosine above the stand-still's (z_0's) by >= {margin:g} (flow "
                    f"- stand-still, whole 95% interval); the criterion itself tests flow - {_REF[ref]} >= "
                    f"{crit.threshold:g}")  # fmt: skip
                notes.append(f"the paired test tests: {extra['paired_test_tests']} (review round 6, F1)")
                if c.collapse_outcome and ssx["ci95"][1] <= crit.threshold - margin:
                    extra["paired_test_uninformative"] = (
                        f"paired test uninformative here: the stand-still {ssx['value']:.3f} "
                        f"[{ssx['ci95'][0]:.3f}, {ssx['ci95'][1]:.3f}] lies at or below criterion - margin = "
                        f"{crit.threshold - margin:g}, so wherever the criterion holds the paired test holds "
                        "too: it cannot fail (review round 6, F5)")  # fmt: skip
                    notes.append(extra["paired_test_uninformative"])
            slow = True
            if c.headroom_rule and kind == "over":  # review round 7, F3: 'slow' = short of 1 - threshold at L
                lastcos = float(np.mean(np.asarray(main_pair[1], float)[:, -1]))
                slow = lastcos < 1.0 - crit.threshold
                if null_base(fam) is not None and main == "fails" and not slow and not why_main:
                    extra["null_fail_not_slow"] = (
                        f"the flow is not slow: mean cosine {lastcos:.3f} at the last depth, within "
                        f"{crit.threshold:g} of one cluster; the fail is a fail, not 'too slow at T_l = 1' "
                        "(config headroom_rule; review round 7, F3)")  # fmt: skip
                    notes.append(extra["null_fail_not_slow"])
            # review round 8, F5 (config guard_time_flows_only): the guard speaks of time (T_l = 1); the
            # no-MLP network (n) is discrete, with no time to run longer, so its fail is a fail
            timed = flow != "no_mlp" or not c.guard_time_flows_only
            if (null_base(fam) is not None and kind == "over" and main == "fails" and c.null_specificity
                    and slow and not why_main and timed):  # fmt: skip
                extra["null_fail_guard"] = (
                    "the flow runs one time unit per layer (T_l = 1): a null flow that does not over-cluster "
                    "in that time may still cluster later (review round 5, F8: random MiniLM heads reach "
                    "0.561 with ten units per layer), so this fail says 'too slow at T_l = 1', not that the "
                    "null's heads cannot cluster; not evidence against clustering (config null_specificity)"
                )  # fmt: skip
                notes.append(extra["null_fail_guard"])
            if null_base(fam) is not None and flow == "model_scores" and c.specificity_every_verdict:
                # review round 7, F7: a null whose (d) is its (a) numerically cannot test 'the model's scores'
                # at the finest ladder rung both flows were computed at (their reported values), else stored
                rungs = (res.get("step_ladder") or {}).get("levels") or {}
                both = [K for K in sorted((int(x) for x in rungs), reverse=True)
                        if {"attention", "model_scores"} <= set(_level(res, K)["sphere"])]  # fmt: skip
                at = {"steps": both[0]} if both else {}
                va = q(*_pair(res, "attention", stat, "sphere", k=k, ref=ref, **at))
                vd = q(*_pair(res, "model_scores", stat, "sphere", k=k, ref=ref, **at))
                if abs(vd - va) <= c.null_same_flow_tol:
                    extra["null_cannot_test"] = (
                        f"its flow (d) is its flow (a): values {vd:.7f} and {va:.7f} differ by "
                        f"{abs(vd - va):.1e} <= {c.null_same_flow_tol:g} (config null_same_flow_tol), so "
                        "this null's attention weights carry nothing its heads' own do not (near-uniform "
                        "attention): it cannot test 'the model's scores'")  # fmt: skip
                    notes.append(f"null cannot test this: {extra['null_cannot_test']} (review round 7, F7)")
            outcome = None if why_main else main
            if c.verdict_reading:  # F3, F6 (review round 6): the verdict in words, the class combine's
                extra["reading"] = _reading(combine(outcome or "inconclusive", rob), outcome, rob,
                                            unmeasured_o, collapsed, why_main)  # fmt: skip
                if c.reading_names_choice:  # F4, F5 (review round 7)
                    verdict_now = combine(outcome or "inconclusive", rob)
                    # review round 12, F6: the verdict on the declared representation alone
                    sphere_now = combine(outcome or "inconclusive", _sphere_only(rob, crit))
                    extra["reading"] = _choice_reading(extra, ctl_log, verdict_now, outcome,
                                                       why_main is None and collapsed is None,
                                                       crit.threshold, margin, factors,
                                                       sphere_verdict=sphere_now)  # fmt: skip
                if c.caps_named:  # review round 8, F3, F9: the caps a reading rests on
                    cap = _caps(summary, fam, res, flow, stat, ref, k, q, c, extra)
                    if cap:
                        extra["reading"] += "; " + cap
                fg = extra.get("fit_grid") or {}
                if fg.get("better_than_fit") and c.statement_names_fit:  # review round 13, F5
                    worse = []
                    for g in fg["better_than_fit"]:
                        d = fg["values"][g].get("fit_minus_this")
                        worse.append(g if d is None else f"{g}: paired fit - it {d['value']:+.3f} "
                                                          f"[{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]")
                    extra["reading"] += "; this fit is worse than a constant time of its grid (" + "; ".join(
                        worse) + ")"  # fmt: skip
                sc = ((summary.get("families") or {}).get(fam) or {}).get("scale_source_check")
                if scale_mismatch and sc:  # review round 11, F1: the check at (n)'s own stream scale
                    extra["scale_source_check"] = sc
                    extra["reading"] += "; " + scale_source_reading(sc)
                ns = ((summary.get("families") or {}).get(fam) or {}).get("null_seeds_check")
                ns = next((x for x in ([ns] if isinstance(ns, dict) else ns or []) if x.get("record") == vid),
                          None)  # fmt: skip
                if ns and c.null_seeds_check:  # review round 14, F2: the record over more seeds
                    extra["null_seeds_check"] = ns
                    extra["reading"] += "; " + null_seeds_reading(ns)
                hr = extra.get("holds_reachable")
                if hr and not hr["reachable"]:  # review round 11, F5: named beside the verdict
                    extra["reading"] += f"; the declared value could not have held ({hr['short']})"
                if why_main is None and extra["reading"] != combine(outcome, rob):
                    notes.insert(0, f"reading: {extra['reading']}")
            spec = (summary.get("null_outcomes") or {}).get(fam, {}) if c.null_specificity else {}
            out.append(record_test(
                id=f"flows-{fam}-{vid}", statement=f"{name}: {what}", source=src_text,
                criterion=crit, value=None if why_main else v, ci95=None if why_main else ci,
                samples=n_used,
                method=f"percentile bootstrap over sentences ({c.bootstrap} paired resamples, {how})",
                robustness=rob, extra=extra or None, notes="; ".join(notes),
                outcome=outcome,
            ))  # fmt: skip
            # F8 (round 5), F7 (round 6): the claim in the nulls; round 7 (F2, F7): for every test verdict
            every = c.specificity_every_verdict and out[-1].klass == "test"
            if spec and (out[-1].verdict == "holds" or every):
                if c.specificity_same_depths and getattr(q, "depths", None) == "all":
                    # review round 16, F1: the trained record over a null's depths with room, like with like
                    def at_null_k(e: dict, pair=main_pair, pair0=pair0, watched=watched,
                                  Ks=Ks if watched else ()):  # fmt: skip
                        # review round 17, F5: the trained flow at the null's main step count, where computed
                        Kn = e.get("K")
                        if watched and Kn in Ks and Kn != getattr(pair, "K", None):
                            return StepPair(pair0("sphere", steps=Kn), Kn)
                        return pair

                    spec = {nf: d if not (d.get(vid) or {}).get("depths") else {
                        **d, vid: {**d[vid], "trained_on_depths": _on_depths_outcome(
                            q, d[vid]["depths"], at_null_k(d[vid]), crit, c.bootstrap, seed, ctl, scoring)}}
                        for nf, d in spec.items()}  # fmt: skip
                lab = specificity(vid, spec, out[-1].verdict, out[-1].result.get("outcome"),
                                  seeds=c.null_seeds_check, like_with_like=c.specificity_same_depths)
                if out[-1].result.get("depends_on_estimator"):  # review round 13, F1
                    lab += (f" -- with the declared scale estimator ({c.scale_estimator}) only: the record "
                            "depends on it")  # fmt: skip
                r = out[-1].to_json()
                out[-1] = VerdictRecord.model_validate(
                    {**r, "result": {**r["result"], "null_specificity": lab},
                     "notes": f"{lab} (config null_specificity); {r['notes']}"})  # fmt: skip
        bad = {fl: next(w for w in d.values() if w is not None) for fl, d in flow_conv.items()
               if any(w is not None for w in d.values()) and any(w is None for w in d.values())}  # fmt: skip
        if bad and not flow_bad:  # build the family again with the flows marked (same records, same seeds)
            del out[n0:]
            todo.insert(0, (fam, res, bad))
    return out


def _caps(summary: dict, fam: str, res: dict, flow: str, stat: str, ref: str, k, q, c, extra: dict) -> str:
    """The scale and time caps a record rests on (config ``caps_named``; review round 8, F3, F9), in words;
    stored in ``extra`` (``scale_caps``, ``time_cap``). Empty where none applies."""
    parts = []
    fs = (summary.get("families") or {}).get(fam) or {}
    if extra.get("depends_on_estimator") and fs.get("rho_mean") and fs.get("scale_alt"):
        rho = np.asarray(fs["rho_mean"], float)
        alt = next(iter(fs["scale_alt"]))
        ralt = np.asarray(fs["scale_alt"][alt].get("rho_mean", []), float)
        j = int(np.argmax(rho[2:] / rho[1:-1])) + 2  # layer 0 -> 1 is the embeddings' norm, not a jump
        m, f = _pair(res, flow, "cos", "sphere", k=None, ref=ref, est=alt)
        fc = np.asarray(f, float).mean(0)
        at = [d for d in range(1, len(fc)) if np.all(fc[d:] >= c.collapse_depth1_cos)]
        mq, fq = _pair(res, flow, stat, "sphere", k=k, ref=ref, est=alt)
        full = _quantity(q.kind)
        va, room = full(mq, fq), full(mq, _collapse(mq))
        extra["scale_caps"] = {
            "declared_rho_jump": {"layer": j, "from": float(rho[j - 1]), "to": float(rho[j]),
                                  f"{alt}_there": float(ralt[j]) if len(ralt) > j else None},
            f"{alt}_one_cluster_from_depth": at[0] if at else None,
            f"{alt}_value_over_collapse_value": va / room if room else None,
        }  # fmt: skip
        t = (f"the declared estimator's scale jumps {rho[j - 1]:.1f} -> {rho[j]:.1f} at layer {j} ("
             + (f"{alt} {ralt[j]:.1f} there), slowing the flow that much from there" if len(ralt) > j else "")
             )  # fmt: skip
        if at:
            t += (f"; under {alt} the flow sits at one cluster (>= {c.collapse_depth1_cos:g}) from depth "
                  f"{at[0]}")
        if room:
            t += f" and its {va:.3f} (depths 1..L) is {va / room:.2f} of the collapse's value"
        parts.append(t + " (review round 8, F3; a sink-robust scale and 96 sentences were not run)")
    if flow == "fitted_time" and res.get("fitted"):
        # review round 15, F5: every fit the record rests on, the main value's at its reported K included
        Kc = (extra.get("step_ladder") or {}).get("chosen")
        Kc = _k_of(Kc, "fitted_time") if Kc is not None else c.steps_per_layer
        fits = [(f"seed {x['split_seed']} {x['direction']}, K = {Kc}", x) for x in res["fitted"]]
        Kr = (extra.get("step_ladder") or {}).get("reported_K")
        if Kr is not None and Kr != Kc and (_level(res, Kr) or {}).get("fitted"):
            x = _level(res, Kr)["fitted"]
            fits.append((f"seed {x['split_seed']} {x['direction']}, K = {Kr} (the main value's)", x))
        capped = {n: [i for i, t in enumerate(x.get("times") or []) if t >= c.max_time - 1e-9]
                  for n, x in fits}  # fmt: skip
        capped = {n: v for n, v in capped.items() if v}
        if capped:
            extra["time_cap"] = {"max_time": c.max_time, "layers_at_cap": capped, "layers": "0-based"}
            lay = sorted({i for v in capped.values() for i in v})
            tcs = fs.get("time_cap_check")  # review round 14, F3: committed refits with a wider grid
            tcs = [tcs] if isinstance(tcs, dict) else list(tcs or [])
            done = []
            for tc in (t for t in tcs if t.get("declared_max_time") == c.max_time):
                extra["time_cap"].setdefault("refits", []).append(tc)
                at = ", ".join(f"layer {i} {tc['times'][i]:g}" for i in lay if i < len(tc["times"]))
                a, b = tc["value_declared_cap"], tc["value"]
                done.append(f"{tc['fit']}, K = {tc['K']} ({tc['source']}): {at}; the value {a['value']:.3f} "
                            f"[{a['ci95'][0]:.3f}, {a['ci95'][1]:.3f}] ({a['outcome']}) -> {b['value']:.3f} "
                            f"[{b['ci95'][0]:.3f}, {b['ci95'][1]:.3f}] ({b['outcome']})")  # fmt: skip
            refit = (f"refitted with the cap at {tcs[0]['max_time']:g}: " + "; ".join(done)
                     + ("" if len(done) == len(capped) else f" ({len(capped) - len(done)} of the capped fits "
                        "not refitted)")) if done else "not refitted"  # fmt: skip
            parts.append(f"the time grid's cap {c.max_time:g} binds at layer{'s' * (len(lay) > 1)} "
                         f"{', '.join(map(str, lay))} (0-based) in {len(capped)} of {len(fits)} fits ("
                         f"{'; '.join(capped)}; a fit there may want more time; review round 8, F9; "
                         f"{refit})")  # fmt: skip
    return "; ".join(parts)


def _reading(verdict: str, main: str | None, checks, unmeasured_outcomes, collapsed, why_main) -> str:
    """A test record's verdict in words (config ``verdict_reading``; review round 6, F3, F6): the class stays
    ``combine``'s; this says why."""
    if why_main is not None:
        if why_main.startswith("unmeasured"):  # review round 8, F4: the reading up to its details
            return why_main.split(" -- ")[0]
        return f"inconclusive: {why_main.split(':')[0]}"
    if collapsed == "unmeasured":  # review round 7, F6
        return "unmeasured (collapses): the flow drives every token to one point"
    if collapsed is not None:
        return f"collapses: the flow drives every token to one point ({verdict})"
    if verdict == "inconclusive" and main in ("holds", "fails"):
        und = [f"{ch.choice} {val}" for ch in checks
               for val, o in zip(ch.values, ch.outcomes, strict=True) if o == "inconclusive"]  # fmt: skip
        if und:
            return f"main {main}; undecided: {', '.join(und)}"
    if verdict == "holds" and unmeasured_outcomes:  # review round 7: e.g. values with no headroom left out
        k, j = len(unmeasured_outcomes), sum(o == "holds" for o in unmeasured_outcomes)
        tail = f"of which {j} would hold on {'its' if k == 1 else 'their'} own" if j else (
            "none of which would hold on its own")  # fmt: skip
        return f"holds where measurable ({k} value{'s' * (k != 1)} unmeasured, {tail})"
    if verdict == "fails" and unmeasured_outcomes:
        k, j = len(unmeasured_outcomes), sum(o == "holds" for o in unmeasured_outcomes)
        if j == k:
            tail = "which would hold on its own" if k == 1 else "which would hold on their own"
        else:
            tail = (
                "none of which would hold on its own" if j == 0 else f"of which {j} would hold on their own"
            )
        return f"fails where measurable ({k} value{'s' * (k != 1)} unmeasured, {tail})"
    return verdict


def _sphere_only(rob, crit: Criterion) -> list:
    """The robustness checks without their hidden-state values (review round 12, F6): the values of the
    check 'representation' and of 'depth summary' computed on hidden states are left out; a check left with
    no value is dropped."""
    out = []
    for ch in rob:
        keep = [i for i, x in enumerate(ch.values) if str(x) != "hidden" and "hidden states" not in str(x)]
        if len(keep) == len(ch.values):
            out.append(ch)
        elif keep:
            out.append(RobustnessCheck.from_values(
                crit, ch.choice, [ch.values[i] for i in keep], [ch.results[i] for i in keep],
                ci95=None if ch.ci95 is None else [ch.ci95[i] for i in keep],
                outcomes=[ch.outcomes[i] for i in keep]))  # fmt: skip
    return out


def _choice_reading(extra: dict, ctl_log: dict, verdict: str, main: str | None, measured: bool,
                    threshold: float, margin: float | None, factors,
                    sphere_verdict: str | None = None) -> str:  # fmt: skip
    """The reading of review round 7 (config ``reading_names_choice``; F4, F5): the scale estimator a verdict
    depends on, the representation a verdict is about, a stand-still margin above the criterion's threshold.
    Sets ``result.depends_on_estimator``, ``representation_reading``, ``margin_above_threshold`` in
    ``extra``; returns the reading. ``sphere_verdict``: the verdict from the sphere-token values alone
    (review round 12, F6; default ``verdict``), named where the two differ."""
    sphere_verdict = verdict if sphere_verdict is None else sphere_verdict
    reading = extra["reading"]
    est = ctl_log.get("scale estimator") or []
    if measured and len(est) > 1:
        o0 = main or "inconclusive"

        def own(x: dict) -> str:  # an unmeasured value: its outcome on its own (without the collapse)
            if not x["measured"] and x.get("no_headroom"):  # review round 14, F1: void for lack of room,
                return "inconclusive"  # whatever the estimator: it decides nothing
            return x["outcome"] if x["measured"] else x.get("outcome_without_collapse", x["outcome"])

        alts = [x for x in est[1:] if own(x) in ("holds", "fails") and own(x) != o0]
        if alts:
            parts = [f"{est[0]['choice_value']} {o0} {est[0]['value']:.3f}"] + [
                f"{x['choice_value']} {own(x)} {x['value']:.3f}"
                + ("" if x["measured"] else " (unmeasured: the collapse control passes there too)")
                for x in est[1:]
            ]
            extra["depends_on_estimator"] = ", ".join(parts)
            reading = "depends on scale estimator: " + extra["depends_on_estimator"] + (
                "" if reading == verdict else f" -- {reading}")  # fmt: skip
    rep = {str(x["choice_value"]): x for x in ctl_log.get("representation") or []}
    hid = rep.get("hidden")
    # review round 14, F4: every hidden-state value of every check, not only the representation check's
    every = [x for xs in ctl_log.values() for x in xs
             if str(x["choice_value"]) == "hidden" or "hidden states" in str(x["choice_value"])]  # fmt: skip
    if hid is not None and hid["measured"] and all(x["measured"] for x in every):
        outs = {o for x in every for o in (x["outcome"], *(x.get("outcome_margin") or {}).values())}
        if len(outs) == 1 and outs <= {"holds", "fails"} and verdict != next(iter(outs)):
            extra["representation_reading"] = (
                f"sphere tokens (declared): {sphere_verdict}; hidden states: {next(iter(outs))} at every "
                f"margin ({hid['value']:.3f})")  # fmt: skip
            reading = f"{reading} [{extra['representation_reading']}]"
    if sphere_verdict != verdict and "representation_reading" not in extra:  # review round 12, F6
        extra["sphere_only_verdict"] = sphere_verdict
        reading = (f"{reading} [sphere tokens (declared) alone: {sphere_verdict}; the rest rests on "
                   "hidden-state values]")  # fmt: skip
    elif sphere_verdict != verdict:
        extra["sphere_only_verdict"] = sphere_verdict
    if margin is not None and "stand-still margin" in verdict and "margin_variants_not_combined" not in extra:
        above = [f"x{s:g} ({margin * s:g})" for s in factors if margin * s > threshold + 1e-12]
        if above:
            extra["margin_above_threshold"] = (
                f"{', '.join(above)} exceeds the criterion's threshold {threshold:g}: it tests a stronger "
                "claim than the one declared (review round 7, F5)")  # fmt: skip
            reading = f"{reading}; {extra['margin_above_threshold']}"
    return reading


def _on_depths_outcome(q, depths: list[int], pair, crit: Criterion, B: int, seed: int, controls,
                       scoring: dict) -> dict:
    """A record's value over the given depths only (a null's depths with room), scored with its own
    controls and without the room rule (review round 16, F1): value, interval, outcome ('unmeasured' where
    the controls leave it so)."""
    rules = {**scoring, "room": None, "room_fail_stands": False}
    qd = _over_depths(q, depths)
    x = scored(qd, *pair, crit, B, seed, controls, **rules)
    out = {"depths": list(depths), "value": x["value"], "ci95": list(x["ci95"]),
           "outcome": x["outcome"] if x["measured"] else "unmeasured", "outcome_flow": x["outcome_flow"],
           **({"K": pair.K} if getattr(pair, "K", None) is not None else {})}
    if scoring.get("kind") in ("gap", "rel") and scoring.get("margin") is not None:  # review round 17, F1
        out["holds_reachable"] = holds_reachable(*pair, q=qd, B=B, seed=seed, margin=scoring["margin"])[
            "reachable"]  # fmt: skip
    return out


def specificity(vid: str, spec: dict, verdict: str = "holds", main: str | None = None, *,
                seeds: bool = True, like_with_like: bool = False) -> str:
    """The null-specificity label of a trained test record (config ``null_specificity``; review round 5, F8,
    round 6, F7; round 7, F2, F7: every test verdict, config ``specificity_every_verdict``), from its nulls'
    records of the same claim (``spec``: null family -> verdict id -> verdict, value, ``guard``: a fail that
    says only 'too slow at T_l = 1', ``no_headroom``: a fail the model's ceiling leaves no room for,
    ``cannot_test``: why the null cannot test the claim by construction, ``ladder``: whether the null ran
    under the step ladder). ``verdict``: the trained record's verdict, ``main``: its main outcome (what a
    'depends on ...' record is compared by). A null run without the ladder never labels the record.
    ``seeds`` (config ``null_seeds_check``; review round 14, F2): a null entry with ``seeds_check`` (its
    outcomes over more seeds, :func:`null_outcomes`) speaks only if every checked seed repeats its verdict."""
    entries = {nf: d.get(vid) for nf, d in spec.items()}
    off = [nf for nf, e in entries.items() if e is not None and e.get("ladder") is False]
    excl = f" ({', '.join(off)}: not run under the step ladder, not used)" if off else ""
    usable = {nf: e for nf, e in entries.items() if nf not in off}
    if off and all(e is None for e in usable.values()):
        return f"specificity untested (nulls not run under the step ladder: {', '.join(off)})"
    cannot = {nf: e["cannot_test"] for nf, e in usable.items() if e is not None and e.get("cannot_test")}
    use = {nf: e for nf, e in usable.items() if nf not in cannot}
    cant = "".join(f"; {nf}: null cannot test this ({why})" for nf, why in cannot.items())
    if cannot and all(e is None for e in use.values()):
        return (
            "null cannot test this (" + "; ".join(f"{nf}: {why}" for nf, why in cannot.items()) + ")" + excl
        )

    def split(e: dict | None) -> dict | None:
        """The null's outcomes over its checked seeds, per step count checked (the check's main K first),
        where at some K they are not all its verdict (review round 14, F2: a null record's fail or hold that
        another seed does not repeat is no contrast either way; the declared rule names every K checked)."""
        ns = (e or {}).get("seeds_check")
        if not seeds or not ns or e.get("no_headroom") or e["verdict"] not in ("holds", "fails"):
            return None  # only a null that would speak can be kept from speaking by its seeds
        Ks = sorted(ns["per_K"], key=lambda k: k != str(ns["K_main"]))
        by = {K: seeds_counts(ns, K)[0] for K in Ks}
        return by if any(set(b) != {e["verdict"]} for b in by.values()) else None

    def word(e: dict) -> str:
        if e.get("no_headroom"):
            return "no headroom"
        per = split(e)
        if per is not None:
            ns = e["seeds_check"]
            src = ns["source"] if ns["source"].startswith("the run's") else ns["source"].split(" ")[0]
            parts = []
            for K, by in per.items():
                n = sum(len(v) for v in by.values())
                x = ns["per_K"][K].get("all_depths")
                lo, hi = (min(a["value"] for a in x), max(a["value"] for a in x)) if x else (0, 0)
                span = "" if not x else (f"; values {lo:.3f}-{hi:.3f}, upper bounds <= "
                                         f"{max(a['ci95'][1] for a in x):.3f}")  # fmt: skip
                t = ns.get("threshold")
                if x and t is not None and like_with_like:  # review round 16, F5: where the intervals lie
                    below = sum(a["ci95"][1] <= t for a in x)
                    above = sum(a["ci95"][0] > t for a in x)
                    span += (f"; all-depth intervals: {below} below {t:g}, {len(x) - below - above} across "
                             f"it, {above} above")  # fmt: skip
                k = f"K = {K}" if K.isdigit() else K
                parts.append(f"{k}: " + ", ".join(f"{o} at {len(v)} of {n}" for o, v in sorted(by.items()))
                             + span)  # fmt: skip
            return (f"{e['verdict']} at the run's seed, but depends on {ns['check']} (" + "; ".join(parts)
                    + f"; {src})")  # fmt: skip
        return e["verdict"] + (" (only by the guard 'too slow at T_l = 1')" if e.get("guard") else "")

    def val(nf: str, e: dict) -> str:
        h = e.get("headroom")
        t = f"{nf}: {e['value']:.3f}" + ("" if h is None else f", headroom {h:.3f}")
        ns = e.get("seeds_check") if seeds and like_with_like else None
        if ns:  # review round 16, F3: how many seeds agree, and at which steps
            n = len(ns["per_K"][str(ns["K_main"])]["seeds"])
            t += (f", the same at {n} {ns['check']}s (" + "; ".join(
                f"K = {k}" if k.isdigit() else k.removeprefix("the run's steps (").removesuffix(")")
                for k in ns["per_K"]) + ")")  # fmt: skip
        xr = e.get("excess_over_room") if like_with_like else None
        if xr is not None:  # review round 17, F3: how far toward a collapse the null goes
            t += f", {xr:.2f} of a collapse's value over all depths"
        td = e.get("trained_on_depths") if like_with_like else None
        if td:  # review round 16, F1: the null's value is over its depths with room
            k = f" at K = {td['K']}" if td.get("K") is not None else ""
            t += f", over its depths with room {td['depths']} (the trained record there{k}: {td['outcome']})"
        return t

    def would_speak(e: dict | None) -> bool:
        """A null record that holds, or fails by more than the guard or the ceiling."""
        return e is not None and (e["verdict"] == "holds" or (
            e["verdict"] == "fails" and not e.get("guard") and not e.get("no_headroom")))  # fmt: skip

    def unlike(e: dict | None) -> bool:
        """Review round 16, F1: the trained record's outcome over the null's depths with room is not its
        own, so the null's outcome there cannot contrast with it."""
        td = (e or {}).get("trained_on_depths")
        return like_with_like and would_speak(e) and td is not None and td["outcome"] != side

    named = ", ".join(f"{nf} {word(e) if e else 'no record'}" for nf, e in use.items())
    dep = verdict.startswith("depends on")
    # review round 17, F2: an inconclusive record with a decided main outcome is compared at its main setting
    # too, as a 'depends on X' one is
    at_main = dep or (like_with_like and verdict == "inconclusive")
    decided = main if main in ("holds", "fails") else None
    side = verdict if verdict in ("holds", "fails") else (decided if at_main else None)
    lead = verdict if verdict in ("holds", "fails") else f"{verdict} (main {main})"
    ok = {nf: e for nf, e in use.items() if e is not None and split(e) is None and not unlike(e)}
    held = [val(nf, e) for nf, e in ok.items() if e["verdict"] == "holds"]
    real_fail = [val(nf, e) for nf, e in ok.items() if e["verdict"] == "fails"
                 and not e.get("guard") and not e.get("no_headroom")]  # fmt: skip
    present = [e for e in use.values() if e is not None]
    # the nulls that speak: a record that holds, or fails by more than the guard or the ceiling, at every
    # seed checked (and, review round 16, F1, on depths where the trained record has its own outcome)
    speak = [e for e in ok.values() if would_speak(e)]
    seeded = [f"{nf} {word(e)}" for nf, e in use.items() if e is not None and split(e) is not None]
    def unlike_text(nf: str, e: dict) -> str:
        td = e["trained_on_depths"]
        why = ""  # review round 17, F1: what decides the trained outcome there
        if td.get("outcome_flow") and td["outcome_flow"] != td["outcome"]:
            why += f"; {td['outcome_flow']} by the criterion alone"
        if td.get("holds_reachable") is False:
            why += "; a hold was out of reach there: the reference itself is too close to standing still"
        k = f" at K = {td['K']}" if td.get("K") is not None else ""
        return (f"{nf} {e['verdict']} over its depths with room {td['depths']}, where the trained record's "
                f"value{k} is {td['value']:.3f} [{td['ci95'][0]:.3f}, {td['ci95'][1]:.3f}] "
                f"({td['outcome']}{why})")

    unlike_d = [unlike_text(nf, e) for nf, e in use.items()
                if e is not None and split(e) is None and unlike(e)]  # fmt: skip
    silent = [f"{nf} {word(e)}" for nf, e in use.items()
              if e is not None and e not in speak and not unlike(e)]  # fmt: skip
    rest = f"; not speaking: {', '.join(silent)}" if silent else ""
    at = ""
    if like_with_like and dep:  # review round 16, F2: a 'depends on X' record at its main setting only
        x = verdict.removeprefix("depends on ")
        at = f" at its main setting (the other settings of {x} not compared)"
    elif like_with_like and verdict == "inconclusive" and side is not None:  # review round 17, F2
        at = " at its main setting (the checks that leave it undecided not compared)"
    if like_with_like and held and real_fail:  # review round 16, F6: the nulls disagree
        return (f"{lead}; specificity undecided: the nulls disagree (holds in null {', '.join(held)}; fails "
                f"in null {', '.join(real_fail)})" + cant + excl)  # fmt: skip
    if (side == "holds" or (dep and not like_with_like)) and held:
        settled = f" whichever way {verdict.removeprefix('depends on ')} is settled" if dep and not at else at
        return (f"{lead}, not specific to training{settled} (also holds in null " + ", ".join(held) + ")"
                + cant + excl)  # fmt: skip
    if side is None:
        named_main = like_with_like and main and main != verdict  # review round 17, F4
        what = (f"the trained record's verdict is {verdict}, its main outcome {main}" if named_main
                else f"the trained record is {verdict}")  # fmt: skip
        return f"no outcome to compare ({what}); in the null(s): {named}{cant}{excl}"
    if side == "fails" and real_fail:
        return f"{lead}, not specific to training{at} (also fails in null {', '.join(real_fail)}){cant}{excl}"
    other = real_fail if side == "holds" else held
    if speak and len(other) == len(speak):
        return (f"{lead}; specific to training{at} ({'fails' if side == 'holds' else 'holds'} in null "
                + ", ".join(other) + ")" + rest + cant + excl)  # fmt: skip
    if present and not speak and unlike_d:
        return (f"{lead}; specificity undecided{at}: the null has room at fewer depths, and there the "
                "trained "
                f"record has not its own outcome ({'; '.join(unlike_d)})" + rest.replace("; not speaking",
                "; not speaking either") + cant + excl)  # fmt: skip
    if present and not speak and seeded:
        return (f"{lead}; specificity undecided: the null's outcome depends on its seed ({named})" + cant
                + excl)  # fmt: skip
    if present and not speak:
        return ("specificity untested (every null fails only by the guard 'too slow at T_l = 1', has no "
                "headroom, is inconclusive, " + ("depends on a choice (such as its seed), " if like_with_like
                                                 else "") + f"or is a description or an identity: {named})"
                + cant + excl)  # fmt: skip
    return f"{lead}; in the null(s): " + named + cant + excl


def null_outcomes(
    records_json: list[dict], families: list[str], ladder: dict[str, bool] | None = None
) -> dict:
    """Per null family of ``families``: verdict id (without the family prefix) -> its verdict, value, whether
    a fail is only the guard's 'too slow at T_l = 1' (``guard``) and whether the null ran under the step
    ladder (``ladder``: family -> bool; omitted: not recorded), from that null's records (JSON): what
    :func:`records` of a trained family reads from its summary's key ``null_outcomes`` (config
    ``null_specificity``; review round 5, F8; round 6, F7)."""
    fams = sorted(families, key=len, reverse=True)
    out = {}
    for r in records_json:
        fam = next((f for f in fams if r["id"].startswith(f"flows-{f}-")), None)
        if fam is None or null_base(fam) is None:
            continue
        sc = r.get("result", {}).get("null_seeds_check") or run_seeds_check(r.get("result", {}))
        out.setdefault(fam, {})[r["id"].removeprefix(f"flows-{fam}-")] = {
            "verdict": r["verdict"],
            "value": r.get("result", {}).get("value"),
            "guard": bool(r.get("result", {}).get("null_fail_guard")),
            "no_headroom": bool(r.get("result", {}).get("no_headroom")),
            "headroom": r.get("result", {}).get("headroom"),
            **(
                {"K": r["result"]["robustness_K"]["main value"]}
                if (r.get("result", {}).get("robustness_K") or {}).get("main value") is not None
                else {}
            ),
            **(
                {"excess_over_room": r["result"]["excess_over_room"]}
                if r.get("result", {}).get("excess_over_room") is not None
                else {}
            ),
            **(
                {"depths": r["result"]["room_per_depth"]["kept"]}
                if (r.get("result", {}).get("room_per_depth") or {}).get("masked")
                and r["result"]["room_per_depth"].get("enough")
                else {}
            ),
            **(
                {"cannot_test": r["result"]["null_cannot_test"]}
                if r.get("result", {}).get("null_cannot_test")
                else {}
            ),
            **({} if ladder is None or fam not in ladder else {"ladder": bool(ladder[fam])}),
            **({"seeds_check": sc} if sc else {}),
        }
    return out


def run_seeds_check(result: dict) -> dict | None:
    """A null record's own seeds (its run's ``null_seeds``: the robustness check 'permutation seed' / 'init
    seed', ``controls_per_value``) in the form of ``families[fam].null_seeds_check``: each seed's outcome, or
    'void ...' where the study's rules left it unmeasured (review round 14, F2: the rule declared for the
    check over more seeds, applied to the seeds every null run has). None: fewer than two seeds logged."""
    cpv = result.get("controls_per_value") or {}
    ch = next((k for k in NULL_CHECK.values() if len(cpv.get(k) or ()) > 1), None)
    if ch is None:
        return None
    outs = [x["outcome"] if x["measured"] else
            "void for lack of room" if x.get("no_headroom") else "void by the collapse control"
            for x in cpv[ch]]  # fmt: skip
    ks = [x.get("K") for x in cpv[ch]]
    K = (ks[0] if len(set(ks)) == 1 else ", ".join(f"seed {x['choice_value']} at K = {k}" for x, k in
                                                   zip(cpv[ch], ks, strict=True))) if None not in ks else None
    K = K if isinstance(K, int) else f"the run's steps ({K})" if K else "the run's step"
    return {"check": ch, "K_main": K, "source": "the run's null_seeds (controls_per_value)",
            "per_K": {str(K): {"seeds": [x["choice_value"] for x in cpv[ch]], "outcomes": outs}}}  # fmt: skip


def stand_still(m: np.ndarray, f: np.ndarray, *, q, B: int, seed: int) -> dict:
    """The stand-still control of a record (config ``stand_still_control``): the flow that does not move,
    i.e. the reference's depth-0 statistic (z_0, where the model, (n) and every flow start) at every depth,
    scored by the record's quantity ``q`` with the same paired bootstrap (the record's pair (reference
    ``m``, flow ``f``), sphere tokens); and the paired difference q(flow) - q(stand-still) with its interval
    (the same resamples)."""
    still = _still(m)
    v, ci = _boot(q, m, still, B, seed)
    both = np.stack([f, still], axis=-1)
    dv, dci = _boot(lambda a, b: q(a, b[..., 0]) - q(a, b[..., 1]), m, both, B, seed)
    return {"value": v, "ci95": list(ci), "flow_minus_stand_still": {"value": dv, "ci95": list(dci)}}


def scale_source_reading(sc: dict) -> str:
    """The scale check of a (n)-referenced record in a pre-LN model in words (config ``scale_source_rule``;
    review round 11, F1); ``sc``: ``families[fam].scale_source_check`` (the committed check's numbers)."""

    def v(key: str) -> str:
        x = sc[key]
        return f"{x['value']:.3f} [{x['ci95'][0]:.3f}, {x['ci95'][1]:.3f}]"

    d = sc["flow_at_n_scale_minus_collapse"]
    beats = d["ci95"][1] <= -sc["margin"]
    if sc["collapse"]["value"] < sc["margin"]:  # review round 13, F3: a comparison that could not pass
        how = (f"a collapse is itself within the margin {sc['margin']:g} of (n), so no flow can be told from "
               "it there")
    else:
        how = "better than a collapse" if beats else "no better than a collapse"
        how += f" (margin {sc['margin']:g})"
    return (
        f"scale source (K = {sc['K']}, {sc['source']}): the flow at the full model's stream scale "
        f"{v('flow_at_model_scale')}, at (n)'s own {v('flow_at_n_scale')}, a collapse {v('collapse')}; "
        f"flow at (n)'s scale - collapse {v('flow_at_n_scale_minus_collapse')}: {how} (config "
        "scale_source_rule)"
    )


def seeds_counts(ns: dict, K: int | str | None = None) -> tuple[dict, bool]:
    """The outcomes of a null record over its checked seeds at step ``K`` (default: the check's main K):
    outcome -> the seeds with it, and whether every seed is a measured fail (review round 14, F2)."""
    r = ns["per_K"][str(ns["K_main"] if K is None else K)]
    by: dict[str, list] = {}
    for s, o in zip(r["seeds"], r["outcomes"], strict=True):
        by.setdefault(o, []).append(s)
    return by, set(by) == {"fails"}


def null_seeds_reading(ns: dict) -> str:
    """A null record's check over more seeds in words (review round 14, F2); ``ns``:
    ``families[fam].null_seeds_check`` (the committed check's outcomes, each seed scored by the study's rules;
    'void': left unmeasured by them, for lack of room or as a collapse)."""

    def part(K: str) -> str:
        by, _ = seeds_counts(ns, K)
        n = len(ns["per_K"][K]["seeds"])
        return f"K = {K}: " + ", ".join(f"{o} at {len(v)} of {n} (seed{'s' * (len(v) > 1)} "
                                         f"{', '.join(map(str, v))})" for o, v in sorted(by.items()))
    Ks = sorted(ns["per_K"], key=lambda k: (k != str(ns["K_main"]), int(k)))
    return (f"over {ns['check']}s {', '.join(map(str, ns['per_K'][Ks[0]]['seeds']))} ({ns['source']}), each "
            "scored by the study's rules: " + "; ".join(part(K) for K in Ks))  # fmt: skip


def holds_reachable(m: np.ndarray, f: np.ndarray, *, q, B: int, seed: int, margin: float) -> dict:
    """Whether a 'follows' record could hold (config ``holds_reachable_check``; review round 11, F5): the
    paired stand-still test of the perfect flow (the reference itself, ``f`` replaced by ``m``), with the
    resamples of :func:`stand_still`; it passes when its whole interval of q(perfect) - q(stand-still) is
    <= -margin. Where it does not, no flow can be 'better than standing still' by the margin, so the
    record can only fail or be inconclusive."""
    still = _still(m)
    both = np.stack([np.asarray(m, float), still], axis=-1)
    dv, dci = _boot(lambda a, b: q(a, b[..., 0]) - q(a, b[..., 1]), m, both, B, seed)
    ok = bool(dci[1] <= -margin)
    out = {"perfect_minus_stand_still": {"value": dv, "ci95": list(dci)}, "margin": margin,
           "reachable": ok, "rule": "config holds_reachable_check (review round 11, F5)"}  # fmt: skip
    if not ok:
        out["short"] = (f"the reference itself beats standing still by only {-dv:.3f} [{-dci[1]:.3f}, "
                        f"{-dci[0]:.3f}], margin {margin:g}")  # fmt: skip
        out["reading"] = (
            f"could not have held: even the reference itself scores only {dv:.3f} "
            f"[{dci[0]:.3f}, {dci[1]:.3f}] against standing still (the paired test needs <= -{margin:g} "
            "over the whole interval), so the record can only fail or be inconclusive (config "
            "holds_reachable_check; review round 11, F5)"
        )
    return out


def _mean_ci(a: np.ndarray, B: int, seed: int) -> dict:
    """Mean over sentences per depth with a 95% percentile bootstrap interval."""
    idx = np.random.default_rng(seed).integers(0, len(a), size=(B, len(a)))
    boots = a[idx].mean(1)
    return {
        "mean": a.mean(0),
        "lo": np.percentile(boots, 2.5, axis=0),
        "hi": np.percentile(boots, 97.5, axis=0),
    }


#: the families' names in tables and figures (the weights' own name is a file path)
DISPLAY = {
    "minilm": "all-MiniLM-L6-v2 (safetensors)",
    "minilm-l3": "paraphrase-MiniLM-L3-v2 (ONNX)",
    "smollm2": "SmolLM2-135M-Instruct (GGUF Q4_1)",
    "minilm-random": "all-MiniLM-L6-v2 architecture, random init",
    "minilm-l3-random": "paraphrase-MiniLM-L3-v2 architecture, random init",
    "smollm2-random": "SmolLM2-135M architecture, random init",
}


def variants_summary(variants: dict) -> dict:
    """Per robustness variant (``family_task``'s ``variants``: check -> value -> data): the inputs' count and
    token lengths, the mean cosine per depth of every source (sphere tokens), of (c) on its report half and
    of the model on that half, and (c)'s fitted times: what the tables show of a variant."""
    return {
        check: {
            v: {
                "inputs": len(d["tokens"]),
                "tokens_mean": float(np.mean(d["tokens"])),
                "tokens_range": [int(np.min(d["tokens"])), int(np.max(d["tokens"]))],
                "cos": {src: np.asarray(x["cos"], float).mean(0) for src, x in d["sphere"].items()},
                "fitted_cos": np.asarray(d["fitted"]["stats"]["sphere"]["cos"], float).mean(0),
                "model_on_report_half": np.asarray(d["sphere"]["model"]["cos"], float)[
                    d["fitted"]["report"]
                ].mean(0),
                "fitted_times": d["fitted"]["times"],
            }
            for v, d in a.items()
        }
        for check, a in variants.items()
    }


def _family_summary(res: dict, c: FlowsConfig) -> dict:
    L = res["model"]["layers"]
    main = res["fitted"][0]
    per = {}
    for rep in REPS:
        per[rep] = {}
        for src in SOURCES:
            d = {}
            for key in ("cos", "erank", "clusters", "agree"):
                if src == "fitted_time":
                    a = np.asarray(main["stats"][rep][key], float)
                else:
                    a = np.asarray(res["stats"][rep][src][key], float)
                d[key] = _mean_ci(a, c.bootstrap, c.seed)
            per[rep][src] = d
    model_report = {
        rep: {key: np.asarray(res["stats"][rep]["model"][key], float)[main["report"]].mean(0)
              for key in ("cos", "erank", "clusters")}
        for rep in REPS
    }  # fmt: skip
    name = DISPLAY.get(res["family"], res["model"]["name"])
    free = res.get("fitted_free")
    return {
        "model": {**res["model"], "name": name, "weights": res["model"]["name"]},
        "sentences": len(res["tokens"]),
        "corpus_index": res["corpus_index"],
        "tokens_mean": float(np.mean(res["tokens"])),
        "per_depth": per,
        "model_on_report_half": model_report,
        "fitted_times": [{k: f[k] for k in ("split_seed", "direction", "times")} for f in res["fitted"]],
        "curves_mean": res["curves_mean"],
        "curve_grid": res["curve_grid"],
        "sink": {k: np.asarray(v, float).mean(0) for k, v in res["sink"].items()},
        "last_depth": {
            rep: {
                src: {
                    "cos": per[rep][src]["cos"]["mean"][L],
                    "lo": per[rep][src]["cos"]["lo"][L],
                    "hi": per[rep][src]["cos"]["hi"][L],
                }
                for src in SOURCES
            }
            for rep in REPS
        },  # fmt: skip
        "fitted_free": None
        if free is None
        else {
            "times": free["times"],
            "report": free["report"],
            "cos": {rep: np.asarray(free["stats"][rep]["cos"], float).mean(0) for rep in REPS},
        },
        "scale_alt": {
            est: {
                "rho_mean": np.asarray(a["rho"], float).mean(0),
                "cos": {v: np.asarray(x["cos"], float).mean(0) for v, x in a["sphere"].items()},
            }
            for est, a in (res.get("scale_alt") or {}).items()
        },
        "steps_alt": {
            K: {
                "cos": {v: np.asarray(x["cos"], float).mean(0) for v, x in a["sphere"].items()},
                "fitted_times": a["fitted"]["times"],
            }
            for K, a in (res.get("steps_alt") or {}).items()
        },
        "variants": variants_summary(res.get("variants") or {}),
        "step": res.get("step", c.steps_per_layer),
        "step_ladder": None
        if not res.get("step_ladder")
        else {
            k: res["step_ladder"][k]
            for k in ("candidates", "chosen", "values", "moves", "converged", "tolerance", "cpu_s")
        },
        "permuted_embeddings": res.get("permuted_embeddings"),
        "rho_mean": None
        if res.get("rho") is None or res["rho"][0] is None
        else np.asarray(res["rho"], float).mean(0),
        "timing_s": res["timing_s"],
    }


def tables(summary: dict) -> list[Table]:
    """Per family and depth: mean cosine (sphere, hidden), clusters, effective rank, agreement, and sinks."""
    thr = summary["thresholds"]
    k = thr.index(min(thr, key=lambda t: abs(t - summary["cluster_threshold"])))
    out = []
    for fam, s in summary["families"].items():
        L, mi = s["model"]["layers"], s["model"]
        srcs = [x for x in SOURCES if x in s["per_depth"]["sphere"]]  # a summary older than a row lacks it
        cols = [Column("depth"), Column("model", "model", ".3f")]
        for f in srcs[1:]:
            if f == "fitted_time":  # (c) is reported on the report half: the model on that half beside it
                cols.append(Column("model_report", "model, report half", ".3f"))
            cols.append(Column(f, LABELS[f], ".3f"))
        for rep, key, what in (
            ("sphere", "cos", "mean cosine, sphere tokens"),
            ("hidden", "cos", "mean cosine, hidden states"),
            ("sphere", "clusters", f"clusters at {thr[k]:g} rad, sphere tokens"),
            ("hidden", "clusters", f"clusters at {thr[k]:g} rad, hidden states"),
            ("sphere", "erank", "effective rank, sphere tokens"),
            ("sphere", "agree", "token-wise agreement <z_model, x_flow>, sphere tokens"),
        ):
            pd = s["per_depth"][rep]

            def val(src, i, pd=pd, key=key):
                v = pd[src][key]["mean"][i]
                return v[k] if key == "clusters" else v

            rows = [{"depth": i, **{src: val(src, i) for src in srcs}} for i in range(L + 1)]
            mr = s["model_on_report_half"][rep].get(key)  # no agreement of the model with itself
            for i, r in enumerate(rows):
                r["model_report"] = None if mr is None else (mr[i][k] if key == "clusters" else mr[i])
            out.append(Table(columns=cols, rows=rows, title=f"{fam}: {what}", id=f"{fam}-{rep}-{key}", note=(
                f"{mi['name']} ({mi['arch']}, {mi['norm']} norm, {mi['positions']} positions, L = {L}, d = "
                f"{mi['d']}, H = {mi['heads']}); mean over {s['sentences']} sentences (flow (c): the "
                f"{len(s['corpus_index']) - len(s['corpus_index']) // 2} sentences of the report half of the "
                "main split, beside the model on the same half)."
            )))  # fmt: skip
        sk = s["sink"]
        times = s["fitted_times"][0]["times"]
        free = s.get("fitted_free")
        out.append(Table(
            columns=[Column("layer"), Column("model", "model", ".3f"), Column("hb", "bias-free heads", ".3f"),
                     Column("hk", "biases kept", ".3f"), Column("fa", "flow (a)", ".3f"),
                     Column("fb", "flow (b)", ".3f"), Column("T", "fitted T_l (main split)", ".2f"),
                     Column("Tf", "free-running T_l (main split)", ".2f")],
            rows=[{"layer": i, "model": sk["model"][i], "hb": sk["heads_biasfree"][i],
                   "hk": sk["heads_biases"][i], "fa": sk["flow_attention"][i], "fb": sk["flow_biases"][i],
                   "T": times[i], "Tf": None if free is None else free["times"][i]} for i in range(L)],
            title=f"{fam}: attention mass on special tokens per layer; fitted times",
            id=f"{fam}-sink",
            note="Special tokens: [CLS] and [SEP] (BERT), the first token (decoder). Heads at the model's "
            "own tokens (bias-free, biases kept) and at the flow's tokens entering the layer. Fitted T_l: "
            "teacher-forced (flow (c)) and free-running (its robustness variant), grid step "
            "1/steps_per_layer up to max_time.",
        ))  # fmt: skip
        for est, a in (s.get("scale_alt") or {}).items():
            keys = [v for v in SCALE_FLOWS if v != "frames"]  # (f) is (a) for pre-LN models
            out.append(Table(
                columns=[Column("depth"), Column("model", "model", ".3f"),
                         Column("no_mlp", LABELS["no_mlp"], ".3f"),
                         *[Column(v, LABELS[v], ".3f") for v in keys],
                         *[Column(f"{v}_alt", f"{LABELS[v][:3]} scale {est}", ".3f") for v in keys]],
                rows=[{"depth": i, "model": s["per_depth"]["sphere"]["model"]["cos"]["mean"][i],
                       "no_mlp": s["per_depth"]["sphere"]["no_mlp"]["cos"]["mean"][i],
                       **{v: s["per_depth"]["sphere"][v]["cos"]["mean"][i] for v in keys},
                       **{f"{v}_alt": a["cos"][v][i] for v in keys}} for i in range(L + 1)],
                title=f"{fam}: mean cosine, sphere tokens, scale estimator mean (declared) and {est}",
                id=f"{fam}-scale-{est}",
                note="Pre-LN: the flows divide the attention / MLP output by rho_l; declared rho_l = mean "
                f"token norm of the stream, alternative '{est}' = median norm of tokens 2..n. "
                "(f) is (a) here.",
            ))  # fmt: skip
        for K, a in (s.get("steps_alt") or {}).items():
            keys = [v for v in STEP_FLOWS if v in a["cos"]]
            sp = s["per_depth"]["sphere"]
            out.append(Table(
                columns=[Column("depth"), Column("model", "model", ".3f"),
                         Column("no_mlp", LABELS["no_mlp"], ".3f"),
                         *[Column(f"{v}_alt", f"{LABELS[v][:3]} K = {K}", ".3f") for v in keys],
                         *[Column(v, f"{LABELS[v][:3]} K = {summary.get('steps_per_layer', 'declared')}",
                                  ".3f") for v in keys]],
                rows=[{"depth": i, "model": sp["model"]["cos"]["mean"][i],
                       "no_mlp": sp["no_mlp"]["cos"]["mean"][i],
                       **{f"{v}_alt": a["cos"][v][i] for v in keys},
                       **{v: sp[v]["cos"]["mean"][i] for v in keys}} for i in range(L + 1)],
                title=f"{fam}: mean cosine, sphere tokens, {K} Euler steps per unit time and the declared",
                id=f"{fam}-steps-{K}",
                note="The robustness check 'step count' (config steps_alternatives): each flow rerun with "
                "K Euler steps per unit time from the same z_0; (n) and the model have no step. (c) is "
                f"refitted at K on the main split: T_l = {', '.join(f'{t:.2f}' for t in a['fitted_times'])}.",
            ))  # fmt: skip
        lad = s.get("step_ladder")
        if lad:
            Ks = sorted(int(K) for K in lad["values"])
            vids = list(lad["values"][str(Ks[0])])
            out.append(Table(
                columns=[Column("quantity"), *[Column(f"K{K}", f"K = {K}", ".3f") for K in Ks],
                         *[Column(f"m{K}", f"move {K} -> next", ".3f") for K in Ks[:-1]],
                         Column("tol", "tolerance", ".4f"), Column("conv", "converged at chosen K")],
                rows=[*({"quantity": v, **{f"K{K}": lad["values"][str(K)].get(v) for K in Ks},
                         **{f"m{K}": lad["moves"].get(str(K), {}).get(v) for K in Ks[:-1]},
                         "tol": lad["tolerance"][v], "conv": "yes" if lad["converged"][v] else "NO"}
                        for v in vids),
                      {"quantity": "CPU seconds of the rung (all flows, (c) refit)",
                       **{f"K{K}": lad["cpu_s"][str(K)] for K in Ks},
                       **{f"m{K}": None for K in Ks[:-1]}, "tol": None, "conv": None}],
                title=f"{fam}: step rule, chosen K = " + (", ".join(
                    f"{f} {K}" for f, K in lad["chosen"].items()) + " (per flow)" if isinstance(
                    lad["chosen"], dict) else f"{lad['chosen']}") + " Euler steps per unit time",
                id=f"{fam}-step-ladder",
                note="The step rule (config step_candidates, step_tolerance_share; review round 3, F2): each "
                "watched record's quantity (sphere tokens, declared depth summary) with the flows at K; the "
                "family's K is the smallest whose move to the next candidate is below the tolerance (share x "
                "criterion threshold) for every quantity; the ladder stops there. Every record and every "
                "robustness variant uses the chosen K; the other rungs are reported only (K = 4: the cost "
                "row of the runs before the rule). Per flow (config step_per_flow, since review round 5): "
                "each flow climbs on its own; an empty cell: the flow had converged at a lower rung and was "
                "not run there.",
            ))  # fmt: skip
        for check, a in (s.get("variants") or {}).items():
            for v, d in a.items():
                keys = [x for x in STEP_FLOWS if x in d["cos"]]
                what = (f"{v} sentences joined per input" if check in ("sentence length", "joined sentences")
                        else f"the null's {check} {v}")  # fmt: skip
                out.append(Table(
                    columns=[Column("depth"), Column("model", "model", ".3f"),
                             Column("no_mlp", LABELS["no_mlp"], ".3f"),
                             *[Column(x, LABELS[x], ".3f") for x in keys],
                             Column("model_report", "model, report half", ".3f"),
                             Column("fitted_time", LABELS["fitted_time"], ".3f")],
                    rows=[{"depth": i, **{x: d["cos"][x][i] for x in ("model", "no_mlp", *keys)},
                           "model_report": d["model_on_report_half"][i], "fitted_time": d["fitted_cos"][i]}
                          for i in range(L + 1)],
                    title=f"{fam}: mean cosine, sphere tokens, {what}",
                    id=f"{fam}-{check.replace(' ', '-')}-{v}",
                    note=f"The robustness check '{check}': {d['inputs']} inputs of {d['tokens_mean']:.1f} "
                    f"tokens on average ({d['tokens_range'][0]}-{d['tokens_range'][1]}); the model, (n) and "
                    f"every flow at the run's step (K = {s.get('step', summary.get('steps_per_layer'))}) on "
                    "them" + ("; 'joined sentences' changes the content as well as the length: k unrelated "
                              "sentences per input" if check == "joined sentences" else "")
                    + "; (c) fitted on the fit half of the main split seed and reported on the other "
                    "(beside the model on that half), T_l = "
                    f"{', '.join(f'{t:.2f}' for t in d['fitted_times'])}.",
                ))  # fmt: skip
    out.extend(verdict_tables(summary))
    return out


def _fmt(v: float | None) -> str:
    """A robustness value for the tables; None: unmeasured (a control does not fail there, review round 4)."""
    return "unmeasured" if v is None else f"{v:.3f}"


def _spec_tag(lab: str) -> str:
    """The table's short form of a record's null-specificity label (review rounds 5-7)."""
    for key, tag in (("not specific to training", "not specific to training"),
                     ("specific to training", "specific to training"),
                     ("specificity untested", "specificity untested"),
                     ("null cannot test this", "null cannot test this")):  # fmt: skip
        if key in lab:
            return f" ({tag})"
    return ""


def verdict_tables(summary: dict) -> list[Table]:
    """Per family: every verdict record (``summary["verdicts"]``) with its value, interval, the outcome at
    each step count (the robustness check "step count") and the checks whose outcomes disagree."""
    recs = summary.get("verdicts") or []
    fams = sorted(summary["families"], key=len, reverse=True)  # 'minilm-l3' before its prefix 'minilm'
    owner = {x["id"]: next((f for f in fams if x["id"].startswith(f"flows-{f}-")), None) for x in recs}
    out = []
    for fam in summary["families"]:
        rows = []
        for r in (x for x in recs if owner[x["id"]] == fam):
            res = r.get("result", {})
            step = next((x for x in r.get("robustness", []) if x["choice"] == "step count"
                         and any(v is not None for v in x["results"])), None)  # fmt: skip
            lad = res.get("step_ladder")
            ci = res.get("ci95") or [None, None]
            rows.append({
                "claim": r["id"].removeprefix(f"flows-{fam}-"),
                "verdict": r["verdict"] + _spec_tag(str(res.get("null_specificity", "")))
                + (f" ({res['unmeasured_main'].split(':')[0]})" if res.get("unmeasured_main") else "")
                # review round 6, F3, F4, F6: the verdict in words where it says more than the class
                + (f" -- {res['reading']}" if res.get("reading") and not res.get("unmeasured_main")
                   and res["reading"] != r["verdict"] else ""),
                # a null's description whose stand-still does not fail keeps its value (not tested)
                "value": res.get("value") if r["class"] == "test" or "stand_still" in res else None,
                "lo": ci[0], "hi": ci[1],
                "still": "" if "stand_still" not in res else "{:.3f} {}".format(
                    res["stand_still"]["value"], res["stand_still"]["outcome"]) + (
                    "" if not (p := res["stand_still"].get("paired_test")) else
                    f"; flow - still {p['value']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]: "
                    f"{p['named']}") + ("; paired test uninformative here (review round 6, F5)" if res.get(
                    "paired_test_uninformative") else ""),
                "unmeasured": "; ".join(x.split(":")[0] for x in res.get("unmeasured", [])),
                "steps": "; ".join(
                    f"K = {k}: {v:.3f}" for k, v in zip(lad["K"], lad["values"], strict=True)
                ) + "; chosen K = {}, {} (move {} {:g})".format(
                    lad["chosen"], "converged" if lad["converged"] else "NOT converged",
                    "- (no next rung), tolerance" if lad["move"] is None else "{:.3f} {}".format(
                        lad["move"], "<" if lad["move"] < lad["tolerance"] else ">="), lad["tolerance"],
                ) + ("" if lad.get("reported_K", lad["chosen"]) == lad["chosen"] else
                     f"; value reported at K = {lad['reported_K']}, checks at K = {lad['chosen']} (the "
                     f"ladder's sphere-token checks at K = {lad['reported_K']})")
                if lad else "" if step is None else "; ".join(
                    f"K = {k}: {_fmt(v)} {o}" for k, v, o in zip(step["values"], step["results"],
                                                               step["outcomes"], strict=True)),
                "other": "; ".join(
                    f"{x['choice']} {val}: {_fmt(v)} {o}" + (
                        f" (z_0 cos {z0[str(val)]:.3f})" if (z0 := (res.get("null_seed_z0") or {}).get(
                            "mean_cos_z0", {})) and str(val) in z0 and x["choice"] in NULL_CHECK.values()
                        else "")
                    for x in r.get("robustness", [])
                    if x["choice"] in ("sentence length", "joined sentences", *NULL_CHECK.values())
                    for val, v, o in zip(x["values"], x["results"], x["outcomes"], strict=True)),
                "disagree": ", ".join(x["choice"] for x in r.get("robustness", [])
                                      if x["verdict"] != res.get("outcome")),
            })  # fmt: skip
        if rows:
            out.append(Table(
                columns=[Column("claim"), Column("verdict"), Column("value", "value", ".3f"),
                         Column("lo", "CI lo", ".3f"), Column("hi", "CI hi", ".3f"),
                         Column("still", "stand-still control (tokens at z_0)"),
                         Column("steps", "step count (Euler steps per unit time)"),
                         Column("other", "joined sentences (per input) / null seed (z_0's mean cosine)"),
                         Column("disagree", "checks not agreeing with the main outcome"),
                         Column("unmeasured", "unmeasured values (left out of the verdict)")],
                rows=rows, title=f"{fam}: verdict records", id=f"{fam}-verdicts",
                note="Built from the records (summary.json, key 'verdicts'); value and 95% percentile "
                "bootstrap interval of the declared criterion on sphere tokens; identity and description "
                "records have no tested value (a null's record whose stand-still control does not fail the "
                "criterion is a description: its value is shown, not tested); stand-still control: the "
                "record's quantity for the tokens left at z_0 at every depth, its outcome under the same "
                "criterion (config stand_still_control) and the paired test that decides since review round "
                "5: flow - stand-still with its interval against the margin (config control_margin_*). A "
                "record whose main value is unmeasured (step not converged, collapse control) shows no value "
                "(the reason beside the verdict); '(not specific to training)': the same claim holds in a "
                "null (config null_specificity). Since review round 6 the verdict is followed by its reading "
                "where it says more ('main fails; undecided: ...', 'collapses: ...', 'fails where measurable "
                "(...)'; config verdict_reading), and '(specificity untested)' where no null can tell. "
                "Since review round 7 every test record carries its label ('(specific to training)', "
                "'(null cannot test this)'; config specificity_every_verdict).",
            ))  # fmt: skip
    return out


@study
class RealModelFlowsStudy(Study):
    name = "real_model_flows"
    description = (
        "issue 26 part 3: each layer of MiniLM-L6, MiniLM-L3 (ONNX) and SmolLM2 (GGUF) against five flows of "
        "its own heads (bias-free, biases kept, fitted time, the model's scores, + MLP)"
    )
    Config = FlowsConfig
    timing_keys = ("timing_s", "cpu_s")  # cpu_s: the step ladder's CPU seconds per rung

    def quick_params(self) -> dict:
        return {"families": ["tiny-bert", "tiny-llama"], "sentences": 8, "steps_per_layer": 2,
                "step_candidates": [2, 8], "max_time": 2.0, "bootstrap": 50}  # fmt: skip

    def plan(self, config) -> dict:
        # a family's computation does not depend on which other families run (it reads no `families`):
        # leaving the list out of its parameters lets the run store reuse it across family selections
        cfg = config.model_dump(mode="json", exclude={"families"})
        fn = "attnflow.studies.real_model_flows:family_task"
        # the step-count check reruns the flows at K steps: about K / steps_per_layer times their share
        alt = sum(K / config.steps_per_layer for K in _alt_steps(config))
        alt += sum(K / config.steps_per_layer for K in config.step_candidates)  # the ladder's rungs
        cost = {f: _LOAD[f] + _COST[f] * config.sentences * (1 + len(config.split_seeds) / 2 + alt)
                for f in config.families}  # fmt: skip
        # run order: the most expensive family first (SmolLM2 ~30 min wall beside the MiniLMs' ~5)
        return {
            f"family-{f}": ComputeTask(fn=fn, params={"config": cfg, "family": f}, cost_s=cost[f])
            for f in sorted(config.families, key=lambda f: -cost[f])
        }

    def analyse(self, config, runs: StudyRuns, out_dir: Path) -> StudyResult:
        c = config
        results = {f: runs.result(f"family-{f}") for f in c.families}
        summary = jsonable(
            {
                "thresholds": c.thresholds,
                "cluster_threshold": c.cluster_threshold,
                "steps_per_layer": c.steps_per_layer,
                "families": {
                    f: {**_family_summary(r, c), "verdict_data": _verdict_data(r)} for f, r in results.items()
                },
                "timing_s": {f: r["timing_s"] for f, r in results.items()},
            }
        )
        recs = records(summary, c)
        return StudyResult(summary=summary, verdicts=recs,
                           tables=tables({**summary, "verdicts": [r.to_json() for r in recs]}))  # fmt: skip
