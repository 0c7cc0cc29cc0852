//! The dashboard's HTTP routes (served by [`crate::telemetry::Telemetry::serve`]).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use tokio::sync::{broadcast, mpsc};

use super::{view, Dashboard};

/// The body of every response of the Prometheus listener (fixed or streamed).
pub type DashboardBody = BoxBody<Bytes, Infallible>;

const PAGE: &str = include_str!("page.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");

/// A client that cannot take an event within this time is dropped.
const SSE_SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// A comment line keeps idle connections open through proxies and finds dead clients.
const SSE_KEEPALIVE: Duration = Duration::from_secs(15);
/// Events buffered for one client.
const SSE_BUFFER: usize = 32;

/// No inline script or style, nothing from elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn fixed(status: StatusCode, ctype: &'static str, body: impl Into<Bytes>) -> Response<DashboardBody> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    r
}

fn json(v: &impl serde::Serialize) -> Response<DashboardBody> {
    match serde_json::to_vec(v) {
        Ok(b) => fixed(StatusCode::OK, "application/json", b),
        Err(e) => fixed(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            format!("cannot encode: {e}\n"),
        ),
    }
}

impl Dashboard {
    /// Answers the dashboard's routes; `None` for any other request (the caller's routes).
    pub fn route<B>(self: &Arc<Self>, req: &Request<B>) -> Option<Response<DashboardBody>> {
        if req.method() != Method::GET {
            return None;
        }
        Some(match req.uri().path() {
            "/" | "/dashboard" | "/dashboard/" => {
                let mut r = fixed(StatusCode::OK, "text/html; charset=utf-8", PAGE);
                r.headers_mut()
                    .insert("content-security-policy", HeaderValue::from_static(CSP));
                r
            }
            "/dashboard/app.js" => fixed(StatusCode::OK, "text/javascript; charset=utf-8", SCRIPT),
            "/dashboard/app.css" => fixed(StatusCode::OK, "text/css; charset=utf-8", STYLE),
            "/api/status" => json(&view::status(&self.published.load())),
            "/api/fabric" => json(&self.fabric_view()),
            "/api/excluded" => json(&self.problems_view()),
            "/api/jobs" => json(&view::jobs(&self.published.load())),
            "/api/timeline" => json(&serde_json::json!({ "events": self.timeline() })),
            "/api/loads" => {
                self.refresh_loads();
                match self.loads() {
                    Some(l) => json(&*l),
                    None => json(&serde_json::json!({ "generation": 0, "computing": true })),
                }
            }
            "/events" => self.sse(),
            _ => return None,
        })
    }

    /// `GET /events`: a server-sent-event stream of the dashboard's events.
    fn sse(self: &Arc<Self>) -> Response<DashboardBody> {
        let Ok(permit) = self.sse_slots.clone().try_acquire_owned() else {
            return fixed(
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("too many dashboard clients (at most {})\n", super::MAX_SSE_CLIENTS),
            );
        };
        let mut rx = self.events.subscribe();
        let (tx, body) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(SSE_BUFFER);
        tokio::spawn(async move {
            let _permit = permit;
            let send = |text: Bytes| {
                let tx = tx.clone();
                async move {
                    matches!(
                        tokio::time::timeout(SSE_SEND_TIMEOUT, tx.send(Ok(Frame::data(text)))).await,
                        Ok(Ok(()))
                    )
                }
            };
            if !send(Bytes::from_static(b"retry: 2000\n: fabricd dashboard events\n\n")).await {
                return;
            }
            let mut keepalive = tokio::time::interval(SSE_KEEPALIVE);
            keepalive.tick().await;
            loop {
                let text = tokio::select! {
                    () = tx.closed() => return,
                    _ = keepalive.tick() => Bytes::from_static(b": keepalive\n\n"),
                    r = rx.recv() => match r {
                        Ok(t) => Bytes::copy_from_slice(t.as_bytes()),
                        // The page reloads its state: events were lost for this client.
                        Err(broadcast::error::RecvError::Lagged(n)) => Bytes::from(format!(
                            "event: lagged\ndata: {{\"lost\":{n}}}\n\n"
                        )),
                        Err(broadcast::error::RecvError::Closed) => return,
                    },
                };
                if !send(text).await {
                    return;
                }
            }
        });
        let mut r = Response::new(BodyExt::boxed(StreamBody::new(
            tokio_stream::wrappers::ReceiverStream::new(body),
        )));
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        r
    }
}
