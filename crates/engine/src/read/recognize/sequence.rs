//! Where each command of a shell line runs: between which control operators, and at
//! what nesting. An assignment sets a variable for the line's launcher only when the
//! shell makes it on every run before that launcher starts: at the top level (not in an
//! `if`, a loop, a `case`, a function body, a `( )` subshell or a `{ }` group), not
//! after `||` or in a pipeline or in the background, and not after the launcher. What
//! the shell makes only on some runs is a value trainplace cannot settle.
//! <https://pubs.opengroup.org/onlinepubs/9699919799/utilities/V3_chap02.html#tag_18_09>

/// The control operator on one side of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sep {
    /// The start or end of the line.
    Edge,
    /// `;`, `;;` or a newline: the next command runs after this one, whatever it did.
    Seq,
    /// `&&`: the next command runs only when this one succeeded.
    And,
    /// `||`: the next command runs only when this one failed.
    Or,
    /// `|` (and `|&`): both sides run at once, each in a subshell.
    Pipe,
    /// `&`: this command runs in a subshell in the background.
    Background,
}

/// One command of a line and what stands around it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Piece<'a> {
    pub text: &'a str,
    pub before: Sep,
    pub after: Sep,
    /// Outside every compound command, subshell and group, and holding none itself.
    pub top_level: bool,
}

/// The line's commands, in order, split at its control operators (not at the `&` of a
/// redirection), each with its operators and nesting. Linear in the line; nothing is
/// collected.
pub(super) fn pieces(line: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = Some((0, Sep::Edge));
    let mut depth = Depth::default();
    std::iter::from_fn(move || {
        let (start, before) = rest?;
        let (end, after, width) = next_operator(line, start);
        rest = (after != Sep::Edge).then_some((end + width, after));
        let text = &line[start..end];
        let top_level = depth.is_zero() && !groups(text);
        depth.follow(text);
        Some(Piece {
            text,
            before,
            after,
            top_level,
        })
    })
}

/// The first control operator at or after `from`: where it starts, which, and its
/// width; the line's end when there is none.
fn next_operator(line: &str, from: usize) -> (usize, Sep, usize) {
    let bytes = line.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        let next = bytes.get(i + 1).copied();
        let prev = i.checked_sub(1).map(|p| bytes[p]);
        let found = match bytes[i] {
            b'\n' => Some((Sep::Seq, 1)),
            b';' => Some((Sep::Seq, if next == Some(b';') { 2 } else { 1 })),
            b'&' if next == Some(b'&') => Some((Sep::And, 2)),
            // A redirection (`2>&1`, `&>log`, `<&3`), not an operator.
            b'&' if matches!(prev, Some(b'>' | b'<')) || next == Some(b'>') => None,
            b'&' => Some((Sep::Background, 1)),
            b'|' if next == Some(b'|') => Some((Sep::Or, 2)),
            // `>|` overwrites a file.
            b'|' if prev == Some(b'>') => None,
            b'|' => Some((Sep::Pipe, if next == Some(b'&') { 2 } else { 1 })),
            _ => None,
        };
        if let Some((sep, width)) = found {
            return (i, sep, width);
        }
        i += 1;
    }
    (bytes.len(), Sep::Edge, 0)
}

/// Whether a command opens or closes a subshell or group itself: `( )`, `{ }`,
/// and with them a function body, `$( )` and `$(( ))`.
fn groups(text: &str) -> bool {
    text.contains(['(', ')'])
        || text
            .split_whitespace()
            .any(|w| matches!(w.trim_matches(['"', '\'']), "{" | "}"))
}

/// Reserved words after which a command's first word follows.
const LEADING: [&str; 9] = [
    "then", "do", "else", "elif", "!", "{", "time", "if", "while",
];

/// The nesting a line has reached: compound commands opened by their reserved words
/// where a command starts, groups by their braces, subshells by their parentheses.
/// Closers past what was opened are ignored (a `case` pattern's `)`).
#[derive(Debug, Default)]
struct Depth {
    words: u32,
    parens: u32,
}

impl Depth {
    fn is_zero(&self) -> bool {
        self.words == 0 && self.parens == 0
    }

    fn follow(&mut self, text: &str) {
        let mut command_word = true;
        for w in text.split_whitespace() {
            // A shell's `-c` string starts inside its quote: `bash -c "if ...; fi"`.
            let w = w.trim_matches(['"', '\'']);
            match w {
                "{" => self.words += 1,
                "}" => self.words = self.words.saturating_sub(1),
                "if" | "while" | "until" | "for" | "case" | "select" if command_word => {
                    self.words += 1;
                }
                "fi" | "done" | "esac" if command_word => {
                    self.words = self.words.saturating_sub(1);
                }
                _ => {}
            }
            command_word = LEADING.contains(&w) || w == "until" || w == "-c";
        }
        for c in text.chars() {
            match c {
                '(' => self.parens += 1,
                ')' => self.parens = self.parens.saturating_sub(1),
                _ => {}
            }
        }
    }
}

/// Where the line's first launcher runs: its piece, and the first piece from which
/// `&&` alone leads to it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Launch {
    first: usize,
    chain: usize,
}

impl Launch {
    /// The first piece `launches` says runs a launcher (none: past the line's end).
    pub(super) fn find(line: &str, launches: impl Fn(&str) -> bool) -> Self {
        let mut chain = 0;
        for (i, p) in pieces(line).enumerate() {
            if p.before != Sep::And {
                chain = i;
            }
            if launches(p.text) {
                return Launch { first: i, chain };
            }
        }
        Launch {
            first: usize::MAX,
            chain: usize::MAX,
        }
    }

    pub(super) fn found(self) -> bool {
        self.first != usize::MAX
    }

    /// Whether an assignment in piece `i` is made on every run before the launcher
    /// reads its variables: at the top level, not after `||` or in a pipeline, not in
    /// the background (but for the launcher's own prefix assignments), after `&&` only
    /// when `&&` alone leads from it to the launcher, and never after the launcher.
    pub(super) fn certain(self, i: usize, p: &Piece<'_>) -> bool {
        p.top_level
            && i <= self.first
            && !matches!(p.before, Sep::Or | Sep::Pipe)
            && (i == self.first || !matches!(p.after, Sep::Pipe | Sep::Background))
            && (p.before != Sep::And || i >= self.chain)
    }
}
