"""The external side of the BERT interop test (Python's safetensors and numpy, not Optimus).

  bert_check.py write DIR BATCH              a random tiny BertForMaskedLM in Hugging Face's names and layout:
                                             config.json and two shards with their index (one of them also holding
                                             the tied decoder and BertForPreTraining's pooler, which a reader passes
                                             over); and a fixed batch in BATCH (token ids, token types, lengths and
                                             targets, one line each, -1 where a position is not predicted)
  bert_check.py check-loss DIR BATCH FILE    FILE's loss (Optimus's) equals a numpy forward of DIR's model on BATCH
                                             within 1e-5 relative
  bert_check.py check-export DIR OUT         OUT (Optimus's export) holds exactly DIR's model tensors and config
  bert_check.py variant DIR OUT KEY VALUE    a copy of DIR whose config.json has KEY = VALUE (JSON): what a reader
                                             must refuse, naming the field

The forward is written here from transformers' BertForMaskedLM: embeddings word + position + token type, LayerNorm;
each layer post-LayerNorm, x = LN(x + attention(x)), x = LN(x + output(gelu(intermediate(x)))), the attention
bidirectional with the padding's keys masked (transformers adds the dtype's most negative value to their scores),
gelu the exact erf form; the head dense, gelu, LayerNorm, then the decoder tied to the word embeddings plus
cls.predictions.bias; the loss the mean cross-entropy over the predicted positions; nn.Linear's y = x W^T + b.
"""
import json
import math
import os
import shutil
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

CONFIG = {"architectures": ["BertForMaskedLM"], "model_type": "bert", "vocab_size": 50, "hidden_size": 32,
          "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 8,
          "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu", "position_embedding_type": "absolute",
          "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "tie_word_embeddings": True,
          "pad_token_id": 0, "torch_dtype": "float32"}
PASSED_OVER = ["cls.predictions.decoder.weight", "cls.predictions.decoder.bias", "bert.pooler.dense.weight",
               "bert.pooler.dense.bias"]


def shapes(c):
    h, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    e = "bert.embeddings."
    out = {e + "word_embeddings.weight": (v, h), e + "position_embeddings.weight": (c["max_position_embeddings"], h),
           e + "token_type_embeddings.weight": (c["type_vocab_size"], h), e + "LayerNorm.weight": (h,),
           e + "LayerNorm.bias": (h,), "cls.predictions.transform.dense.weight": (h, h),
           "cls.predictions.transform.dense.bias": (h,), "cls.predictions.transform.LayerNorm.weight": (h,),
           "cls.predictions.transform.LayerNorm.bias": (h,), "cls.predictions.bias": (v,)}
    for l in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{l}."
        for lin, shape in [("attention.self.query", (h, h)), ("attention.self.key", (h, h)),
                           ("attention.self.value", (h, h)), ("attention.output.dense", (h, h)),
                           ("intermediate.dense", (f, h)), ("output.dense", (h, f))]:
            out[p + lin + ".weight"] = shape
            out[p + lin + ".bias"] = (shape[0],)
        for norm in ["attention.output.LayerNorm", "output.LayerNorm"]:
            out[p + norm + ".weight"] = (h,)
            out[p + norm + ".bias"] = (h,)
    return out


def load_dir(d):
    config = json.load(open(os.path.join(d, "config.json")))
    index = os.path.join(d, "model.safetensors.index.json")
    files = ["model.safetensors"]
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    tensors = {}
    for f in files:
        tensors.update(load_file(os.path.join(d, f)))
    return config, tensors


def write(d, batch_path):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(11)
    tensors = {}
    for name, shape in shapes(CONFIG).items():
        norm_weight = "LayerNorm.weight" in name
        scale = 0.3 if len(shape) == 2 else 0.1
        tensors[name] = ((1.0 if norm_weight else 0.0) + scale * rng.standard_normal(shape)).astype(np.float32)
    names = sorted(tensors)
    halves = [names[: len(names) // 2], names[len(names) // 2:]]
    # The tied decoder as transformers may save it, and BertForPreTraining's pooler: what a reader passes over.
    extra = {"cls.predictions.decoder.weight": tensors["bert.embeddings.word_embeddings.weight"],
             "cls.predictions.decoder.bias": tensors["cls.predictions.bias"],
             "bert.pooler.dense.weight": rng.standard_normal((32, 32)).astype(np.float32),
             "bert.pooler.dense.bias": rng.standard_normal((32,)).astype(np.float32)}
    weight_map = {}
    for k, part in enumerate(halves):
        file = f"model-{k + 1:05d}-of-00002.safetensors"
        content = {n: tensors[n] for n in part}
        if k == 1:
            content.update(extra)
        save_file(content, os.path.join(d, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in content})
    json.dump({"metadata": {"total_size": sum(t.nbytes for t in tensors.values())}, "weight_map": weight_map},
              open(os.path.join(d, "model.safetensors.index.json"), "w"))
    json.dump(CONFIG, open(os.path.join(d, "config.json"), "w"))
    # Two sequences of 8: the second padded after 5 positions (PAD 0, type 0); types 1 from the middle of each
    # sequence's real tokens; every third real position predicted.
    s, v = CONFIG["max_position_embeddings"], CONFIG["vocab_size"]
    lengths = [8, 5]
    tokens, types, targets = [], [], []
    for b, length in enumerate(lengths):
        for t in range(s):
            real = t < length
            tokens.append((7 * t + 3 * b + 1) % v if real else 0)
            types.append(1 if real and t >= length // 2 else 0)
            targets.append((5 * t + b + 2) % v if real and t % 3 == 1 else -1)
    with open(batch_path, "w") as f:
        for row in (tokens, types, lengths, targets):
            f.write(" ".join(str(x) for x in row) + "\n")


def read_batch(path):
    rows = [[int(x) for x in line.split()] for line in open(path)]
    return rows[0], rows[1], rows[2], rows[3]


def forward_loss(c, t, tokens, types, lengths, targets):
    h, heads, eps = c["hidden_size"], c["num_attention_heads"], c["layer_norm_eps"]
    s, d = c["max_position_embeddings"], h // heads
    w = {k: v.astype(np.float64) for k, v in t.items()}
    erf = np.vectorize(math.erf)

    def ln(x, name):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * w[name + ".weight"] + w[name + ".bias"]

    def lin(x, name):
        return x @ w[name + ".weight"].T + w[name + ".bias"]

    def gelu(x):
        return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))

    batch = len(lengths)
    tokens, types = np.array(tokens).reshape(batch, s), np.array(types).reshape(batch, s)
    e = "bert.embeddings."
    x = w[e + "word_embeddings.weight"][tokens] + w[e + "position_embeddings.weight"][np.arange(s)][None] + \
        w[e + "token_type_embeddings.weight"][types]
    x = ln(x, e + "LayerNorm")  # [b, s, h]
    # transformers' extended attention mask: 0 where a key is real, the most negative float where it is padding
    key_mask = np.where(np.arange(s)[None, :] < np.array(lengths)[:, None], 0.0, np.finfo(np.float64).min)
    for l in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{l}."

        def split(y):
            return y.reshape(batch, s, heads, d).transpose(0, 2, 1, 3)  # [b, heads, s, d]

        q, k, v = (split(lin(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + key_mask[:, None, None, :]
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        context = (scores / scores.sum(-1, keepdims=True)) @ v  # [b, heads, s, d]
        context = context.transpose(0, 2, 1, 3).reshape(batch, s, h)
        x = ln(x + lin(context, p + "attention.output.dense"), p + "attention.output.LayerNorm")
        x = ln(x + lin(gelu(lin(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm")
    y = ln(gelu(lin(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
    logits = (y @ w[e + "word_embeddings.weight"].T + w["cls.predictions.bias"]).reshape(batch * s, -1)
    targets = np.array(targets)
    predicted = targets != -1
    logits, targets = logits[predicted], targets[predicted]
    top = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - top).sum(-1)) + top[:, 0]
    return float((log_z - logits[np.arange(len(targets)), targets]).mean())


def check_loss(d, batch_path, path):
    c, t = load_dir(d)
    want = forward_loss(c, t, *read_batch(batch_path))
    got = float(open(path).read())
    rel = abs(got - want) / abs(want)
    print(f"bert_check: Optimus's masked-LM loss {got:.9g} against numpy's BertForMaskedLM {want:.9g}: relative "
          f"difference {rel:.3g}")
    assert rel < 1e-5, f"relative difference {rel} above 1e-5"


def check_export(d, out):
    c, t = load_dir(d)
    c2, t2 = load_dir(out)
    assert os.path.exists(os.path.join(out, "model.safetensors.index.json")), "the export is not sharded"
    model = {n: v for n, v in t.items() if n not in PASSED_OVER}
    assert sorted(model) == sorted(t2), f"tensors differ: {sorted(set(model) ^ set(t2))}"
    for name in model:
        assert t2[name].dtype == np.float32 and t2[name].shape == model[name].shape, name
        assert np.array_equal(t2[name], model[name]), f"{name} differs"
    for key in ["architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                "num_attention_heads", "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "hidden_act",
                "position_embedding_type"]:
        assert c2[key] == c[key], f"config {key}: {c2[key]} vs {c[key]}"
    print(f"bert_check: the export's {len(t2)} tensors and config equal the original's")


def variant(d, out, key, value):
    shutil.copytree(d, out)
    config = json.load(open(os.path.join(out, "config.json")))
    config[key] = json.loads(value)
    json.dump(config, open(os.path.join(out, "config.json"), "w"))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "write":
        write(sys.argv[2], sys.argv[3])
    elif mode == "check-loss":
        check_loss(sys.argv[2], sys.argv[3], sys.argv[4])
    elif mode == "check-export":
        check_export(sys.argv[2], sys.argv[3])
    elif mode == "variant":
        variant(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        sys.exit(f"unknown mode {mode}")
