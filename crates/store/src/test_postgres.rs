//! A throwaway PostgreSQL for tests, and a fresh database on it per test.
//!
//! With `SVS_TEST_DATABASE_URL` set (`postgres://user:password@host:port/db`,
//! a role allowed to create databases), tests use that server. Otherwise the
//! first test of a test process starts its own server: Debian's `initdb`
//! into a new temporary directory, then `postgres` on a free port of
//! 127.0.0.1 (as the `postgres` user when the tests run as root, which
//! PostgreSQL refuses to run as), its role `svs` signing in with a password. The server dies with the test process
//! (PR_SET_PDEATHSIG from a thread that lives as long as the process) and an
//! exit handler removes its directory. Durability settings are off there
//! (`fsync`, `synchronous_commit`): the tests check behaviour, not crashes
//! of the machine.
//!
//! Every [`TestDatabase`] is a new database (`CREATE DATABASE`), dropped
//! when the value is dropped, so tests never see each other's rows.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The server all of a test process's databases are made on.
struct Server {
    /// URL of the server's `postgres` database, as a role that may create
    /// databases.
    admin_url: String,
}

/// The temporary directory and process of each server this process started
/// (one, unless a start failed half way), for the exit handler.
static STARTED: Mutex<Vec<(PathBuf, u32)>> = Mutex::new(Vec::new());

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();

/// A new, empty database for one test; dropped with this value.
pub struct TestDatabase {
    /// Its URL, for `PgStore::open` or a service's `store` setting.
    pub url: String,
    name: String,
    admin_url: String,
}

impl TestDatabase {
    /// Makes a new database on the test server (starting the server first
    /// if this process has none yet). Panics with the reason when there is
    /// no server to be had: a test that needs PostgreSQL must not pass
    /// without one.
    pub async fn new() -> TestDatabase {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // Started on a thread of its own: starting waits for the server
        // with a runtime of its own, which cannot run inside the test's.
        let server = std::thread::spawn(|| match SERVER.get_or_init(start_server) {
            Ok(server) => Ok(server.admin_url.clone()),
            Err(why) => Err(why.clone()),
        })
        .join();
        let admin_url = match server {
            Ok(Ok(url)) => url,
            Ok(Err(why)) => panic!("no PostgreSQL for the tests: {why}"),
            Err(_) => panic!("no PostgreSQL for the tests: starting it panicked"),
        };
        let name = format!(
            "svs_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        admin(&admin_url, &format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        TestDatabase {
            url: with_database(&admin_url, &name),
            name,
            admin_url,
        }
    }
}

impl TestDatabase {
    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `sql` as the server's administrator, on its `postgres`
    /// database (to take this database away and give it back, say).
    pub async fn admin(&self, sql: &str) -> Result<(), String> {
        admin(&self.admin_url, sql).await
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Drop runs inside a test's runtime: a thread of its own, with a
        // runtime of its own, may block on the statement.
        let (admin_url, sql) = (
            self.admin_url.clone(),
            format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(admin(&admin_url, &sql))
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("test database {} not dropped: {e}", self.name);
        }
    }
}

/// Runs one statement on the server's `postgres` database.
async fn admin(admin_url: &str, sql: &str) -> Result<(), String> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(admin_url)
        .await
        .map_err(|e| e.to_string())?;
    let done = sqlx::query(sql).execute(&mut conn).await.map(|_| ());
    let _ = conn.close().await;
    done.map_err(|e| e.to_string())
}

/// `url` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    // postgres://user@host:port/db: the database is after the first '/'
    // following the authority.
    let authority_end = base
        .find("://")
        .map(|i| i + 3)
        .and_then(|start| base[start..].find('/').map(|i| start + i))
        .unwrap_or(base.len());
    format!("{}/{name}{query}", &base[..authority_end])
}

fn start_server() -> Result<Server, String> {
    if let Ok(url) = std::env::var("SVS_TEST_DATABASE_URL") {
        return Ok(Server { admin_url: url });
    }
    let bin = bin_dir()?;
    let dir = tempfile::Builder::new()
        .prefix("svs-test-pg-")
        .tempdir()
        .map_err(|e| format!("temporary directory: {e}"))?;
    let started = start_in(&bin, dir.path());
    // Once a server runs there, the exit handler removes the directory.
    let running = STARTED
        .lock()
        .map(|s| s.iter().any(|(d, _)| d == dir.path()))
        .unwrap_or(false);
    if running {
        let _ = dir.keep();
    }
    started
}

fn start_in(bin: &Path, dir: &Path) -> Result<Server, String> {
    let dir = dir.to_path_buf();
    let data = dir.join("data");
    // PostgreSQL refuses to run as root: run it as `postgres` then.
    let owner = if unsafe { libc::geteuid() } == 0 {
        let ids = user_ids("postgres").ok_or(
            "the tests run as root and there is no `postgres` user to run PostgreSQL as \
             (install Debian's postgresql, or set SVS_TEST_DATABASE_URL)",
        )?;
        std::os::unix::fs::chown(&dir, Some(ids.0), Some(ids.1))
            .map_err(|e| format!("chown {}: {e}", dir.display()))?;
        Some(ids)
    } else {
        None
    };
    let as_owner = |program: &str| {
        let mut cmd = Command::new(bin.join(program));
        if let Some((uid, gid)) = owner {
            cmd.uid(uid).gid(gid);
        }
        cmd
    };
    // Connections over TCP need the password, as on a real server (so a
    // wrong one is refused); the socket in the directory trusts.
    let password = format!("svs-test-{}", std::process::id());
    let pwfile = dir.join("password");
    std::fs::write(&pwfile, &password).map_err(|e| format!("password file: {e}"))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid))
            .map_err(|e| format!("chown {}: {e}", pwfile.display()))?;
    }
    let out = as_owner("initdb")
        .args([
            "-U",
            "svs",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
        ])
        .arg(format!("--pwfile={}", pwfile.display()))
        .args(["--no-sync", "-E", "UTF8", "--locale=C", "-D"])
        .arg(&data)
        .output()
        .map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("free port: {e}"))?
        .port();
    let mut postgres = as_owner("postgres");
    postgres
        .arg("-D")
        .arg(&data)
        .args(["-p", &port.to_string(), "-h", "127.0.0.1", "-k"])
        .arg(&dir)
        .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
        .args(["-c", "full_page_writes=off", "-c", "max_connections=300"])
        .stdout(std::process::Stdio::null())
        .stderr(
            std::fs::File::create(dir.join("postgres.log"))
                .map_err(|e| format!("log file: {e}"))?,
        );
    unsafe {
        // A fast shutdown when the thread that started it (alive as long as
        // the process) goes: the server never outlives its tests.
        postgres.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("test-postgres".into())
        .spawn(move || {
            let started = postgres.spawn();
            let child = match started {
                Ok(child) => child,
                Err(e) => {
                    let _ = tx.send(Err(format!("postgres: {e}")));
                    return;
                }
            };
            let _ = tx.send(Ok(child.id()));
            // Lives as long as the process: its end is the server's signal.
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| format!("thread: {e}"))?;
    let pid = rx.recv().map_err(|e| format!("postgres: {e}"))??;
    if let Ok(mut started) = STARTED.lock() {
        if started.is_empty() {
            unsafe {
                libc::atexit(stop_servers);
            }
        }
        started.push((dir.clone(), pid));
    }
    let admin_url = format!("postgres://svs:{password}@127.0.0.1:{port}/postgres");
    wait_ready(&admin_url, &dir.join("postgres.log"))?;
    Ok(Server { admin_url })
}

/// At exit: stops the servers this process started and removes their files.
extern "C" fn stop_servers() {
    let started = STARTED
        .lock()
        .map(|mut s| std::mem::take(&mut *s))
        .unwrap_or_default();
    for (dir, pid) in started {
        let pid = pid as libc::pid_t;
        unsafe {
            // Immediate shutdown: nothing in it is worth keeping.
            libc::kill(pid, libc::SIGQUIT);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let mut status = 0;
            if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The server's other processes may still be leaving files behind.
        while std::fs::remove_dir_all(&dir).is_err() && dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Waits until the server takes connections (30 s at most).
fn wait_ready(admin_url: &str, log: &Path) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match runtime.block_on(admin(admin_url, "SELECT 1")) {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() > deadline => {
                let log = std::fs::read_to_string(log).unwrap_or_default();
                return Err(format!("postgres did not start: {e}\n{log}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Where `initdb` and `postgres` are: `pg_config --bindir`, else the newest
/// of Debian's /usr/lib/postgresql/<version>/bin, else the PATH.
fn bin_dir() -> Result<PathBuf, String> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && dir.join("initdb").exists() && dir.join("postgres").exists() {
            return Ok(dir);
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|dir| dir.join("initdb").exists() && dir.join("postgres").exists())
        .ok_or_else(|| {
            "PostgreSQL's initdb and postgres are not installed (Debian: apt-get install \
             postgresql), and SVS_TEST_DATABASE_URL is not set"
                .to_string()
        })
}

/// The uid and gid of `user`, from /etc/passwd.
fn user_ids(user: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != user {
            return None;
        }
        let uid = fields.nth(1)?.parse().ok()?;
        let gid = fields.next()?.parse().ok()?;
        Some((uid, gid))
    })
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn a_url_gets_the_database_named() {
        assert_eq!(
            with_database("postgres://svs@127.0.0.1:5432/postgres", "t1"),
            "postgres://svs@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u:p@h/db?sslmode=disable", "t2"),
            "postgres://u:p@h/t2?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://u@h:1", "t3"),
            "postgres://u@h:1/t3"
        );
    }
}
