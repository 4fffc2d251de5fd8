"""Reviewer check, round 2: does the study's sentence-length cap (max_tokens = 24) bind?

Token counts of every sentence of the shipped corpus under a family's tokenizer.
Usage: PYTHONPATH=src python corpus_lengths.py FAMILY
"""

import sys

import numpy as np

from attnflow.studies.real_model import load_corpus
from attnflow.studies.real_model_flows import load_family

fam = sys.argv[1]
_, tokenize, _ = load_family(fam, 0)
n = np.array([len(tokenize(s)) for s in load_corpus()])
print(f"{fam}: {len(n)} sentences, tokens min {n.min()} median {np.median(n):.0f} max {n.max()}; "
      f"share > 24: {(n > 24).mean():.3f}; share < 3: {(n < 3).mean():.3f}")
