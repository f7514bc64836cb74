//! Text from outside (a device, a model, a file) made safe to show on a
//! terminal, where its control characters would otherwise act.

/// `text` with its control characters shown escaped (`\u{1b}`), line
/// breaks and tabs kept: what a device, a model or a file said reaches the
/// terminal, where an escape sequence (ESC, or C1's U+009B) would act and
/// a bidirectional override (U+202E) would show the text reordered.
pub fn printable(text: &str) -> String {
    escaped(text, |c| matches!(c, '\n' | '\t'))
}

/// [`printable`] on one line: line breaks and tabs escaped too, for a
/// progress bar's message or a question whose answer follows on its line,
/// which a line break in a model's plan or a screen's text would split.
pub fn printable_line(text: &str) -> String {
    escaped(text, |_| false)
}

fn escaped(text: &str, keep: impl Fn(char) -> bool) -> String {
    text.chars()
        .map(
            |c| match (c.is_control() || is_bidi_control(c)) && !keep(c) {
                true => c.escape_default().to_string(),
                false => c.to_string(),
            },
        )
        .collect()
}

/// The invisible marks that reorder the text around them (Unicode's
/// embeddings, overrides and isolates).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_escaped() {
        assert_eq!(
            printable("emu\u{1b}]0;owned\u{7}\u{9b}2J-5554 é\n\tnext"),
            "emu\\u{1b}]0;owned\\u{7}\\u{9b}2J-5554 é\n\tnext"
        );
        assert_eq!(
            printable_line("Tap \"OK\".\n\u{1b}[2K\tAllow"),
            "Tap \"OK\".\\n\\u{1b}[2K\\tAllow"
        );
        assert_eq!(printable("a\u{202e}eteled"), "a\\u{202e}eteled");
    }
}
