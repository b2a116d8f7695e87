"""Which of AIConfigurator's systems (its per-GPU databases) stands for each card the plane knows.

AIConfigurator names systems by form factor (`h200_sxm`, `gb200`); the plane names cards as the
recipes and node labels do (`h200`, `gb200`). The plane's H100/H200/B200/B300 are the 8-GPU SXM
boards (wingsmith/domain/hardware.py), so they map to the `_sxm` databases; AMD cards have none.
"""

from __future__ import annotations

from wingsmith.domain.hardware import get_hardware

SYSTEMS: dict[str, str] = {
    "h100": "h100_sxm",
    "h200": "h200_sxm",
    "b200": "b200_sxm",
    "b300": "b300_sxm",
    "gb200": "gb200",
    "gb300": "gb300",
}


def system_for(card: str) -> str | None:
    """AIConfigurator's system name for a plane card, or None when it has no database for it."""
    return SYSTEMS.get(get_hardware(card).id)


def no_system_reason(card: str, tool: str) -> str:
    hardware = get_hardware(card)
    return f"{tool} has no performance database for {hardware.display_name} ({hardware.vendor})"


def gpus_for_layout(layout: str, card: str) -> int:
    """The GPUs one replica of a layout takes on a card, when the caller names no count: one whole node
    for the single-node layouts and for prefill/decode on one node, two whole nodes for the multi-node
    ones (the fewest that make them multi-node). AIConfigurator searches the parallelism within it."""
    per_node = get_hardware(card).gpus_per_node
    return 2 * per_node if layout.startswith("multi_node") else per_node
