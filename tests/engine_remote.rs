//! Inner engines on another machine: a real OpenSSH server on the loopback address, with keys made for the test,
//! serves Stockfish to `analyze --engines` beside a local Stockfish. The remote engine's connection is cut in the middle
//! of the analysis; its search runs again, the engine comes back after its back-off, and nothing is lost.

mod common;

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// The OpenSSH server, stopped when dropped.
struct SshServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for SshServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sshd() -> PathBuf {
    let path = PathBuf::from("/usr/sbin/sshd");
    assert!(path.exists(), "the OpenSSH server is missing: install openssh-server (scripts/install-deps)");
    path
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .status()
        .expect("ssh-keygen runs");
    assert!(status.success());
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("an address").port()
}

fn user() -> String {
    let output = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

impl SshServer {
    fn start(dir: &Path) -> SshServer {
        let sshd = sshd();
        keygen(&dir.join("host_key"));
        keygen(&dir.join("client_key"));
        std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).expect("authorized keys");
        // sshd wants its privilege separation directory, which a fresh container may lack.
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = free_port();
        let config = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {keys}\nPasswordAuthentication \
             no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\nPidFile \
             {pid}\nLogLevel INFO\n",
            host = dir.join("host_key").display(),
            keys = dir.join("authorized_keys").display(),
            pid = dir.join("sshd.pid").display(),
        );
        std::fs::write(dir.join("sshd_config"), config).expect("sshd config");
        let log = std::fs::File::create(dir.join("sshd.log")).expect("sshd log");
        let child = Command::new(sshd)
            .args(["-D", "-e", "-f"])
            .arg(dir.join("sshd_config"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("sshd starts");
        let server = SshServer { child, port, dir: dir.to_owned() };
        let started = Instant::now();
        while !server.ssh_command("true").status().is_ok_and(|s| s.success()) {
            assert!(started.elapsed() < Duration::from_secs(20), "sshd did not accept a connection: {}", server.log());
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// The command line that runs `program` on the server.
    fn command_line(&self, program: &str) -> String {
        format!(
            "ssh -i {} -p {} -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o \
             BatchMode=yes {}@127.0.0.1 {program}",
            self.dir.join("client_key").display(),
            self.port,
            user()
        )
    }

    fn ssh_command(&self, program: &str) -> Command {
        let line = self.command_line(program);
        let mut words = line.split_whitespace();
        let mut command = Command::new(words.next().expect("ssh"));
        command.args(words).stdout(Stdio::null()).stderr(Stdio::null());
        command
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sshd.log")).unwrap_or_default()
    }

    /// Connections accepted so far.
    fn accepted(&self) -> usize {
        self.log().matches("Accepted publickey").count()
    }

    /// Kills the server's processes that serve connections (not the listener): every connection is cut.
    fn cut_connections(&self) -> usize {
        let output = Command::new("pgrep").args(["-P", &self.child.id().to_string()]).output().expect("pgrep runs");
        let children: Vec<String> =
            String::from_utf8_lossy(&output.stdout).split_whitespace().map(str::to_owned).collect();
        for pid in &children {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
        children.len()
    }
}

#[test]
fn a_remote_engine_cut_off_mid_analysis_comes_back_and_nothing_is_lost() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let server = SshServer::start(dir.path());
    let connections_before = server.accepted();
    let stockfish = common::stockfish();
    let engines = format!(
        "{} | workers=1 ; {} | workers=1",
        stockfish.display(),
        server.command_line(&stockfish.display().to_string())
    );
    let tree = dir.path().join("tree");
    let mut analysis = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&tree)
        .args(["analyze", "--engines", &engines, "--engine-depth", "13", "--max-depth", "3", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("deeptree runs");

    // Once the analysis has settled depth 1 (every engine started and searching), cut the remote engine's connection.
    let stderr = analysis.stderr.take().expect("stderr");
    let (rows_tx, rows_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok) {
            let _ = rows_tx.send(line.clone());
            lines.push(line);
        }
        lines.join("\n")
    });
    let started = Instant::now();
    loop {
        let row = rows_rx.recv_timeout(Duration::from_secs(60)).expect("the analysis settles depth 1");
        if row.trim_start().starts_with('1') {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "depth 1 did not settle");
    }
    assert!(server.accepted() > connections_before, "the remote engine connected: {}", server.log());
    assert!(
        analysis.try_wait().expect("the analysis can be waited for").is_none(),
        "the analysis ended before the connection could be cut; make it longer"
    );
    assert!(server.cut_connections() > 0, "a connection was cut");

    let output = analysis.wait_with_output().expect("the analysis ends");
    let stderr = reader.join().expect("stderr is read");
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("null")).expect("a JSON report");
    assert_eq!(report["settled_depth"], 3, "{report}");
    assert_eq!(report["failed"], 0, "no search was lost: {report}\n{stderr}");
    // The engine's end was seen while the analysis ran, and it was started again over a new connection.
    assert!(stderr.contains("engine fault, restarting it"), "{stderr}");
    assert!(server.accepted() >= connections_before + 2, "the remote engine came back: {}", server.log());

    // Every evaluation records its engine: the local and the remote Stockfish both gave some.
    let stats = Command::new(env!("CARGO_BIN_EXE_deeptree"))
        .arg("--db")
        .arg(&tree)
        .args(["stats", "--json"])
        .output()
        .expect("deeptree stats runs");
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("a JSON object");
    let engines = stats["engines"].as_array().expect("engines");
    assert_eq!(engines.len(), 2, "{stats}");
    let remote =
        engines.iter().position(|e| e["name"].as_str().is_some_and(|n| n.contains("ssh -i"))).expect("{stats}");
    for engine in engines {
        assert!(engine["evaluations"].as_u64().is_some_and(|n| n > 0), "{stats}");
    }
    assert_eq!(engines[1 - remote]["name"].as_str().map(|n| n.contains("ssh")), Some(false), "{stats}");
    assert_eq!(stats["evaluations_without_engine"], 0, "{stats}");
}
