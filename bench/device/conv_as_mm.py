"""Is a convolution with few input channels faster as a gather (im2col) and a GEMM than as cuDNN's convolution?

The stem convolutions of CNNs read 3 channels: cuDNN pads them to 8 and runs a tensor-core kernel with most of its
K dimension zero (resnet50's 7x7 stem is 15% of a tuned bf16 step on the H200). Here each such convolution, in
channels-last bf16, is timed as eager cuDNN, as Inductor compiles it (default and max-autotune-no-cudagraphs), and as
a gather (im2col, K padded to a multiple of 8) and one GEMM, and as a stride-1 convolution over the input's
space-to-depth form (3 channels become 12 for stride 2), each eager and compiled the same two ways, against eager's
output. CUDA-event medians
of 200 runs after 25 warm-up runs, in one process.

    python bench/device/conv_as_mm.py --out $OUT/conv-as-mm.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
from collections.abc import Sequence
from typing import Any

import torch
import torch._dynamo

from tuner.backend.hooks.conv_rewrite import s2d_weight  # the rewrite's own weight, as the fusion study applies it


def weight_matrix(w: Any) -> Any:
    """The convolution's weight ``[OC, C, KH, KW]`` as the GEMM's right operand ``[K, OC]`` with K = KH*KW*C in the
    gather's order, K padded with zero rows to a multiple of 8 (16-byte rows for the GEMM's loads)."""
    import torch.nn.functional as F

    oc, c, kh, kw = w.shape
    wm = w.permute(2, 3, 1, 0).reshape(kh * kw * c, oc)
    pad = -wm.shape[0] % 8
    return F.pad(wm, (0, 0, 0, pad)) if pad else wm


def conv_as_mm_with(
    x: Any, wm: Any, bias: Any, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int]
) -> Any:
    """``conv2d(x, w, bias, stride, padding)`` from ``wm = weight_matrix(w)``; the result is channels-last."""
    import torch
    import torch.nn.functional as F

    n, c, h, w_ = x.shape
    kh, kw = kernel
    (sh, sw), (ph, pw) = stride, padding
    xp = F.pad(x, (pw, pw, ph, ph)) if ph or pw else x
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w_ + 2 * pw - kw) // sw + 1
    cols = xp.unfold(2, kh, sh).unfold(3, kw, sw)  # [n, c, oh, ow, kh, kw]
    cols = cols.permute(0, 2, 3, 4, 5, 1).reshape(n * oh * ow, kh * kw * c)
    pad = wm.shape[0] - cols.shape[1]
    if pad:
        cols = F.pad(cols, (0, pad))
    out = torch.addmm(bias, cols, wm) if bias is not None else torch.mm(cols, wm)
    return out.view(n, oh, ow, wm.shape[1]).permute(0, 3, 1, 2)


def s2d_conv(x: Any, w2: Any, bias: Any, s: int, p: int, out_hw: Sequence[int]) -> Any:
    """``conv2d(x, w, bias, s, p)`` as a stride-1 convolution of ``w2 = s2d_weight(w, s)`` over the space-to-depth
    form of the padded input: ``s*s`` times the channels (3 become 12), a quarter of the taps for ``s = 2``."""
    import torch.nn.functional as F

    n, c, h, w_ = x.shape
    oh, ow = out_hw
    k2 = w2.shape[2]
    rows, cols = (oh + k2 - 1) * s, (ow + k2 - 1) * s  # the padded input's extent the output reads
    xp = F.pad(x, (p, max(0, cols - w_ - p), p, max(0, rows - h - p)))[:, :, :rows, :cols]
    xs = (
        xp.reshape(n, c, rows // s, s, cols // s, s)
        .permute(0, 1, 3, 5, 2, 4)
        .reshape(n, c * s * s, rows // s, cols // s)
    )
    xs = xs.contiguous(memory_format=torch.channels_last)
    return F.conv2d(xs, w2, bias)


# (batch, in channels, size, out channels, kernel, stride, padding): torchvision stems and a patchify stem.
CASES = [
    (32, 3, 224, 64, 7, 2, 3),  # resnet*, regnet (regnet: 32 out, 3x3)
    (32, 3, 224, 32, 3, 2, 1),  # regnet_y, efficientnet, mobilenet
    (32, 3, 224, 24, 3, 2, 1),  # shufflenet_v2
    (32, 3, 224, 96, 4, 4, 0),  # convnext
    (32, 3, 224, 768, 16, 16, 0),  # vit_b_16
]


def median_ms(fn, x, runs: int = 200, warmup: int = 25) -> float:
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def case(n: int, c: int, size: int, oc: int, k: int, s: int, p: int, forms: Sequence[str]) -> dict:
    torch.manual_seed(0)
    x = torch.randn(n, c, size, size, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    w = torch.randn(oc, c, k, k, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last) * 0.1
    b = torch.randn(oc, device="cuda", dtype=torch.bfloat16)

    def conv(x):
        return torch.relu(torch.nn.functional.conv2d(x, w, b, s, p))

    wm = weight_matrix(w).contiguous()  # as the rewrite stores it: computed once from the frozen weight

    def mm(x):
        return torch.relu(conv_as_mm_with(x, wm, b, (k, k), (s, s), (p, p)))

    oh = (size + 2 * p - k) // s + 1
    w2 = s2d_weight(w, s)

    def s2d(x):
        return torch.relu(s2d_conv(x, w2, b, s, p, (oh, oh)))

    ref = conv(x).float()
    row = {"shape": [n, c, size, size], "weight": [oc, c, k, k], "stride": s, "padding": p}
    every = {"conv": conv, "mm": mm, "s2d": s2d}
    chosen = [(f, every[f]) for f in forms if f in every and (f != "s2d" or k > s > 1)]
    for name, fn in chosen:
        row[f"eager_{name}"] = median_ms(fn, x)
        row[f"eager_{name}_max_err"] = float((fn(x).float() - ref).abs().max() / ref.abs().max())
    for mode in ("default", "max-autotune-no-cudagraphs"):
        for name, fn in chosen:
            torch._dynamo.reset()
            compiled = torch.compile(fn, mode=None if mode == "default" else mode)
            out = compiled(x).float()
            row[f"{name}_{mode}"] = median_ms(compiled, x)
            row[f"{name}_{mode}_max_err"] = float((out - ref).abs().max() / ref.abs().max())
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--forms", default="conv,mm,s2d", help="comma-separated: conv (cuDNN), mm (im2col + GEMM), s2d (space-to-depth)"
    )
    ap.add_argument("--cases", default=",".join(map(str, range(len(CASES)))), help="comma-separated indices into CASES")
    args = ap.parse_args()
    rows = []
    for i in map(int, args.cases.split(",")):
        rows.append(case(*CASES[i], forms=args.forms.split(",")))
        print(json.dumps(rows[-1]), flush=True)
    import triton

    json.dump(
        {
            "device": torch.cuda.get_device_name(),
            "torch": torch.__version__,
            "triton": triton.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": f"python bench/device/conv_as_mm.py --forms {args.forms} --cases {args.cases}",
            "cases": rows,
        },
        open(args.out, "w"),
        indent=1,
    )


if __name__ == "__main__":
    main()
