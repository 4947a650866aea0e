"""The agent's credentials for the controller, and the id they give it.

With a certificate, the agent's id is the certificate's common name (the controller lets
an agent certificate open a session under that name only); with a token file holding an
`agent NAME TOKEN` line, it is NAME. `--id` may repeat that name, never differ from it.
"""

from __future__ import annotations

from cryptography import x509
from cryptography.x509.oid import NameOID

from loadfleet.wire.dial import ClientCredentials

from .errors import UsageError

# The role a loadfleet certificate carries (the controller's certs.py writes it).
ROLE_URI_PREFIX = "loadfleet:role:"


def certificate_name(pem: bytes, path: str) -> str:
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise UsageError(f"--tls-cert {path}: not a certificate ({exc})") from None
    try:
        uris = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.UniformResourceIdentifier
        )
    except x509.ExtensionNotFound:
        uris = []
    roles = [u.removeprefix(ROLE_URI_PREFIX) for u in uris if u.startswith(ROLE_URI_PREFIX)]
    if roles and roles != ["agent"]:
        raise UsageError(
            f"--tls-cert {path}: a certificate for a {' and '.join(roles)}, not an agent "
            "(`loadfleet certs agent` makes agents' certificates)"
        )
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(names) != 1:
        raise UsageError(f"--tls-cert {path}: the certificate has no common name to take the agent's id from")
    return str(names[0].value)


def agent_id(credentials: ClientCredentials, explicit: str | None, fallback: str) -> str:
    """The id the credentials allow (`explicit` must match it), else `explicit`, else `fallback`."""
    granted = ""
    if credentials.cert_pem is not None:
        granted = certificate_name(credentials.cert_pem, str(credentials.cert_path))
    elif credentials.token is not None and credentials.token.name:
        if credentials.token.role and credentials.token.role != "agent":
            raise UsageError(f"the token file is for a {credentials.token.role}, not an agent")
        granted = credentials.token.name
    if granted and explicit and explicit != granted:
        raise UsageError(
            f"--id {explicit}: the credentials are for agent {granted!r} (leave --id out, or make "
            f"credentials for {explicit!r})"
        )
    return granted or explicit or fallback
