//! The command-line syntax of the virtual phone's shell: the part of POSIX
//! `sh` that adb clients and agents send.
//!
//! `adb exec-out` shell-quotes every argument (`screencap '-p'`), agents chain
//! commands and read the status (`input tap 1 2; echo __btl_rc=$?`), and
//! scripts redirect output (`uiautomator dump /sdcard/x.xml > /dev/null`). So
//! this reads quoting (single, double, backslash), `$?`, the list operators
//! `;`, `&&`, `||`, and the redirections `>`, `>>`, `2>`, `2>&1`. Pipes and
//! other expansions are refused with a clear message rather than half-done.

/// A piece of a word: literal text or `$?`, expanded when the command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    LastStatus,
}

/// A word before expansion.
pub type Word = Vec<Piece>;

/// Where an output stream goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// `> file` / `>> file` (stdout) or `2> file` (stderr).
    File {
        stderr: bool,
        append: bool,
        path: Word,
    },
    /// `2>&1`.
    StderrToStdout,
}

/// One simple command with its redirections.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Command {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

/// How a command joins the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// First command, or after `;`: always runs.
    Always,
    /// After `&&`: runs if the previous succeeded.
    IfOk,
    /// After `||`: runs if the previous failed.
    IfFailed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(Word),
    Semicolon,
    And,
    Or,
    Pipe,
    Out { stderr: bool, append: bool },
    StderrToStdout,
}

/// Reads a command line into commands joined by list operators.
pub fn parse(line: &str) -> Result<Vec<(Join, Command)>, String> {
    let mut list = Vec::new();
    let mut join = Join::Always;
    let mut current = Command::default();
    let mut tokens = tokenize(line)?.into_iter().peekable();
    while let Some(token) = tokens.next() {
        match token {
            Token::Word(w) => current.words.push(w),
            Token::Out { stderr, append } => match tokens.next() {
                Some(Token::Word(path)) => current.redirects.push(Redirect::File {
                    stderr,
                    append,
                    path,
                }),
                _ => return Err("syntax error: redirection without a file".into()),
            },
            Token::StderrToStdout => current.redirects.push(Redirect::StderrToStdout),
            Token::Pipe => return Err("pipes are not supported by this shell".into()),
            op @ (Token::Semicolon | Token::And | Token::Or) => {
                if current.words.is_empty() {
                    if op == Token::Semicolon && list.is_empty() && tokens.peek().is_none() {
                        continue;
                    }
                    return Err("syntax error: unexpected list operator".into());
                }
                list.push((join, std::mem::take(&mut current)));
                join = match op {
                    Token::And => Join::IfOk,
                    Token::Or => Join::IfFailed,
                    _ => Join::Always,
                };
            }
        }
    }
    if !current.words.is_empty() {
        list.push((join, current));
    } else if join != Join::Always {
        return Err("syntax error: the line ends with a list operator".into());
    }
    Ok(list)
}

fn tokenize(line: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    let mut word: Option<Word> = None;
    let push_text = |word: &mut Option<Word>, c: char| {
        let w = word.get_or_insert_with(Vec::new);
        match w.last_mut() {
            Some(Piece::Text(t)) => t.push(c),
            _ => w.push(Piece::Text(c.to_string())),
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if let Some(w) = word.take() {
                    tokens.push(Token::Word(w));
                }
            }
            '#' if word.is_none() => break,
            ';' | '&' | '|' | '>' => {
                // `2>` is a redirection only when the 2 stands alone.
                let stderr = c == '>'
                    && word
                        .as_ref()
                        .is_some_and(|w| w == &[Piece::Text("2".into())]);
                if let Some(w) = word.take()
                    && !stderr
                {
                    tokens.push(Token::Word(w));
                }
                tokens.push(match (c, chars.peek()) {
                    (';', _) => Token::Semicolon,
                    ('&', Some('&')) => {
                        chars.next();
                        Token::And
                    }
                    ('&', _) => {
                        return Err("background jobs (&) are not supported by this shell".into());
                    }
                    ('|', Some('|')) => {
                        chars.next();
                        Token::Or
                    }
                    ('|', _) => Token::Pipe,
                    (_, Some('>')) => {
                        chars.next();
                        Token::Out {
                            stderr,
                            append: true,
                        }
                    }
                    (_, Some('&')) if stderr => {
                        chars.next();
                        match chars.next() {
                            Some('1') => Token::StderrToStdout,
                            _ => return Err("only the redirection 2>&1 is supported".into()),
                        }
                    }
                    _ => Token::Out {
                        stderr,
                        append: false,
                    },
                });
            }
            '\'' => {
                word.get_or_insert_with(Vec::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => push_text(&mut word, c),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                word.get_or_insert_with(Vec::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => push_text(&mut word, e),
                            Some('\n') => {}
                            Some(other) => {
                                push_text(&mut word, '\\');
                                push_text(&mut word, other);
                            }
                            None => return Err("unterminated double quote".into()),
                        },
                        Some('$') if chars.peek() == Some(&'?') => {
                            chars.next();
                            word.get_or_insert_with(Vec::new).push(Piece::LastStatus);
                        }
                        Some(c) => push_text(&mut word, c),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(e) => push_text(&mut word, e),
                None => push_text(&mut word, '\\'),
            },
            '$' if chars.peek() == Some(&'?') => {
                chars.next();
                word.get_or_insert_with(Vec::new).push(Piece::LastStatus);
            }
            '`' | '(' | ')' => return Err(format!("'{c}' is not supported by this shell")),
            c => push_text(&mut word, c),
        }
    }
    if let Some(w) = word {
        tokens.push(Token::Word(w));
    }
    Ok(tokens)
}

/// A word with `$?` replaced by the last exit status.
pub fn expand(word: &Word, last_status: u8) -> String {
    word.iter()
        .map(|p| match p {
            Piece::Text(t) => t.clone(),
            Piece::LastStatus => last_status.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        parse(line)
            .unwrap()
            .into_iter()
            .map(|(_, c)| c.words.iter().map(|w| expand(w, 7)).collect())
            .collect()
    }

    #[test]
    fn quoting_as_adb_sends_it() {
        assert_eq!(words("screencap '-p'"), [["screencap", "-p"]]);
        assert_eq!(
            words(r#"input text 'it'\''s' "a \"b\" \$x" c\ d"#),
            [["input", "text", "it's", "a \"b\" $x", "c d"]]
        );
        assert_eq!(words("echo ''"), [["echo", ""]]);
        assert_eq!(words("echo a#b # comment"), [["echo", "a#b"]]);
    }

    #[test]
    fn lists_and_status() {
        let list = parse("input tap 1 2; echo __btl_rc=$? && true || false").unwrap();
        let joins: Vec<Join> = list.iter().map(|(j, _)| *j).collect();
        assert_eq!(
            joins,
            [Join::Always, Join::Always, Join::IfOk, Join::IfFailed]
        );
        assert_eq!(expand(&list[1].1.words[1], 0), "__btl_rc=0");
        assert_eq!(words("a;"), [["a"]]);
    }

    #[test]
    fn redirections() {
        let list = parse("uiautomator dump /sdcard/x.xml >/dev/null 2>&1").unwrap();
        let cmd = &list[0].1;
        assert_eq!(cmd.words.len(), 3);
        assert_eq!(
            cmd.redirects,
            [
                Redirect::File {
                    stderr: false,
                    append: false,
                    path: vec![Piece::Text("/dev/null".into())]
                },
                Redirect::StderrToStdout
            ]
        );
        let cmd = &parse("ls 2> err >> out").unwrap()[0].1;
        assert!(matches!(
            cmd.redirects[0],
            Redirect::File {
                stderr: true,
                append: false,
                ..
            }
        ));
        assert!(matches!(
            cmd.redirects[1],
            Redirect::File {
                stderr: false,
                append: true,
                ..
            }
        ));
        assert_eq!(
            words("echo a2>b"),
            [["echo", "a2"]],
            "2> only when the 2 stands alone"
        );
    }

    #[test]
    fn unsupported_syntax_is_refused_clearly() {
        for (line, msg) in [
            ("ls | grep x", "pipes"),
            ("sleep 1 &", "background"),
            ("echo 'x", "unterminated single quote"),
            ("echo \"x", "unterminated double quote"),
            ("&& ls", "unexpected list operator"),
            ("ls &&", "ends with a list operator"),
            ("echo >", "redirection without a file"),
            ("echo $(ls)", "not supported"),
        ] {
            let err = parse(line).unwrap_err();
            assert!(err.contains(msg), "{line}: {err}");
        }
    }
}
