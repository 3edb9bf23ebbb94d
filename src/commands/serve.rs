//! `deeptree serve`: the stored tree live in a browser (see [`crate::serve`]).

use std::{
    io::Write,
    net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener},
    path::Path,
};

use crate::{
    config::Config,
    serve::{
        Server,
        guard::{Guard, check_bind, new_token, url_host},
    },
    store::{Store, StoreOptions},
};

use super::{CommandResult, PositionArgs};

/// `deeptree serve [--port P] [--bind ADDR] [--allow-remote] [--fen FEN] [--moves "..."]`
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Port to listen on (0: any free port; the URL printed at start names it).
    #[arg(long, default_value_t = 8088)]
    pub port: u16,
    /// Address to listen on; one other than loopback needs --allow-remote.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub bind: IpAddr,
    /// Serve on an address other than loopback (plain HTTP: the token travels in clear).
    #[arg(long)]
    pub allow_remote: bool,
    /// The page's first position.
    #[command(flatten)]
    pub position: PositionArgs,
}

/// Runs `deeptree serve` on the existing store in `db` until the process is stopped.
pub fn run(db: Option<&Path>, config: &Config, args: ServeArgs) -> CommandResult {
    let ServeArgs { port, bind, allow_remote, position } = args;
    let root = position.line()?;
    let warning = check_bind(bind, allow_remote)?;
    // Opened for writing (steering writes marks), shared: `compact` is refused while serve runs.
    let dir = config.tree_dir(db);
    let store = Store::open_existing(&dir, &StoreOptions::from(config))?;
    let listener = TcpListener::bind(SocketAddr::new(bind, port))
        .map_err(|e| format!("cannot listen on {}: {e}", SocketAddr::new(bind, port)))?;
    let port = listener.local_addr()?.port();
    let guard = Guard { bind, port, allow_remote, token: new_token()? };
    if let Some(warning) = warning {
        eprintln!("deeptree: {warning}");
    }
    // The address it listens on (every address: the loopback one of its family).
    let host = match bind {
        IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".to_owned(),
        IpAddr::V6(v6) if v6.is_unspecified() => "[::1]".to_owned(),
        bound => url_host(bound),
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "http://{host}:{port}/?token={}", guard.token)?;
    out.flush()?;
    drop(out);
    eprintln!("deeptree: serving the tree in {} (Ctrl-C stops)", dir.display());
    Server::new(store, guard, root).run(listener)?;
    Ok(())
}
