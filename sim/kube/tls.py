"""The simulated clusters' TLS: a certificate authority of their own and a server certificate it
signs, so their Kubernetes API is served over HTTPS as a real one is. `kubectl` sends a bearer token
only over HTTPS, so without this it could not talk to them at all; the kubeconfig carries the CA
(`certificate-authority-data`), as a real cluster's does.

A new authority is made at every start (the kubeconfig is written again then too); its key never
leaves the process. The server's key is written 0600 beside the certificates for uvicorn to load.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = timedelta(days=365)


@dataclass(frozen=True)
class ServerTls:
    ca_pem: bytes
    ca_file: Path
    cert_file: Path
    key_file: Path


def make_server_tls(directory: Path, host: str) -> ServerTls:
    """A CA and a server certificate for `host` (and 127.0.0.1, localhost), written under `directory`."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    now = datetime.now(UTC) - timedelta(minutes=5)  # a little slack for clocks that disagree
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "wingsmith simulated clusters CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now).not_valid_after(now + VALID_FOR)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    try:
        address = ipaddress.ip_address(host)
        if str(address) != "127.0.0.1":
            names.append(x509.IPAddress(address))
    except ValueError:
        if host != "localhost":
            names.append(x509.DNSName(host))
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + VALID_FOR)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    tls = ServerTls(ca_pem=ca_pem, ca_file=directory / "ca.crt", cert_file=directory / "server.crt",
                    key_file=directory / "server.key")
    tls.ca_file.write_bytes(ca_pem)
    tls.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(tls.key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    return tls
