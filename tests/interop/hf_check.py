"""The external side of the GPT-2 interop test (Python's safetensors and numpy, not Optimus).

  hf_check.py check-export FILE EXPECTED   FILE has exactly Hugging Face GPT-2's names and shapes for the model in
                                           EXPECTED ("name d0 [d1] values..." per line), with those values (float32)
  hf_check.py write-import FILE EXPECTED   writes a GPT2LMHeadModel-style file (transformer. prefix, attn.bias and
                                           masked_bias buffers, a tied lm_head.weight, no n_head) and EXPECTED
"""
import sys

import numpy as np
from safetensors.numpy import load_file, save_file


def gpt2_shapes(vocab, ctx, layers, h, ffn):
    shapes = {"wte.weight": (vocab, h), "wpe.weight": (ctx, h)}
    for l in range(layers):
        p = f"h.{l}."
        shapes.update({p + "ln_1.weight": (h,), p + "ln_1.bias": (h,), p + "attn.c_attn.weight": (h, 3 * h),
                       p + "attn.c_attn.bias": (3 * h,), p + "attn.c_proj.weight": (h, h), p + "attn.c_proj.bias": (h,),
                       p + "ln_2.weight": (h,), p + "ln_2.bias": (h,), p + "mlp.c_fc.weight": (h, ffn),
                       p + "mlp.c_fc.bias": (ffn,), p + "mlp.c_proj.weight": (ffn, h), p + "mlp.c_proj.bias": (h,)})
    shapes.update({"ln_f.weight": (h,), "ln_f.bias": (h,)})
    return shapes


def read_expected(path):
    out = {}
    for line in open(path):
        fields = line.split()
        name, rest = fields[0], fields[1:]
        dims = 2 if name.endswith(".weight") and not (".ln_" in name or name.startswith("ln_f")) else 1
        shape = tuple(int(d) for d in rest[:dims])
        out[name] = np.array([float(v) for v in rest[dims:]], dtype=np.float32).reshape(shape)
    return out


def check_export(path, expected_path):
    got = load_file(path)
    want = read_expected(expected_path)
    vocab, h = want["wte.weight"].shape
    ctx = want["wpe.weight"].shape[0]
    layers = sum(1 for n in want if n.endswith("attn.c_attn.weight"))
    ffn = want["h.0.mlp.c_fc.weight"].shape[1]
    names = gpt2_shapes(vocab, ctx, layers, h, ffn)
    assert set(got) == set(names), f"names differ: {sorted(set(got) ^ set(names))}"
    for name, shape in names.items():
        assert got[name].shape == shape, f"{name}: shape {got[name].shape}, GPT-2 has {shape}"
        assert got[name].dtype == np.float32, f"{name}: {got[name].dtype}"
        assert np.array_equal(got[name], want[name]), f"{name}: values differ from what Optimus gathered"
    print(f"hf_check: {len(got)} tensors with GPT-2's names and shapes and Optimus' values")


def write_import(path, expected_path):
    rng = np.random.default_rng(20240326)
    vocab, ctx, layers, h, ffn = 61, 16, 2, 128, 256  # h = 128: two heads of GPT-2's 64
    tensors = {}
    with open(expected_path, "w") as out:
        for name, shape in gpt2_shapes(vocab, ctx, layers, h, ffn).items():
            value = (rng.standard_normal(shape) * 0.05).astype(np.float32)
            tensors["transformer." + name] = value
            out.write(" ".join([name] + [str(d) for d in shape] + [repr(float(v)) for v in value.ravel()]) + "\n")
    for l in range(layers):  # buffers a reader must ignore
        tensors[f"transformer.h.{l}.attn.bias"] = np.tril(np.ones((1, 1, ctx, ctx), dtype=np.float32))
        tensors[f"transformer.h.{l}.attn.masked_bias"] = np.array(-1e4, dtype=np.float32)
    tensors["lm_head.weight"] = tensors["transformer.wte.weight"].copy()
    save_file(tensors, path, metadata={"format": "pt"})
    print(f"hf_check: wrote {len(tensors)} tensors to {path}")


if __name__ == "__main__":
    mode, path, expected = sys.argv[1:4]
    {"check-export": check_export, "write-import": write_import}[mode](path, expected)
