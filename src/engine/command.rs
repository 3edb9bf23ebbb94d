//! Engine command lines: splitting as a shell does, and program resolution.

use std::path::{Path, PathBuf};

use super::EngineError;

/// Directories searched for a bare program name that is not on `PATH` (Debian installs Stockfish in /usr/games).
const FALLBACK_DIRS: &[&str] = &["/usr/games", "/usr/local/games"];

/// Splits a command line as a POSIX shell does, by [`shell_words`]: words separated by blanks (spaces, tabs, line
/// ends), `'...'` taken literally, `"..."` with `\"`, `\\`, `\$` and `` \` `` escapes, a backslash outside quotes
/// escaping the next character, and a word that starts with `#` beginning a comment to the end of the line. White
/// space that is not one of those blanks (a `\r` left from a CRLF file, a no-break space) is dropped at either end
/// first. A line that is empty, leaves a quote open or ends with a backslash that escapes nothing is a
/// [`EngineError::BadCommand`].
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
    let line = command.trim_matches(|c: char| c.is_whitespace() && !matches!(c, ' ' | '\t' | '\n'));
    let words = shell_words::split(line).map_err(|e| bad(&e.to_string()))?;
    // shell-words keeps a last backslash as it is; a shell would wait for the line it joins. With every quote
    // closed, a line that ends with an odd run of backslashes ends with one that escapes nothing.
    if line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1 {
        return Err(bad("trailing backslash"));
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
    fn splits_as_a_shell_does() {
        assert_eq!(split_command_line("stockfish\r").unwrap(), ["stockfish"]);
        assert_eq!(split_command_line(r"engine a\ ").unwrap(), ["engine", "a "]);
        assert_eq!(split_command_line("a\tb\nc").unwrap(), ["a", "b", "c"]);
        assert_eq!(split_command_line(r"a\\ b\\\\").unwrap(), [r"a\", r"b\\"]);
        assert_eq!(split_command_line(r#"a "\$x \`y\`" '\n'"#).unwrap(), ["a", "$x `y`", r"\n"]);
        assert_eq!(split_command_line("engine --x #a comment").unwrap(), ["engine", "--x"]);
        assert_eq!(split_command_line("engine a#b").unwrap(), ["engine", "a#b"]);
    }

    #[test]
    fn rejects_bad_command_lines() {
        for (bad, reason) in [
            ("", "empty command"),
            ("   ", "empty command"),
            ("# only a comment", "empty command"),
            ("a 'b", "missing closing quote"),
            ("a \"b", "missing closing quote"),
            ("a \"b\\", "missing closing quote"),
            ("a \\", "trailing backslash"),
            (r"a\\\", "trailing backslash"),
        ] {
            match split_command_line(bad) {
                Err(EngineError::BadCommand { command, reason: why }) => {
                    assert_eq!((command.as_str(), why.as_str()), (bad, reason), "{bad:?}")
                }
                other => panic!("{bad:?}: {other:?}"),
            }
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
