//! Commands a GUI sends, parsed tolerantly: unknown leading tokens are skipped (as the UCI text asks), unknown
//! tokens inside `go` are skipped, and what cannot be understood is reported, never a panic.
//!
//! ```
//! use deeptree::uci::command::{GuiCommand, parse};
//!
//! let GuiCommand::Go(go) = parse("go ponder wtime 60000 btime 58000 winc 1000 binc 1000") else { panic!() };
//! assert!(go.ponder);
//! assert_eq!(go.wtime, Some(60_000));
//! assert!(matches!(parse("joho debug on"), GuiCommand::Debug(true)));
//! ```

/// The limits of one `go`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Go {
    pub searchmoves: Vec<String>,
    pub ponder: bool,
    pub wtime: Option<u64>,
    pub btime: Option<u64>,
    pub winc: Option<u64>,
    pub binc: Option<u64>,
    pub movestogo: Option<u64>,
    pub depth: Option<u64>,
    pub nodes: Option<u64>,
    pub mate: Option<u64>,
    pub movetime: Option<u64>,
    pub infinite: bool,
    /// What of the line could not be read (`movestogo` without a value, `wtime abc`): each is said to the GUI, and
    /// the search goes on without it, since every `go` must get its `bestmove`.
    pub unread: Vec<String>,
}

impl Go {
    /// A clock was given: a timed game is running.
    pub fn is_timed(&self) -> bool {
        self.wtime.is_some() || self.btime.is_some()
    }
}

/// One line from the GUI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuiCommand {
    Uci,
    Debug(bool),
    IsReady,
    SetOption {
        name: String,
        value: Option<String>,
    },
    Register,
    UciNewGame,
    /// `fen` is `None` for `startpos`.
    Position {
        fen: Option<String>,
        moves: Vec<String>,
    },
    Go(Go),
    Stop,
    PonderHit,
    Quit,
    /// Nothing on the line.
    Empty,
    /// No known command on the line.
    Unknown(String),
    /// A known command with arguments that cannot be used.
    Malformed {
        command: &'static str,
        reason: String,
    },
}

const COMMANDS: [&str; 12] = [
    "uci",
    "debug",
    "isready",
    "setoption",
    "register",
    "ucinewgame",
    "position",
    "go",
    "stop",
    "ponderhit",
    "quit",
    "eof",
];

/// Parses one line.
pub fn parse(line: &str) -> GuiCommand {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    if tokens.is_empty() {
        return GuiCommand::Empty;
    }
    let Some(start) = tokens.iter().position(|t| COMMANDS.contains(t)) else {
        return GuiCommand::Unknown(line.trim().chars().take(200).collect());
    };
    let args = &tokens[start + 1..];
    match tokens[start] {
        "uci" => GuiCommand::Uci,
        "debug" => GuiCommand::Debug(args.first() != Some(&"off")),
        "isready" => GuiCommand::IsReady,
        "setoption" => parse_setoption(args),
        "register" => GuiCommand::Register,
        "ucinewgame" => GuiCommand::UciNewGame,
        "position" => parse_position(args),
        "go" => parse_go(args),
        "stop" => GuiCommand::Stop,
        "ponderhit" => GuiCommand::PonderHit,
        _ => GuiCommand::Quit,
    }
}

fn parse_setoption(args: &[&str]) -> GuiCommand {
    if args.first() != Some(&"name") {
        return GuiCommand::Malformed { command: "setoption", reason: "expected 'name'".into() };
    }
    let value_at = args.iter().position(|t| *t == "value");
    let name_end = value_at.unwrap_or(args.len());
    let name = args[1..name_end].join(" ");
    if name.is_empty() {
        return GuiCommand::Malformed { command: "setoption", reason: "empty option name".into() };
    }
    let value = value_at.map(|i| args[i + 1..].join(" "));
    GuiCommand::SetOption { name, value }
}

fn parse_position(args: &[&str]) -> GuiCommand {
    let moves_at = args.iter().position(|t| *t == "moves");
    let setup = &args[..moves_at.unwrap_or(args.len())];
    let moves = moves_at.map(|i| args[i + 1..].iter().map(|m| (*m).to_owned()).collect()).unwrap_or_default();
    match setup.first() {
        Some(&"startpos") if setup.len() == 1 => GuiCommand::Position { fen: None, moves },
        Some(&"fen") if setup.len() > 1 => GuiCommand::Position { fen: Some(setup[1..].join(" ")), moves },
        Some(&"fen") => GuiCommand::Malformed { command: "position", reason: "'fen' without a FEN".into() },
        _ => GuiCommand::Malformed { command: "position", reason: "expected 'startpos' or 'fen'".into() },
    }
}

fn parse_go(args: &[&str]) -> GuiCommand {
    let mut go = Go::default();
    let mut i = 0;
    while i < args.len() {
        let number = |slot: &mut Option<u64>, i: &mut usize| -> Result<(), String> {
            let Some(value) = args.get(*i + 1) else {
                *i += 1;
                return Err(format!("'{}' without a value", args[*i - 1]));
            };
            let Some(parsed) = gui_number(value) else {
                // The key alone is skipped: its would-be value is read next, as a key or as a token to skip.
                *i += 1;
                return Err(format!("'{}' value '{value}' is not a number", args[*i - 1]));
            };
            *slot = Some(parsed);
            *i += 2;
            Ok(())
        };
        let result = match args[i] {
            "ponder" => {
                go.ponder = true;
                i += 1;
                Ok(())
            }
            "infinite" => {
                go.infinite = true;
                i += 1;
                Ok(())
            }
            "wtime" => number(&mut go.wtime, &mut i),
            "btime" => number(&mut go.btime, &mut i),
            "winc" => number(&mut go.winc, &mut i),
            "binc" => number(&mut go.binc, &mut i),
            "movestogo" => number(&mut go.movestogo, &mut i),
            "depth" => number(&mut go.depth, &mut i),
            "nodes" => number(&mut go.nodes, &mut i),
            "mate" => number(&mut go.mate, &mut i),
            "movetime" => number(&mut go.movetime, &mut i),
            "searchmoves" => {
                i += 1;
                while i < args.len() && looks_like_move(args[i]) {
                    go.searchmoves.push(args[i].to_owned());
                    i += 1;
                }
                Ok(())
            }
            _ => {
                i += 1; // unknown token: skipped
                Ok(())
            }
        };
        if let Err(reason) = result {
            go.unread.push(reason);
        }
    }
    GuiCommand::Go(go)
}

/// A number of a `go`, read as leniently as engines read them: a negative clock (a GUI that is late) is 0, a number
/// past `i64` (`nodes 18446744073709551615`) or a decimal (`wtime 1.5e5`) is read as near as it goes; at most
/// `i64::MAX`, so that any deadline made from it fits.
fn gui_number(value: &str) -> Option<u64> {
    let number = match value.parse::<i64>() {
        Ok(number) => number.max(0) as u64,
        Err(_) => match value.parse::<u64>() {
            Ok(number) => number,
            // `as` saturates: a huge decimal is u64::MAX, a negative one 0.
            Err(_) => value.parse::<f64>().ok().filter(|number| number.is_finite())? as u64,
        },
    };
    Some(number.min(i64::MAX as u64))
}

fn looks_like_move(token: &str) -> bool {
    let b = token.as_bytes();
    (4..=5).contains(&b.len()) && b[0].is_ascii_lowercase() && b[1].is_ascii_digit()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn commands() {
        assert_eq!(
            parse("position startpos moves e2e4 e7e5"),
            GuiCommand::Position { fen: None, moves: vec!["e2e4".into(), "e7e5".into()] }
        );
        assert_eq!(
            parse("position fen 8/8/8/8/8/8/8/K1k5 w - - 0 1"),
            GuiCommand::Position { fen: Some("8/8/8/8/8/8/8/K1k5 w - - 0 1".into()), moves: vec![] }
        );
        assert_eq!(
            parse("setoption name Clear Hash"),
            GuiCommand::SetOption { name: "Clear Hash".into(), value: None }
        );
        assert_eq!(
            parse("setoption name MoveDistance value 15"),
            GuiCommand::SetOption { name: "MoveDistance".into(), value: Some("15".into()) }
        );
        let GuiCommand::Go(go) = parse("go searchmoves e2e4 d2d4 depth 5 nodes 1000 wtime -20 movestogo 3") else {
            panic!()
        };
        assert_eq!(go.searchmoves, vec!["e2e4", "d2d4"]);
        assert_eq!((go.depth, go.nodes, go.wtime, go.movestogo), (Some(5), Some(1000), Some(0), Some(3)));
        // What cannot be read is noted and skipped: the `go` still searches.
        let GuiCommand::Go(go) = parse("go depth") else { panic!() };
        assert_eq!((go.depth, go.unread.len()), (None, 1));
        let GuiCommand::Go(go) = parse("go wtime 1.5e5 btime abc movestogo depth 7 nodes 18446744073709551615") else {
            panic!()
        };
        assert_eq!((go.wtime, go.btime, go.movestogo, go.depth), (Some(150_000), None, None, Some(7)));
        assert_eq!(go.nodes, Some(i64::MAX as u64));
        assert_eq!(go.unread, ["'btime' value 'abc' is not a number", "'movestogo' value 'depth' is not a number"]);
        assert!(matches!(parse("position"), GuiCommand::Malformed { .. }));
        assert!(matches!(parse("hello world"), GuiCommand::Unknown(_)));
        assert_eq!(parse("   "), GuiCommand::Empty);
    }

    proptest! {
        #[test]
        fn any_line_parses_without_panic(line in "\\PC{0,200}") {
            let _ = parse(&line);
        }

        #[test]
        fn mutated_commands_parse_without_panic(
            base in prop::sample::select(vec![
                "position startpos moves e2e4 e7e5 g1f3",
                "go wtime 1000 btime 1000 winc 10 binc 10 movestogo 5",
                "setoption name Threads value 2",
                "go ponder searchmoves e2e4 infinite",
            ]),
            cut in 0usize..60,
            insert in "\\PC{0,10}",
        ) {
            let mut line = base.to_owned();
            let at = line.char_indices().map(|(i, _)| i).nth(cut.min(line.chars().count())).unwrap_or(line.len());
            line.insert_str(at, &insert);
            let _ = parse(&line);
        }
    }
}
