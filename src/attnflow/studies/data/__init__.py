"""Data shipped with the studies: ``corpus.txt``, short English sentences written for attnflow."""
