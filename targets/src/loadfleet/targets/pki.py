"""A lab's own certificate authority for an mTLS target (issue 32): a CA, a server certificate
it signed for the listen address and a DNS name (for a plan's `tls.sni`), and a client
certificate and key it signed, which a plan's `tls.client_cert`/`client_key` name. Made by the
openssl CLI, as tls.py's self-signed certificate is; EC P-256 throughout.

Files, in `directory`: `ca.pem` (what a plan's `tls.ca` names), `cert.pem` and `key.pem` (the
server's), `client.pem` and `client-key.pem`. Keys are mode 0600.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .tls import CERT_DAYS, NEW_EC_KEY, openssl

SERVER_NAME = "lab.loadfleet.test"  # the DNS name the server certificate holds beside its address
_CA_EXTENSIONS = ["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"]


@dataclass(frozen=True)
class LabPki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def lab_pki(directory: Path, host: str) -> LabPki:
    """Makes the CA and the certificates it signs (see the module's docstring)."""
    directory.mkdir(parents=True, exist_ok=True)
    d = directory
    ca = ["req", "-x509", *NEW_EC_KEY, "-days", str(CERT_DAYS), "-subj", "/CN=loadfleet-lab-ca", *_CA_EXTENSIONS]
    openssl([*ca, "-keyout", str(d / "ca-key.pem"), "-out", str(d / "ca.pem")], "openssl could not make the lab CA")
    server = f"subjectAltName=IP:{host},DNS:{SERVER_NAME}\nextendedKeyUsage=serverAuth\n"
    _signed(d, "cert.pem", "key.pem", "/CN=loadfleet-lab", server)
    _signed(d, "client.pem", "client-key.pem", "/CN=loadfleet-client", "extendedKeyUsage=clientAuth\n")
    for key in ("ca-key.pem", "key.pem", "client-key.pem"):
        (d / key).chmod(0o600)
    return LabPki(d / "ca.pem", d / "cert.pem", d / "key.pem", d / "client.pem", d / "client-key.pem")


def _signed(d: Path, cert: str, key: str, subject: str, extensions: str) -> None:
    """A key and a certificate for it signed by the CA in `d`, with `extensions` (end entity)."""
    request, ext = d / f"{cert}.csr", d / f"{cert}.ext"
    ext.write_text("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n" + extensions)
    failure = f"openssl could not make {cert}"
    openssl(["req", *NEW_EC_KEY, "-subj", subject, "-keyout", str(d / key), "-out", str(request)], failure)
    signing = ["x509", "-req", "-in", str(request), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca-key.pem")]
    openssl(
        [*signing, "-CAcreateserial", "-days", str(CERT_DAYS), "-extfile", str(ext), "-out", str(d / cert)], failure
    )
    request.unlink()
    ext.unlink()
