//! Running the host's tools (util-linux, e2fsprogs, xfsprogs).

use std::ffi::OsStr;
use std::process::Command;

use crate::{HostDevError, Result};

/// Runs `program args...`, returning its stdout; a non-zero exit is an
/// error carrying its stderr.
pub(crate) fn run<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Result<String> {
    let line = std::iter::once(program.to_owned())
        .chain(
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned()),
        )
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| HostDevError::io(format!("running `{line}`"), e))?;
    if !out.status.success() {
        return Err(HostDevError::Command {
            command: line,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
