//! Streamable HTTP to an upstream server, through toolcage's own HTTP
//! client under the server's grant (`call::runner::http::exchange`: the
//! host decided before it is resolved, private addresses refused unless
//! pinned, no redirects): the transport rmcp's client runs over. No
//! sandboxed process runs for such a server; the grant's network is what
//! confines it. The server-to-client GET stream is not opened (servers
//! answer each request on its own POST), and each POST's answer is read
//! whole before it is parsed.

use crate::call::runner::http::{client::Response, exchange};
use crate::policy::Network;
use futures::StreamExt;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Largest answer read from an upstream (one JSON-RPC message or stream).
const MAX_BODY: usize = 16 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct HttpFailure(String);

type Failed = StreamableHttpError<HttpFailure>;

#[derive(Clone)]
pub(crate) struct PolicyHttpClient {
    pub(crate) server: String,
    pub(crate) network: Network,
    /// The `.mcp.json` entry's headers.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) timeout: Duration,
}

impl PolicyHttpClient {
    async fn send(
        &self,
        method: &'static str,
        uri: &str,
        mut headers: Vec<(String, String)>,
        body: Option<Vec<u8>>,
    ) -> Result<Response, Failed> {
        headers.extend(self.headers.iter().cloned());
        let (who, network, url, timeout) = (
            self.server.clone(),
            self.network.clone(),
            uri.to_string(),
            self.timeout,
        );
        let server = self.server.clone();
        tokio::task::spawn_blocking(move || {
            exchange(
                &who,
                &network,
                &url,
                method,
                &headers,
                body.as_deref(),
                MAX_BODY,
                timeout,
            )
        })
        .await?
        .map_err(|e| {
            // The http tools' wording, for a server.
            let e = e
                .replace(
                    &format!("tool {server} makes"),
                    &format!("upstream server {server} makes"),
                )
                .replace(
                    &format!("or for this tool in [tools.{server}.network]"),
                    &format!("in [upstreams.{server}.network]"),
                );
            StreamableHttpError::Client(HttpFailure(e))
        })
    }
}

fn common(
    session_id: Option<&str>,
    auth_header: Option<String>,
    custom: HashMap<HeaderName, HeaderValue>,
) -> Vec<(String, String)> {
    let mut h = vec![(
        "Accept".to_string(),
        "application/json, text/event-stream".to_string(),
    )];
    if let Some(s) = session_id {
        h.push(("Mcp-Session-Id".into(), s.into()));
    }
    if let Some(a) = auth_header {
        h.push(("Authorization".into(), format!("Bearer {a}")));
    }
    for (k, v) in custom {
        if let Ok(v) = v.to_str() {
            h.push((k.to_string(), v.to_string()));
        }
    }
    h
}

fn status_error(r: &Response) -> Failed {
    let body: String = r.body.text.chars().take(300).collect();
    StreamableHttpError::UnexpectedServerResponse(
        format!("HTTP {} {}: {body}", r.status, r.reason).into(),
    )
}

impl StreamableHttpClient for PolicyHttpClient {
    type Error = HttpFailure;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        let body = serde_json::to_vec(&message)?;
        let mut headers = common(session_id.as_deref(), auth_header, custom_headers);
        headers.push(("Content-Type".into(), "application/json".into()));
        let r = self.send("POST", &uri, headers, Some(body)).await?;
        if matches!(r.status, 202 | 204) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if !(200..300).contains(&r.status) {
            return Err(status_error(&r));
        }
        let session = r.header("mcp-session-id").map(str::to_owned);
        let kind = r
            .header("content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        if kind.starts_with("text/event-stream") {
            let bytes = bytes::Bytes::from(r.body.text.into_bytes());
            let one = futures::stream::once(async move { Ok::<_, std::io::Error>(bytes) });
            let stream = sse_stream::SseStream::from_bytes_stream(one).boxed();
            return Ok(StreamableHttpPostResponse::Sse(stream, session));
        }
        if kind.starts_with("application/json") {
            let msg: ServerJsonRpcMessage = serde_json::from_str(&r.body.text)?;
            return Ok(StreamableHttpPostResponse::Json(msg, session));
        }
        Err(StreamableHttpError::UnexpectedContentType(Some(kind)))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failed> {
        let headers = common(Some(&session_id), auth_header, custom_headers);
        self.send("DELETE", &uri, headers, None).await.map(|_| ())
    }

    async fn get_stream(
        &self,
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<futures::stream::BoxStream<'static, Result<sse_stream::Sse, SseError>>, Failed>
    {
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}
