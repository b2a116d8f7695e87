"""Simulated Kubernetes clusters with a simulated NVIDIA Dynamo operator and model frontends."""

from sim.kube.clusters import ClusterSpec, NodePool, SimulatedCluster, SimulatedClusters, default_cluster_specs
from sim.kube.faults import Faults
from sim.kube.operator import FRONTEND_URL_ANNOTATION, LABEL_COMPONENT, LABEL_COMPONENT_TYPE, LABEL_DGD

__all__ = [
    "ClusterSpec", "NodePool", "SimulatedCluster", "SimulatedClusters", "default_cluster_specs", "Faults",
    "FRONTEND_URL_ANNOTATION", "LABEL_DGD", "LABEL_COMPONENT", "LABEL_COMPONENT_TYPE",
]
