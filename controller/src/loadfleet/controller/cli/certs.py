"""`loadfleet certs`: a private CA for one fleet and the certificates of its members.

Every certificate says who its holder is and what it may do:

- the subject's common name is the holder's name (an agent's id, an operator's name, the
  controller's first DNS name);
- the role is a URI in the subject alternative names, `loadfleet:role:<role>` (security.Role),
  repeated as the subject's OU for people reading it with `openssl x509 -text`; the controller
  reads the URI (grpc hands it over verified, as `peer_uri`), never the OU;
- the extended key usage fits the role: TLS server for the controller, TLS client for
  agents and operators, so neither can stand in for the other.

Files (DIR): `ca.crt`, `ca.key`; `controller.crt/.key`; `agent-<name>.crt/.key`;
`operator-<name>.crt/.key`. Keys are ECDSA P-256, written 0600 (the CA key should then go
offline); nothing is overwritten without `force`.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from loadfleet.controller.model.errors import UsageError
from loadfleet.controller.service.security import Role

DEFAULT_CA_DAYS = 3650
DEFAULT_CERT_DAYS = 365
# Agent ids and operator names become file names and log fields: keep them plain.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
CA_CERT, CA_KEY = "ca.crt", "ca.key"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
DNS_NAME = re.compile(rf"^(?:\*\.)?{_LABEL}(?:\.{_LABEL})*$")
# Clock skew between the machine that issues and the hosts that verify.
_BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True)
class Issued:
    """Files written for one certificate."""

    cert: Path
    key: Path
    not_after: datetime.datetime


def check_name(name: str, what: str) -> str:
    if not NAME_PATTERN.match(name):
        raise UsageError(
            f"{what} {name!r}: use 1-63 letters, digits, '.', '_' or '-' (starting with a letter or digit)"
        )
    return name


def init_ca(directory: Path, *, days: int = DEFAULT_CA_DAYS, force: bool = False) -> Issued:
    """A new CA in `directory` (ca.crt, ca.key)."""
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    _refuse_overwrite([cert_path, key_path], force)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "loadfleet"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"loadfleet CA {directory.resolve().name}"),
        ]
    )
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return _write(directory, CA_CERT, cert, key)


def issue(
    directory: Path,
    role: Role,
    name: str,
    *,
    dns_names: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    days: int = DEFAULT_CERT_DAYS,
    force: bool = False,
) -> Issued:
    """A certificate for `name` in `role`, signed by the CA in `directory`."""
    name = _holder_name(role, name, dns_names, ips)
    addresses = _ip_addresses(ips)
    file = "controller.crt" if role is Role.CONTROLLER else f"{role.value}-{name}.crt"
    cert_path = directory / file
    _refuse_overwrite([cert_path, cert_path.with_suffix(".key")], force)
    ca_cert, ca_key = load_ca(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(role.uri)]
    sans += [x509.DNSName(d) for d in dns_names] + [x509.IPAddress(a) for a in addresses]
    usage = ExtendedKeyUsageOID.SERVER_AUTH if role is Role.CONTROLLER else ExtendedKeyUsageOID.CLIENT_AUTH
    now = _now()
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "loadfleet"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role.value),
            x509.NameAttribute(NameOID.COMMON_NAME, name),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(min(now + datetime.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return _write(directory, file, cert, key)


def _holder_name(role: Role, name: str, dns_names: tuple[str, ...], ips: tuple[str, ...]) -> str:
    """The certificate's common name; UsageError for a controller without names to dial it by,
    a DNS name that is none, or a holder's name that is not plain."""
    if role is not Role.CONTROLLER:
        return check_name(name, f"{role.value} name")
    if not dns_names and not ips:
        raise UsageError("the controller's certificate needs the names agents dial it by: --name HOST and/or --ip IP")
    for dns in dns_names:
        if len(dns) > 253 or not DNS_NAME.match(dns):
            raise UsageError(f"--name {dns!r} is not a DNS name")
    # A common name has at most 64 characters; clients check the SANs anyway.
    return name if len(name) <= 64 else "loadfleet-controller"


def _ip_addresses(ips: tuple[str, ...]) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    addresses = []
    for ip in ips:
        try:
            addresses.append(ipaddress.ip_address(ip))
        except ValueError:
            raise UsageError(f"--ip {ip!r} is not an IP address") from None
    return addresses


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """A CA's key signs certificates and CRLs; a holder's key signs TLS handshakes only."""
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def load_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    if not cert_path.exists() or not key_path.exists():
        raise UsageError(
            f"no CA in {directory} (ca.crt and ca.key): run `loadfleet certs init --dir {directory}` "
            "first, or put the CA key back for the time of issuing"
        )
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (ValueError, TypeError, OSError) as exc:
        raise UsageError(f"cannot read the CA in {directory}: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey):  # `certs init` makes an EC key; nothing else signs here
        raise UsageError(f"cannot read the CA in {directory}: ca.key is not an elliptic-curve key")
    return cert, key


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def _refuse_overwrite(paths: list[Path], force: bool) -> None:
    existing = [str(p) for p in paths if p.exists()]
    if existing and not force:
        raise UsageError(
            f"{', '.join(existing)} already exist(s); give --force to replace (clients holding the "
            "old files keep working until they expire, unless the CA is replaced)"
        )


def _write(directory: Path, cert_file: str, cert: x509.Certificate, key: PrivateKeyTypes) -> Issued:
    directory.mkdir(parents=True, exist_ok=True)
    cert_path = directory / cert_file
    key_path = cert_path.with_suffix(".key")
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _write_file(key_path, key_pem, 0o600)
    _write_file(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return Issued(cert=cert_path, key=key_path, not_after=cert.not_valid_after_utc)


def _write_file(path: Path, data: bytes, mode: int) -> None:
    """Written under a temporary name with its final mode from the start (a key is never
    readable by others, even for a moment), then renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.write(fd, data)
        os.fchmod(fd, mode)  # whatever the umask
    finally:
        os.close(fd)
    os.replace(tmp, path)
