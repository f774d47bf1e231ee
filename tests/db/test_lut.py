"""``tuner db export --format inductor-lut``: CUDA GEMM winners as Inductor's lookup table (the GPU test
compiles with the exported table through Inductor's own LookupTableChoices)."""

import json

from typer.testing import CliRunner

from tuner.cli import app
from tuner.db import Database, DeviceInfo, EnvironmentInfo
from tuner.db.lut import lookup_key, lut_entry
from tuner.search_spaces import space_for

H200 = DeviceInfo("cuda", "NVIDIA H200", {"capability": "9.0", "sm_count": 132})
ENV = EnvironmentInfo("2.11.0", "3.6.0", "13.0", "3.12.0", "0.1.0")
# key_of rows: device, dtype, sizes, strides, offset (addmm: the expanded bias, mat1, mat2)
INPUTS = [
    ["cuda", "torch.bfloat16", 32, 1000, 0, 1, 0],
    ["cuda", "torch.bfloat16", 32, 2048, 2048, 1, 0],
    ["cuda", "torch.bfloat16", 2048, 1000, 1, 2048, 0],
]
TRITON = 'triton::mm:{"BLOCK_K":32,"BLOCK_M":32,"BLOCK_N":64,"GROUP_M":8,"num_stages":5,"num_warps":8}'
runner = CliRunner()


SPLIT_K = 'tuner::splitk:{"BLOCK_K":256,"BLOCK_M":32,"BLOCK_N":16,"SPLIT_K":1,"num_stages":3,"num_warps":2}'


def _site(db, key, op, choice, device=H200, scalars=None):
    sig = {
        "op": op,
        "inputs": INPUTS,
        "space": {"choices": ["aten::bias_addmm:{}", TRITON, SPLIT_K], "default": "aten::bias_addmm:{}"},
    }
    if scalars is not None:
        sig["scalars"] = scalars
    rec = db.upsert_task(key, "template_choice", f"{op} site", sig, space_for("template_choice", sig).fingerprint())
    d, e = db.device_id(device), db.environment_id(ENV)
    t = db.record_trial(rec.id, d, e, {"choice": choice}, "ok", median_ms=0.02, baseline_ms=0.05)
    db.set_winner(rec.id, d, t.id, {"choice": choice}, 0.02, 0.05)


def test_key_and_entry_match_inductors_format():
    key = lookup_key("addmm", INPUTS, {"beta": 1, "alpha": 1})
    assert key == (
        "((torch.bfloat16, [32, 1000], [0, 1]), (torch.bfloat16, [32, 2048], [2048, 1]), "
        "(torch.bfloat16, [2048, 1000], [1, 2048]))+alpha=1&beta=1+addmm"
    )
    assert lookup_key("mm", INPUTS[1:], None).endswith("[1, 2048]))+mm")
    assert lut_entry(TRITON) == {
        "template_id": "triton::mm",
        "BLOCK_K": 32,
        "BLOCK_M": 32,
        "BLOCK_N": 64,
        "GROUP_M": 8,
        "num_stages": 5,
        "num_warps": 8,
    }
    assert lut_entry("aten::bias_addmm:{}") == {"template_id": "aten::bias_addmm"}
    assert lut_entry("TritonTemplateCaller:triton_convolution2d:BLOCK_M=64") is None


def test_export_writes_only_cuda_gemm_winners(db_url, tmp_path):
    db = Database.open(db_url)
    _site(db, "a" * 64, "addmm", TRITON, scalars={"alpha": 1, "beta": 1})
    _site(db, "b" * 64, "convolution", TRITON)
    _site(db, "c" * 64, "mm", TRITON, device=DeviceInfo("cpu", "Some CPU", {"threads": 2}))
    _site(db, "d" * 64, "addmm", SPLIT_K, scalars={"alpha": 1, "beta": 1})  # no lookup-table entry can name it
    db.close()
    out = tmp_path / "lut.json"
    res = runner.invoke(app, ["db", "export", str(out), "--format", "inductor-lut", "--db", db_url])
    assert res.exit_code == 0, res.output
    table = json.loads(out.read_text())
    assert list(table) == [lookup_key("addmm", INPUTS, {"alpha": 1, "beta": 1})]
    assert table[next(iter(table))][0]["template_id"] == "triton::mm"
    assert "1 GEMM site" in " ".join(res.output.split()) and "1 site(s) won by tuner's own split-K kernel" in " ".join(
        res.output.split()
    )


def test_export_refuses_ambiguity_and_bad_options(db_url, tmp_path):
    db = Database.open(db_url)
    _site(db, "a" * 64, "addmm", TRITON)
    _site(
        db, "a" * 64, "addmm", TRITON, device=DeviceInfo("cuda", "NVIDIA H100", {"capability": "9.0", "sm_count": 114})
    )
    db.close()
    out = tmp_path / "lut.json"
    res = runner.invoke(app, ["db", "export", str(out), "--format", "inductor-lut", "--db", db_url])
    assert res.exit_code == 1 and "pick one with --device" in res.output and not out.exists()
    res = runner.invoke(app, ["db", "export", str(out), "--format", "inductor-lut", "--device", "H100", "--db", db_url])
    assert res.exit_code == 0 and "alpha=1, beta=1" in " ".join(res.output.split()), res.output
    res = runner.invoke(app, ["db", "export", str(out), "--format", "nope", "--db", db_url])
    assert res.exit_code != 0 and "inductor-lut" in res.output
