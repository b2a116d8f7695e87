"""How a simulated cluster is set up, as against the faults it shows: which Dynamo CRDs it serves and
which Role its kubeconfig's user holds. A member cluster's platform team sets these (installs the
operator's CRDs, binds the plane's user to a Role), so they are the cluster's, not injected failures:
`Faults.reset()` leaves them alone. Settable at start (`ClusterSpec.setup`), from Python
(`sim.setup("sim-east").role = [...]`) or over the admin route `/admin/clusters/<cluster>/setup`.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sim.kube.access import PolicyRule

# The API group of the Dynamo operator's kinds (DynamoGraphDeployment and friends).
DYNAMO_GROUP = "nvidia.com"

DynamoCrds = Literal["current", "old", "none"]


class ClusterSetup(BaseModel):
    model_config = ConfigDict(validate_assignment=True, extra="forbid")

    dynamo_crds: DynamoCrds = Field(
        "current", description="current: every Dynamo CRD version in the CRD directory is served; old: only each "
                               "kind's oldest version (DynamoGraphDeployment v1alpha1, as before v1beta1); none: "
                               "the Dynamo CRDs are not installed (their resources answer 404)")
    role: list[PolicyRule] | None = Field(
        None, description="the rules the kubeconfig's user holds (RBAC PolicyRules); None: cluster-admin")

    def serves(self, group: str, version: str, versions: tuple[str, ...]) -> bool:
        """Whether a kind of `group` is served at `version` (one of its `versions`) under this setup."""
        if group != DYNAMO_GROUP or self.dynamo_crds == "current":
            return True
        if self.dynamo_crds == "none":
            return False
        return version == min(versions, key=version_priority)


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes orders versions GA > beta > alpha, then by number: v1 > v1beta2 > v1beta1 > v1alpha1."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (-1, 0, 0)
    stage = {"alpha": 0, "beta": 1, None: 2}[match.group(2)]
    return (stage, int(match.group(1)), int(match.group(3) or 0))
