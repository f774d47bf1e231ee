"""Does the pre-grad pass find the attention a workload's compile would run as math? One short device call: the
workload's model (its first layer's worth where a config override says so) compiled with only that pass, printing
each SDPA call it sees, the dispatcher's pick for it and what the graph holds after.

    python bench/device/math_attention_check.py --model "hf:bert-base-uncased,num_hidden_layers=1" --dtype bf16 --batch 8 --seq-len 512
"""

from __future__ import annotations

import argparse
import logging

import workload_args


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    workload_args.add(p)
    p.add_argument("--tuned", action="store_true", help="compile through backend='tuned' (an empty database), as a sweep's compiles do")
    a = p.parse_args()
    import torch

    from tuner.backend.hooks import attention_math as am
    from tuner.workloads.spec import build_model, make_inputs

    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    spec = workload_args.spec(a)
    model, x = build_model(spec), make_inputs(spec, 1)[0]
    seen = []
    _original = am.KeepMathAttention.__call__

    class Spy(am.KeepMathAttention):
        def __call__(self, graph):
            for n in graph.nodes:
                c = am._call(n)
                if c is not None:
                    vals = [am._value(c[k]) for k in ("q", "k", "v", "mask")]
                    seen.append([(tuple(v.shape), tuple(v.stride()), str(v.dtype)) if v is not None else None for v in vals])
                    args = vals + [c["causal"], c["scale"], c["gqa"]]
                    with vals[0].fake_mode:
                        g = am.traced(None, args)
                    print("call", seen[-1], c["causal"], c["scale"], "->", [str(t.target) for t in g.graph.nodes if "scaled" in str(t.target) or "bmm" in str(t.target)])
            print("grad enabled:", torch.is_grad_enabled())
            _original(self, graph)
            print("after:", [str(n.target) for n in graph.nodes if "attention" in str(n.target)])

    torch._inductor.config.force_disable_caches = True
    if a.tuned:  # the tuned backend places the pass itself: spy on the class it places
        am.KeepMathAttention.__call__ = Spy.__call__
        import os
        import tempfile

        os.environ["TUNER_DB"] = "sqlite:///" + os.path.join(tempfile.mkdtemp(), "empty.db")
        backend = "tuned"
    else:
        torch._inductor.config.pre_grad_custom_pass = Spy()
        backend = "inductor"
    with torch.no_grad():
        torch.compile(model, backend=backend)(x)


if __name__ == "__main__":
    main()
