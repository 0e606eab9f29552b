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
    /// Its URL, for `SqlStore::open_postgres` or a service's `store` setting.
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
    /// database.
    pub async fn admin(&self, sql: &str) -> Result<(), String> {
        admin(&self.admin_url, sql).await
    }

    /// Takes the database away from its clients, as while its server
    /// restarts: no new connection is let in and those open are cut.
    pub async fn take_away(&self) {
        let name = &self.name;
        self.admin(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
            .await
            .expect("close the database");
        self.admin(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        ))
        .await
        .expect("cut its connections");
    }

    /// Lets clients connect again after [`TestDatabase::take_away`].
    pub async fn give_back(&self) {
        self.admin(&format!(
            "ALTER DATABASE {} ALLOW_CONNECTIONS true",
            self.name
        ))
        .await
        .expect("open the database");
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

/// A server's files and how it is run: its data directory under `dir`,
/// the user it runs as, its port and its role's password.
struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    owner: Option<(u32, u32)>,
    port: u16,
    password: String,
}

impl Cluster {
    /// `initdb` into `dir` (a fresh directory), on a free port.
    fn init(bin: &Path, dir: &Path) -> Result<Cluster, String> {
        let dir = dir.to_path_buf();
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
        // Connections over TCP need the password, as on a real server (so a
        // wrong one is refused); the socket in the directory trusts.
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let password = format!(
            "svs-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let pwfile = dir.join("password");
        std::fs::write(&pwfile, &password).map_err(|e| format!("password file: {e}"))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", pwfile.display()))?;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("free port: {e}"))?
            .port();
        let cluster = Cluster {
            bin: bin.to_path_buf(),
            dir,
            owner,
            port,
            password,
        };
        let out = cluster
            .as_owner("initdb")
            .args([
                "-U",
                "svs",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["--no-sync", "-E", "UTF8", "--locale=C", "-D"])
            .arg(cluster.dir.join("data"))
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(cluster)
    }

    fn as_owner(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    fn admin_url(&self) -> String {
        format!(
            "postgres://svs:{}@127.0.0.1:{}/postgres",
            self.password, self.port
        )
    }

    /// Starts `postgres` on the cluster and waits until it takes
    /// connections; returns its pid, registered for the exit handler.
    fn spawn(&self) -> Result<u32, String> {
        let mut postgres = self.as_owner("postgres");
        postgres
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &self.port.to_string(), "-h", "127.0.0.1", "-k"])
            .arg(&self.dir)
            .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
            .args(["-c", "full_page_writes=off", "-c", "max_connections=300"])
            .stdout(std::process::Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(self.dir.join("postgres.log"))
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
                let mut child = match started {
                    Ok(child) => child,
                    Err(e) => {
                        let _ = tx.send(Err(format!("postgres: {e}")));
                        return;
                    }
                };
                let _ = tx.send(Ok(child.id()));
                // Lives as long as the server: its end (the process's) is
                // the server's signal; a server stopped by its test is
                // reaped here.
                let _ = child.wait();
            })
            .map_err(|e| format!("thread: {e}"))?;
        let pid = rx.recv().map_err(|e| format!("postgres: {e}"))??;
        if let Ok(mut started) = STARTED.lock() {
            if started.is_empty() {
                unsafe {
                    libc::atexit(stop_servers);
                }
            }
            started.retain(|(d, _)| *d != self.dir);
            started.push((self.dir.clone(), pid));
        }
        wait_ready(&self.admin_url(), &self.dir.join("postgres.log"))?;
        Ok(pid)
    }
}

fn start_in(bin: &Path, dir: &Path) -> Result<Server, String> {
    let cluster = Cluster::init(bin, dir)?;
    cluster.spawn()?;
    Ok(Server {
        admin_url: cluster.admin_url(),
    })
}

/// A PostgreSQL server of one test's own, which the test may stop and
/// start again (same port, same data), with one database `svs`: to take the
/// whole database server away, as the shared server cannot be. Stopped and
/// removed when dropped. Needs Debian's binaries even with
/// `SVS_TEST_DATABASE_URL` set.
pub struct TestServer {
    cluster: Cluster,
    pid: Mutex<Option<u32>>,
    /// The URL of its database `svs`.
    pub url: String,
}

impl TestServer {
    pub async fn new() -> TestServer {
        let made = std::thread::spawn(|| -> Result<TestServer, String> {
            let bin = bin_dir()?;
            let dir = tempfile::Builder::new()
                .prefix("svs-test-pg-own-")
                .tempdir()
                .map_err(|e| format!("temporary directory: {e}"))?
                .keep();
            let cluster = Cluster::init(&bin, &dir)?;
            let pid = cluster.spawn()?;
            let url = with_database(&cluster.admin_url(), "svs");
            Ok(TestServer {
                cluster,
                pid: Mutex::new(Some(pid)),
                url,
            })
        })
        .join();
        let server = match made {
            Ok(Ok(server)) => server,
            Ok(Err(why)) => panic!("no PostgreSQL server of the test's own: {why}"),
            Err(_) => panic!("no PostgreSQL server of the test's own: starting it panicked"),
        };
        admin(&server.cluster.admin_url(), "CREATE DATABASE svs")
            .await
            .unwrap_or_else(|e| panic!("CREATE DATABASE svs: {e}"));
        server
    }

    /// Stops the server (a fast shutdown: clients are cut) and waits until
    /// it is gone.
    pub fn stop(&self) {
        let Some(pid) = self.pid.lock().ok().and_then(|mut p| p.take()) else {
            return;
        };
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGINT);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        // Gone when its pid no longer answers (its thread reaps it).
        while unsafe { libc::kill(pid as libc::pid_t, 0) } == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the stopped server again, on the same port with the same data.
    pub async fn start(&self) {
        let cluster = Cluster {
            bin: self.cluster.bin.clone(),
            dir: self.cluster.dir.clone(),
            owner: self.cluster.owner,
            port: self.cluster.port,
            password: self.cluster.password.clone(),
        };
        let pid = std::thread::spawn(move || cluster.spawn())
            .join()
            .unwrap_or_else(|_| Err("starting it panicked".into()))
            .unwrap_or_else(|why| panic!("the test's PostgreSQL does not start again: {why}"));
        if let Ok(mut p) = self.pid.lock() {
            *p = Some(pid);
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
        if let Ok(mut started) = STARTED.lock() {
            started.retain(|(d, _)| *d != self.cluster.dir);
        }
        let _ = std::fs::remove_dir_all(&self.cluster.dir);
    }
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
