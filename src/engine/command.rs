//! Engine command lines: shell-like splitting and program resolution.

use std::path::{Path, PathBuf};

use super::EngineError;

/// Directories searched for a bare program name that is not on `PATH` (Debian installs Stockfish in /usr/games).
const FALLBACK_DIRS: &[&str] = &["/usr/games", "/usr/local/games"];

/// Splits a command line the way a shell would for simple cases: words separated by whitespace, `'...'` taken
/// literally, `"..."` with `\"` and `\\` escapes, and a backslash outside quotes escaping the next character.
///
/// ```
/// use deeptree::engine::split_command_line;
///
/// let words = split_command_line(r#"ssh 'my host' "stock fish" -a\ b"#)?;
/// assert_eq!(words, ["ssh", "my host", "stock fish", "-a b"]);
/// # Ok::<_, deeptree::engine::EngineError>(())
/// ```
pub fn split_command_line(command: &str) -> Result<Vec<String>, EngineError> {
    let bad = |reason: &str| EngineError::BadCommand { command: command.to_owned(), reason: reason.to_owned() };
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(bad("unterminated single quote")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(bad("unterminated double quote")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(bad("unterminated double quote")),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(c) => word.push(c),
                    None => return Err(bad("trailing backslash")),
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        return Err(bad("empty command"));
    }
    Ok(words)
}

/// The program to run for `program`: a name with a slash is used as it is; a bare name is looked up on `PATH`, then
/// in /usr/games and /usr/local/games, and is left as it is when found nowhere (spawning then reports the error).
pub fn resolve_program(program: &str) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| is_executable(p)))
        .unwrap_or_default();
    on_path
        .or_else(|| FALLBACK_DIRS.iter().map(|dir| Path::new(dir).join(program)).find(|p| is_executable(p)))
        .unwrap_or_else(|| PathBuf::from(program))
}

/// Whether the program of `command` (its first word, resolved as [`resolve_program`] does) is an executable file:
/// checked before anything is created for an engine that cannot start.
pub fn program_exists(command: &str) -> bool {
    split_command_line(command)
        .ok()
        .and_then(|words| words.into_iter().next())
        .is_some_and(|program| is_executable(&resolve_program(&program)))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_words_and_quotes() {
        assert_eq!(split_command_line("  stockfish  ").unwrap(), ["stockfish"]);
        assert_eq!(split_command_line("a 'b c' d").unwrap(), ["a", "b c", "d"]);
        assert_eq!(split_command_line(r#"x "a \"q\" \\ \n" y"#).unwrap(), ["x", r#"a "q" \ \n"#, "y"]);
        assert_eq!(split_command_line("a''b ''").unwrap(), ["ab", ""]);
        assert_eq!(split_command_line(r"a\ b\'c").unwrap(), ["a b'c"]);
    }

    #[test]
    fn rejects_bad_command_lines() {
        for bad in ["", "   ", "a 'b", "a \"b", "a \\"] {
            assert!(matches!(split_command_line(bad), Err(EngineError::BadCommand { .. })), "{bad:?}");
        }
    }

    #[test]
    fn resolves_paths_and_bare_names() {
        assert_eq!(resolve_program("./x/engine"), PathBuf::from("./x/engine"));
        assert_eq!(resolve_program("sh").file_name().unwrap(), "sh");
        assert!(resolve_program("sh").is_absolute());
        assert_eq!(resolve_program("no-such-engine-anywhere"), PathBuf::from("no-such-engine-anywhere"));
    }
}
