"""Accelerator facts the plane needs everywhere: which cards exist, how much memory they have,
how many sit in one node, how Kubernetes labels them, and whether Wingsmith can place them.

Figures follow the vLLM recipes' hardware taxonomy (memory per node divided by GPUs per node)
and the product names NVIDIA's GPU feature discovery writes into `nvidia.com/gpu.product`.
Only NVIDIA cards are placeable: serving goes through NVIDIA Dynamo.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Hardware(BaseModel, frozen=True):
    id: str
    display_name: str
    vendor: str
    generation: str
    gpus_per_node: int
    memory_gb_per_gpu: float = Field(description="decimal GB of device memory per GPU")
    # Substrings of `nvidia.com/gpu.product` values that identify this card. Matching is
    # case-insensitive and the most specific (longest) pattern wins, so "GB200" beats "B200".
    product_labels: tuple[str, ...] = ()

    @property
    def placeable(self) -> bool:
        return self.vendor == "NVIDIA"

    @property
    def memory_bytes_per_gpu(self) -> int:
        return int(self.memory_gb_per_gpu * 1e9)


_CARDS = [
    Hardware(id="h100", display_name="H100", vendor="NVIDIA", generation="hopper", gpus_per_node=8,
             memory_gb_per_gpu=80, product_labels=("H100",)),
    Hardware(id="h200", display_name="H200", vendor="NVIDIA", generation="hopper", gpus_per_node=8,
             memory_gb_per_gpu=141, product_labels=("H200",)),
    Hardware(id="b200", display_name="B200", vendor="NVIDIA", generation="blackwell", gpus_per_node=8,
             memory_gb_per_gpu=180, product_labels=("B200",)),
    Hardware(id="b300", display_name="B300", vendor="NVIDIA", generation="blackwell", gpus_per_node=8,
             memory_gb_per_gpu=268, product_labels=("B300",)),
    Hardware(id="gb200", display_name="GB200 NVL4", vendor="NVIDIA", generation="blackwell",
             gpus_per_node=4, memory_gb_per_gpu=192, product_labels=("GB200",)),
    Hardware(id="gb300", display_name="GB300 NVL4", vendor="NVIDIA", generation="blackwell",
             gpus_per_node=4, memory_gb_per_gpu=288, product_labels=("GB300",)),
    Hardware(id="mi300x", display_name="MI300X", vendor="AMD", generation="cdna3", gpus_per_node=8,
             memory_gb_per_gpu=192),
    Hardware(id="mi325x", display_name="MI325X", vendor="AMD", generation="cdna3", gpus_per_node=8,
             memory_gb_per_gpu=256),
    Hardware(id="mi355x", display_name="MI355X", vendor="AMD", generation="cdna4", gpus_per_node=8,
             memory_gb_per_gpu=288),
]

HARDWARE: dict[str, Hardware] = {h.id: h for h in _CARDS}
NVIDIA_HARDWARE: list[Hardware] = [h for h in _CARDS if h.placeable]


class UnknownHardware(ValueError):
    pass


def get_hardware(hardware_id: str) -> Hardware:
    try:
        return HARDWARE[hardware_id.lower()]
    except KeyError:
        known = ", ".join(sorted(HARDWARE))
        raise UnknownHardware(f"unknown hardware {hardware_id!r}; known: {known}") from None


def hardware_for_product_label(product: str) -> Hardware | None:
    """Map a `nvidia.com/gpu.product` value (e.g. `NVIDIA-H200`, `NVIDIA-GB200`) to a card."""
    value = product.upper()
    best: tuple[int, Hardware] | None = None
    for card in NVIDIA_HARDWARE:
        for pattern in card.product_labels:
            if pattern in value and (best is None or len(pattern) > best[0]):
                best = (len(pattern), card)
    return best[1] if best else None


def product_label_for(hardware_id: str) -> str:
    """The `nvidia.com/gpu.product` value the plane selects nodes by for a card."""
    card = get_hardware(hardware_id)
    if not card.placeable:
        raise UnknownHardware(f"{card.display_name} is not NVIDIA hardware and cannot be placed")
    return f"NVIDIA-{card.product_labels[0]}"
