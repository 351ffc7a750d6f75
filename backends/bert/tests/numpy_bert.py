"""A from-scratch BERT encoder in numpy: the reference the candle models are checked against.

float64, one sequence at a time, no padding. The safetensors file is parsed by hand (an 8-byte
header length, a JSON header, raw little-endian tensors); nothing here shares code with candle.
Imported by backends/minilm/tests/reference.py (mean pooling on top) and
rerankers/cross-encoder/tests/tiny_model.py (pooler and classifier on top).
"""

import json
import math
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def load_safetensors(path):
    """The floating-point tensors of a safetensors file as float64, named without the `bert.`
    prefix of transformers checkpoints. Integer buffers (`position_ids`) are not weights: skipped."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] not in DTYPES:
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data[base + start : base + end], dtype=DTYPES[info["dtype"]])
        tensors[name.removeprefix("bert.")] = array.reshape(info["shape"]).astype(np.float64)
    return tensors


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


ERF = np.vectorize(math.erf)


def gelu(x):
    # BERT's "gelu": the exact form with erf, not the tanh approximation.
    return 0.5 * x * (1.0 + ERF(x / math.sqrt(2.0)))


def linear(w, x, name):
    return x @ w[name + ".weight"].T + w[name + ".bias"]


def encode(ids, type_ids, w, config):
    """The last hidden states, (len(ids), hidden_size), of one unpadded sequence."""
    heads = config["num_attention_heads"]
    hidden = config["hidden_size"]
    head_dim = hidden // heads
    eps = config["layer_norm_eps"]
    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][type_ids]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)

    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (
            linear(w, x, p + "attention.self." + m).reshape(n, heads, head_dim).transpose(1, 0, 2)
            for m in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, hidden)
        attn = linear(w, context, p + "attention.output.dense") + x
        x = layer_norm(attn, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        inner = gelu(linear(w, x, p + "intermediate.dense"))
        out = linear(w, inner, p + "output.dense") + x
        x = layer_norm(out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return x
