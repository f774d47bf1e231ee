"""--mode decode: one token per sequence against a static KV cache (tuner.workloads.decoder), compiled for real on the CPU
(CUDA graphs, which reduce-overhead adds on a GPU, are tested there)."""

import json

import pytest
import torch
from typer.testing import CliRunner

from tuner.cli import app
from tuner.errors import TunerError, WorkloadError
from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

TINY = "hf:gpt2,n_layer=1,n_embd=64,n_head=2,vocab_size=512"
SPEC = WorkloadSpec(model=TINY, device="cpu", mode="decode", batch=2, seq_len=32, threads=2)


def test_a_decode_step_takes_one_token_and_does_the_same_work_every_call():
    model = build_model(SPEC)
    x = make_inputs(SPEC)[0]
    assert x.shape == (2, 1) and SPEC.name.endswith("/2x1/kv32")
    before = model.blocks[0].k.clone()
    with torch.no_grad():
        a, b = model(x), model(x)
    assert a.shape == (2, 1, 512) and torch.equal(a, b)
    changed = (model.blocks[0].k != before).any(dim=(0, 1, 3))
    assert changed.tolist() == [False] * 31 + [True]  # only the new token's slot is written


def test_decode_takes_a_language_model_and_no_input_shape():
    with pytest.raises(WorkloadError, match="decode"):
        WorkloadSpec(model="resnet18", mode="decode")
    with pytest.raises(WorkloadError, match="decode"):
        WorkloadSpec(model=TINY, mode="decode", input_shape=(2, 1))


def test_tuned_compiles_a_decode_step_under_reduce_overhead(tmp_path):
    model = build_model(SPEC)
    x = make_inputs(SPEC)[1]
    with torch.no_grad():
        ref = model(x)
        fn = torch.compile(
            model, backend="tuned", options={"db": f"sqlite:///{tmp_path / 'empty.db'}", "mode": "reduce-overhead"}
        )
        out = fn(x)
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(TunerError, match="mode"):
        from tuner.backend.tuned import Options

        Options.parse({"mode": "fastest"})


def test_bench_times_decode_steps_in_tokens_per_second(tmp_path):
    out = tmp_path / "bench.json"
    args = [
        "bench",
        "--model",
        TINY,
        "--mode",
        "decode",
        "--batch",
        "2",
        "--seq-len",
        "32",
        "--device",
        "cpu",
        "--threads",
        "2",
        "--modes",
        "default,tuned-reduce-overhead",
        "--rounds",
        "3",
        "--db",
        f"sqlite:///{tmp_path / 'none.db'}",
        "--out",
        str(out),
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "tok/s" in r.output
    results = json.loads(out.read_text())["results"]
    assert all(v["tokens_per_s"] > 0 and v["numerics_ok"] for v in results.values()), results


def test_a_decode_sweep_stores_winners_that_a_tuned_compile_forces(db_url, cwd_root):
    import tuner.backend as tb
    from tuner.db import Database

    args = [
        "sweep",
        "--model",
        TINY,
        "--mode",
        "decode",
        "--batch",
        "2",
        "--seq-len",
        "32",
        "--device",
        "cpu",
        "--threads",
        "2",
        "--budget",
        "quick",
        "--trials",
        "2",
        "--no-fusion",
        "--db",
        db_url,
    ]
    r = CliRunner().invoke(app, args, terminal_width=300)
    assert r.exit_code == 0, r.output
    assert "done:" in r.output
    db = Database.open(db_url)
    stats = db.stats()
    db.close()
    assert stats["winners"] >= 1 and stats["trials"] >= 2, stats
    model, x = build_model(SPEC), make_inputs(SPEC)[0]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # CPU winners are keyed by thread count
    tb.reset_stats()
    try:
        with torch.no_grad():
            ref = model(x)
            out = torch.compile(model, backend="tuned", options={"db": db_url})(x)
    finally:
        torch.set_num_threads(threads)
    assert torch.allclose(out, ref, rtol=1e-4, atol=1e-4)
    s = tb.stats()
    assert s["benchmarks"] == 0 and s["hits"] >= 1, s


def test_a_config_with_fewer_key_value_heads_decodes_with_grouped_heads():
    """Llama's and Qwen2's ``num_key_value_heads``: the cache holds those heads, and attention groups the query heads
    over them, as attention over the cache repeated for each query head of a group gives."""
    spec = WorkloadSpec(
        model="hf:llama,num_hidden_layers=1,hidden_size=64,intermediate_size=128,num_attention_heads=4,"
        "num_key_value_heads=2,vocab_size=512",
        device="cpu",
        mode="decode",
        batch=2,
        seq_len=16,
        threads=2,
    )
    model = build_model(spec)
    block = model.blocks[0]
    assert block.k.shape == (2, 2, 16, 16) and block.qkv.out_features == 64 + 2 * 2 * 16
    x = make_inputs(spec)[0]
    with torch.no_grad():
        got = model(x)
        repeated = torch.nn.functional.scaled_dot_product_attention
        torch.nn.functional.scaled_dot_product_attention = lambda q, k, v, enable_gqa=False: repeated(
            q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
        )
        try:
            want = model(x)
        finally:
            torch.nn.functional.scaled_dot_product_attention = repeated
    assert got.shape == (2, 1, 512) and torch.allclose(got, want, atol=1e-5)
    with pytest.raises(WorkloadError, match="group"):
        from tuner.workloads.decoder import DecodeStep

        DecodeStep(vocab=8, width=48, layers=1, heads=6, batch=1, cache_len=4, kv_heads=4)
