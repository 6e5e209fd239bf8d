//! The Redis commands the key-value server takes, decoded into key-value
//! commands and the shape of their reply. Every refusal is a message in
//! Redis's words ("ERR wrong number of arguments for 'get' command").

use std::sync::atomic::Ordering;

use bytes::Bytes;
use tiermux_kv::{Command, Machine};

use crate::kv::ReplyShape;
use crate::listener::Admission;
use crate::resp;

fn arity(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

fn upper(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_ascii_uppercase()
}

/// A command name in capitals, without allocating (names longer than 16
/// bytes are no command: they come back empty).
fn command_name(b: &[u8]) -> ([u8; 16], usize) {
    let mut buf = [0u8; 16];
    if b.len() > buf.len() {
        return (buf, 0);
    }
    for (d, s) in buf.iter_mut().zip(b) {
        *d = s.to_ascii_uppercase();
    }
    (buf, b.len())
}

/// What a command asks of the machine and how its reply is shaped; an error
/// message for a command that cannot run.
pub(crate) fn decode(
    args: &[Bytes],
    now_ms: u64,
    machine: &Machine,
    cursors: &crate::kv_scan::Cursors,
    clients: &Admission,
) -> Result<(ReplyShape, Vec<Command>), String> {
    let (buf, len) = command_name(&args[0]);
    let name = std::str::from_utf8(&buf[..len]).unwrap_or("");
    let rest = &args[1..];
    let ready = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut out = Vec::new();
        f(&mut out);
        Ok((ReplyShape::Ready(out), Vec::new()))
    };
    match name {
        "GET" => match rest {
            [key] => Ok((
                ReplyShape::Value(None),
                vec![Command::Get { key: key.clone() }],
            )),
            _ => Err(arity("get")),
        },
        "MGET" if !rest.is_empty() => {
            let cmds = rest
                .iter()
                .map(|k| Command::Get { key: k.clone() })
                .collect();
            Ok((ReplyShape::Values(vec![None; rest.len()]), cmds))
        }
        "DEL" | "EXISTS" if !rest.is_empty() => {
            let del = name == "DEL";
            let cmds = rest
                .iter()
                .map(|k| {
                    if del {
                        Command::Del { key: k.clone() }
                    } else {
                        Command::Exists { key: k.clone() }
                    }
                })
                .collect();
            Ok((ReplyShape::Count(0), cmds))
        }
        "SET" if rest.len() >= 2 => decode_set(rest, now_ms, machine),
        "PING" => match rest {
            [] => ready(&|o| resp::simple(o, "PONG")),
            [msg] => ready(&|o| resp::bulk(o, Some(msg))),
            _ => Err(arity("ping")),
        },
        "ECHO" => match rest {
            [msg] => ready(&|o| resp::bulk(o, Some(msg))),
            _ => Err(arity("echo")),
        },
        "QUIT" => ready(&|o| resp::simple(o, "OK")),
        "INFO" => {
            let text = info(machine, clients);
            ready(&|o| resp::bulk(o, Some(text.as_bytes())))
        }
        "CONFIG" if rest.len() == 2 && upper(&rest[0]) == "GET" => {
            let value = config_value(&rest[1]);
            ready(&|o| {
                resp::array_header(o, 2);
                resp::bulk(o, Some(&rest[1]));
                resp::bulk(o, Some(value));
            })
        }
        "CONFIG" => Err("ERR only CONFIG GET with one parameter is supported".into()),
        "MGET" | "DEL" | "EXISTS" | "SET" => Err(arity(&name.to_ascii_lowercase())),
        "SCAN" if machine.mode() == "cache" => {
            Err("ERR SCAN needs a key-value store; this server runs a cache".into())
        }
        "SCAN" => crate::kv_scan::decode(rest, cursors),
        _ => {
            let shown: String = String::from_utf8_lossy(&args[0]).chars().take(64).collect();
            Err(format!("ERR unknown command '{shown}'"))
        }
    }
}

/// `SET key value [EX s | PX ms]`: refused when the value cannot be stored.
fn decode_set(
    rest: &[Bytes],
    now_ms: u64,
    machine: &Machine,
) -> Result<(ReplyShape, Vec<Command>), String> {
    let expires_at_ms = set_expiry(&rest[2..], now_ms)?;
    let (key, value) = (rest[0].clone(), rest[1].clone());
    let max_bytes = machine.max_value_bytes(key.len());
    if value.len() > max_bytes {
        return Err(format!(
            "ERR value of {} bytes is larger than the {} stores ({max_bytes} bytes)",
            value.len(),
            machine.mode(),
        ));
    }
    Ok((
        ReplyShape::Ok,
        vec![Command::Set {
            key,
            value,
            expires_at_ms,
        }],
    ))
}

/// The value `CONFIG GET` gives for a setting. Clients read a few at start
/// (redis-benchmark reads `save` and `appendonly`): this server keeps
/// nothing to disk.
fn config_value(setting: &[u8]) -> &'static [u8] {
    if setting.eq_ignore_ascii_case(b"appendonly") {
        b"no"
    } else {
        b""
    }
}

/// The expiry of a SET's options (`EX seconds`, `PX milliseconds`).
fn set_expiry(opts: &[Bytes], now_ms: u64) -> Result<u64, String> {
    match opts {
        [] => Ok(0),
        [unit, n] => {
            let n: u64 = std::str::from_utf8(n)
                .ok()
                .and_then(|s| s.parse().ok())
                .filter(|&n| n > 0)
                .ok_or("ERR invalid expire time in 'set' command")?;
            let ms = match upper(unit).as_str() {
                "EX" => n.checked_mul(1000),
                "PX" => Some(n),
                _ => return Err("ERR syntax error".into()),
            };
            ms.and_then(|ms| now_ms.checked_add(ms))
                .ok_or_else(|| "ERR invalid expire time in 'set' command".into())
        }
        _ => Err("ERR syntax error".into()),
    }
}

/// INFO's text: the server, its clients and the machine's counters, in
/// Redis's sections and, where Redis has them, its names.
fn info(m: &Machine, clients: &Admission) -> String {
    let mut text = format!(
        "# Server\r\nredis_version:7.0.0\r\ntiermux_mode:{}\r\n\
         # Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\n\
         # Stats\r\nrejected_connections:{}\r\n",
        m.mode(),
        clients.open.load(Ordering::Relaxed),
        clients.max,
        clients.refused.load(Ordering::Relaxed),
    );
    for (name, value) in m.counters() {
        text.push_str(&format!("{name}:{value}\r\n"));
    }
    text
}
