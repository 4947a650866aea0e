"""A self-signed certificate for a lab server's https listener, made by the openssl CLI
(Debian `openssl`): load tests run against it with certificate verification off, as against
lab and internal servers.

The key is EC P-256 (made in milliseconds, and what TLS 1.3 clients prefer); the certificate
names the listen address as an IP subjectAltName, so a client that does verify it (after
trusting `cert.pem`) accepts it for that address.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .daemon import LabError, find_program

CERT_DAYS = 30


# A new EC P-256 key, unencrypted (`openssl req` arguments).
NEW_EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


def self_signed_cert(directory: Path, host: str) -> tuple[Path, Path]:
    """Writes `cert.pem` and `key.pem` (mode 0600) into `directory` for `host`; returns both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "cert.pem", directory / "key.pem"
    args = ["req", "-x509", *NEW_EC_KEY, "-days", str(CERT_DAYS), "-subj", "/CN=loadfleet-lab"]
    args += ["-addext", f"subjectAltName=IP:{host}", "-keyout", str(key), "-out", str(cert)]
    openssl(args, f"openssl could not make a certificate for {host}")
    return cert, key


def openssl(args: list[str], failure: str) -> None:
    """Runs the openssl CLI; a failure is a LabError, `failure` followed by openssl's own words."""
    argv = [find_program("openssl", "openssl", extra_dirs=("/usr/bin",)), *args]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if result.returncode != 0:
        raise LabError(f"{failure}: {result.stderr.strip()[-500:]}")
