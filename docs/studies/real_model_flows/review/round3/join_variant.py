"""The 'sentence length' variant of a committed real_model_flows run, computed apart and merged into it.

Usage (repository root): PYTHONPATH=src python docs/studies/real_model_flows/review/round3/join_variant.py
DIR FAMILY [JOIN]. Reads DIR/study.json (config) and DIR/summary.json (the drawn corpus_index), rebuilds the
same draw, joins JOIN (default 3) consecutive drawn sentences, runs the study's own ``_lite`` on them (the
code path of the rerun studies) and merges the result into the summary as the family task would have
(``verdict_data.variants`` and ``variants``); then run scripts/regen_verdicts.py and scripts/regen_tables.py
on DIR. Used for SmolLM2 (24 sentences), whose full rerun did not fit the session.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from attnflow.studies.multihead_common import jsonable, one_thread
from attnflow.studies.real_model import load_corpus
from attnflow.studies.real_model_flows import (
    FlowsConfig,
    _lite,
    _verdict_data,
    joined_inputs,
    load_family,
    variants_summary,
)  # fmt: skip

d, fam = Path(sys.argv[1]), sys.argv[2]
join = int(sys.argv[3]) if len(sys.argv) > 3 else 3
meta = json.loads((d / "study.json").read_text())
c = FlowsConfig.model_validate({k: v for k, v in meta["config"].items() if k in FlowsConfig.model_fields})
summary = json.loads((d / "summary.json").read_text())
fs = summary["families"][fam]
t0 = time.perf_counter()
with one_thread(), torch.no_grad():
    w, tokenize, _ = load_family(fam, c.seed)
    corpus = load_corpus()
    order = np.random.default_rng(c.corpus_seed).permutation(len(corpus))
    chosen = []
    for k in order:  # the draw of family_task
        t = tokenize(corpus[k])
        if 3 <= len(t) <= min(c.max_tokens, w.max_length):
            chosen.append(int(k))
        if len(chosen) == c.sentences:
            break
    assert chosen == fs["corpus_index"], "not the committed draw"
    toks = [tokenize(x) for x in joined_inputs([corpus[k] for k in chosen], join)]
    lite = _lite(w, toks, c)
res = jsonable({"sentence length": {str(join): lite}})
(d / f"join{join}_{fam}.json").write_text(json.dumps(res))  # the computation, kept before the merge
fs["verdict_data"]["variants"] = {
    **fs["verdict_data"].get("variants", {}),
    **jsonable(_verdict_data({"tokens": [], "stats": {}, "fitted": [], "variants": res})["variants"]),
}
fs["variants"] = {**fs.get("variants", {}), **jsonable(variants_summary(res))}
fs["timing_s"] = {**fs.get("timing_s", {}), f"join{join}_apart": time.perf_counter() - t0}
text = (d / "summary.json").read_text()
indent = len(text.splitlines()[1]) - len(text.splitlines()[1].lstrip(" "))
end = "\n" if text.endswith("\n") else ""
(d / "summary.json").write_text(json.dumps(summary, indent=indent or 1) + end)
print(fam, len(toks), "inputs", [len(t) for t in toks], f"{time.perf_counter() - t0:.0f} s")
