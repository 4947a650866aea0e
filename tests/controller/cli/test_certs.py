"""`loadfleet certs`: a CA and certificates whose role and name a controller can trust."""

import stat
import subprocess

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from support.procs import program

pytestmark = pytest.mark.process  # starts real processes (tests/conftest.py)


def certs(*args):
    return subprocess.run([program("loadfleet"), "certs", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def pki(tmp_path):
    directory = tmp_path / "pki"
    assert certs("init", "--dir", str(directory)).returncode == 0
    return directory


def load(path):
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_each_role_is_in_its_certificate_with_the_name_and_usage(pki):
    assert certs("controller", "--dir", str(pki), "--name", "ctrl.example", "--ip", "10.0.0.5").returncode == 0
    assert certs("agent", "--dir", str(pki), "load-1", "load-2").returncode == 0
    assert certs("operator", "--dir", str(pki), "alice").returncode == 0
    expected = {
        "controller.crt": ("ctrl.example", "controller", ExtendedKeyUsageOID.SERVER_AUTH),
        "agent-load-1.crt": ("load-1", "agent", ExtendedKeyUsageOID.CLIENT_AUTH),
        "agent-load-2.crt": ("load-2", "agent", ExtendedKeyUsageOID.CLIENT_AUTH),
        "operator-alice.crt": ("alice", "operator", ExtendedKeyUsageOID.CLIENT_AUTH),
    }
    ca = load(pki / "ca.crt")
    for file, (name, role, usage) in expected.items():
        cert = load(pki / file)
        cert.verify_directly_issued_by(ca)
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.UniformResourceIdentifier) == [f"loadfleet:role:{role}"]
        assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [usage]
        days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
        assert 364 <= days <= 366
        assert stat.S_IMODE((pki / file.replace(".crt", ".key")).stat().st_mode) == 0o600
    sans = load(pki / "controller.crt").extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["ctrl.example"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["10.0.0.5"]
    assert stat.S_IMODE((pki / "ca.key").stat().st_mode) == 0o600
    check = subprocess.run(
        ["openssl", "verify", "-CAfile", str(pki / "ca.crt"), "-purpose", "sslclient", str(pki / "agent-load-1.crt")],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_nothing_is_overwritten_without_force(pki):
    before = (pki / "ca.key").read_bytes()
    result = certs("init", "--dir", str(pki))
    assert result.returncode == 2 and "--force" in result.stderr and len(result.stderr.splitlines()) == 1
    assert (pki / "ca.key").read_bytes() == before
    assert certs("agent", "--dir", str(pki), "a1").returncode == 0
    first = (pki / "agent-a1.crt").read_bytes()
    assert certs("agent", "--dir", str(pki), "a1").returncode == 2
    assert certs("agent", "--dir", str(pki), "a1", "--force").returncode == 0
    assert (pki / "agent-a1.crt").read_bytes() != first


@pytest.mark.parametrize(
    "args, message",
    [
        (["agent", "../etc/passwd"], "use 1-63 letters"),
        (["agent", "a b"], "use 1-63 letters"),
        (["controller"], "--name HOST"),
        (["controller", "--ip", "not-an-ip"], "not an IP address"),
        (["operator", "alice", "--days", "0"], "at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(pki, args, message):
    result = certs(*args, "--dir", str(pki))
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_certificates_need_the_ca_and_never_outlive_it(tmp_path):
    result = certs("agent", "--dir", str(tmp_path), "a1")
    assert result.returncode == 2 and "certs init" in result.stderr
    assert certs("init", "--dir", str(tmp_path), "--days", "30").returncode == 0
    assert certs("agent", "--dir", str(tmp_path), "a1").returncode == 0
    assert load(tmp_path / "agent-a1.crt").not_valid_after_utc <= load(tmp_path / "ca.crt").not_valid_after_utc


def test_a_ca_key_of_another_kind_is_refused_in_one_line(pki):
    # `certs init` makes an elliptic-curve key; an RSA key put in its place is not signed with.
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    (pki / "ca.key").write_bytes(pem)
    done = certs("agent", "--dir", str(pki), "load-1")
    assert done.returncode == 2
    assert done.stderr.strip().endswith("ca.key is not an elliptic-curve key"), done.stderr
    assert not (pki / "agent-load-1.crt").exists()
