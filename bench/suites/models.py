"""The suites' models, loadable by a sweep as ``bench.suites.models:NAME`` (run from the repository root)."""

import torch


def mlp() -> torch.nn.Module:
    """Two layers: 64 -> 256 -> 64."""
    return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))


def transformer_block() -> torch.nn.Module:
    """One encoder layer (attention + MLP, layer norms), 64 wide, 4 heads, on (batch, 16 tokens, 64)."""
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True, dropout=0.0)
