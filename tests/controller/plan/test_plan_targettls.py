"""TLS options per target (plan/targettls.py): files read beside the plan, checked and sent
inline; problems named by their path; the client key never in what a run directory keeps."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from loadfleet.controller.model.errors import PlanError
from loadfleet.controller.plan.parse import load_plan, parse_plan
from loadfleet.controller.plan.redact import redact_plan, redact_plan_yaml
from loadfleet.controller.plan.targettls import MAX_TLS_FILE_BYTES, TlsVersion
from loadfleet.controller.rpc.targetconvert import target_to_proto
from loadfleet.v1 import job_pb2

PLAN = """
duration_s: 1
DRIVER
targets: [{url: "URL", tls: TLS}]
load: {model: closed, clients: 1}
workload: {requests: [{name: home, path: /}]}
"""


def write_pki(tmp_path: Path) -> None:
    """A self-signed certificate and its key, as lab files would be."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "client.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    (tmp_path / "client.key").write_bytes(key_pem)


def plan_file(tmp_path: Path, tls: str, *, url: str = "https://127.0.0.1:8443", driver: str = "") -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(PLAN.replace("URL", url).replace("TLS", tls).replace("DRIVER", driver))
    return path


def problems(plan: Path) -> list[str]:
    with pytest.raises(PlanError) as info:
        load_plan(plan)
    return [f"{p.path}: {p.message}" for p in info.value.problems]


ALL = '{ca: ca.crt, client_cert: client.crt, client_key: client.key, version: "1.2", resumption: false, sni: lab.test}'


def test_the_files_are_read_checked_and_sent_inline(tmp_path):
    write_pki(tmp_path)
    plan = load_plan(plan_file(tmp_path, ALL))
    tls = plan.targets[0].tls
    assert tls is not None
    assert tls.client_key_pem == (tmp_path / "client.key").read_text()
    assert (tls.version, tls.resumption, tls.sni) == (TlsVersion.TLS12, False, "lab.test")
    sent = plan.to_yaml()
    assert "client.key" not in sent
    assert parse_plan(sent) == plan  # what the controller receives: self-contained
    message = target_to_proto(plan.targets[0])
    assert message.tls.client_key == (tmp_path / "client.key").read_bytes()
    assert message.tls.ca == (tmp_path / "ca.crt").read_bytes()
    assert message.tls.version == job_pb2.TLS_VERSION_1_2
    assert message.tls.no_resumption and message.tls.sni == "lab.test"


def test_a_target_without_options_sends_none(tmp_path):
    plan = load_plan(plan_file(tmp_path, "{}").with_name("plan.yaml"))
    assert not target_to_proto(plan.targets[0]).tls.no_resumption
    assert target_to_proto(plan.targets[0]).tls.version == job_pb2.TLS_VERSION_UNSPECIFIED


def test_the_client_key_never_reaches_the_run_directory(tmp_path):
    write_pki(tmp_path)
    plan = load_plan(plan_file(tmp_path, ALL))
    secret = (tmp_path / "client.key").read_text().splitlines()[1]
    stored = redact_plan_yaml(plan.to_yaml())
    assert secret not in stored and "redacted" in stored.splitlines()[0]
    assert (tmp_path / "ca.crt").read_text().splitlines()[1] in stored  # only the key goes
    assert secret not in redact_plan(plan).to_yaml()


@pytest.mark.parametrize(
    ("tls", "url", "expected"),
    [
        ("{version: '1.3'}", "http://127.0.0.1:8080", "targets[0].tls: TLS options need an https:// URL"),
        ("{client_cert: client.crt}", "https://a.test", "targets[0].tls: give both `client_cert` and `client_key`"),
        ("{ca: client.key}", "https://a.test", "targets[0].tls.ca: "),
        ("{ca: missing.pem}", "https://a.test", "targets[0].tls.ca: "),
        ("{client_cert: client.crt, client_key: ca.crt}", "https://a.test", "targets[0].tls.client_key: "),
        ("{sni: 'not a name'}", "https://a.test", "targets[0].tls.sni"),
        ("{version: '1.1'}", "https://a.test", "targets[0].tls.version"),
    ],
)
def test_each_problem_is_named_by_its_path(tmp_path, tls, url, expected):
    write_pki(tmp_path)
    found = problems(plan_file(tmp_path, tls, url=url))
    assert any(p.startswith(expected) for p in found), found


def test_a_key_problem_never_quotes_the_key(tmp_path):
    write_pki(tmp_path)
    (tmp_path / "bad.key").write_text((tmp_path / "client.key").read_text().replace("PRIVATE KEY", "PRIVATE KEX"))
    found = problems(plan_file(tmp_path, "{client_cert: client.crt, client_key: bad.key}"))
    secret = (tmp_path / "client.key").read_text().splitlines()[1]
    assert found and all(secret not in p for p in found)


def test_a_file_over_the_bound_is_refused(tmp_path):
    write_pki(tmp_path)
    pem = (tmp_path / "ca.crt").read_text()
    (tmp_path / "big.crt").write_text(pem * (MAX_TLS_FILE_BYTES // len(pem) + 1))
    (tmp_path / "fits.crt").write_text(pem * (MAX_TLS_FILE_BYTES // len(pem)))
    assert any(p.startswith("targets[0].tls.ca: ") for p in problems(plan_file(tmp_path, "{ca: big.crt}")))
    assert load_plan(plan_file(tmp_path, "{ca: fits.crt}")).targets[0].tls is not None


def test_a_confined_plan_naming_a_file_is_refused(tmp_path):
    with pytest.raises(PlanError) as info:
        parse_plan(PLAN.replace("URL", "https://a.test").replace("TLS", "{ca: ca.crt}").replace("DRIVER", ""))
    assert [p.path for p in info.value.problems] == ["targets[0].tls.ca"]


def test_the_gatling_driver_refuses_tls_options(tmp_path):
    found = problems(plan_file(tmp_path, "{version: '1.2'}", driver="driver: gatling"))
    assert any(p.startswith("targets[0].tls: the gatling driver") and "driver: engine" in p for p in found), found
