"""The offline Hugging Face Hub: a snapshot server that the real `huggingface_hub` client talks to."""

from sim.hub.faults import FaultPlan, Faults
from sim.hub.server import HubServerHandle, start_hub_server
from sim.hub.snapshot import load_snapshot, shipped_models

__all__ = ["FaultPlan", "Faults", "HubServerHandle", "load_snapshot", "shipped_models", "start_hub_server"]
