#!/usr/bin/env python3
"""Reference embeddings for the `minilm` embedder, computed another way.

The from-scratch numpy BERT encoder of backends/bert/tests/numpy_bert.py
(float64, one sentence at a time, no padding, nothing shared with candle) over
the same model folder, then mean pooling and L2 normalisation as the model's
modules.json prescribes.

    reference.py MODEL_DIR < {"sentences": [...], "ids": [[...], ...]}

prints {"embeddings": [[...], ...], "tokenizer": "..."} as JSON on stdout.

Token ids: when the `tokenizers` package is importable (chromadb and
sentence-transformers both depend on it) the sentences are tokenised here,
with truncation set from sentence_bert_config.json, and must equal the ids the
Rust side sent, which checks its tokenizer setup; otherwise the sent ids are
used as they are.
"""

import json
import os
import sys

import numpy as np

# The numpy BERT encoder is shared with the other candle model's reference; no __pycache__ is
# left beside it in the source tree.
sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bert", "tests"))
import numpy_bert  # noqa: E402


def embed(ids, w, config):
    x = numpy_bert.encode(ids, np.zeros_like(ids), w, config)
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
    weights = numpy_bert.load_safetensors(os.path.join(model_dir, "model.safetensors"))

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
