"""Task keys must be identical in every process: they are how a compile finds a sweep's winners."""

from tuner.keys import canonical_json, config_hash, task_key
from tuner.measure import Worker
from tuner.workloads.spec import WorkloadSpec


def test_keys_are_stable_across_processes(tmp_path, cwd_root):
    spec = WorkloadSpec(model="tests.helpers.models:mlp", input_shape=(8, 64), threads=1)
    keys = []
    for _ in range(2):  # two spawned interpreters, each compiling from scratch
        w = Worker(spec, tmp_path / "logs")
        cap = w.start()
        w.close()
        keys.append(([g["key"] for g in cap.graphs], sorted(s["key"] for s in cap.sites)))
    assert keys[0] == keys[1]
    graphs, sites = keys[0]
    assert len(graphs) == 1 and len(sites) == 2 and len(set(sites)) == 2


def test_canonical_json_ignores_order_and_hash_is_sha256():
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert config_hash({"x": 1, "y": 2}) == config_hash({"y": 2, "x": 1})
    k = task_key("cpp_graph", {"code": "x"})
    assert len(k) == 64 and k != task_key("template_choice", {"code": "x"})
