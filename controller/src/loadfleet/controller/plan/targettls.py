"""TLS options of an https target (`targets[].tls`): a CA bundle to verify the server
against, a client certificate and key (mTLS), a pinned version, session resumption and an
SNI name. The files are read where the plan is, by `loadfleet run` and `validate` (like
body files, bodyfiles.py), checked to be PEM that parses, and put into the plan as
`ca_pem`, `client_cert_pem` and `client_key_pem`, so a controller never opens a file a plan
names. The key never reaches a run directory (redact.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from loadfleet.controller.model.errors import Problem
from loadfleet.controller.plan.course import resolve
from loadfleet.wire.files import FileRefused, read_regular

# Each file's bound: a CA bundle of a few hundred certificates fits; more is a mistake.
MAX_TLS_FILE_BYTES = 256 * 1024
_FILES = ("ca", "client_cert", "client_key")


class TlsVersion(enum.Enum):
    ANY = ""  # TLS 1.2 and 1.3
    TLS12 = "1.2"
    TLS13 = "1.3"


@dataclass(frozen=True)
class TargetTls:
    ca_pem: str = ""
    client_cert_pem: str = ""
    client_key_pem: str = ""
    version: TlsVersion = TlsVersion.ANY
    resumption: bool = True
    sni: str = ""

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> TargetTls:
        return cls(
            doc.get("ca_pem", ""),
            doc.get("client_cert_pem", ""),
            doc.get("client_key_pem", ""),
            TlsVersion(doc.get("version", "")),
            doc.get("resumption", True),
            doc.get("sni", ""),
        )

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {f"{name}_pem": getattr(self, f"{name}_pem") for name in _FILES}
        doc = {k: v for k, v in doc.items() if v}
        if self.version is not TlsVersion.ANY:
            doc["version"] = self.version.value
        if not self.resumption:
            doc["resumption"] = False
        if self.sni:
            doc["sni"] = self.sni
        return doc


def inline_tls_files(doc: dict[str, Any], base_dir: Path | None, *, confined: bool) -> list[Problem]:
    """Replaces each target's TLS file names by their checked PEM text (in `doc`); the
    problems of those that cannot be, and of options that do not fit the target, each named
    by its path."""
    problems = []
    for i, target in enumerate(doc.get("targets", [])):
        tls = target.get("tls")
        if tls is None:
            continue
        place = f"targets[{i}].tls"
        if not str(target["url"]).lower().startswith("https://"):
            problems.append(Problem(place, f"TLS options need an https:// URL; '{target['url']}' is http"))
        if ("client_cert" in tls or "client_cert_pem" in tls) != ("client_key" in tls or "client_key_pem" in tls):
            problems.append(Problem(place, "give both `client_cert` and `client_key`, or neither"))
        for name in _FILES:
            if name in tls:
                problems += _inline_one(tls, name, f"{place}.{name}", base_dir, confined=confined)
    return problems


def _inline_one(tls: dict[str, Any], name: str, place: str, base_dir: Path | None, *, confined: bool) -> list[Problem]:
    if confined:
        why = "the controller reads no files named by a plan: `loadfleet run` reads the TLS file and sends it inline"
        return [Problem(place, why)]
    path = resolve(tls[name], base_dir)
    try:
        text = read_regular(path, MAX_TLS_FILE_BYTES).decode("ascii")
    except FileRefused as exc:
        return [Problem(place, f"{path}: {exc}")]
    except UnicodeDecodeError:
        return [Problem(place, f"{path} is not PEM text")]
    why = _pem_problem(name, text.encode("ascii"))
    if why:
        return [Problem(place, f"{path}: {why}")]
    tls[f"{name}_pem"] = text
    del tls[name]
    return []


def _pem_problem(name: str, data: bytes) -> str:
    """Why the file is not what its field needs (never quoting a key), or ''."""
    try:
        if name == "client_key":
            serialization.load_pem_private_key(data, password=None)
        else:
            x509.load_pem_x509_certificates(data)
    except (ValueError, TypeError):
        what = "an unencrypted PEM private key" if name == "client_key" else "PEM certificates"
        return f"does not hold {what} that parse"
    return ""
