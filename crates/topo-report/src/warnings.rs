//! Warnings for text views: the same warning at many lines of a file, or for many names, as
//! one line. JSON keeps every warning as it came.

/// Warnings that say the same thing at different lines of a file, or of different names
/// (45 `<net name="...">`s listed again), as one line naming the lines, the names and the
/// count, in the order they first came. The JSON keeps every warning as it was.
pub fn collapse_warnings(ws: &[String]) -> Vec<String> {
    let mut groups: Vec<Group> = vec![];
    let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for w in ws {
        let (line, text) = split_line(w);
        let (key, quoted) = template(text);
        let i = *at.entry(key.clone()).or_insert_with(|| {
            groups.push(Group {
                first: w,
                text,
                key,
                lines: vec![],
                names: vec![],
                n: 0,
            });
            groups.len() - 1
        });
        let g = &mut groups[i];
        g.lines.extend(line);
        if !g.names.contains(&quoted) {
            g.names.push(quoted);
        }
        g.n += 1;
    }
    groups.into_iter().map(Group::line).collect()
}

struct Group<'a> {
    first: &'a String,
    text: &'a str,
    key: String,
    lines: Vec<&'a str>,
    names: Vec<String>,
    n: usize,
}

impl Group<'_> {
    fn line(self) -> String {
        let n = self.n;
        if n == 1 {
            return self.first.clone();
        }
        let (text, of) = if self.names.len() > 1 {
            let shown = self.names[..self.names.len().min(4)].join(", ");
            let more = if self.names.len() > 4 { ", ..." } else { "" };
            (self.key.as_str(), format!(": {shown}{more}"))
        } else {
            (self.text, String::new())
        };
        let lines = match self.lines.len() {
            0 => String::new(),
            l => format!(
                "line{} {}{}: ",
                if l > 1 { "s" } else { "" },
                self.lines[..l.min(3)].join(", "),
                if l > 3 { ", ..." } else { "" }
            ),
        };
        format!("{lines}{text} ({n} times{of})")
    }
}

/// `<net name="mlx5_0"> is listed again` → (`<net name="…"> is listed again`, `mlx5_0`): the
/// text with its quoted values blanked, and those values.
fn template(text: &str) -> (String, String) {
    let mut key = String::new();
    let mut quoted = vec![];
    for (i, part) in text.split('"').enumerate() {
        if i > 0 {
            key.push('"');
        }
        if i % 2 == 1 {
            key.push('…');
            quoted.push(part);
        } else {
            key.push_str(part);
        }
    }
    (key, quoted.join(" "))
}

/// `line 12: text` → (Some("12"), "text"); anything else → (None, whole).
fn split_line(w: &str) -> (Option<&str>, &str) {
    w.strip_prefix("line ")
        .and_then(|r| r.split_once(": "))
        .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .map_or((None, w), |(n, t)| (Some(n), t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_warnings_collapse_into_one_line() {
        let mut ws: Vec<String> = (0..45)
            .map(|i| {
                format!(
                    "line {}: <net name=\"mlx5_{}\"> is listed again",
                    10 + i,
                    i % 5
                )
            })
            .collect();
        ws.insert(1, "no NVML".into());
        ws.push("no NVML".into());
        ws.push("line 7: other".into());
        assert_eq!(
            collapse_warnings(&ws),
            [
                "lines 10, 11, 12, ...: <net name=\"…\"> is listed again (45 times: mlx5_0, mlx5_1, mlx5_2, mlx5_3, ...)",
                "no NVML (2 times)",
                "line 7: other",
            ]
        );
        let two = ["line 3: x".to_string(), "line 9: x".to_string()];
        assert_eq!(collapse_warnings(&two), ["lines 3, 9: x (2 times)"]);
    }
}
