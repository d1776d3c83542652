//! NCCL network transport errors. The NET/IB completion line changed over the releases
//! (`src/transport/net_ib.cc`, later `src/transport/net_ib/*.cc`): `Got completion with error
//! 12, opcode 1, len 0, vendor err 129` (before 2.8); `Got completion from peer <ip><port> with
//! error 12, opcode 0, len 0, vendor err 129` (2.8-2.18); `... with status=12 opcode=0 len=0
//! vendor err 129 (Recv) localGid .. remoteGids..` (2.19-2.27); `status=IBV_WC_RETRY_EXC_ERR(12)
//! opcode=..` (2.28+). Async HCA events (`Got async event : port error`, `local catastrophic
//! error`, newer lines prefixed by `mlx5_0:1`), the wire size check (`collective mismatch error,
//! local size A remote size B`) and the socket transport's failures are read too.

use super::types::{NetError, NetWhat, Quote};

/// Whether the line may be a network error (a substring scan or two).
pub fn wanted(line: &str) -> bool {
    line.contains("NET/")
        || line.contains("Net : ")
        || line.contains("remote peer")
        || line.contains("Call to recv from")
        || line.contains("Call to send to")
}

/// A Markdown autolink (`[net_ib.cc:101](http://net_ib.cc:101/)`) as its text, as issue
/// comments render file names and addresses. One pass: each `](http` is found once and its
/// `[` looked for only since the previous link.
pub fn strip_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(m) = rest.find("](http") {
        let (head, tail) = (&rest[..m], &rest[m + 2..]);
        let (Some(open), Some(close)) = (head.rfind('['), tail.find(')')) else {
            out.push_str(&rest[..m + 2]);
            rest = tail;
            continue;
        };
        out.push_str(&head[..open]);
        out.push_str(&head[open + 1..]);
        rest = &tail[close + 1..];
    }
    out.push_str(rest);
    out
}

/// The network error of a line (launcher prefixes and links already off), if it is one.
pub fn read(file: &str, n: usize, t: &str) -> Option<NetError> {
    let what = what(t)?;
    let head = t.split(" NCCL WARN").next().unwrap_or("");
    let (host, pid, dev) = nccl_prefix(head);
    Some(NetError {
        host,
        pid,
        dev,
        hca: hca(t),
        surfaced: t.contains("ncclRemoteError") || t.contains("NCCL error"),
        what,
        at: Quote::new(file, n, t),
    })
}

fn what(t: &str) -> Option<NetWhat> {
    if let Some(i) = t.find("Got completion") {
        let s = &t[i..];
        let status = num_after(s, "with error ")
            .or_else(|| num_after(s, "status="))
            .or_else(|| paren_num(s, "status="));
        return Some(NetWhat::Completion {
            status,
            vendor_err: num_after(s, "vendor err ").or_else(|| num_after(s, "vendor_err=")),
            peer: addr_after(s, "from peer "),
            direction: ["(Send)", "(Recv)"]
                .iter()
                .find(|d| s.contains(*d))
                .map(|d| d.trim_matches(['(', ')']).to_string()),
        });
    }
    if let Some(i) = t.find("Got async event : ") {
        let event = t[i + 18..].trim().to_string();
        return Some(NetWhat::AsyncEvent { event });
    }
    if t.contains("collective mismatch error") {
        return Some(NetWhat::SizeMismatch {
            peer: addr_after(t, "peer "),
            local: num_after(t, "local size ").map(u64::from),
            remote: num_after(t, "remote size ").map(u64::from),
        });
    }
    if let Some(i) = t.find("Connection closed by remote peer") {
        return Some(NetWhat::Socket {
            peer: addr_after(&t[i..], "remote peer "),
            error: "connection closed by remote peer".into(),
        });
    }
    // `Net : Call to recv from` before 2.12, `socketProgressOpt: Call to recv from` after.
    if t.contains("Call to recv from ") || t.contains("Call to send to ") {
        let key = if t.contains("recv from ") {
            "recv from "
        } else {
            "send to "
        };
        let error = t.rsplit(" : ").next().unwrap_or("").trim().to_string();
        return Some(NetWhat::Socket {
            peer: addr_after(t, key),
            error,
        });
    }
    None
}

fn num_after(s: &str, key: &str) -> Option<u32> {
    let i = s.find(key)? + key.len();
    let d: String = s[i..].chars().take_while(char::is_ascii_digit).collect();
    d.parse().ok()
}

/// `status=IBV_WC_RETRY_EXC_ERR(12)`: the number in parentheses (NCCL 2.28+).
fn paren_num(s: &str, key: &str) -> Option<u32> {
    let i = s.find(key)? + key.len();
    let w = s[i..].split_whitespace().next()?;
    let inner = w.split_once('(')?.1.split(')').next()?;
    inner.parse().ok()
}

/// `10.216.210.236<54862>` or `[fe80::1]<1234>`: the address without the port.
fn addr_after(s: &str, key: &str) -> Option<String> {
    let i = s.find(key)? + key.len();
    let w = s[i..].split_whitespace().next()?;
    let a = w.split('<').next()?.trim_matches(['[', ']', ',']);
    (!a.is_empty()).then(|| a.to_string())
}

/// `mlx5_0:1 Got async event`, `[hca mlx5_2]`, `hca mlx5_0`.
fn hca(t: &str) -> Option<String> {
    if let Some(i) = t.find(" Got async event") {
        let w = t[..i].split_whitespace().last()?;
        if w.contains('_') && !w.contains('/') {
            return Some(w.to_string());
        }
    }
    let i = t.find("hca ")? + 4;
    let w = t[i..].split_whitespace().next()?;
    Some(w.trim_end_matches([']', ',']).to_string())
}

/// `host:pid:tid [dev]` before the source file and `NCCL WARN`: the last `[digits]` word
/// and the word before it (pdsh and timestamps may come first).
fn nccl_prefix(head: &str) -> (Option<String>, Option<u64>, Option<u32>) {
    let w: Vec<&str> = head.split_whitespace().collect();
    let Some(d) = w.iter().rposition(|x| {
        x.strip_prefix('[')
            .and_then(|x| x.strip_suffix(']'))
            .is_some_and(|x| !x.is_empty() && x.bytes().all(|c| c.is_ascii_digit()))
    }) else {
        return (None, None, None);
    };
    let dev = w[d].trim_matches(['[', ']']).parse().ok();
    let Some(who) = d.checked_sub(1).map(|i| w[i]) else {
        return (None, None, dev);
    };
    let mut parts = who.rsplitn(3, ':');
    let (_tid, pid, host) = (parts.next(), parts.next(), parts.next());
    match (host, pid.and_then(|p| p.parse().ok())) {
        (Some(h), Some(p)) if !h.is_empty() => (Some(h.to_string()), Some(p), dev),
        _ => (None, None, dev),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_completion_lines_of_every_era() {
        let old = read("f", 1, "-worker-1:946:988 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129").unwrap();
        assert_eq!(old.host.as_deref(), Some("-worker-1"));
        assert!(matches!(
            old.what,
            NetWhat::Completion {
                status: Some(12),
                peer: None,
                ..
            }
        ));
        let mid = read("f", 1, "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid fd00::1 remoteGidsfd00::2").unwrap();
        assert_eq!(mid.dev, Some(4));
        assert_eq!(
            mid.what,
            NetWhat::Completion {
                status: Some(12),
                vendor_err: Some(129),
                peer: Some("10.216.210.236".into()),
                direction: Some("Recv".into())
            }
        );
        let new = read("f", 1, "h:1:2 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 hca mlx5_3").unwrap();
        assert!(matches!(
            new.what,
            NetWhat::Completion {
                status: Some(12),
                ..
            }
        ));
        assert_eq!(new.hca.as_deref(), Some("mlx5_3"));
    }

    #[test]
    fn net_async_events_mismatch_and_markdown() {
        let md = strip_links(
            "node201:127799:127863 [0] transport/[net_ib.cc:101](http://net_ib.cc:101/) NCCL WARN NET/IB : mlx5_0:1 Got async event : local access violation work queue error",
        );
        let e = read("f", 1, &md).unwrap();
        assert_eq!(e.host.as_deref(), Some("node201"));
        assert_eq!(e.hca.as_deref(), Some("mlx5_0:1"));
        assert!(
            matches!(&e.what, NetWhat::AsyncEvent { event } if event.starts_with("local access"))
        );
        let m = read("f", 1, "10.10.23.10: so-ucloud-10-10-23-10:1307367:1307586 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer 10.10.23.6<58683> collective mismatch error, local size 496640 remote size 65536").unwrap();
        assert_eq!(m.host.as_deref(), Some("so-ucloud-10-10-23-10"));
        assert_eq!(
            m.what,
            NetWhat::SizeMismatch {
                peer: Some("10.10.23.6".into()),
                local: Some(496640),
                remote: Some(65536)
            }
        );
        assert_eq!(
            strip_links("peer [10.1.3.201](http://10.1.3.201/)<33057>"),
            "peer 10.1.3.201<33057>"
        );
        assert_eq!(strip_links("a [b] c"), "a [b] c");
        let s = read("f", 1, "n1:1:2 [0] misc/socket.cc:1 NCCL WARN socketProgressOpt: Call to recv from 10.0.0.2<60536> failed : Connection reset by peer").unwrap();
        assert_eq!(
            s.what,
            NetWhat::Socket {
                peer: Some("10.0.0.2".into()),
                error: "Connection reset by peer".into()
            }
        );
    }
}
