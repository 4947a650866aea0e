"""A lab's own certificate authority for an mTLS target (issue 32): a CA, a server certificate
it signed for the listen address and a DNS name (for a plan's `tls.sni`), and a client
certificate and key it signed, which a plan's `tls.client_cert`/`client_key` name. Made by the
openssl CLI, as tls.py's self-signed certificate is; EC P-256 throughout.

Files, in `directory`: `ca.pem` (what a plan's `tls.ca` names), `cert.pem` and `key.pem` (the
server's), `client.pem` and `client-key.pem`. Keys are mode 0600.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .daemon import LabError, find_program
from .tls import CERT_DAYS

SERVER_NAME = "lab.loadfleet.test"  # the DNS name the server certificate holds beside its address
_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
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
    _openssl(["req", "-x509", *_KEY, "-days", str(CERT_DAYS), "-subj", "/CN=loadfleet-lab-ca", *_CA_EXTENSIONS,
              "-keyout", str(d / "ca-key.pem"), "-out", str(d / "ca.pem")])  # fmt: skip
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
    _openssl(["req", *_KEY, "-subj", subject, "-keyout", str(d / key), "-out", str(request)])
    _openssl(["x509", "-req", "-in", str(request), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca-key.pem"),
              "-CAcreateserial", "-days", str(CERT_DAYS), "-extfile", str(ext), "-out", str(d / cert)])  # fmt: skip
    request.unlink()
    ext.unlink()


def _openssl(args: list[str]) -> None:
    argv = [find_program("openssl", "openssl", extra_dirs=("/usr/bin",)), *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise LabError(f"openssl {args[0]} failed: {result.stderr.strip()[-500:]}")
