"""The mean-field Transformer PDE (81) for the token density (issue 16)."""
