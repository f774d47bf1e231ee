"""--model timm:NAME and hf:NAME: built with no download, token inputs for hf:, and one clear line when
the extra is missing or the name is unknown."""

import json
import sys

import pytest
import torch
from typer.testing import CliRunner

from tuner.cli import app
from tuner.errors import WorkloadError
from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

GPT2 = "hf:gpt2,n_layer=1,n_embd=32,n_head=2,vocab_size=128,n_positions=64"
BERT = (
    "hf:bert-base-uncased,num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64,vocab_size=128"
)


def test_a_causal_lm_prefills_random_tokens_to_logits_and_an_encoder_gives_hidden_states():
    spec = WorkloadSpec(model=GPT2, batch=2, seq_len=16)
    model, x = build_model(spec), make_inputs(spec, sets=1)[0]
    assert (
        x.dtype == torch.int64
        and x.shape == (2, 16)
        and 0 <= int(x.min())
        and int(x.max()) < 128
        and spec.shape == (2, 16)
    )
    with torch.no_grad():
        assert model(x).shape == (2, 16, 128)  # logits over the vocabulary
    bert = WorkloadSpec(model=BERT, batch=2, seq_len=8)
    with torch.no_grad():
        assert build_model(bert)(make_inputs(bert, sets=1)[0]).shape == (2, 8, 32)


def test_a_vocabulary_smaller_than_the_types_padding_id_builds_without_a_padding_row():
    """phi3's config pads with token 32000: at vocab_size=128 its embedding refused it. The model builds, with no
    padding row, unless the string sets pad_token_id itself."""
    spec = WorkloadSpec(
        model="hf:phi3,num_hidden_layers=1,hidden_size=32,num_attention_heads=2,intermediate_size=64,vocab_size=128",
        batch=1,
        seq_len=8,
    )
    model = build_model(spec)
    assert model.config.pad_token_id is None
    with torch.no_grad():
        assert model(make_inputs(spec, sets=1)[0]).shape == (1, 8, 128)
    own = WorkloadSpec(model=spec.model + ",pad_token_id=3", batch=1, seq_len=8)
    assert build_model(own).config.pad_token_id == 3


def test_explain_compiles_an_hf_model_under_the_tuned_backend(db_url):
    from tuner.db import Database

    Database.open(db_url).close()
    args = [
        "explain",
        "--model",
        GPT2,
        "--batch",
        "2",
        "--seq-len",
        "16",
        "--device",
        "cpu",
        "--threads",
        "2",
        "--json",
        "--db",
        db_url,
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["workload"].endswith("/infer/cpu/fp32/2x16") and report["counts"]["hit"] == 0
    assert report["counts"]["miss"] >= 1  # an empty database: every lookup is a miss, none an error


def test_a_timm_model_is_built_without_weights_and_matches_under_compile():
    spec = WorkloadSpec(model="timm:resnet10t", batch=1, image_size=32)
    model, x = build_model(spec).eval(), make_inputs(spec, sets=1)[0]
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend="tuned")(x), model(x), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
    "model, message",
    [
        ("timm:resnet5O", "unknown timm model 'resnet5O'"),
        ("hf:no_such_type", "Transformers has no model type 'no_such_type'"),
        ("hf:gpt2,n_layer", "config overrides are key=value"),
    ],
)
def test_unknown_names_are_one_line(model, message):
    with pytest.raises(WorkloadError, match=message):
        build_model(WorkloadSpec(model=model))


@pytest.mark.parametrize(
    "model, package, extra", [("timm:resnet18", "timm", "timm"), ("hf:gpt2", "transformers", "hf")]
)
def test_a_missing_extra_names_its_install(model, package, extra, monkeypatch):
    monkeypatch.setitem(sys.modules, package, None)  # as when it is not installed: importing it raises ImportError
    with pytest.raises(WorkloadError, match=rf"pip install -e '\.\[{extra}\]'"):
        build_model(WorkloadSpec(model=model))


def test_the_cli_prints_the_missing_extra_as_written(monkeypatch, db_url):
    monkeypatch.setitem(sys.modules, "timm", None)
    from tuner.db import Database

    Database.open(db_url).close()
    result = CliRunner().invoke(
        app, ["explain", "--model", "timm:resnet18", "--device", "cpu", "--db", db_url]
    )  # builds here
    assert result.exit_code == 1 and "pip install -e '.[timm]'" in result.output  # brackets are not console markup


def test_a_language_models_training_step_is_tuned_backward_as_forward():
    """An hf: causal LM's training step (AdamW in bench) is captured forward and backward, and the backward
    graph's template sites and graph knobs become tasks as the forward's do."""
    from tuner.core import Kind
    from tuner.measure.session import Session
    from tuner.sweep.tasks import tasks_from_capture

    cap = Session(WorkloadSpec(model=GPT2, device="cpu", mode="train", batch=2, seq_len=16, threads=2)).capture()
    backward = {g["key"] for g in cap.graphs if g["backward"]}
    assert len(backward) == 1 and len(cap.graphs) == 2
    assert any(s["graph"] in backward for s in cap.sites) and any(s["graph"] not in backward for s in cap.sites)
    names = [t.name for t in tasks_from_capture(cap, "gpt2") if t.kind == Kind.CPP_GRAPH]
    assert names == ["gpt2 forward graph 0", "gpt2 backward graph 0"]


def test_weights_initialised_to_zeros_are_drawn_so_outputs_depend_on_inputs():
    """torchvision's vit_b_32 zeroes its head: its outputs were all zero, and no numerics check could fail."""
    import torch

    from tuner.workloads.spec import WorkloadSpec, build_model, make_inputs

    spec = WorkloadSpec("vit_b_32")
    model = build_model(spec).eval()
    assert model.heads.head.weight.abs().max() > 0 and model.heads.head.bias.abs().max() == 0, (
        "weights drawn, biases kept"
    )
    a, b = make_inputs(spec, 2)
    with torch.no_grad():
        ya, yb = model(a), model(b)
    assert ya.abs().max() > 0 and not torch.allclose(ya, yb)
    assert torch.equal(build_model(spec).heads.head.weight, model.heads.head.weight), (
        "seeded: every process builds the same model"
    )
