"""The stored answers are read once per database state: N Dynamo graphs of one workload read the store once, and a
winner written or a file replaced between compiles is read again."""

import shutil

import torch

from tuner.backend import counters
from tuner.db import Database, current_device
from tuner.search_spaces import space_for


class TwoGraphs(torch.nn.Module):
    """A model with a graph break: Dynamo hands the backend two graphs."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(32, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        x = torch.relu(self.a(x))
        torch._dynamo.graph_break()
        return self.b(x).sigmoid()


def _compile_and_run(url, m, x):
    torch._dynamo.reset()
    before = counters.count("store_reads"), counters.count("tuned_compiles")
    with torch.no_grad():
        torch.compile(m, backend="tuned", options={"db": url})(x)
    return counters.count("store_reads") - before[0], counters.count("tuned_compiles") - before[1]


def _add_winner(url, key):
    db = Database.open(url)
    sig = {
        "space": {"isa": current_device("cpu").info["isa"], "threads": torch.get_num_threads(), "has_cpp_gemm": False}
    }
    t = db.upsert_task(key, "cpp_graph", "test", sig, "fp")
    db.set_winner(t.id, db.device_id(current_device("cpu")), None, space_for("cpp_graph", sig).default, 1.0, 2.0)
    db.close()


def test_graphs_of_one_workload_read_the_store_once(db_url):
    _add_winner(db_url, "e" * 64)
    m, x = TwoGraphs().eval(), torch.randn(4, 32)
    reads, graphs = _compile_and_run(db_url, m, x)
    assert graphs == 2 and reads == 1
    assert _compile_and_run(db_url, m, x) == (0, 2), "an unchanged database is not read again"


def test_a_changed_database_is_read_again(db_url, tmp_path):
    _add_winner(db_url, "e" * 64)
    m, x = TwoGraphs().eval(), torch.randn(4, 32)
    _compile_and_run(db_url, m, x)
    _add_winner(db_url, "f" * 64)
    assert _compile_and_run(db_url, m, x) == (1, 2), "a new winner changes the revision"

    other = tmp_path / "other.db"
    _add_winner(f"sqlite:///{other}", "1" * 64)
    shutil.copy(other, db_url.removeprefix("sqlite:///") + ".new")
    shutil.move(db_url.removeprefix("sqlite:///") + ".new", db_url.removeprefix("sqlite:///"))
    assert _compile_and_run(db_url, m, x) == (1, 2), "another file at the same path is opened and read"
