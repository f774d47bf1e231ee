"""Where ``--model`` finds a model: ``timm:NAME`` (timm, no pretrained weights), ``hf:NAME`` (Hugging Face
Transformers, built from a config: nothing is downloaded), ``pkg.module:factory`` (your own) or a torchvision name.

``hf:NAME`` takes a model type Transformers knows (``gpt2``, ``bert``, ``llama``, …, or a few checkpoint names such
as ``bert-base-uncased`` for their default config), optionally followed by config overrides:
``hf:gpt2,n_layer=2,n_embd=64``. Its inputs are random token ids (``--seq-len``); a causal LM runs one forward
pass over the whole sequence (prefill, no cache) and gives its logits, any other model its last hidden state.
``--mode decode`` builds a decode step at the config's sizes instead (``tuner.workloads.decoder``).
timm and Transformers are optional extras (``pip install -e '.[timm]'`` / ``'.[hf]'``).
"""

from __future__ import annotations

import difflib
from typing import Any

from tuner.errors import WorkloadError

HF_ALIASES = {"bert-base-uncased": "bert", "roberta-base": "roberta", "distilbert-base-uncased": "distilbert"}
TOKEN_SOURCES = ("hf:",)


def takes_tokens(model: str) -> bool:
    """Whether the model's input is token ids (not a float tensor)."""
    return model.startswith(TOKEN_SOURCES)


def token_vocab(model: str) -> int:
    """The vocabulary size of a token model's config (0: the model does not take tokens)."""
    if not takes_tokens(model):
        return 0
    return int(hf_config(model.removeprefix("hf:"), model).vocab_size)


def _need(package: str, extra: str, model: str) -> Any:
    import importlib

    try:
        return importlib.import_module(package)
    except ImportError:
        raise WorkloadError(f"--model {model} needs {package}: pip install -e '.[{extra}]'") from None


def timm_model(name: str, model: str) -> Any:
    timm = _need("timm", "timm", model)
    names = timm.list_models()
    if name not in names:
        near = difflib.get_close_matches(name, names, n=3)
        raise WorkloadError(f"unknown timm model {name!r}" + (f"; did you mean {', '.join(near)}?" if near else ""))
    return timm.create_model(name, pretrained=False)


def _value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def hf_config(text: str, model: str) -> Any:
    transformers = _need("transformers", "hf", model)
    name, *pairs = text.split(",")
    overrides = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep or not k.strip():
            raise WorkloadError(f"--model {model}: config overrides are key=value, not {p!r}")
        overrides[k.strip()] = _value(v.strip())
    try:
        config = transformers.AutoConfig.for_model(HF_ALIASES.get(name, name), **overrides)
    except (ValueError, KeyError) as e:
        raise WorkloadError(f"--model {model}: Transformers has no model type {name!r} ({e})") from None
    pad = getattr(config, "pad_token_id", None)
    if (
        "pad_token_id" not in overrides
        and isinstance(pad, int)
        and not 0 <= pad < getattr(config, "vocab_size", pad + 1)
    ):
        config.pad_token_id = None  # a smaller vocab_size than the type's own (phi3's pad id is 32000): no padding row
    return config


def hf_model(text: str, model: str) -> Any:
    import torch

    config = hf_config(text, model)
    transformers = _need("transformers", "hf", model)
    # A decoder-only model: it has a causal-LM head and no masked-LM one (BERT has both, as an encoder first).
    kind = type(config)
    causal = kind in transformers.MODEL_FOR_CAUSAL_LM_MAPPING and kind not in transformers.MODEL_FOR_MASKED_LM_MAPPING
    inner = (transformers.AutoModelForCausalLM if causal else transformers.AutoModel).from_config(config)

    class Prefill(torch.nn.Module):
        """``input_ids`` to logits (a causal LM, one pass over the sequence, no cache) or the last hidden state."""

        def __init__(self) -> None:
            super().__init__()
            self.model = inner
            self.config = inner.config

        def forward(self, input_ids: Any) -> Any:
            out = self.model(input_ids=input_ids, use_cache=False) if causal else self.model(input_ids=input_ids)
            return out.logits if causal else out.last_hidden_state

    return Prefill()


def factory_model(model: str) -> Any:
    """``pkg.module:factory``: the user's own factory, imported as ``python -m`` would from where tuner runs."""
    import importlib
    import os
    import sys

    module_name, _, attr = model.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise WorkloadError(f"cannot load model factory {model!r}: {e}") from None
    try:
        return factory()
    except Exception as e:  # the user's code: any failure is theirs to see, in one line
        raise WorkloadError(f"model factory {model!r} failed: {type(e).__name__}: {e}") from None


def torchvision_model(model: str) -> Any:
    import torchvision

    names = torchvision.models.list_models()
    if model not in names:
        near = difflib.get_close_matches(model, names, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else "; use a torchvision model name or pkg.module:factory"
        raise WorkloadError(f"unknown model {model!r}{hint}")
    return torchvision.models.get_model(model, weights=None)


def is_builtin(model: str) -> bool:
    """Whether ``model`` names a model tuner builds itself (a torchvision name, ``timm:NAME``, ``hf:NAME``), rather than
    code to import (``pkg.module:factory``): the only kind a command may take from stored data."""
    return model.startswith(("timm:", "hf:")) or ":" not in model


def load(model: str) -> Any:
    """The model ``--model`` names, from whichever source its form says."""
    if model.startswith("timm:"):
        return timm_model(model.removeprefix("timm:"), model)
    if model.startswith("hf:"):
        return hf_model(model.removeprefix("hf:"), model)
    return factory_model(model) if ":" in model else torchvision_model(model)


__all__ = ["is_builtin", "load", "takes_tokens", "token_vocab"]
