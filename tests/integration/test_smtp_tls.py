"""Approval email over STARTTLS and over TLS from the start, to a real SMTP server (aiosmtpd)
on loopback with a certificate from a CA made here: the server's certificate and name are
checked, the login goes only over the encrypted session, and an untrusted server gets nothing."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import SecretStr

from shared.local.embedded_redis import free_port
from shared.settings import Settings, SmtpSecurity
from worker.routes.email import send_message

USER, PASSWORD = "signoff", "smtp-passphrase"
# the implicit-TLS server is told its sessions are safe for AUTH, and aiosmtpd warns of it
pytestmark = pytest.mark.filterwarnings("ignore:Requiring AUTH while not requiring TLS")


class Mailbox:
    """Keeps what it accepts, and whether each session was encrypted and logged in."""

    def __init__(self) -> None:
        self.received: list[tuple[bytes, bool, bool]] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        # STARTTLS sets the session's `ssl`; TLS from the start shows on the transport
        tls = session.ssl is not None or server.transport.get_extra_info("ssl_object") is not None
        self.received.append((envelope.content, tls, session.authenticated))
        return "250 OK"


def _authenticate(server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> Any:
    ok = isinstance(data, LoginPassword) and (data.login, data.password) == (
        USER.encode(),
        PASSWORD.encode(),
    )
    return AuthResult(success=ok)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificates(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A CA's certificate (written to ca.pem) and a server context for localhost signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("signoff test CA"))
        .issuer_name(_name("signoff test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(san, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(server.public_bytes(pem))
    (folder / "server.key").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(folder / "server.pem", folder / "server.key")
    return folder / "ca.pem", context


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    return _certificates(tmp_path_factory.mktemp("smtp-tls"))


def _server(mailbox: Mailbox, context: ssl.SSLContext, *, implicit: bool) -> Controller:
    common: dict[str, Any] = {
        "hostname": "127.0.0.1",
        "port": free_port(),
        "authenticator": _authenticate,
        "auth_required": True,
        "server_hostname": "localhost",
    }
    if implicit:
        # aiosmtpd advertises AUTH only after its own STARTTLS unless told the session is safe
        return Controller(mailbox, ssl_context=context, auth_require_tls=False, **common)
    return Controller(mailbox, tls_context=context, require_starttls=True, **common)


@pytest.fixture(params=[SmtpSecurity.STARTTLS, SmtpSecurity.TLS], ids=["starttls", "tls"])
def served(
    request: pytest.FixtureRequest, tls: tuple[Path, ssl.SSLContext]
) -> Iterator[tuple[Mailbox, int, SmtpSecurity]]:
    mailbox = Mailbox()
    controller = _server(mailbox, tls[1], implicit=request.param is SmtpSecurity.TLS)
    controller.start()
    yield mailbox, controller.port, request.param
    controller.stop()


def _settings(port: int, security: SmtpSecurity) -> Settings:
    return Settings(
        smtp_host="localhost",
        smtp_port=port,
        smtp_security=security,
        smtp_username=USER,
        smtp_password=SecretStr(PASSWORD),
        smtp_from="signoff@example.test",
        outbound_allow=("127.0.0.1", "::1"),  # the SMTP server is on loopback
    )


def _message() -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"] = "signoff@example.test", "ana@example.test"
    message["Subject"] = "Approval needed: send_email"
    message.set_content("Allow or deny: http://signoff.example.test/a/xyz")
    return message


def test_mail_goes_encrypted_and_logged_in_to_a_trusted_server(
    served: tuple[Mailbox, int, SmtpSecurity],
    tls: tuple[Path, ssl.SSLContext],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mailbox, port, security = served
    monkeypatch.setenv("SSL_CERT_FILE", str(tls[0]))  # the test CA, as an operator's trust store
    send_message(_settings(port, security), _message())
    [(content, encrypted, logged_in)] = mailbox.received
    assert encrypted and logged_in
    assert b"Approval needed: send_email" in content


def test_a_server_whose_certificate_is_not_trusted_gets_nothing(
    served: tuple[Mailbox, int, SmtpSecurity],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mailbox, port, security = served
    other_ca, _ = _certificates(tmp_path)  # a CA that did not sign the server's certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(other_ca))
    with pytest.raises(ssl.SSLCertVerificationError):
        send_message(_settings(port, security), _message())
    assert mailbox.received == []
