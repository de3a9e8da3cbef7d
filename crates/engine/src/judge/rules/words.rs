//! Counted nouns for findings' text.

/// [`count`] for counts that were multiplied in u64.
pub fn count64(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// "1 pod", "8 pods".
pub fn count(n: u32, word: &str) -> String {
    count64(n.into(), word)
}
