//! A do-nothing admission webhook for comparison benchmarks: the same TLS stack
//! (rustls/ring, HTTP/1.1 and HTTP/2), the same runtime and allocator as
//! `trainplace serve`, and it parses each AdmissionReview into JSON, but it judges
//! nothing and answers `allowed: true`.
//!
//!   cargo run --release --example baseline -- 127.0.0.1:9443
//!   cargo run --release --example baseline -- 127.0.0.1:9443 typed
//!
//! By default it parses the body into a `serde_json::Value`, the cheapest read there
//! is. With `typed` it is the webhook kube-rs's documentation leads to: axum's `Json`
//! extractor into kube-core's `AdmissionReview<DynamicObject>`, and an
//! `AdmissionResponse::from(&request)` answered through axum's `Json`
//! (https://docs.rs/kube/latest/kube/core/admission/index.html).
//!
//! With BASELINE_TLS_CERT and BASELINE_TLS_KEY (PEM files) it serves that certificate
//! instead of a self-signed one, so a real API server can call it
//! (examples/sandbox_pod_latency.rs).
//!
//! See scripts/bench-compare.sh for the side-by-side run.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use kube_core::DynamicObject;
use kube_core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use serde_json::{Value, json};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

async fn allow(body: Bytes) -> axum::Json<Value> {
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let uid = review["request"]["uid"].clone();
    axum::Json(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": true}
    }))
}

async fn allow_typed(
    axum::Json(review): axum::Json<AdmissionReview<DynamicObject>>,
) -> axum::Json<AdmissionReview<DynamicObject>> {
    let request: Result<AdmissionRequest<DynamicObject>, _> = review.try_into();
    let response = match request {
        Ok(request) => AdmissionResponse::from(&request),
        Err(error) => AdmissionResponse::invalid(error.to_string()),
    };
    axum::Json(response.into_review())
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args().nth(1).unwrap_or("127.0.0.1:9443".into());
    let typed = std::env::args().nth(2).as_deref() == Some("typed");
    let (chain, key) = match (
        std::env::var_os("BASELINE_TLS_CERT"),
        std::env::var_os("BASELINE_TLS_KEY"),
    ) {
        (Some(cert), Some(key)) => {
            use rustls::pki_types::pem::PemObject;
            let chain = rustls::pki_types::CertificateDer::pem_file_iter(cert)
                .expect("BASELINE_TLS_CERT")
                .collect::<Result<Vec<_>, _>>()
                .expect("BASELINE_TLS_CERT");
            (
                chain,
                rustls::pki_types::PrivateKeyDer::from_pem_file(key).expect("BASELINE_TLS_KEY"),
            )
        }
        _ => {
            let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
            let key =
                rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
            (vec![cert.cert.der().clone()], key)
        }
    };
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("protocols")
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .expect("key");
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let review = if typed {
        post(allow_typed)
    } else {
        post(allow)
    };
    let app = Router::new()
        .route("/mutate", review.clone())
        .route("/validate", review);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let mode = if typed { "typed" } else { "JSON tree" };
    eprintln!(
        "baseline webhook ({mode}) on https://{}",
        listener.local_addr()?
    );
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(app);
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), service)
                .await;
        });
    }
}
