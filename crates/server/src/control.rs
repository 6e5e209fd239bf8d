//! The control socket of a served volume (`tiermux serve --control PATH`,
//! spoken by `tiermux ctl`): a Unix socket that takes one command per
//! connection and answers it.
//!
//! A request is one line of at most [`MAX_REQUEST_BYTES`]:
//! - `get` lists the policy's running parameters and those it can change
//!   live; `get KEY` shows one;
//! - `set KEY VALUE [KEY VALUE]...` changes parameters (checked as a config
//!   file's are; refused as a whole if any is refused);
//! - `stats` gives the metrics text of `--metrics`.
//!
//! The answer's first line is `ok` or `error`, then its text, then the
//! connection closes. `get` and `set` are carried out by the event loop
//! (through an inbox and its waker, between two batches of requests);
//! `stats` reads the snapshot the loop publishes.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tiermux_core::{ParamValue, Params};
use tiermux_engine::reactor::Waker;
use tiermux_engine::runtime::Io;

use crate::listener::AcceptPacing;
use crate::metrics::{render, VolumeInfo};
use crate::server::LiveStats;

/// The longest request line, bytes.
pub const MAX_REQUEST_BYTES: usize = 4096;

/// How long a client may take to send its line, and the loop to answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Connections answered at once; one more is told the socket is busy and
/// closed, so idle clients cannot make the server start threads without
/// end.
pub const MAX_CONNECTIONS: usize = 16;

/// A parsed request.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// The running parameters, or one of them.
    Get(Option<String>),
    /// New values of parameters.
    Set(Vec<(String, ParamValue)>),
    /// The metrics text.
    Stats,
}

/// A command for the event loop and where its answer goes.
pub(crate) struct Call {
    command: Command,
    reply: mpsc::Sender<Result<String, String>>,
}

/// Calls waiting for the event loop.
pub(crate) type Inbox = Arc<Mutex<Vec<Call>>>;

/// Parses a request line.
pub fn parse(line: &str) -> Result<Command, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["get"] => Ok(Command::Get(None)),
        ["get", key] => Ok(Command::Get(Some(key.to_string()))),
        ["stats"] => Ok(Command::Stats),
        ["set", rest @ ..] if !rest.is_empty() && rest.len() % 2 == 0 => Ok(Command::Set(
            rest.chunks(2)
                .map(|kv| (kv[0].to_string(), parse_value(kv[1])))
                .collect(),
        )),
        ["set", ..] => Err("set takes pairs: set KEY VALUE [KEY VALUE]...".into()),
        [] => Err("empty request (get, set or stats)".into()),
        [other, ..] => Err(format!("unknown command '{other}' (get, set or stats)")),
    }
}

/// A value as a config file would type it: true/false, an integer, a real
/// number, or else a string (quotes optional).
pub fn parse_value(word: &str) -> ParamValue {
    if let Ok(b) = word.parse::<bool>() {
        ParamValue::Bool(b)
    } else if let Ok(i) = word.parse::<i64>() {
        ParamValue::Int(i)
    } else if let Ok(x) = word.parse::<f64>() {
        ParamValue::Float(x)
    } else {
        let unquoted = word
            .strip_prefix('"')
            .and_then(|w| w.strip_suffix('"'))
            .unwrap_or(word);
        ParamValue::Str(unquoted.to_string())
    }
}

/// Carries out `get` and `set` in the event loop.
pub(crate) fn execute(command: &Command, io: &mut Io<'_>) -> Result<String, String> {
    match command {
        Command::Get(key) => Ok(describe(io, key.as_deref())),
        Command::Set(pairs) => {
            let mut changes = Params::new();
            for (k, v) in pairs {
                changes.set(k, v.clone());
            }
            let changed = io.reconfigure(&changes).map_err(|e| e.to_string())?;
            Ok(if changed.is_empty() {
                "unchanged\n".into()
            } else {
                format!("changed {}\n", changed.join(", "))
            })
        }
        Command::Stats => unreachable!("stats is answered from the snapshot"),
    }
}

/// The running parameters (all, or `key`), as a config file writes them.
fn describe(io: &Io<'_>, key: Option<&str>) -> String {
    let vol = io.volume();
    let params = vol.params();
    let line = |k: &str, v: &ParamValue| format!("{k} = {v}\n");
    match key {
        Some("name") | Some("policy") => line("name", &ParamValue::Str(vol.policy_name().into())),
        Some(k) => match params.iter().find(|(n, _)| n.as_str() == k) {
            Some((n, v)) => line(n, v),
            None => format!(
                "# {k} is not set: policy '{}' uses its default\n",
                vol.policy_name()
            ),
        },
        None => {
            let mut out = line("name", &ParamValue::Str(vol.policy_name().into()));
            for (n, v) in params.iter() {
                out += &line(n, v);
            }
            let live = vol.policy().live_params();
            out += &format!(
                "# can change while running: {}\n",
                if live.is_empty() {
                    "nothing".to_string()
                } else {
                    live.join(", ")
                }
            );
            out
        }
    }
}

/// A listening control socket; the socket file goes when it is dropped.
pub struct ControlEndpoint {
    /// The socket's path.
    pub path: PathBuf,
}

impl Drop for ControlEndpoint {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl ControlEndpoint {
    /// Listens on `path` (a stale socket file is replaced) and answers on a
    /// thread of its own; `get` and `set` go to the loop through `inbox`,
    /// `stats` renders `metrics` (a server without them refuses it).
    pub(crate) fn start(
        path: &Path,
        inbox: Inbox,
        waker: Waker,
        metrics: Option<(Arc<Mutex<LiveStats>>, VolumeInfo)>,
    ) -> io::Result<ControlEndpoint> {
        if path.exists() {
            std::fs::remove_file(path)?;
        }
        let listener = UnixListener::bind(path)?;
        std::thread::Builder::new()
            .name("tiermux-control".into())
            .spawn(move || {
                // One thread per connection, up to MAX_CONNECTIONS: a
                // client that sends nothing holds up no other.
                let open = Arc::new(AtomicUsize::new(0));
                let mut pacing = AcceptPacing::new(Arc::default());
                for got in listener.incoming() {
                    // A failed accept (descriptors short) is retried after
                    // a pause, not at once.
                    let stream = match got {
                        Ok(s) => {
                            pacing.accepted();
                            s
                        }
                        Err(e) => {
                            pacing.failed(&e);
                            continue;
                        }
                    };
                    if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                        open.fetch_sub(1, Ordering::AcqRel);
                        refuse_busy(&stream);
                        continue;
                    }
                    let (inbox, waker, metrics, conn_open) =
                        (inbox.clone(), waker.clone(), metrics.clone(), open.clone());
                    let spawned = std::thread::Builder::new()
                        .name("tiermux-control-conn".into())
                        .spawn(move || {
                            let _ = answer(stream, &inbox, &waker, metrics.as_ref());
                            conn_open.fetch_sub(1, Ordering::AcqRel);
                        });
                    if spawned.is_err() {
                        // No thread: the stream was dropped with the
                        // closure; count it closed.
                        open.fetch_sub(1, Ordering::AcqRel);
                    }
                }
            })?;
        Ok(ControlEndpoint {
            path: path.to_path_buf(),
        })
    }
}

/// Tells a connection beyond [`MAX_CONNECTIONS`] that the socket is busy.
/// Its request line is read first, for at most 50 ms (the accept thread
/// must not wait on a silent client), so that closing does not reset the
/// connection before the client reads the answer.
fn refuse_busy(stream: &UnixStream) {
    let short = Some(Duration::from_millis(50));
    let _ = stream.set_read_timeout(short);
    let _ = stream.set_write_timeout(short);
    let mut line = Vec::new();
    let mut reader = BufReader::new(io::Read::take(stream, MAX_REQUEST_BYTES as u64 + 1));
    let _ = reader.read_until(b'\n', &mut line);
    let mut out = stream;
    let _ = write!(
        out,
        "error\nbusy: {MAX_CONNECTIONS} control connections are open; try again\n"
    );
}

/// Reads one request from `stream` and writes its answer.
fn answer(
    stream: UnixStream,
    inbox: &Inbox,
    waker: &Waker,
    metrics: Option<&(Arc<Mutex<LiveStats>>, VolumeInfo)>,
) -> io::Result<()> {
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let mut bytes = Vec::new();
    let mut reader = BufReader::new(io::Read::take(&stream, MAX_REQUEST_BYTES as u64 + 1));
    reader.read_until(b'\n', &mut bytes)?;
    let result = if bytes.len() > MAX_REQUEST_BYTES {
        // Read the rest of the line (up to 1 MiB), so that closing with it
        // unread does not reset the connection before the answer is read.
        let mut rest = BufReader::new(io::Read::take(&stream, 1 << 20));
        let _ = rest.skip_until(b'\n');
        Err(format!("request longer than {MAX_REQUEST_BYTES} bytes"))
    } else if let Err(e) = std::str::from_utf8(&bytes) {
        Err(format!("request is not UTF-8 ({e})"))
    } else {
        let line = String::from_utf8_lossy(&bytes);
        match parse(line.trim_end()) {
            Ok(Command::Stats) => match metrics {
                Some((live, info)) => Ok(render(live, info)),
                None => Err("this server keeps no metrics; get and set work".into()),
            },
            Ok(command) => call_loop(command, inbox, waker),
            Err(e) => Err(e),
        }
    };
    let mut out = &stream;
    match result {
        Ok(text) => write!(out, "ok\n{text}"),
        Err(e) => writeln!(out, "error\n{e}"),
    }
}

/// Hands `command` to the event loop and waits for its answer.
fn call_loop(command: Command, inbox: &Inbox, waker: &Waker) -> Result<String, String> {
    let (reply, answer) = mpsc::channel();
    inbox
        .lock()
        .expect("control inbox")
        .push(Call { command, reply });
    waker.wake();
    answer
        .recv_timeout(TIMEOUT)
        .map_err(|_| "the volume did not answer (is it stopping?)".to_string())?
}

/// Carries out the calls in `inbox` (from the loop's wake-up).
pub(crate) fn serve_calls(inbox: &Inbox, io: &mut Io<'_>) {
    let calls: Vec<Call> = std::mem::take(&mut *inbox.lock().expect("control inbox"));
    for call in calls {
        let _ = call.reply.send(execute(&call.command, io));
    }
}

/// Sends `line` to the control socket at `path` and returns the answer's
/// text, or its error as `Err`.
pub fn request(path: &Path, line: &str) -> io::Result<Result<String, String>> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(TIMEOUT * 2))?;
    writeln!(stream, "{line}")?;
    let mut answer = String::new();
    io::Read::read_to_string(&mut stream, &mut answer)?;
    let (status, text) = answer.split_once('\n').unwrap_or((answer.as_str(), ""));
    match status {
        "ok" => Ok(Ok(text.to_string())),
        "error" => Ok(Err(text.trim_end().to_string())),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not a tiermux control socket (answered {status:?})"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_into_commands_and_bad_ones_are_named() {
        assert_eq!(parse("get"), Ok(Command::Get(None)));
        assert_eq!(
            parse(" get  write_mode "),
            Ok(Command::Get(Some("write_mode".into())))
        );
        assert_eq!(parse("stats"), Ok(Command::Stats));
        assert_eq!(
            parse("set write_mode wt dirty_high_ratio 0.5 flush_max_inflight 4 noise_aware true x \"wb\""),
            Ok(Command::Set(vec![
                ("write_mode".into(), ParamValue::Str("wt".into())),
                ("dirty_high_ratio".into(), ParamValue::Float(0.5)),
                ("flush_max_inflight".into(), ParamValue::Int(4)),
                ("noise_aware".into(), ParamValue::Bool(true)),
                ("x".into(), ParamValue::Str("wb".into())),
            ]))
        );
        assert!(parse("set write_mode").unwrap_err().contains("pairs"));
        assert!(parse("set").unwrap_err().contains("pairs"));
        assert!(parse("").unwrap_err().contains("empty"));
        assert!(parse("reboot now")
            .unwrap_err()
            .contains("unknown command 'reboot'"));
    }
}
