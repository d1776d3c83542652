//! What people paste is not what NCCL wrote: launchers, container runtimes and terminals add
//! their own prefixes, colours and line ends, and ranks writing at once glue lines together.
//! [`clean`] takes those off one line so the recognisers see NCCL's text.

use std::borrow::Cow;

#[cfg(test)]
mod line_tests {
    #[test]
    fn lines_end_at_lf_crlf_or_a_lone_cr() {
        fn l(t: &str) -> Vec<&str> {
            super::lines(t).collect()
        }
        assert_eq!(l(""), Vec::<&str>::new());
        assert_eq!(l("a\nb\n"), ["a", "b"]);
        assert_eq!(l("a\r\nb\r\n"), ["a", "b"]);
        assert_eq!(l("a\rb\rc"), ["a", "b", "c"]);
        assert_eq!(l("a\n\nb"), ["a", "", "b"]);
        assert_eq!(l("\n"), [""]);
        for t in ["x\ny\r\nz\n", "p\nq", "\n\n"] {
            assert_eq!(l(t), t.lines().collect::<Vec<_>>(), "{t:?}");
        }
    }
}

/// The line as NCCL wrote it: no trailing CR, no ANSI escape sequences, no launcher or
/// container-log prefixes (any number of them, in any order).
pub fn clean(raw: &str) -> Cow<'_, str> {
    let mut line: Cow<'_, str> = Cow::Borrowed(raw.trim_end_matches(['\r', '\n']));
    if line.contains('\x1b') {
        line = Cow::Owned(strip_ansi(&line));
    }
    // Markdown bold around a message (`**NCCL WARN ...**`) in an issue comment.
    if line.contains("**NCCL ") {
        line = Cow::Owned(line.replace("**", ""));
    }
    let mut rest: &str = &line;
    // Each prefix shape at most a few times: `[1,0]<stdout>: 0: 2024-...Z host:...` exists.
    for _ in 0..6 {
        let before = rest.len();
        rest = strip_launcher(rest);
        if rest.len() == before {
            break;
        }
    }
    if rest.len() == line.len() {
        return line;
    }
    Cow::Owned(rest.to_string())
}

/// The text's lines, ended by `\n`, `\r\n` or a lone `\r` (old Mac files, and what a
/// terminal capture of a progress line holds): `str::lines` knows no lone `\r`, so a file of
/// CR-only endings read as one line of hundreds of megabytes (issue 45).
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let body = text.strip_suffix('\n').unwrap_or(text);
    let body = if text.ends_with('\n') {
        body.strip_suffix('\r').unwrap_or(body)
    } else {
        body
    };
    (!text.is_empty())
        .then_some(body)
        .into_iter()
        .flat_map(|b| b.split('\n'))
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
}

/// Drops CSI (`ESC [ ... final`), OSC (`ESC ] ... BEL`) and two-byte escapes.
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\x1b' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('[') => {
                for d in it.by_ref() {
                    if ('@'..='~').contains(&d) {
                        break;
                    }
                }
            }
            Some(']') => {
                for d in it.by_ref() {
                    if d == '\x07' || d == '\\' {
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// One launcher prefix off the front, if there is one.
fn strip_launcher(s: &str) -> &str {
    let t = s.trim_start_matches(' ');
    // A Markdown quote (`> ` lines of an issue comment).
    if let Some(rest) = t.strip_prefix('>') {
        return rest.trim_start_matches(' ');
    }
    if let Some(rest) = open_mpi_tag(t) {
        return rest;
    }
    if let Some(rest) = bracket_rank(t) {
        return rest;
    }
    if let Some(rest) = word_rank(t) {
        return rest;
    }
    if let Some(rest) = ray_actor(t) {
        return rest;
    }
    if let Some(rest) = rfc3339(t) {
        return rest;
    }
    if let Some(rest) = digits_colon(t) {
        return rest;
    }
    s
}

/// Open MPI's `--tag-output`: `[1,0]<stdout>:` or `[1,0]<stderr>:`.
fn open_mpi_tag(t: &str) -> Option<&str> {
    let rest = t.strip_prefix('[')?;
    let (inner, rest) = rest.split_once(']')?;
    let (a, b) = inner.split_once(',')?;
    if !all_digits(a) || !all_digits(b) {
        return None;
    }
    let rest = rest
        .strip_prefix("<stdout>:")
        .or_else(|| rest.strip_prefix("<stderr>:"))
        .or_else(|| rest.strip_prefix(':'))?;
    Some(rest.trim_start_matches(' '))
}

/// torchrun and DeepSpeed: `[rank0]:`, `[default0]:`, `[RANK 3]:`; a log collector's tag
/// (`[vllm]: `, a word of letters).
fn bracket_rank(t: &str) -> Option<&str> {
    let rest = t.strip_prefix('[')?;
    let (inner, rest) = rest.split_once("]:")?;
    let word = inner
        .trim_end_matches(|c: char| c.is_ascii_digit())
        .trim_end();
    let tag = word.len() == inner.len() && rest.starts_with(' ') && inner.len() <= 16;
    if (word.len() == inner.len() && !tag)
        || word.is_empty()
        || !word.chars().all(|c| c.is_ascii_alphabetic())
    {
        return None;
    }
    Some(rest.trim_start_matches(' '))
}

/// `rank0: `, `Rank 3:`; not a host named `rank0` in NCCL's own `rank0:pid:tid` prefix.
fn word_rank(t: &str) -> Option<&str> {
    let (head, rest) = t.split_once(':')?;
    let lower = head.to_ascii_lowercase();
    let num = lower.strip_prefix("rank")?;
    let pid_follows = rest.split_once(':').is_some_and(|(pid, _)| all_digits(pid));
    if !all_digits(num.trim_start()) || pid_follows {
        return None;
    }
    Some(rest.trim_start_matches(' '))
}

/// Ray's worker prefix, which SkyPilot prints too: `(head, rank=0, pid=3808) `,
/// `(worker1, rank=1, pid=2769, ip=10.100.10.12) `, `(pid=123) `: parentheses holding a
/// `pid=`, then a space. A parenthesis of prose holds no `pid=`.
fn ray_actor(t: &str) -> Option<&str> {
    let inner_end = t.strip_prefix('(')?.find(')')?;
    let inner = &t[1..1 + inner_end];
    let rest = t[inner_end + 2..].strip_prefix(' ')?;
    let pid = inner
        .split([',', ' '])
        .any(|w| w.strip_prefix("pid=").is_some_and(all_digits));
    (pid && inner.len() <= 128).then_some(rest)
}

/// srun `--label` and pdsh: `0: `, `12: `.
fn digits_colon(t: &str) -> Option<&str> {
    let (head, rest) = t.split_once(": ")?;
    (all_digits(head) && head.len() <= 6).then_some(rest)
}

/// kubectl `--timestamps` and docker `-t`: `2024-05-01T12:00:00.123456789Z ` (or an offset).
fn rfc3339(t: &str) -> Option<&str> {
    let b = t.as_bytes();
    let date_ok = b.len() > 20
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':';
    if !date_ok {
        return None;
    }
    let (stamp, rest) = t.split_once(' ')?;
    stamp
        .bytes()
        .all(|c| c.is_ascii_digit() || b"-:T.Z+".contains(&c))
        .then_some(rest)
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

/// Where a second NCCL line starts inside this one (two ranks wrote at once and the newline
/// was lost): the start of the word before its ` [dev] NCCL INFO|WARN` marker.
pub fn glued_at(line: &str) -> Option<usize> {
    let first = marker(line, 0)?;
    let second = marker(line, first + 1)?;
    let head = &line[..second];
    // `host:pid:tid [dev]` before the marker: back over `[dev]`, then over the host word.
    let dev = head.rfind(" [")?;
    let word = head[..dev].rfind(' ').map_or(0, |i| i + 1);
    (word > first).then_some(word)
}

/// The next ` NCCL INFO` or ` NCCL WARN` at or after `from`: one scan for ` NCCL `.
fn marker(line: &str, from: usize) -> Option<usize> {
    let s = line.get(from..)?;
    s.match_indices(" NCCL ")
        .find(|(i, _)| {
            let rest = &s.as_bytes()[i + 6..];
            rest.starts_with(b"INFO") || rest.starts_with(b"WARN")
        })
        .map(|(i, _)| from + i)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "node1:123:456 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC";

    #[test]
    fn paste_prefixes_colours_and_crlf_come_off() {
        for wrapped in [
            format!("[1,0]<stdout>:{LINE}\r"),
            format!("0: {LINE}"),
            format!("[rank0]: {LINE}"),
            format!("[default3]:{LINE}"),
            format!("rank0: {LINE}"),
            format!("2024-05-01T12:00:00.123Z {LINE}"),
            format!("2024-05-01T12:00:00.123456789+02:00 [1,1]<stderr>:{LINE}"),
            format!("\x1b[32m{LINE}\x1b[0m\r\n"),
            format!("12: [rank3]: \x1b[1;31m{LINE}"),
            format!("> {LINE}"),
            format!("[vllm]: {LINE}"),
            format!("(head, rank=0, pid=3808) [1,0]<stdout>:{LINE}"),
            format!("(worker1, rank=1, pid=2769, ip=10.100.10.12) {LINE}"),
        ] {
            assert_eq!(clean(&wrapped), LINE, "{wrapped:?}");
        }
    }

    #[test]
    fn paste_markdown_bold_comes_off_a_message() {
        let w = "h:1:2 [0] include/shm.h:28 **NCCL WARN Call to posix_fallocate failed : No space left on device**";
        assert_eq!(
            clean(w),
            "h:1:2 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device"
        );
    }

    #[test]
    fn paste_hostnames_and_tables_are_left_alone() {
        for s in [
            LINE,
            "worker-1:77:77 [0] NCCL INFO x",
            "rank0:77:77 [0] NCCL INFO x",
            "   AllReduce |  6.8/ 0.0 |",
            "Channel 00/02 : 0 1",
            "(see the log) NCCL INFO x",
        ] {
            assert_eq!(clean(s), s);
        }
    }

    #[test]
    fn paste_glued_lines_are_found() {
        let g = "a:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPb:2:2 [1] NCCL INFO Trees [0] -1/-1/-1->1->0";
        let at = glued_at(g).unwrap();
        assert!(g[at..].starts_with("P2P/IPb:2:2 [1] NCCL INFO Trees"));
        assert_eq!(glued_at(LINE), None);
    }
}
