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
    /// The quoted `-c` script of a child shell (`bash -c "..."`) the command is in, by
    /// its order in the line (0: the line's own shell): what a child shell assigns is
    /// gone when it exits.
    pub script: u32,
}

/// The line's commands, in order, split at its control operators (not at the `&` of a
/// redirection), each with its operators and nesting. Linear in the line; nothing is
/// collected.
pub(super) fn pieces(line: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = Some((0, Sep::Edge));
    let mut depth = Depth::default();
    let mut scripts = Scripts::default();
    std::iter::from_fn(move || {
        let (start, before) = rest?;
        let at_start = scripts.active();
        let (head_end, mut after, mut width) = next_operator(line, start, &mut scripts);
        let mut end = head_end;
        // A here-document's body, to its delimiter line, is the command's data.
        if after == Sep::Seq
            && line.as_bytes().get(end) == Some(&b'\n')
            && let Some(delimiter) = heredoc_delimiter(&line[start..end])
        {
            let body_end = heredoc_end(line, end + 1, delimiter);
            (end, after, width) = next_operator(line, body_end, &mut scripts);
        }
        rest = (after != Sep::Edge).then_some((end + width, after));
        let text = &line[start..end];
        // The nesting is the command line's, not its here-document's or its strings'.
        let head = code_only(&line[start..head_end]);
        let top_level = depth.is_zero() && !groups(&head);
        depth.follow(&head);
        Some(Piece {
            text,
            before,
            after,
            top_level,
            script: scripts.opened.take().unwrap_or(at_start),
        })
    })
}

/// The script number of a child shell's script inside another's.
const NESTED: u32 = u32::MAX;

/// The child shells' quoted scripts a scan is in.
#[derive(Debug, Default)]
struct Scripts {
    /// The quote of the script the scan is inside, and its number.
    inside: Option<(u8, u32)>,
    /// Scripts seen so far.
    count: u32,
    /// The script opened in the current piece.
    opened: Option<u32>,
}

impl Scripts {
    fn active(&self) -> u32 {
        self.inside.map_or(0, |(_, id)| id)
    }
}

/// The delimiter of a command's here-document (`<<EOF`, `<<-'EOF'`, `<< "END"`), not a
/// here-string (`<<<`).
fn heredoc_delimiter(command: &str) -> Option<&str> {
    let at = command.match_indices("<<").find(|(i, _)| {
        command.as_bytes().get(i + 2) != Some(&b'<')
            && (*i == 0 || command.as_bytes()[i - 1] != b'<')
    })?;
    let rest = command[at.0 + 2..].trim_start_matches('-').trim_start();
    let word = rest
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '<' | '>'))
        .next()?
        .trim_matches(['"', '\'', '\\']);
    (!word.is_empty()).then_some(word)
}

/// Where a here-document whose body starts at `from` ends: the end of its delimiter
/// line, or the end of the text (the shell reads an unterminated one to the end).
fn heredoc_end(line: &str, from: usize, delimiter: &str) -> usize {
    let mut at = from;
    for l in line[from.min(line.len())..].split_inclusive('\n') {
        let end = at + l.trim_end_matches('\n').len();
        if l.trim() == delimiter {
            return end;
        }
        at += l.len();
    }
    line.len()
}

/// The first control operator at or after `from`: where it starts, which, and its
/// width; the line's end when there is none.
fn next_operator(line: &str, from: usize, scripts: &mut Scripts) -> (usize, Sep, usize) {
    let bytes = line.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        let next = bytes.get(i + 1).copied();
        let prev = i.checked_sub(1).map(|p| bytes[p]);
        // A shell's quoted `-c` script is code: its operators separate its commands.
        if matches!(bytes[i], b'"' | b'\'') {
            let q = bytes[i];
            if scripts.inside.is_some_and(|(open, _)| open == q) {
                scripts.inside = None;
            } else if scripts.inside.is_none() && after_c_switch(&line[..i]) {
                scripts.count += 1;
                scripts.inside = Some((q, scripts.count));
                scripts.opened = Some(scripts.count);
            } else if let Some(close) = line[i + 1..].find(q as char) {
                // A shell's script inside another's is read with the command that
                // runs it, in a shell of its own no launcher shares.
                if after_c_switch(&line[..i]) {
                    scripts.opened = Some(NESTED);
                }
                // A quoted string is data: no operator inside it separates commands.
                i += close + 2;
                continue;
            }
            i += 1;
            continue;
        }
        // An escaped operator character is part of a word.
        if prev == Some(b'\\') {
            i += 1;
            continue;
        }
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

/// Whether the text before a quote ends in a shell's `-c` switch (`bash -c "..."`,
/// `sh -lc '...'`): the quoted text is the shell's script.
fn after_c_switch(before: &str) -> bool {
    before
        .split_whitespace()
        .next_back()
        .is_some_and(is_c_switch)
}

/// A shell's `-c` switch, alone or at the end of a cluster (`-c`, `-lc`, `-ec`).
pub(super) fn is_c_switch(word: &str) -> bool {
    word.strip_prefix('-').is_some_and(|o| {
        !o.starts_with('-') && o.ends_with('c') && o.chars().all(|c| c.is_ascii_alphabetic())
    })
}

/// A command without its quoted strings (data: `echo ":-("`, `grep "if"`), keeping a
/// shell's `-c` script (code) without its quotes. Borrowed when it has no quote.
fn code_only(command: &str) -> std::borrow::Cow<'_, str> {
    if !command.contains(['"', '\'']) {
        return std::borrow::Cow::Borrowed(command);
    }
    let mut out = String::with_capacity(command.len());
    let mut script: Option<char> = None;
    let mut rest = command;
    while let Some(at) = rest.find(['"', '\'']) {
        out.push_str(&rest[..at]);
        let q = rest[at..].chars().next().unwrap_or('"');
        let after = &rest[at + 1..];
        if script == Some(q) {
            script = None;
        } else if script.is_none() && after_c_switch(&out) {
            script = Some(q);
        } else if let Some(close) = after.find(q) {
            // A string: a placeholder word, so words on either side stay apart.
            out.push_str(" _ ");
            rest = &after[close + 1..];
            continue;
        }
        rest = after;
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// A word written in quotes on both sides (`"}"`, `'if'`): a string, never syntax.
fn quoted(word: &str) -> bool {
    word.len() >= 2
        && ((word.starts_with('"') && word.ends_with('"'))
            || (word.starts_with('\'') && word.ends_with('\'')))
}

/// Whether a command opens or closes a subshell or group itself: `( )`, `{ }`,
/// and with them a function body, `$( )`, `$(( ))` and backquotes.
fn groups(text: &str) -> bool {
    text.contains(['(', ')', '`'])
        || text
            .split_whitespace()
            .filter(|w| !quoted(w))
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
            if quoted(w) {
                command_word = false;
                continue;
            }
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
    /// The child shell's script the launcher runs in (0: the line's own shell; `None`:
    /// no launcher, so the program reading the env may run in any).
    script: Option<u32>,
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
                return Launch {
                    first: i,
                    chain,
                    script: Some(p.script),
                };
            }
        }
        Launch {
            first: usize::MAX,
            chain: usize::MAX,
            script: None,
        }
    }

    pub(super) fn found(self) -> bool {
        self.first != usize::MAX
    }

    /// Whether an assignment in piece `i` is made on every run before the launcher
    /// reads its variables: at the top level, in the line's shell or the launcher's (a
    /// child shell's assignments die with it), not after `||` or in a pipeline, not in
    /// the background (but for the launcher's own prefix assignments), after `&&` only
    /// when `&&` alone leads from it to the launcher, and never after the launcher.
    pub(super) fn certain(self, i: usize, p: &Piece<'_>) -> bool {
        p.top_level
            && (p.script == 0 || self.script.is_none_or(|s| s == p.script))
            && i <= self.first
            && !matches!(p.before, Sep::Or | Sep::Pipe)
            && (i == self.first || !matches!(p.after, Sep::Pipe | Sep::Background))
            && (p.before != Sep::And || i >= self.chain)
    }
}
