#!/usr/bin/env python3
"""Reference embeddings for the `minilm` embedder, computed another way.

A from-scratch BERT forward pass in numpy (float64, one sentence at a time, no
padding) over the same model folder: the safetensors file is parsed by hand
(an 8-byte header length, a JSON header, raw little-endian tensors), then mean
pooling and L2 normalisation as the model's modules.json prescribes. Nothing
here shares code with candle.

    reference.py MODEL_DIR < {"sentences": [...], "ids": [[...], ...]}

prints {"embeddings": [[...], ...], "tokenizer": "..."} as JSON on stdout.

Token ids: when the `tokenizers` package is importable (chromadb and
sentence-transformers both depend on it) the sentences are tokenised here,
with truncation set from sentence_bert_config.json, and must equal the ids the
Rust side sent, which checks its tokenizer setup; otherwise the sent ids are
used as they are.
"""

import json
import math
import os
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
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


def embed(ids, w, config):
    heads = config["num_attention_heads"]
    hidden = config["hidden_size"]
    head_dim = hidden // heads
    eps = config["layer_norm_eps"]
    n = len(ids)
    x = (
        w["embeddings.word_embeddings.weight"][ids]
        + w["embeddings.position_embeddings.weight"][:n]
        + w["embeddings.token_type_embeddings.weight"][0]
    )
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)

    def linear(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (
            linear(x, p + "attention.self." + m).reshape(n, heads, head_dim).transpose(1, 0, 2)
            for m in ("query", "key", "value")
        )
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(n, hidden)
        attn = linear(context, p + "attention.output.dense") + x
        x = layer_norm(attn, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], eps)
        inner = gelu(linear(x, p + "intermediate.dense"))
        out = linear(inner, p + "output.dense") + x
        x = layer_norm(out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)

    pooled = x.mean(0)  # every token is real: no padding here
    return pooled / max(np.linalg.norm(pooled), 1e-12)


def tokenize(model_dir, sentences):
    try:
        from tokenizers import Tokenizer
        import tokenizers
    except ImportError:
        return None, None
    max_len = 512
    st_config = os.path.join(model_dir, "sentence_bert_config.json")
    if os.path.exists(st_config):
        with open(st_config) as f:
            max_len = json.load(f).get("max_seq_length", max_len)
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_len)
    return [e.ids for e in tok.encode_batch(sentences)], f"tokenizers {tokenizers.__version__}"


def main():
    model_dir = sys.argv[1]
    request = json.load(sys.stdin)
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    weights = load_safetensors(os.path.join(model_dir, "model.safetensors"))

    ids, source = tokenize(model_dir, request["sentences"])
    if ids is None:
        ids, source = request["ids"], "ids from Rust (python tokenizers not installed)"
    elif ids != request["ids"]:
        bad = next(i for i, (a, b) in enumerate(zip(ids, request["ids"])) if a != b)
        sys.exit(f"token ids differ for sentence {bad}: python {ids[bad][:20]}... rust {request['ids'][bad][:20]}...")

    embeddings = [embed(np.array(s, dtype=np.int64), weights, config).tolist() for s in ids]
    json.dump({"embeddings": embeddings, "tokenizer": source}, sys.stdout)


if __name__ == "__main__":
    main()
