"""The loading shared by the review scripts that rerun a family: its weights and the study's sentence draw.

Import from a script in review/roundN/ after ``sys.path.insert(0, <review/>)``, as report_common.
"""

from __future__ import annotations

import numpy as np


def family_weights(family: str, c):
    """The weights and tokenizer of ``family`` as ``real_model_flows.family_task`` loads them: a null family
    (``null_base`` not None) is its trained base's weights made null with ``c.null_seeds[0]``."""
    from attnflow.studies.real_model_flows import load_family, null_base, null_weights

    base = null_base(family)
    if base is None:
        w, tokenize, _ = load_family(family, c.seed)
    else:
        trained, tokenize, _ = load_family(base, c.seed)
        w = null_weights(family, trained, c.null_seeds[0], keep_embeddings=c.permuted_embeddings == "keep")
    return w, tokenize


def draw_sentences(tokenize, max_length: int, corpus_seed: int, max_tokens: int, n: int):
    """The study's sentence draw: the corpus in the order ``corpus_seed`` permutes it, the sentences of
    3..min(``max_tokens``, ``max_length``) tokens, the first ``n``. Returns (token ids, corpus indices)."""
    from attnflow.studies.real_model import load_corpus

    corpus = load_corpus()
    order = np.random.default_rng(corpus_seed).permutation(len(corpus))
    ids, idx = [], []
    for k in order:
        t = tokenize(corpus[k])
        if 3 <= len(t) <= min(max_tokens, max_length):
            ids.append(t)
            idx.append(int(k))
        if len(ids) == n:
            break
    return ids, idx


def stored_config(study_dir):
    """The study's config as a committed directory ran it (``study.json``; fields added since take their
    declared defaults, as ``scripts/regen_verdicts.py`` reads it) and the directory's summary."""
    import json

    from attnflow.studies import get_study

    study = get_study("real_model_flows")
    meta = json.loads((study_dir / "study.json").read_text())
    fields = study.Config.model_fields
    c = study.Config.model_validate({k: v for k, v in meta["config"].items() if k in fields})
    return c, json.loads((study_dir / "summary.json").read_text())
