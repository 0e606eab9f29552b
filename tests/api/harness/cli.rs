//! Helpers of the `cli` tests, shared with other test files.

use crate::harness::*;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use tempfile::TempDir;

/// A user's home for the client: its own credentials file (also used by
/// the user management tests, `users_cli`).
pub(crate) struct Home {
    pub(crate) dir: TempDir,
    /// Use $XDG_CONFIG_HOME (else only $HOME).
    pub(crate) xdg: bool,
}

impl Home {
    pub(crate) fn new(xdg: bool) -> Home {
        Home {
            dir: tempfile::tempdir().expect("temp home"),
            xdg,
        }
    }

    pub(crate) fn credentials(&self) -> PathBuf {
        if self.xdg {
            self.dir.path().join("xdg/svs/credentials")
        } else {
            self.dir.path().join("home/.config/svs/credentials")
        }
    }

    /// Runs `svs ARGS` with `stdin` as its standard input and `env` added
    /// to an environment without the client's own variables.
    pub(crate) fn run_env(
        &self,
        args: &[&str],
        stdin: Option<&str>,
        env: &[(&str, &str)],
    ) -> Output {
        let mut cmd = Command::new(svs_bin());
        cmd.args(args)
            .env("HOME", self.dir.path().join("home"))
            .env_remove("SVS_PROFILE")
            .env_remove("SVS_URL")
            .env_remove("SVS_NEW_PASSWORD")
            .env_remove("SVS_CURRENT_PASSWORD")
            .envs(env.iter().copied())
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if self.xdg {
            cmd.env("XDG_CONFIG_HOME", self.dir.path().join("xdg"));
        } else {
            cmd.env_remove("XDG_CONFIG_HOME");
        }
        let mut child = cmd.spawn().expect("svs runs");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input.as_bytes())
                .expect("stdin written");
        }
        child.wait_with_output().expect("svs ends")
    }

    /// Runs `svs ARGS` with `stdin` as its standard input.
    pub(crate) fn run_with(&self, args: &[&str], stdin: Option<&str>) -> Output {
        self.run_env(args, stdin, &[])
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, None)
    }

    /// Runs with `stdin` and asserts success; returns stdout.
    pub(crate) fn ok_with(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run_with(args, stdin);
        assert!(
            out.status.success(),
            "svs {args:?} failed: {}{}",
            stdout(&out),
            stderr(&out)
        );
        stdout(&out)
    }

    /// Runs and asserts success; returns stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        self.ok_with(args, None)
    }

    /// Runs and asserts failure with `message` on stderr.
    pub(crate) fn fails(&self, args: &[&str], message: &str) {
        let out = self.run(args);
        assert!(!out.status.success(), "svs {args:?} succeeded");
        assert!(
            stderr(&out).contains(message),
            "svs {args:?}: {}",
            stderr(&out)
        );
    }

    /// Runs with `--output json` and parses stdout.
    pub(crate) fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["--output", "json"]);
        let text = self.ok(&all);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("svs {args:?}: {e}: {text}"))
    }

    pub(crate) fn login(&self, app: &TestApp) {
        self.login_as(app, ADMIN_EMAIL, ADMIN_PASSWORD);
    }

    pub(crate) fn login_as(&self, app: &TestApp, email: &str, password: &str) {
        let out = self.run_with(
            &["login", "--url", &app.base, "--email", email],
            Some(&format!("{password}\n")),
        );
        assert!(out.status.success(), "login: {}", stderr(&out));
    }

    /// A file `name` in the home holding `content`; its path.
    pub(crate) fn file(&self, name: &str, content: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).expect("file written");
        path.to_string_lossy().into_owned()
    }
}

pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub(crate) fn credentials(home: &Home) -> Value {
    let text = std::fs::read_to_string(home.credentials()).expect("credentials file");
    serde_json::from_str(&text).expect("credentials are JSON")
}
