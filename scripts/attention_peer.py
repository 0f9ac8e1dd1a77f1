#!/usr/bin/env python3
"""The fused causal attention's peer on a GPU, for optimus-bench attention's rows beside it.

PyTorch's scaled_dot_product_attention (is_causal=True, bf16) with each backend it has — FlashAttention-2, cuDNN,
memory-efficient — forced in turn, at optimus-bench attention's shapes, its TFLOP/s counted the same way (forward
2 b heads s^2 d, the causal half of 4 b heads s^2 d; backward 2.5 times that) from the median of the iterations.
Run on the lent GPU machine by scripts/lent_machine.sh (its image has PyTorch); prints one line and exits 0 where
there is no PyTorch or no GPU.

    scripts/attention_peer.py [--b 2] [--heads 16] [--d 128] [--s 1024,2048,4096,8192] [--iters 5]
"""
import argparse
import statistics
import sys
import time


def median_ms(run, sync, warmup, iters):
    for _ in range(warmup):
        run()
    sync()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        run()
        sync()
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--b", type=int, default=2)
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--s", default="1024,2048,4096,8192")
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args()
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"attention_peer.py: no PyTorch with torch.nn.attention here ({e})")
        return 0
    if not torch.cuda.is_available():
        print("attention_peer.py: PyTorch sees no GPU")
        return 0
    print(f"# peer: PyTorch {torch.__version__} (cuDNN {torch.backends.cudnn.version()}) on "
          f"{torch.cuda.get_device_name(0)}: F.scaled_dot_product_attention(is_causal=True), bf16, "
          f"b={args.b} heads={args.heads} d={args.d}; TFLOP/s as optimus-bench attention counts them")
    print(f"# {'backend':>19} {'s':>6} {'fwd_ms':>9} {'bwd_ms':>9} {'fwd_TFLOP/s':>11} {'bwd_TFLOP/s':>11} "
          f"{'TFLOP/s':>8}")
    sync = torch.cuda.synchronize
    for name in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"):
        backend = getattr(SDPBackend, name, None)
        if backend is None:
            print(f"  {name:>19}: not in this PyTorch")
            continue
        for s in (int(x) for x in args.s.split(",")):
            shape = (args.b, args.heads, s, args.d)
            q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
            try:
                with sdpa_kernel(backend):
                    fwd = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), sync, 2,
                                    args.iters)
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    grad = torch.randn_like(out)
                    bwd = median_ms(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True), sync, 2,
                                    args.iters)
            except RuntimeError as e:
                print(f"  {name:>19} {s:>6}: not run ({str(e).splitlines()[0][:100]})")
                continue
            flops = 2.0 * args.b * args.heads * s * s * args.d
            print(f"  {name:>19} {s:>6} {fwd:9.3f} {bwd:9.3f} {flops / fwd / 1e9:11.1f} {2.5 * flops / bwd / 1e9:11.1f} "
                  f"{3.5 * flops / (fwd + bwd) / 1e9:8.1f}")
            del q, k, v, out, grad
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
