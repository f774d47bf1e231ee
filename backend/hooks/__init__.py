"""Adapters onto TorchInductor internals, one module per hook. Nothing else in tuner touches ``torch._inductor``."""
