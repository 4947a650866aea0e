//! TLS for https targets (rustls). A load test usually aims at servers with lab or
//! internal certificates, so verification is off unless the job asks for it; with it on,
//! Mozilla's root certificates are trusted. A target's own options (the plan's
//! `targets[].tls`: CA bundle, client certificate, version, resumption, SNI) build its
//! own configuration (target_config).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WantsClientCert};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ConfigBuilder, DigitallySignedStruct, SignatureScheme, SupportedProtocolVersion};

use crate::wire::pb;

pub fn client_config(verify: bool) -> Arc<ClientConfig> {
    let options = pb::TargetTls::default();
    target_config(verify, &options).expect("the default options need no files")
}

/// The handshake's configuration of a target with its own TLS options (the job's
/// `verify` unless a CA bundle is given). Errors start with the field at fault.
pub fn target_config(verify: bool, options: &pb::TargetTls) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&SupportedProtocolVersion] = match options.version() {
        pb::TlsVersion::Unspecified => rustls::DEFAULT_VERSIONS,
        pb::TlsVersion::TlsVersion12 => &[&rustls::version::TLS12],
        pb::TlsVersion::TlsVersion13 => &[&rustls::version::TLS13],
    };
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|e| format!("tls.version: {e}"))?;
    let builder = if !options.ca.is_empty() {
        builder.with_root_certificates(ca_roots(&options.ca)?)
    } else if verify {
        builder.with_root_certificates(rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() })
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
    };
    let mut config = client_auth(builder, options)?;
    if options.no_resumption {
        // Every connection a full handshake: neither session IDs nor tickets are kept.
        config.resumption = Resumption::disabled();
    }
    Ok(Arc::new(config))
}

/// The server name the handshake sends and verifies: the plan's `sni`, else the URL's host.
pub fn server_name(options: Option<&pb::TargetTls>, host: &str) -> Result<ServerName<'static>, String> {
    match options.map(|o| o.sni.as_str()).filter(|sni| !sni.is_empty()) {
        Some(sni) => {
            ServerName::try_from(sni.to_string()).map_err(|e| format!("tls.sni: '{sni}' is not a DNS name: {e}"))
        }
        None => {
            ServerName::try_from(host.to_string()).map_err(|e| format!("url: '{host}' is not a TLS server name: {e}"))
        }
    }
}

fn ca_roots(pem: &[u8]) -> Result<rustls::RootCertStore, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("tls.ca: not a PEM certificate bundle: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err("tls.ca: no usable CA certificate in the bundle".into());
    }
    Ok(roots)
}

fn client_auth(
    builder: ConfigBuilder<ClientConfig, WantsClientCert>,
    options: &pb::TargetTls,
) -> Result<ClientConfig, String> {
    match (options.client_cert.is_empty(), options.client_key.is_empty()) {
        (true, true) => Ok(builder.with_no_client_auth()),
        (false, false) => {
            let chain = CertificateDer::pem_slice_iter(&options.client_cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("tls.client_cert: not a PEM certificate: {e}"))?;
            if chain.is_empty() {
                return Err("tls.client_cert: no certificate in the file".into());
            }
            // The key's parse error never quotes the key itself.
            let key = PrivateKeyDer::from_pem_slice(&options.client_key)
                .map_err(|_| "tls.client_key: not a PEM private key".to_string())?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("tls.client_key: {e}"))
        }
        _ => Err("tls.client_cert, tls.client_key: give both or neither".into()),
    }
}

/// Accepts any certificate but still checks the handshake's signatures, so a broken
/// server still fails the handshake.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_name_their_field() {
        let err = |options: pb::TargetTls| target_config(false, &options).err().unwrap();
        let not_pem = b"not a certificate".to_vec();
        assert!(err(pb::TargetTls { ca: not_pem.clone(), ..Default::default() }).starts_with("tls.ca: "));
        let half = pb::TargetTls { client_cert: not_pem.clone(), ..Default::default() };
        assert!(err(half).starts_with("tls.client_cert, tls.client_key: "));
        let key = b"-----BEGIN PRIVATE KEY-----\nc2VjcmV0\n-----END PRIVATE KEY-----\n".to_vec();
        let bad_cert = pb::TargetTls { client_cert: not_pem, client_key: key, ..Default::default() };
        let message = err(bad_cert);
        assert!(message.starts_with("tls.client_cert: "), "{message}");
        assert!(!message.contains("c2VjcmV0"), "a key is never quoted: {message}");
    }

    #[test]
    fn versions_resumption_and_sni_are_the_targets() {
        for version in [pb::TlsVersion::TlsVersion12, pb::TlsVersion::TlsVersion13] {
            let options = pb::TargetTls { version: version.into(), no_resumption: true, ..Default::default() };
            assert!(target_config(true, &options).is_ok(), "{version:?}");
        }
        let sni = pb::TargetTls { sni: "lab.test".into(), ..Default::default() };
        assert_eq!(server_name(Some(&sni), "127.0.0.1").unwrap(), ServerName::try_from("lab.test").unwrap());
        assert_eq!(server_name(None, "a.test").unwrap(), ServerName::try_from("a.test").unwrap());
        let bad = pb::TargetTls { sni: "not a name".into(), ..Default::default() };
        assert!(server_name(Some(&bad), "a.test").unwrap_err().starts_with("tls.sni: "));
    }
}
