//! The kit's scripted HTTP/1.1 server: raw TCP on 127.0.0.1, so that it can misbehave exactly
//! where a case needs it (reset before or after reading, cut a body short, trickle it), which
//! no HTTP library's server lets a handler do. Every connection gets the same [`Act`] and
//! carries one request; every request read is recorded, for the key and look-up checks.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::Reply;

/// What the server does with each connection.
#[derive(Debug, Clone)]
pub(crate) enum Act {
    /// Reads the request and answers with this reply.
    Answer(Reply),
    /// Reads the request and answers with this reply, each `{request}` in its body replaced by
    /// the request as received (request line, headers, body), escaped for a JSON string.
    Echo(Reply),
    /// Reads the request and answers with this reply, with a `Retry-After` HTTP date `ahead`
    /// of the moment it answers: dated when the case is set up, a busy machine's delay before
    /// the case is played would be read as a shorter wait.
    RetryAt { reply: Reply, ahead: Duration },
    /// Resets the connection without reading a byte.
    ResetBeforeReading,
    /// Reads the whole request, then resets the connection.
    ResetAfterReading,
    /// Reads the request and answers nothing until the client gives up.
    Hold,
    /// Sends the reply's head with its full length, then half its body, then closes.
    Truncate(Reply),
    /// Sends the reply's head, then its body a byte at a time, spread evenly over `over`.
    Trickle { reply: Reply, over: Duration },
}

/// A request as the server read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Recorded {
    pub method: String,
    /// The path and query, as sent.
    pub target: String,
    /// In the order sent; names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Holding a connection open longer than this serves no case: every adapter has given up.
const HOLD_AT_MOST: Duration = Duration::from_secs(15);

/// A request head longer than this is not one the kit expects; the connection is dropped.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// A running server. Dropping it stops the server and every connection it holds.
pub(crate) struct Server {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: JoinHandle<()>,
}

impl Server {
    pub(crate) async fn start(act: Act) -> std::io::Result<Server> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn(accept(listener, act, Arc::clone(&requests)));
        Ok(Server {
            addr,
            requests,
            task,
        })
    }

    pub(crate) fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request read so far, in the order they came.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        // A connection task never panics while holding the lock.
        self.requests.lock().expect("not poisoned").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Aborting the accept loop drops its `JoinSet`, which aborts every connection.
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, act: Act, requests: Arc<Mutex<Vec<Recorded>>>) {
    let mut connections = JoinSet::new();
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                connections.spawn(serve(stream, act.clone(), Arc::clone(&requests)));
            }
            // A failed accept (a client gone already, no file descriptors) ends nothing but
            // that connection; the pause keeps a lasting failure from spinning.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn serve(mut stream: TcpStream, act: Act, requests: Arc<Mutex<Vec<Recorded>>>) {
    if let Act::ResetBeforeReading = act {
        reset(stream);
        return;
    }
    let Some((recorded, raw)) = read_request(&mut stream).await else {
        return;
    };
    requests.lock().expect("not poisoned").push(recorded);
    // A write fails only when the client has gone, which ends the case's exchange anyway.
    let _ = match act {
        Act::Answer(reply) => answer(&mut stream, &reply).await,
        Act::RetryAt { reply, ahead } => {
            let date = httpdate::fmt_http_date(std::time::SystemTime::now() + ahead);
            answer(&mut stream, &reply.header("retry-after", date)).await
        }
        Act::Echo(reply) => {
            let quoted = serde_json::to_string(&raw).expect("a string serializes");
            let echo = &quoted[1..quoted.len() - 1];
            let body = reply.body.replace("{request}", echo);
            answer(&mut stream, &Reply { body, ..reply }).await
        }
        Act::ResetBeforeReading | Act::ResetAfterReading => {
            reset(stream);
            return;
        }
        Act::Hold => {
            // Returns when the client closes (or resets) its side, or at the bound.
            let mut byte = [0u8; 1];
            let _ = tokio::time::timeout(HOLD_AT_MOST, stream.read(&mut byte)).await;
            return;
        }
        Act::Truncate(reply) => truncate(&mut stream, &reply).await,
        Act::Trickle { reply, over } => trickle(&mut stream, &reply, over).await,
    };
}

/// Closing with a zero linger sends a reset instead of an orderly close.
fn reset(stream: TcpStream) {
    let _ = stream.set_zero_linger();
    drop(stream);
}

/// The status line and headers of `reply` for a body of `length` bytes. The reason phrase is
/// left empty, which HTTP/1.1 allows.
fn head(reply: &Reply, length: usize) -> String {
    let mut head = format!("HTTP/1.1 {} \r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "content-length: {length}\r\nconnection: close\r\n\r\n"
    ));
    head
}

async fn answer(stream: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    let mut bytes = head(reply, reply.body.len()).into_bytes();
    bytes.extend_from_slice(reply.body.as_bytes());
    stream.write_all(&bytes).await?;
    stream.shutdown().await
}

async fn truncate(stream: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    let body = reply.body.as_bytes();
    stream.write_all(head(reply, body.len()).as_bytes()).await?;
    stream.write_all(&body[..body.len() / 2]).await?;
    stream.shutdown().await
}

async fn trickle(stream: &mut TcpStream, reply: &Reply, over: Duration) -> std::io::Result<()> {
    let body = reply.body.as_bytes();
    stream.write_all(head(reply, body.len()).as_bytes()).await?;
    let pause = over / u32::try_from(body.len().max(1)).unwrap_or(u32::MAX);
    for byte in body {
        tokio::time::sleep(pause).await;
        stream.write_all(&[*byte]).await?;
    }
    stream.shutdown().await
}

/// Reads one request (a body only by `Content-Length`, as every adapter sends one), and gives
/// it recorded and as raw text. `None`: the client closed, or sent no HTTP.
async fn read_request(stream: &mut TcpStream) -> Option<(Recorded, String)> {
    let mut bytes = Vec::new();
    let head_end = loop {
        if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if bytes.len() > MAX_HEAD_BYTES || stream.read_buf(&mut bytes).await.ok()? == 0 {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, target) = (request_line.next()?, request_line.next()?);
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    while bytes.len() < head_end + length {
        if stream.read_buf(&mut bytes).await.ok()? == 0 {
            return None;
        }
    }
    let recorded = Recorded {
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
        body: String::from_utf8_lossy(&bytes[head_end..head_end + length]).into_owned(),
    };
    let raw = String::from_utf8_lossy(&bytes[..head_end + length]).into_owned();
    Some((recorded, raw))
}
