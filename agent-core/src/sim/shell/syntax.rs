//! The command-line syntax of the virtual phone's shell: the part of
//! Android's `sh` (mksh) that adb clients and scripts send.
//!
//! `adb exec-out` shell-quotes every argument (`screencap '-p'`), client
//! libraries chain commands and read the status (`…; echo X4EXIT:$?`), pipe
//! (`dumpsys window | grep mCurrentFocus`), wrap scripts in `sh -c '…'` and
//! redirect (`>/dev/null 2>&1`, `echo err >&2`). So this reads quoting
//! (single, double, backslash), `$?`, `$NAME` and `${NAME}`, assignments
//! (`A=1`), pipelines with `!`, the list operators `;`, `&&`, `||` and line
//! breaks, and the redirections `[n]>`, `[n]>>`, `[n]<` and `[n]>&m`.
//! File name patterns stay as written, as mksh leaves a pattern that matches
//! nothing. Everything else (command substitution, subshells, control flow,
//! background jobs) is refused with a clear message rather than half-done.

/// A piece of a word: literal text or a parameter, expanded when the
/// command runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    /// `$?`.
    LastStatus,
    /// `$NAME` or `${NAME}`.
    Var(String),
}

/// A word before expansion.
pub type Word = Vec<Piece>;

/// Where a redirection points a file descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `> file`, `>> file`.
    Write { path: Word, append: bool },
    /// `< file`.
    Read(Word),
    /// `>&m`: the same place as descriptor m.
    Dup(u8),
}

/// One redirection of descriptor `fd` (0, 1 or 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    pub fd: u8,
    pub target: Target,
}

/// One simple command: assignments, words and redirections.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Command {
    pub assignments: Vec<(String, Word)>,
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

/// Commands joined by `|`, the whole negated by a leading `!`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pipeline {
    pub negated: bool,
    pub commands: Vec<Command>,
}

/// How a pipeline joins the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// First pipeline, or after `;` or a line break: always runs.
    Always,
    /// After `&&`: runs if the previous succeeded.
    IfOk,
    /// After `||`: runs if the previous failed.
    IfFailed,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A word; `assignment` when it starts with an unquoted `NAME=`.
    Word {
        word: Word,
        assignment: bool,
    },
    Separator,
    And,
    Or,
    Pipe,
    Redirect {
        fd: Option<u8>,
        op: RedirectOp,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RedirectOp {
    Out,
    Append,
    In,
    /// `>&` (or `<&`): a descriptor number follows.
    Dup,
}

/// Reads a command line into pipelines joined by list operators.
pub fn parse(line: &str) -> Result<Vec<(Join, Pipeline)>, String> {
    let mut list = Vec::new();
    let mut join = Join::Always;
    let mut pipeline = Pipeline::default();
    let mut command = Command::default();
    let mut tokens = tokenize(line)?.into_iter().peekable();
    let unexpected = |what: &str| Err(format!("syntax error: '{what}' unexpected"));
    while let Some(token) = tokens.next() {
        match token {
            Token::Word { word, assignment } => {
                if command.words.is_empty() && assignment {
                    let Some(Piece::Text(first)) = word.first() else {
                        unreachable!("an assignment starts with its name");
                    };
                    let (name, value) = first.split_once('=').unwrap_or((first, ""));
                    let mut value_word = vec![Piece::Text(value.to_owned())];
                    value_word.extend(word[1..].iter().cloned());
                    command.assignments.push((name.to_owned(), value_word));
                } else if command.words.is_empty()
                    && command.assignments.is_empty()
                    && command.redirects.is_empty()
                    && pipeline.commands.is_empty()
                    && !pipeline.negated
                    && word == [Piece::Text("!".into())]
                {
                    pipeline.negated = true;
                } else {
                    command.words.push(word);
                }
            }
            Token::Redirect { fd, op } => {
                let Some(Token::Word { word, .. }) = tokens.next() else {
                    return Err("syntax error: a redirection without a file".into());
                };
                let fd = fd.unwrap_or(if op == RedirectOp::In { 0 } else { 1 });
                let target = match op {
                    RedirectOp::Out => Target::Write {
                        path: word,
                        append: false,
                    },
                    RedirectOp::Append => Target::Write {
                        path: word,
                        append: true,
                    },
                    RedirectOp::In => Target::Read(word),
                    RedirectOp::Dup => match word.as_slice() {
                        [Piece::Text(n)] if matches!(n.as_str(), "0" | "1" | "2") => {
                            Target::Dup(n.parse().unwrap_or(1))
                        }
                        _ => {
                            return Err(
                                "syntax error: >& takes a descriptor number (0, 1 or 2)".into()
                            );
                        }
                    },
                };
                command.redirects.push(Redirect { fd, target });
            }
            Token::Pipe => {
                if is_empty(&command) {
                    return unexpected("|");
                }
                pipeline.commands.push(std::mem::take(&mut command));
            }
            op @ (Token::Separator | Token::And | Token::Or) => {
                if is_empty(&command) {
                    if !pipeline.commands.is_empty() {
                        return unexpected(symbol(&op));
                    }
                    // Empty statements between separators are allowed.
                    if op == Token::Separator && join == Join::Always && !pipeline.negated {
                        continue;
                    }
                    return unexpected(symbol(&op));
                }
                pipeline.commands.push(std::mem::take(&mut command));
                list.push((join, std::mem::take(&mut pipeline)));
                join = match op {
                    Token::And => Join::IfOk,
                    Token::Or => Join::IfFailed,
                    _ => Join::Always,
                };
            }
        }
    }
    if !is_empty(&command) {
        pipeline.commands.push(command);
        list.push((join, pipeline));
    } else if !pipeline.commands.is_empty() || pipeline.negated || join != Join::Always {
        return Err("syntax error: unexpected end of the line".into());
    }
    Ok(list)
}

fn is_empty(command: &Command) -> bool {
    command.words.is_empty() && command.assignments.is_empty() && command.redirects.is_empty()
}

fn symbol(token: &Token) -> &'static str {
    match token {
        Token::And => "&&",
        Token::Or => "||",
        _ => ";",
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A word being read, with what decides how it may be taken.
#[derive(Default)]
struct WordState {
    word: Option<Word>,
    /// Only unquoted name characters so far (so `=` makes an assignment
    /// and a lone digit may be a redirection's descriptor).
    plain: bool,
    assignment: bool,
}

impl WordState {
    fn push(&mut self, c: char, quoted: bool) {
        let fresh = self.word.is_none();
        let word = self.word.get_or_insert_with(Vec::new);
        match word.last_mut() {
            Some(Piece::Text(t)) => t.push(c),
            _ => word.push(Piece::Text(c.to_string())),
        }
        if fresh {
            self.plain = !quoted && (is_name_start(c) || c.is_ascii_digit());
        } else if self.plain && !self.assignment {
            if !quoted && c == '=' && !starts_with_digit(word) {
                self.assignment = true;
            } else if quoted || !is_name_char(c) {
                self.plain = false;
            }
        }
    }

    fn piece(&mut self, piece: Piece) {
        self.word.get_or_insert_with(Vec::new).push(piece);
        if !self.assignment {
            self.plain = false;
        }
    }

    /// Marks a word as begun by quotes (`''` is an empty word).
    fn quoted(&mut self) {
        if self.word.is_none() {
            self.word = Some(Vec::new());
        }
        if !self.assignment {
            self.plain = false;
        }
    }

    /// The word so far is a lone descriptor number (`2` in `2>`).
    fn descriptor(&self) -> Option<u8> {
        match self.word.as_deref() {
            Some([Piece::Text(t)]) if self.plain && matches!(t.as_str(), "0" | "1" | "2") => {
                t.parse().ok()
            }
            _ => None,
        }
    }

    fn take(&mut self) -> Option<Token> {
        let word = self.word.take()?;
        let assignment = self.assignment;
        *self = Self::default();
        Some(Token::Word { word, assignment })
    }
}

fn starts_with_digit(word: &Word) -> bool {
    matches!(word.first(), Some(Piece::Text(t)) if t.starts_with(|c: char| c.is_ascii_digit()))
}

fn tokenize(line: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    let mut state = WordState::default();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => tokens.extend(state.take()),
            '#' if state.word.is_none() => {
                // A comment runs to the end of its line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        tokens.push(Token::Separator);
                        break;
                    }
                }
            }
            '\n' | ';' => {
                tokens.extend(state.take());
                if chars.peek() == Some(&';') {
                    return Err("syntax error: ';;' unexpected".into());
                }
                tokens.push(Token::Separator);
            }
            '&' => {
                tokens.extend(state.take());
                if chars.next_if_eq(&'&').is_some() {
                    tokens.push(Token::And);
                } else {
                    return Err("background jobs (&) are not supported by this shell".into());
                }
            }
            '|' => {
                tokens.extend(state.take());
                tokens.push(if chars.next_if_eq(&'|').is_some() {
                    Token::Or
                } else {
                    Token::Pipe
                });
            }
            '>' | '<' => {
                let fd = state.descriptor();
                if fd.is_some() {
                    state = WordState::default();
                } else {
                    tokens.extend(state.take());
                }
                let op = if chars.next_if_eq(&'&').is_some() {
                    RedirectOp::Dup
                } else if c == '>' && chars.next_if_eq(&'>').is_some() {
                    RedirectOp::Append
                } else if c == '>' {
                    // `>|` overrides noclobber, which this shell never sets.
                    chars.next_if_eq(&'|');
                    RedirectOp::Out
                } else {
                    RedirectOp::In
                };
                tokens.push(Token::Redirect { fd, op });
            }
            '\'' => {
                state.quoted();
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => state.push(c, true),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                state.quoted();
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => state.push(e, true),
                            Some('\n') => {}
                            Some(other) => {
                                state.push('\\', true);
                                state.push(other, true);
                            }
                            None => return Err("unterminated double quote".into()),
                        },
                        Some('$') => dollar(&mut chars, &mut state, true)?,
                        Some('`') => return Err(substitution()),
                        Some(c) => state.push(c, true),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(e) => state.push(e, true),
                None => state.push('\\', true),
            },
            '$' => dollar(&mut chars, &mut state, false)?,
            '`' => return Err(substitution()),
            '(' | ')' => return Err(format!("'{c}' (subshells) is not supported by this shell")),
            c => state.push(c, false),
        }
    }
    tokens.extend(state.take());
    Ok(tokens)
}

fn substitution() -> String {
    "command substitution is not supported by this shell".into()
}

/// After a `$`: `$?`, `$NAME`, `${NAME}`, or a literal `$`.
fn dollar(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    state: &mut WordState,
    quoted: bool,
) -> Result<(), String> {
    match chars.peek() {
        Some('?') => {
            chars.next();
            state.piece(Piece::LastStatus);
        }
        Some('(') => return Err(substitution()),
        Some('{') => {
            chars.next();
            let mut name = String::new();
            loop {
                match chars.next() {
                    Some('}') => break,
                    Some(c) if is_name_char(c) => name.push(c),
                    Some(c) => {
                        return Err(format!(
                            "${{…}} with '{c}': only plain ${{NAME}} is supported by this shell"
                        ));
                    }
                    None => return Err("syntax error: missing '}'".into()),
                }
            }
            if name.is_empty() || !name.starts_with(is_name_start) {
                return Err(format!("${{{name}}}: bad substitution"));
            }
            state.piece(Piece::Var(name));
        }
        Some(&c) if is_name_start(c) => {
            let mut name = String::new();
            while let Some(c) = chars.next_if(|&c| is_name_char(c)) {
                name.push(c);
            }
            state.piece(Piece::Var(name));
        }
        _ => state.push('$', quoted),
    }
    Ok(())
}

/// A word with its parameters replaced: `$?` by the last exit status, a
/// variable by its value (empty if unset).
pub fn expand<'v>(word: &Word, last_status: u8, var: impl Fn(&str) -> Option<&'v str>) -> String {
    let mut out = String::new();
    for piece in word {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::LastStatus => out.push_str(&last_status.to_string()),
            Piece::Var(name) => out.push_str(var(name).unwrap_or_default()),
        }
    }
    out
}

/// The bytes parameters add to `word` in [`expand`]: what is not the
/// line's own text, found without making it.
pub fn substituted_len<'v>(
    word: &Word,
    last_status: u8,
    var: impl Fn(&str) -> Option<&'v str>,
) -> usize {
    word.iter()
        .map(|piece| match piece {
            Piece::Text(_) => 0,
            Piece::LastStatus => last_status.to_string().len(),
            Piece::Var(name) => var(name).map_or(0, str::len),
        })
        .fold(0, usize::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_vars(_: &str) -> Option<&'static str> {
        None
    }

    fn words(line: &str) -> Vec<Vec<String>> {
        parse(line)
            .unwrap()
            .into_iter()
            .flat_map(|(_, p)| p.commands)
            .map(|c| c.words.iter().map(|w| expand(w, 7, no_vars)).collect())
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
        assert_eq!(words("echo $ a$"), [["echo", "$", "a$"]]);
    }

    #[test]
    fn lists_pipelines_and_status() {
        let list = parse("input tap 1 2; echo X4EXIT:$? && true || false\nls").unwrap();
        let joins: Vec<Join> = list.iter().map(|(j, _)| *j).collect();
        assert_eq!(
            joins,
            [
                Join::Always,
                Join::Always,
                Join::IfOk,
                Join::IfFailed,
                Join::Always
            ]
        );
        assert_eq!(
            expand(&list[1].1.commands[0].words[1], 0, no_vars),
            "X4EXIT:0"
        );
        assert_eq!(words("a;"), [["a"]]);
        assert!(parse(";;a").is_err(), "';;' is a syntax error");
        let list = parse("! dumpsys window | grep -E 'mCurrent|mFocused' | head -n 1").unwrap();
        let pipeline = &list[0].1;
        assert!(pipeline.negated);
        assert_eq!(pipeline.commands.len(), 3);
    }

    #[test]
    fn parameters_and_assignments() {
        let list = parse("A=1 B='x y' env; C=$A; echo ${A}b $Ab \"$B\"").unwrap();
        let first = &list[0].1.commands[0];
        assert_eq!(first.assignments.len(), 2);
        assert_eq!(first.assignments[1].0, "B");
        let vars = |name: &str| match name {
            "A" => Some("1"),
            "B" => Some("x y"),
            _ => None,
        };
        assert_eq!(expand(&first.assignments[1].1, 0, vars), "x y");
        assert_eq!(substituted_len(&first.assignments[1].1, 0, vars), 0);
        assert!(list[1].1.commands[0].words.is_empty());
        let echo: Vec<String> = list[2].1.commands[0]
            .words
            .iter()
            .map(|w| expand(w, 0, vars))
            .collect();
        assert_eq!(echo, ["echo", "1b", "", "x y"]);
        let substituted: Vec<usize> = list[2].1.commands[0]
            .words
            .iter()
            .map(|w| substituted_len(w, 0, vars))
            .collect();
        assert_eq!(substituted, [0, 1, 0, 3]);
        // Quoted or not at the start: not an assignment.
        assert_eq!(words("'A=1' x"), [["A=1", "x"]]);
        assert_eq!(words("echo A=1"), [["echo", "A=1"]]);
        assert_eq!(words("1A=2"), [["1A=2"]]);
    }

    #[test]
    fn redirections() {
        let list = parse("uiautomator dump /sdcard/x.xml >/dev/null 2>&1").unwrap();
        let cmd = &list[0].1.commands[0];
        assert_eq!(cmd.words.len(), 3);
        assert_eq!(
            cmd.redirects,
            [
                Redirect {
                    fd: 1,
                    target: Target::Write {
                        path: vec![Piece::Text("/dev/null".into())],
                        append: false
                    }
                },
                Redirect {
                    fd: 2,
                    target: Target::Dup(1)
                }
            ]
        );
        let cmd = &parse("echo err >&2").unwrap()[0].1.commands[0];
        assert_eq!(
            cmd.redirects,
            [Redirect {
                fd: 1,
                target: Target::Dup(2)
            }]
        );
        let cmd = &parse("ls 2> err >> out < in").unwrap()[0].1.commands[0];
        let fds: Vec<u8> = cmd.redirects.iter().map(|r| r.fd).collect();
        assert_eq!(fds, [2, 1, 0]);
        assert!(matches!(
            cmd.redirects[1].target,
            Target::Write { append: true, .. }
        ));
        assert!(matches!(cmd.redirects[2].target, Target::Read(_)));
        assert_eq!(
            words("echo a2>b"),
            [["echo", "a2"]],
            "2> only when the 2 stands alone"
        );
        assert_eq!(words("echo '2'>b"), [["echo", "2"]], "a quoted 2 is a word");
    }

    #[test]
    fn unsupported_syntax_is_refused_clearly() {
        for (line, msg) in [
            ("sleep 1 &", "background"),
            ("echo 'x", "unterminated single quote"),
            ("echo \"x", "unterminated double quote"),
            ("&& ls", "'&&' unexpected"),
            ("ls &&", "unexpected end"),
            ("ls |", "unexpected end"),
            ("| ls", "'|' unexpected"),
            ("echo >", "redirection without a file"),
            ("echo $(ls)", "command substitution"),
            ("echo `ls`", "command substitution"),
            ("(ls)", "subshells"),
            ("echo ${A:-x}", "only plain ${NAME}"),
            ("echo 2>&x", "descriptor number"),
        ] {
            let err = parse(line).unwrap_err();
            assert!(err.contains(msg), "{line}: {err}");
        }
    }
}
