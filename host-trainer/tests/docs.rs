//! Every `btl` and `btl-train` command the README and docs/ show in a shell
//! block is one the programs accept: each is parsed by the CLIs' own
//! definitions, so a renamed flag or a missing argument in the docs fails
//! here. Schematic parts are read as a user would fill them in: optional
//! `[…]` groups included, the first of `a|b` alternatives, shell variables
//! given a value, redirections and comments dropped.

use std::path::Path;

/// A command as written, where, and its arguments after its program.
struct DocCommand {
    place: String,
    program: String,
    args: Vec<String>,
}

/// Splits a shell line into words: quotes group, backslashes escape.
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None | Some('"'), '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (_, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The shell blocks' `btl`/`btl-train` lines of one markdown file.
fn commands_in(path: &Path) -> Vec<DocCommand> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut found = Vec::new();
    let (mut in_shell, mut pending) = (false, String::new());
    for (i, line) in text.lines().enumerate() {
        if let Some(fence) = line.strip_prefix("```") {
            in_shell = !in_shell && matches!(fence.trim(), "sh" | "bash" | "shell");
            continue;
        }
        if !in_shell {
            continue;
        }
        let line = format!("{pending}{line}");
        if let Some(continued) = line.strip_suffix('\\') {
            pending = format!("{continued} ");
            continue;
        }
        pending.clear();
        // A comment starts at " #" outside the command's quotes; the docs
        // put none inside them.
        let code = line.split(" #").next().unwrap_or("");
        let mut words = shell_words(code).into_iter();
        let Some(program) = words.next().filter(|p| p == "btl" || p == "btl-train") else {
            continue;
        };
        let mut args = Vec::new();
        for word in words {
            if word.starts_with('>') || word == "|" {
                break;
            }
            if word.starts_with("${") {
                continue;
            }
            let word = word.replace("$px", "200704").replace(['[', ']'], "");
            let word = word.split('|').next().unwrap_or_default().to_string();
            if !word.is_empty() {
                args.push(word);
            }
        }
        found.push(DocCommand {
            place: format!("{}:{}", path.display(), i + 1),
            program,
            args,
        });
    }
    found
}

#[test]
fn every_documented_command_parses() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let commands: Vec<DocCommand> = files.iter().flat_map(|f| commands_in(f)).collect();
    assert!(commands.len() >= 40, "{} commands found", commands.len());
    let failures: Vec<String> = commands
        .iter()
        .filter_map(|c| {
            let checked = match c.program.as_str() {
                "btl" => agent_core::cli::check_command_line(&c.args),
                _ => host_trainer::cli::check_command_line(&c.args),
            };
            checked
                .err()
                .map(|e| format!("{}: {} {}\n{e}", c.place, c.program, c.args.join(" ")))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn shell_words_split_as_a_shell_does() {
    assert_eq!(
        shell_words(r#"btl run "Turn on Wi-Fi" --x 'a b' c\ d """#),
        ["btl", "run", "Turn on Wi-Fi", "--x", "a b", "c d", ""]
    );
}
