"""A secured Temporal for tests: certificates made here (a CA, the server's, a client's, and a stranger's
signed by another CA) and the real dev server behind HAProxy, which terminates TLS, requires a client
certificate signed by the CA and offers HTTP/2 by ALPN, as a production TLS front of Temporal does.

Why HAProxy and not stunnel: stunnel (5.68 in Debian 12) cannot negotiate ALPN, and the Temporal SDK's
gRPC client refuses a TLS endpoint that does not select `h2` ("H2NotNegotiated"): no client could
connect through it. scripts/install-debian.sh installs HAProxy; CI (CI=true) fails without it."""

from __future__ import annotations

import datetime
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from wingsmith.local.ports import free_port
from wingsmith.local.temporal_server import stop_process, wait_for_port

SERVER_NAME = "temporal.test"  # the only name in the server's certificate: clients must set TEMPORAL_TLS_SERVER_NAME


@dataclass(frozen=True)
class Pki:
    root: Path

    def path(self, stem: str, kind: str) -> Path:
        return self.root / f"{stem}.{kind}"

    def client_env(self, address: str, client: str | None = "client") -> dict[str, str]:
        """Temporal's own client variables for a process that presents `client`'s certificate (None: none)."""
        env = {"TEMPORAL_ADDRESS": address, "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(self.path("ca", "pem")),
               "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME}
        if client is not None:
            env.update(TEMPORAL_TLS_CLIENT_CERT_PATH=str(self.path(client, "pem")),
                       TEMPORAL_TLS_CLIENT_KEY_PATH=str(self.path(client, "key")))
        else:
            env["TEMPORAL_TLS"] = "true"
        return env


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: str, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer).public_key(public_key)
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1)))


def _authority(common_name: str):
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(common_name, _name(common_name), key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(authority, common_name: str, *, server: bool):
    ca_key, ca_cert = authority
    key = ec.generate_private_key(ec.SECP256R1())
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (_builder(common_name, ca_cert.subject, key.public_key())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(common_name)]), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _write(root: Path, stem: str, key, cert) -> None:
    (root / f"{stem}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        fd = os.open(root / f"{stem}.key", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def make_pki(root: Path) -> Pki:
    """ca.pem; server.{pem,key} for SERVER_NAME; client.{pem,key} signed by the CA; stranger.{pem,key}
    signed by a CA the server does not trust."""
    root.mkdir(parents=True, exist_ok=True)
    authority = _authority("wingsmith test CA")
    _write(root, "ca", None, authority[1])
    _write(root, "server", *_leaf(authority, SERVER_NAME, server=True))
    _write(root, "client", *_leaf(authority, "wingsmith-plane", server=False))
    _write(root, "stranger", *_leaf(_authority("another CA"), "stranger", server=False))
    return Pki(root)


def haproxy() -> str:
    """HAProxy's path; a missing one fails the test in CI (scripts/install-debian.sh installs it)."""
    found = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")
    if found:
        return found
    message = "haproxy is missing: run scripts/install-debian.sh (Debian's haproxy terminates TLS for this test)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@dataclass(frozen=True)
class Terminator:
    address: str
    log_path: Path

    def forwarded_sessions(self) -> int:
        """Connections that passed the certificate check and reached Temporal (HAProxy's tcplog lines
        name the backend server; refused handshakes name none)."""
        return sum(" temporal/dev " in line for line in self.log_path.read_text().splitlines())


@contextmanager
def tls_terminator(pki: Pki, temporal_address: str, workdir: Path) -> Iterator[Terminator]:
    """HAProxy on a free loopback port in front of `temporal_address`, requiring a client certificate;
    stopped when the block ends, also when it fails."""
    executable = haproxy()
    workdir.mkdir(parents=True, exist_ok=True)
    bundle = workdir / "server-bundle.pem"
    bundle.write_bytes(pki.path("server", "pem").read_bytes() + pki.path("server", "key").read_bytes())
    bundle.chmod(0o600)
    port = free_port()
    config = workdir / "haproxy.cfg"
    config.write_text(f"""global
    log stderr format raw local0 info
defaults
    mode tcp
    log global
    option tcplog
    timeout connect 5s
    timeout client 1h
    timeout server 1h
frontend temporal_tls
    bind 127.0.0.1:{port} ssl crt {bundle} ca-file {pki.path("ca", "pem")} verify required alpn h2
    default_backend temporal
backend temporal
    server dev {temporal_address}
""")
    log_path = workdir / "haproxy.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([executable, "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for_port("127.0.0.1", port, 10, process, "haproxy")
        yield Terminator(f"127.0.0.1:{port}", log_path)
    finally:
        stop_process(process, 5)
