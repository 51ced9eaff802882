//! A scripted SMTP peer on loopback, for the faults a real server will not produce on demand.
//!
//! It speaks enough RFC 5321 for herald's adapter (EHLO, MAIL, RCPT, DATA, RSET, NOOP, QUIT;
//! no TLS, no AUTH — those are tested against a real server) and follows a [`Script`]: answer
//! normally, answer one step with a chosen reply, or misbehave around the final dot. Its
//! [`Ledger`] counts the messages it received completely (the final dot read) and took or may
//! have taken, keyed by their Message-ID header, which is the ground truth for duplicate tests.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use herald_smtp::fake::{self, Script};
//! let peer = fake::spawn(Script::DropAfterDot).await?;
//! // point an SmtpRoute at peer.addr(), send, then:
//! assert_eq!(peer.ledger().deliveries_of("<n-1@herald.invalid>"), 1);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

/// A step of the SMTP exchange, as the server sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// The 220 greeting on connect.
    Greeting,
    /// The reply to EHLO (or HELO).
    Ehlo,
    MailFrom,
    RcptTo,
    /// The reply to the DATA command (normally 354).
    Data,
    /// The reply to the final `.` of the content (normally 250).
    AfterDot,
}

/// How the peer behaves; it applies to every connection accepted while it is in force.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Script {
    /// Answer every step positively and queue each message (`250 2.0.0 Ok: queued as FAKE<n>`).
    #[default]
    Accept,
    /// Answer `step` with `code text` instead. At [`Step::AfterDot`] the message is not
    /// recorded: a 4xx/5xx there means the server refused responsibility. After a greeting
    /// reply the peer answers only QUIT, as RFC 5321 §3.1 asks of a 554 greeting.
    Reply { step: Step, code: u16, text: String },
    /// Read the content and the final dot, record the message, and close the connection
    /// without replying: the RFC 1047 window.
    DropAfterDot,
    /// Read the content and the final dot, record the message, and never reply.
    SilentAfterDot,
    /// Answer DATA with 354, then stop reading: the client's writes back up and the final dot
    /// never arrives, so nothing is recorded.
    StallInContent,
}

impl Script {
    /// [`Script::Reply`] in short: `Script::reply(Step::RcptTo, 550, "5.1.1 No such user")`.
    pub fn reply(step: Step, code: u16, text: impl Into<String>) -> Script {
        Script::Reply {
            step,
            code,
            text: text.into(),
        }
    }

    fn reply_at(&self, at: Step) -> Option<String> {
        match self {
            Script::Reply { step, code, text } if *step == at => Some(format!("{code} {text}\r\n")),
            _ => None,
        }
    }
}

/// A message the peer read completely.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The MAIL FROM argument, e.g. `FROM:<ops@example.com>`.
    pub mail_from: String,
    /// The RCPT TO arguments.
    pub rcpt_to: Vec<String>,
    /// The Message-ID header value, angle brackets included.
    pub message_id: Option<String>,
    /// The content as the client meant it (dot-stuffing removed), CRLF line ends.
    pub content: String,
}

/// What the peer received completely, shared with the peer's tasks.
#[derive(Debug, Clone, Default)]
pub struct Ledger(Arc<Mutex<Vec<Received>>>);

impl Ledger {
    /// How many times a message with this Message-ID header value (`<…@herald.invalid>`) was
    /// received completely and taken or possibly taken (see [`Script`]).
    pub fn deliveries_of(&self, message_id: &str) -> u64 {
        self.lock()
            .iter()
            .filter(|m| m.message_id.as_deref() == Some(message_id))
            .count() as u64
    }

    /// Counts per Message-ID.
    pub fn counts(&self) -> HashMap<String, u64> {
        let mut counts = HashMap::new();
        for message in self.lock().iter() {
            if let Some(id) = &message.message_id {
                *counts.entry(id.clone()).or_default() += 1;
            }
        }
        counts
    }

    /// Every message, in the order received.
    pub fn messages(&self) -> Vec<Received> {
        self.lock().clone()
    }

    fn record(&self, message: Received) {
        self.lock().push(message);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Received>> {
        // A panicking test thread must not hide the ledger from the others.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running peer; it stops (and drops its connections) when this is dropped.
#[derive(Debug)]
pub struct FakeSmtp {
    addr: SocketAddr,
    ledger: Ledger,
    script: Arc<Mutex<Script>>,
    accept: JoinHandle<()>,
}

impl FakeSmtp {
    /// The loopback address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn ledger(&self) -> Ledger {
        self.ledger.clone()
    }

    /// Replaces the script for connections accepted from now on.
    pub fn set_script(&self, script: Script) {
        *self.script.lock().unwrap_or_else(PoisonError::into_inner) = script;
    }
}

impl Drop for FakeSmtp {
    fn drop(&mut self) {
        // The accept task owns the connection tasks (a JoinSet), so they end with it.
        self.accept.abort();
    }
}

/// Starts a peer on `127.0.0.1:0`.
pub async fn spawn(script: Script) -> io::Result<FakeSmtp> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let ledger = Ledger::default();
    let script = Arc::new(Mutex::new(script));
    let accept = tokio::spawn(accept_loop(listener, script.clone(), ledger.clone()));
    Ok(FakeSmtp {
        addr,
        ledger,
        script,
        accept,
    })
}

async fn accept_loop(listener: TcpListener, script: Arc<Mutex<Script>>, ledger: Ledger) {
    let queued = Arc::new(AtomicU64::new(0));
    let mut sessions = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let script = script.lock().unwrap_or_else(PoisonError::into_inner).clone();
                // A session's I/O error is the client's business (a test that drops the
                // connection on purpose); the peer just forgets the session.
                sessions.spawn(session(stream, script, ledger.clone(), queued.clone()));
            }
            Some(_) = sessions.join_next() => {}
        }
    }
}

/// Longest line the peer reads: RFC 5321's 1000 octets, with room for a lenient client.
const MAX_LINE: u64 = 64 * 1024;

async fn session(
    stream: TcpStream,
    script: Script,
    ledger: Ledger,
    queued: Arc<AtomicU64>,
) -> io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);

    if let Some(reply) = script.reply_at(Step::Greeting) {
        send(&mut write, &reply).await?;
        while let Some(line) = read_line(&mut read).await? {
            if verb(&line) == "QUIT" {
                return send(&mut write, "221 2.0.0 Bye\r\n").await;
            }
            send(&mut write, "503 5.5.1 Only QUIT now\r\n").await?;
        }
        return Ok(());
    }
    send(
        &mut write,
        "220 fake.invalid ESMTP herald-smtp scripted peer\r\n",
    )
    .await?;

    let mut mail_from: Option<String> = None;
    let mut rcpt_to = Vec::new();
    while let Some(line) = read_line(&mut read).await? {
        let argument = line.get(4..).unwrap_or("").trim().to_owned();
        let reply = match verb(&line).as_str() {
            "EHLO" | "HELO" => script.reply_at(Step::Ehlo).unwrap_or_else(|| {
                "250-fake.invalid\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250 ENHANCEDSTATUSCODES\r\n"
                    .to_owned()
            }),
            "MAIL" => script.reply_at(Step::MailFrom).unwrap_or_else(|| {
                mail_from = Some(argument);
                rcpt_to.clear();
                "250 2.1.0 Ok\r\n".to_owned()
            }),
            "RCPT" => script.reply_at(Step::RcptTo).unwrap_or_else(|| {
                rcpt_to.push(argument);
                "250 2.1.5 Ok\r\n".to_owned()
            }),
            "DATA" => {
                if let Some(reply) = script.reply_at(Step::Data) {
                    reply
                } else if mail_from.is_none() || rcpt_to.is_empty() {
                    "503 5.5.1 MAIL and RCPT first\r\n".to_owned()
                } else {
                    send(&mut write, "354 End data with <CR><LF>.<CR><LF>\r\n").await?;
                    if script == Script::StallInContent {
                        // Never read again; the peer's owner ends this by dropping the peer.
                        std::future::pending::<()>().await;
                    }
                    let Some(content) = read_content(&mut read).await? else {
                        return Ok(()); // the client left mid-content: nothing was received
                    };
                    let message = Received {
                        mail_from: mail_from.take().unwrap_or_default(),
                        rcpt_to: std::mem::take(&mut rcpt_to),
                        message_id: header(&content, "Message-ID"),
                        content,
                    };
                    match &script {
                        Script::Reply {
                            step: Step::AfterDot,
                            ..
                        } => script.reply_at(Step::AfterDot).unwrap_or_default(),
                        Script::DropAfterDot => {
                            ledger.record(message);
                            return Ok(());
                        }
                        Script::SilentAfterDot => {
                            ledger.record(message);
                            // Swallow whatever the client sends until it leaves.
                            let mut sink = Vec::new();
                            let _ = read.read_to_end(&mut sink).await;
                            return Ok(());
                        }
                        _ => {
                            ledger.record(message);
                            let n = queued.fetch_add(1, Ordering::SeqCst) + 1;
                            format!("250 2.0.0 Ok: queued as FAKE{n}\r\n")
                        }
                    }
                }
            }
            "RSET" => {
                mail_from = None;
                rcpt_to.clear();
                "250 2.0.0 Ok\r\n".to_owned()
            }
            "NOOP" => "250 2.0.0 Ok\r\n".to_owned(),
            "QUIT" => return send(&mut write, "221 2.0.0 Bye\r\n").await,
            _ => "502 5.5.2 Command not recognized\r\n".to_owned(),
        };
        send(&mut write, &reply).await?;
    }
    Ok(())
}

async fn send(write: &mut OwnedWriteHalf, reply: &str) -> io::Result<()> {
    write.write_all(reply.as_bytes()).await?;
    write.flush().await
}

/// One line with its line end, or `None` at the end of the stream.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(read: &mut R) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    let n = read.take(MAX_LINE).read_until(b'\n', &mut line).await?;
    if n == 0 {
        return Ok(None);
    }
    Ok(Some(String::from_utf8_lossy(&line).into_owned()))
}

fn verb(line: &str) -> String {
    line.split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_uppercase()
}

/// The content up to the final `.` line, dot-stuffing undone (RFC 5321 §4.5.2); `None` if the
/// stream ends first.
async fn read_content<R: tokio::io::AsyncBufRead + Unpin>(
    read: &mut R,
) -> io::Result<Option<String>> {
    let mut content = String::new();
    loop {
        let Some(line) = read_line(read).await? else {
            return Ok(None);
        };
        if line == ".\r\n" || line == ".\n" {
            return Ok(Some(content));
        }
        content.push_str(line.strip_prefix('.').unwrap_or(&line));
    }
}

/// The value of header `name` in the header section of `content`, unfolded and trimmed.
fn header(content: &str, name: &str) -> Option<String> {
    let head = content.split("\r\n\r\n").next().unwrap_or("");
    let mut found: Option<String> = None;
    for line in head.split("\r\n") {
        if line.starts_with([' ', '\t']) {
            if let Some(value) = found.as_mut() {
                value.push_str(line.trim());
            }
            continue;
        }
        if found.is_some() {
            break;
        }
        if let Some((field, value)) = line.split_once(':')
            && field.trim().eq_ignore_ascii_case(name)
        {
            found = Some(value.trim().to_owned());
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_found_case_insensitively_and_unfolded() {
        let content = "From: a@b.c\r\nmessage-id:\r\n <x@herald.invalid>\r\nSubject: s\r\n\r\nMessage-ID: <body>\r\n";
        assert_eq!(
            header(content, "Message-ID").as_deref(),
            Some("<x@herald.invalid>")
        );
        assert_eq!(header(content, "To"), None);
    }
}
