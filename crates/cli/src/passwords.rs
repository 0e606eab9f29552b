//! Where passwords come from: never a flag's value (other users could read
//! it in the process list), but a file, an environment variable, stdin or
//! a prompt on a terminal.

use clap::Args;
use std::io::{IsTerminal, Read};
use std::path::PathBuf;

/// Where a new password comes from (never a flag's value, which other
/// users could read in the process list).
#[derive(Debug, Args, Clone)]
pub struct NewPasswordArgs {
    /// A file whose first line is the new password.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
}

/// The environment variables the user commands read passwords from.
pub const NEW_PASSWORD_ENV: &str = "SVS_NEW_PASSWORD";
pub const CURRENT_PASSWORD_ENV: &str = "SVS_CURRENT_PASSWORD";

/// Standard input, read once, handing out one line per password.
#[derive(Default)]
pub(super) struct StdinLines {
    lines: Option<std::vec::IntoIter<String>>,
}

impl StdinLines {
    fn next_line(&mut self) -> Result<Option<String>, String> {
        if self.lines.is_none() {
            let mut input = String::new();
            std::io::stdin()
                .read_to_string(&mut input)
                .map_err(|e| format!("cannot read the password from stdin: {e}"))?;
            let lines: Vec<String> = input.lines().map(str::to_string).collect();
            self.lines = Some(lines.into_iter());
        }
        Ok(self.lines.as_mut().and_then(Iterator::next))
    }
}

/// A password from, in order: the file's first line, the environment
/// variable, the next line of stdin (not a terminal), a prompt (a
/// terminal; twice with `confirm`). Empty is refused.
pub(super) fn password_from(
    file: Option<&std::path::Path>,
    env: &str,
    what: &str,
    stdin: &mut StdinLines,
    confirm: bool,
) -> Result<String, String> {
    let password = if let Some(path) = file {
        std::fs::read_to_string(path)
            .map_err(|e| format!("password file {}: {e}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    } else if let Some(value) = std::env::var(env).ok().filter(|v| !v.is_empty()) {
        value
    } else if !std::io::stdin().is_terminal() {
        stdin.next_line()?.unwrap_or_default()
    } else {
        let first = rpassword::prompt_password(format!("{what}: ")).map_err(|e| e.to_string())?;
        if confirm {
            let second = rpassword::prompt_password(format!("Repeat {}: ", what.to_lowercase()))
                .map_err(|e| e.to_string())?;
            if first != second {
                return Err("passwords do not match".into());
            }
        }
        first
    };
    if password.is_empty() {
        return Err(format!(
            "no {}: give a file, set {env}, or write it on stdin",
            what.to_lowercase()
        ));
    }
    Ok(password)
}

pub(super) fn new_password(
    args: &NewPasswordArgs,
    stdin: &mut StdinLines,
) -> Result<String, String> {
    password_from(
        args.password_file.as_deref(),
        NEW_PASSWORD_ENV,
        "New password",
        stdin,
        true,
    )
}

/// A password from stdin (all of it but the line end), or prompted for on
/// a terminal (twice with `confirm`).
pub(super) fn read_password(confirm: bool) -> Result<String, String> {
    if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("Password: ").map_err(|e| e.to_string())?;
        if !confirm {
            return Ok(first);
        }
        let second = rpassword::prompt_password("Repeat password: ").map_err(|e| e.to_string())?;
        if first != second {
            return Err("passwords do not match".into());
        }
        Ok(first)
    } else {
        let mut input = String::new();
        std::io::stdin()
            .read_to_string(&mut input)
            .map_err(|e| format!("cannot read the password from stdin: {e}"))?;
        Ok(input.trim_end_matches(['\n', '\r']).to_string())
    }
}
