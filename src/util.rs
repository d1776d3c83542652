//! Small shared helpers: size strings, output styling.

use std::io::IsTerminal;

/// Parses a size the way nccl-tests does (`8`, `1K`, `16M`, `4G`, also `1KB`, `1KiB`,
/// lower case): binary multiples. Errors name the string.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "bad size '{s}': expected a number with an optional K, M, G or T suffix"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("bad size '{s}': number too large"))?;
    let mult: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        _ => {
            return Err(format!(
                "bad size '{s}': unknown suffix '{unit}' (use K, M, G or T)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("bad size '{s}': too large"))
}

/// Human size with binary units, as nccl-tests users read them (`1K`, `16M`, `1.5G`).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "T"),
        (1 << 30, "G"),
        (1 << 20, "M"),
        (1 << 10, "K"),
    ];
    for (m, u) in UNITS {
        if bytes >= m {
            let v = bytes as f64 / m as f64;
            return if bytes.is_multiple_of(m) {
                format!("{}{u}", bytes / m)
            } else {
                format!("{v:.1}{u}")
            };
        }
    }
    format!("{bytes}")
}

/// Whether to colour output: `always`/`never` win; `auto` colours only a terminal and
/// respects `NO_COLOR` (any non-empty value).
pub fn use_color(choice: &str) -> bool {
    match choice {
        "always" => true,
        "never" => false,
        _ => {
            std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::io::stdout().is_terminal()
        }
    }
}

/// ANSI styling that collapses to plain text when colour is off.
#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    pub color: bool,
}

impl Style {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    pub fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    pub fn green(&self, s: &str) -> String {
        self.wrap("32", s)
    }
    pub fn yellow(&self, s: &str) -> String {
        self.wrap("33", s)
    }
    pub fn red(&self, s: &str) -> String {
        self.wrap("31", s)
    }
    pub fn cyan(&self, s: &str) -> String {
        self.wrap("36", s)
    }
    pub fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_like_nccl_tests() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("1K").unwrap(), 1024);
        assert_eq!(parse_size("16M").unwrap(), 16 << 20);
        assert_eq!(parse_size("4G").unwrap(), 4 << 30);
        assert_eq!(parse_size("4g").unwrap(), 4 << 30);
        assert_eq!(parse_size("2KiB").unwrap(), 2048);
        for bad in [
            "",
            "K",
            "1X",
            "-1",
            "1.5M",
            "99999999999999999999",
            "16777216T",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_size(8), "8");
        assert_eq!(human_size(1024), "1K");
        assert_eq!(human_size(1536), "1.5K");
        assert_eq!(human_size(16 << 20), "16M");
    }
}
