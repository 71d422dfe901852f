"""The emulator's TLS: a throwaway CA and a serving certificate for 127.0.0.1, made at start.

Development emulator, not for production. The API server speaks HTTPS because clients send
bearer tokens only over TLS (kubectl and client-go drop them on plain HTTP), and authentication
needs the token. Every kubeconfig the emulator writes carries the CA, so kubectl, kopf and the
official client verify the server as they would a cluster's. The keys live in `<state_dir>/pki`
(mode 0600) and are made anew by every emulator.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_DAYS = 365


@dataclass(frozen=True, slots=True)
class Pki:
    ca: Path
    """The CA certificate (PEM): what clients trust."""
    cert: Path
    key: Path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def make(directory: Path) -> Pki:
    """A new CA and a certificate it signed for 127.0.0.1 and localhost, written under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    since, until = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=VALID_DAYS)
    ca = (x509.CertificateBuilder().subject_name(_name("liveplex-emulator-ca"))
          .issuer_name(_name("liveplex-emulator-ca")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(since).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost"),
             x509.DNSName("kubernetes.default.svc")]
    cert = (x509.CertificateBuilder().subject_name(_name("liveplex-emulator")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(since).not_valid_after(until)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pki = Pki(directory / "ca.crt", directory / "server.crt", directory / "server.key")
    _write(pki.ca, ca.public_bytes(serialization.Encoding.PEM))
    _write(pki.cert, cert.public_bytes(serialization.Encoding.PEM))
    _write(pki.key, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return pki
