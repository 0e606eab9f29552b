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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_command_reports_its_line_status_and_stderr() {
        let err = run("sh", &["-c", "echo out; echo oops >&2; exit 3"]).unwrap_err();
        match err {
            HostDevError::Command {
                command,
                status,
                stderr,
            } => {
                assert_eq!(command, "sh -c echo out; echo oops >&2; exit 3");
                assert_eq!(status, "exit status: 3");
                assert_eq!(stderr, "oops");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_successful_command_returns_its_stdout() {
        assert_eq!(
            run("sh", &["-c", "echo /dev/loop7"]).unwrap(),
            "/dev/loop7\n"
        );
    }

    #[test]
    fn a_missing_program_is_an_io_error_naming_it() {
        let err = run::<&str>("svs-no-such-tool", &[]).unwrap_err();
        assert!(matches!(err, HostDevError::Io { .. }), "{err:?}");
        assert!(err.to_string().contains("svs-no-such-tool"), "{err}");
    }
}
