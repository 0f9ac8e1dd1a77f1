"""The external side of the Llama interop test (Python's safetensors and numpy, not Optimus).

  llama_check.py write DIR               a random tiny Llama in Hugging Face's names and layout: config.json (grouped-
                                         query attention, an untied head) and two shards with their index
  llama_check.py check-logits DIR FILE   FILE's logits (Optimus's, one row per token) equal a numpy forward of DIR's
                                         model within 1e-5 relative
  llama_check.py check-export DIR OUT    OUT (Optimus's export) holds exactly DIR's tensors and config

The forward is written here from transformers' LlamaForCausalLM: RMSNorm x / sqrt(mean(x^2) + eps) * w, rotate-half
rotary embeddings with inv_freq = theta^(-2i/d), causal softmax attention with key/value heads repeated for their
query groups, SwiGLU down(silu(gate(x)) * up(x)), nn.Linear's y = x W^T.
"""
import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 50, "hidden_size": 32,
          "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 500.0, "max_position_embeddings": 8,
          "tie_word_embeddings": False, "attention_bias": False, "torch_dtype": "float32"}


def shapes(c):
    h, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    kv = c["num_key_value_heads"] * h // c["num_attention_heads"]
    out = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,), "lm_head.weight": (v, h)}
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                    p + "self_attn.q_proj.weight": (h, h), p + "self_attn.k_proj.weight": (kv, h),
                    p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, h),
                    p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h),
                    p + "mlp.down_proj.weight": (h, f)})
    return out


def load_dir(d):
    config = json.load(open(os.path.join(d, "config.json")))
    index = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    tensors = {}
    for f in files:
        tensors.update(load_file(os.path.join(d, f)))
    return config, tensors


def write(d):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(5)
    tensors = {}
    for name, shape in shapes(CONFIG).items():
        scale = 0.3 if len(shape) == 2 else 0.1
        base = 1.0 if len(shape) == 1 else 0.0  # norm weights near 1
        tensors[name] = (base + scale * rng.standard_normal(shape)).astype(np.float32)
    names = sorted(tensors)
    halves = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for k, part in enumerate(halves):
        file = f"model-{k + 1:05d}-of-00002.safetensors"
        save_file({n: tensors[n] for n in part}, os.path.join(d, file), metadata={"format": "pt"})
        weight_map.update({n: file for n in part})
    json.dump({"metadata": {"total_size": sum(t.nbytes for t in tensors.values())}, "weight_map": weight_map},
              open(os.path.join(d, "model.safetensors.index.json"), "w"))
    json.dump(CONFIG, open(os.path.join(d, "config.json"), "w"))


def forward(c, t, tokens):
    h, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    d, eps, theta = h // heads, c["rms_norm_eps"], c["rope_theta"]
    w = {k: v.astype(np.float64) for k, v in t.items()}
    n = len(tokens)

    def rms(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    inv_freq = theta ** (-np.arange(0, d, 2) / d)  # [d/2]
    angle = np.arange(n)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(np.concatenate([angle, angle], -1)), np.sin(np.concatenate([angle, angle], -1))  # [n, d]

    def rotate_half(x):
        return np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)

    x = w["model.embed_tokens.weight"][tokens]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        a = rms(x, w[p + "input_layernorm.weight"])
        q = (a @ w[p + "self_attn.q_proj.weight"].T).reshape(n, heads, d).transpose(1, 0, 2)
        k = (a @ w[p + "self_attn.k_proj.weight"].T).reshape(n, kv, d).transpose(1, 0, 2)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).reshape(n, kv, d).transpose(1, 0, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        k, v = np.repeat(k, heads // kv, axis=0), np.repeat(v, heads // kv, axis=0)  # repeat_kv
        s = q @ k.transpose(0, 2, 1) / np.sqrt(d) + np.triu(np.full((n, n), -np.inf), 1)
        s = np.exp(s - s.max(-1, keepdims=True))
        o = (s / s.sum(-1, keepdims=True)) @ v  # [heads, n, d]
        x = x + o.transpose(1, 0, 2).reshape(n, h) @ w[p + "self_attn.o_proj.weight"].T
        m = rms(x, w[p + "post_attention_layernorm.weight"])
        g, u = m @ w[p + "mlp.gate_proj.weight"].T, m @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    head = w["model.embed_tokens.weight"] if c.get("tie_word_embeddings") else w["lm_head.weight"]
    return rms(x, w["model.norm.weight"]) @ head.T


def check_logits(d, path):
    c, t = load_dir(d)
    n = c["max_position_embeddings"]
    tokens = [(7 * k + 1) % c["vocab_size"] for k in range(n)]
    want = forward(c, t, tokens)
    got = np.loadtxt(path, ndmin=2)
    assert got.shape == want.shape, f"logits {got.shape}, expected {want.shape}"
    rel = np.abs(got - want).max() / np.abs(want).max()
    print(f"llama_check: Optimus's logits against numpy's Llama forward: max relative difference {rel:.3g}")
    assert rel < 1e-5, f"relative difference {rel} above 1e-5"


def check_export(d, out):
    c, t = load_dir(d)
    c2, t2 = load_dir(out)
    assert os.path.exists(os.path.join(out, "model.safetensors.index.json")), "the export is not sharded"
    assert sorted(t) == sorted(t2), f"tensors differ: {sorted(set(t) ^ set(t2))}"
    for name in t:
        assert t2[name].dtype == np.float32 and t2[name].shape == t[name].shape, name
        assert np.array_equal(t2[name], t[name]), f"{name} differs"
    for key in ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "rms_norm_eps", "rope_theta", "max_position_embeddings", "tie_word_embeddings",
                "hidden_act"]:
        assert c2[key] == c[key], f"config {key}: {c2[key]} vs {c[key]}"
    print(f"llama_check: the export's {len(t2)} tensors and config equal the original's")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "write":
        write(sys.argv[2])
    elif mode == "check-logits":
        check_logits(sys.argv[2], sys.argv[3])
    elif mode == "check-export":
        check_export(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown mode {mode}")
