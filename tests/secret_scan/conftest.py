"""The endpoint test bed with credentials worth leaking: Kimi-K3 gated on the offline Hub and open
only to the journey's Hugging Face token, and clusters reached through a kubeconfig (a file the
plane only references) whose users carry a bearer token and a client certificate and key."""

from __future__ import annotations

import base64
import copy
import datetime
import os

import pytest
import pytest_asyncio
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sim.hub import start_hub_server
from sim.hub.snapshot import load_snapshot
from tests.endpoints.conftest import HF_TOKEN, HF_TOKEN_ENV, TOKENS, api, approved_kimi, deps, gateway, settings, sims  # noqa: F401
from tests.workloads.conftest import KIMI
from wingsmith.adapters.store.clusters import ClusterSpec, create_cluster


@pytest.fixture(scope="module")
def hub():
    """Kimi-K3 gated, granted to the journey's token only: resolving its files proves the token was sent."""
    snapshot = copy.deepcopy(load_snapshot())
    snapshot["models"][KIMI]["gated"] = "manual"
    handle = start_hub_server(snapshot=snapshot, grants={KIMI: {HF_TOKEN}})
    yield handle
    handle.stop()


def client_credentials() -> tuple[bytes, bytes]:
    """A real EC key and self-signed client certificate (PEM), as a kubeconfig user would carry."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "wingsmith-secret-scan"),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@pytest.fixture(scope="module")
def kube_credentials(sims, tmp_path_factory) -> dict:  # noqa: F811 - pytest fixtures imported above
    """The emulator's kubeconfig with a client certificate and key added to every user, written
    0600 to a file of its own; the plane is given only its path."""
    cert_pem, key_pem = client_credentials()
    config = yaml.safe_load(sims.kubeconfig_path.read_text())
    for user in config["users"]:
        user["user"]["client-certificate-data"] = base64.b64encode(cert_pem).decode()
        user["user"]["client-key-data"] = base64.b64encode(key_pem).decode()
    path = tmp_path_factory.mktemp("kube") / "kubeconfig"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        yaml.safe_dump(config, fh)
    return {"path": path, "cert_pem": cert_pem, "key_pem": key_pem,
            "tokens": {name: sims.cluster(name).token for name in sims.names}}


@pytest_asyncio.fixture(loop_scope="session")
async def clusters(pg_pool, sims, kube_credentials):  # noqa: F811 - pytest fixtures imported above
    for name in sims.names:
        sims.faults(name).reset()
        spec = sims.cluster(name).spec
        await create_cluster(pg_pool, ClusterSpec(
            name=name, region=spec.region, kubeconfig=str(kube_credentials["path"]), kube_context=sims.context(name),
            frontend_base_url=f"{sims.base_url}/frontends/{name}"))
    yield sims
