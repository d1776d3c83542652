//! What a caller asks of a renderer: which view of `topo show`, and the text style (colour,
//! width).

/// The width a text view fits when nothing says otherwise.
pub const DEFAULT_WIDTH: usize = 100;

/// What `topo show` shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShowView {
    Summary,
    Matrix,
    Pci,
    Paths,
    Dot,
}

impl ShowView {
    /// The name the command line gives it (`--view pci`).
    pub fn name(self) -> &'static str {
        match self {
            ShowView::Summary => "summary",
            ShowView::Matrix => "matrix",
            ShowView::Pci => "pci",
            ShowView::Paths => "paths",
            ShowView::Dot => "dot",
        }
    }
}

/// ANSI styling that collapses to plain text when colour is off, and the width text fits.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    pub color: bool,
    /// Columns every line of a text view fits.
    pub width: usize,
}

impl Default for Style {
    fn default() -> Style {
        Style {
            color: false,
            width: DEFAULT_WIDTH,
        }
    }
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
