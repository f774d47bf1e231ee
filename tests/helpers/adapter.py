"""A kind's own adapter, as ``backend/hooks`` would hold one (``TaskKind.adapter``): it records each install."""

INSTALLED: list[str] = []


def install(device_type: str) -> None:
    INSTALLED.append(device_type)
