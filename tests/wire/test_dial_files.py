"""Credential files as the client and the controller read them: secrets kept from other users,
nothing but regular files, never more than MAX_CREDENTIAL_FILE_BYTES."""

from __future__ import annotations

import os

import pytest

from loadfleet.wire.dial import MAX_CREDENTIAL_FILE_BYTES, CredentialsError, read_pem, read_token_file, token_lines

TOKEN = "agent a1 " + "x" * 40 + "\n"
KEY = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"


def _file(tmp_path, text: str, mode: int):
    path = tmp_path / "secret"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


@pytest.mark.parametrize("mode", [0o600, 0o400, 0o640, 0o440])
def test_a_secret_kept_from_other_users_is_read(tmp_path, mode):
    assert read_token_file(_file(tmp_path, TOKEN, mode)).name == "a1"
    assert b"PRIVATE KEY" in read_pem(_file(tmp_path, KEY, mode), "--tls-key", "PRIVATE KEY")


@pytest.mark.parametrize("mode", [0o644, 0o604, 0o602, 0o666])
def test_a_secret_other_users_may_read_or_write_is_refused_with_the_fix(tmp_path, mode):
    path = _file(tmp_path, TOKEN, mode)
    with pytest.raises(CredentialsError, match=f"other users may read it \\(mode {mode:04o}\\): chmod o-rwx"):
        token_lines(path)
    with pytest.raises(CredentialsError, match="other users may read it"):
        read_pem(_file(tmp_path, KEY, mode), "--tls-key", "PRIVATE KEY")


def test_a_certificate_may_be_world_readable(tmp_path):
    cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    assert read_pem(_file(tmp_path, cert, 0o644), "--tls-ca", "CERTIFICATE")


def test_a_fifo_or_a_device_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(CredentialsError, match="not a regular file"):
        token_lines(str(fifo))
    with pytest.raises(CredentialsError, match="not a regular file"):
        read_pem("/dev/zero", "--tls-ca", "CERTIFICATE")


def test_an_oversized_file_is_refused(tmp_path):
    path = _file(tmp_path, "#" * (MAX_CREDENTIAL_FILE_BYTES + 1), 0o600)
    with pytest.raises(CredentialsError, match="larger than"):
        token_lines(path)
