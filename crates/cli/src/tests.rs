//! Parsing of the command line.

use super::*;
use svs_client::{parse_size_gib, Consistency, CopyRate, SnapshotRef};

fn parse(args: &[&str]) -> Result<Command, clap::Error> {
    Cli::try_parse_from(std::iter::once("svs").chain(args.iter().copied())).map(|c| c.command)
}

#[test]
fn volume_recover_takes_a_name_and_wait() {
    match parse(&["volume", "recover", "db", "--wait"]) {
        Ok(Command::Volume {
            command: VolumeCommand::Recover { name, wait },
            ..
        }) => {
            assert_eq!(name, "db");
            assert!(wait.wait);
        }
        other => panic!("{other:?}"),
    }
    match parse(&["volume", "recover", "db"]) {
        Ok(Command::Volume {
            command: VolumeCommand::Recover { wait, .. },
            ..
        }) => assert!(!wait.wait),
        other => panic!("{other:?}"),
    }
    assert!(
        parse(&["volume", "recover"]).is_err(),
        "the volume is required"
    );
}

#[test]
fn job_cancel_takes_a_job_and_waits_unless_no_wait() {
    match parse(&["job", "cancel", "12"]) {
        Ok(Command::Job {
            command: JobCommand::Cancel { id, no_wait },
            ..
        }) => {
            assert_eq!(id, "12");
            assert!(!no_wait, "it follows the job by default");
        }
        other => panic!("{other:?}"),
    }
    match parse(&["job", "cancel", "12", "--no-wait", "--output", "json"]) {
        Ok(Command::Job {
            command: JobCommand::Cancel { id, no_wait },
            client,
        }) => {
            assert_eq!(id, "12");
            assert!(no_wait);
            assert_eq!(client.output, OutputFormat::Json);
        }
        other => panic!("{other:?}"),
    }
    assert!(parse(&["job", "cancel"]).is_err(), "the job is required");
    assert!(parse(&["job", "cancel", "1", "2"]).is_err());
    assert!(
        parse(&["job", "cancel", "12", "--wait"]).is_err(),
        "waiting is the default: no --wait"
    );
}

#[test]
fn job_pause_and_resume_take_a_job() {
    match parse(&["job", "pause", "12"]) {
        Ok(Command::Job {
            command: JobCommand::Pause { id },
            ..
        }) => assert_eq!(id, "12"),
        other => panic!("{other:?}"),
    }
    match parse(&["job", "resume", "12", "--output", "json"]) {
        Ok(Command::Job {
            command: JobCommand::Resume { id },
            client,
        }) => {
            assert_eq!(id, "12");
            assert_eq!(client.output, OutputFormat::Json);
        }
        other => panic!("{other:?}"),
    }
    for command in ["pause", "resume"] {
        assert!(
            parse(&["job", command]).is_err(),
            "{command}: the job is required"
        );
        assert!(parse(&["job", command, "1", "2"]).is_err(), "{command}");
        assert!(
            parse(&["job", command, "12", "--wait"]).is_err(),
            "{command}: nothing to follow"
        );
    }
}

#[test]
fn job_rate_takes_a_rate_per_second_zero_or_default() {
    let rate = |text: &str| match parse(&["job", "rate", "12", text]) {
        Ok(Command::Job {
            command: JobCommand::Rate { id, rate },
            ..
        }) => {
            assert_eq!(id, "12");
            rate
        }
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(rate("64 MiB"), CopyRate::PerSecond(64 << 20));
    assert_eq!(rate("64MiB"), CopyRate::PerSecond(64 << 20));
    assert_eq!(rate("67108864"), CopyRate::PerSecond(67108864));
    assert_eq!(rate("0"), CopyRate::PerSecond(0), "unthrottled");
    assert_eq!(rate("default"), CopyRate::Default);
    assert_eq!(rate("Default"), CopyRate::Default);
    assert_eq!(CopyRate::Default.bytes_per_second(), None, "sent as null");
    assert_eq!(CopyRate::PerSecond(0).bytes_per_second(), Some(0));
    let err = parse(&["job", "rate", "12", "fast"]).expect_err("not a rate");
    assert!(
        err.to_string().contains(
            "'fast' is not a rate: give bytes per second, e.g. \"64 MiB\" or 67108864, 0 \
             (unthrottled) or default (the service's movement_rate)"
        ),
        "{err}"
    );
    assert!(
        parse(&["job", "rate", "12"]).is_err(),
        "the rate is required"
    );
    assert!(parse(&["job", "rate"]).is_err());
    assert!(parse(&["job", "rate", "12", "1 MiB", "2 MiB"]).is_err());
}

#[test]
fn user_commands_take_passwords_from_files_never_from_a_flags_value() {
    match parse(&[
        "user",
        "create",
        "bob@example.com",
        "--password-file",
        "pw",
        "--admin",
    ]) {
        Ok(Command::User {
            command:
                UserCommand::Create {
                    email,
                    admin,
                    password,
                    ..
                },
        }) => {
            assert_eq!(email, "bob@example.com");
            assert!(admin);
            assert_eq!(password.password_file, Some(PathBuf::from("pw")));
        }
        other => panic!("{other:?}"),
    }
    for args in [
        &["user", "create", "bob@example.com", "--password", "secret"][..],
        &[
            "user",
            "reset-password",
            "bob@example.com",
            "--password",
            "secret",
        ],
        &["user", "passwd", "--current-password", "secret"],
    ] {
        assert!(parse(args).is_err(), "{args:?}");
    }
    match parse(&["user", "passwd", "--current-password-file", "old"]) {
        Ok(Command::User {
            command:
                UserCommand::Passwd {
                    current_password_file,
                    password,
                    ..
                },
        }) => {
            assert_eq!(current_password_file, Some(PathBuf::from("old")));
            assert_eq!(password.password_file, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn media_fail_takes_one_medium() {
    match parse(&["media", "fail", "d3"]) {
        Ok(Command::Media {
            command: MediaCommand::Fail { medium },
            ..
        }) => assert_eq!(medium, "d3"),
        other => panic!("{other:?}"),
    }
    assert!(parse(&["media", "fail"]).is_err());
    assert!(parse(&["media", "fail", "a", "b"]).is_err());
    assert!(matches!(
        parse(&["media", "list"]),
        Ok(Command::Media {
            command: MediaCommand::List,
            ..
        })
    ));
}

#[test]
fn media_add_needs_node_zone_directory_and_a_size_of_at_least_one() {
    match parse(&[
        "media",
        "add",
        "m7",
        "--node",
        "n",
        "--zone",
        "z",
        "--directory",
        "/srv/m7",
        "--size",
        "100",
    ]) {
        Ok(Command::Media {
            command:
                MediaCommand::Add {
                    id,
                    node,
                    zone,
                    directory,
                    size,
                },
            ..
        }) => {
            assert_eq!(
                (id.as_str(), node.as_str(), zone.as_str()),
                ("m7", "n", "z")
            );
            assert_eq!((directory, size), (PathBuf::from("/srv/m7"), 100));
        }
        other => panic!("{other:?}"),
    }
    assert!(parse(&["media", "add", "m7", "--node", "n", "--zone", "z"]).is_err());
    assert!(parse(&["media", "set", "m7", "--size", "0"]).is_err());
    assert!(matches!(
        parse(&["media", "set", "m7", "--size", "5"]),
        Ok(Command::Media {
            command: MediaCommand::Set { size: 5, .. },
            ..
        })
    ));
    assert!(matches!(
        parse(&["media", "remove", "m7"]),
        Ok(Command::Media {
            command: MediaCommand::Remove { .. },
            ..
        })
    ));
    assert!(matches!(
        parse(&["node", "remove", "h"]),
        Ok(Command::Node {
            command: NodeCommand::Remove { .. },
            ..
        })
    ));
}

#[test]
fn from_snapshot_is_volume_slash_snapshot() {
    match parse(&[
        "volume",
        "create",
        "c",
        "--size",
        "4",
        "--policy",
        "p",
        "--from-snapshot",
        "v/s1",
    ]) {
        Ok(Command::Volume {
            command: VolumeCommand::Create { from_snapshot, .. },
            ..
        }) => assert_eq!(
            from_snapshot,
            Some(SnapshotRef {
                volume: "v".into(),
                snapshot: "s1".into()
            })
        ),
        other => panic!("{other:?}"),
    }
    for bad in ["v", "v/", "/s", "v/s/x"] {
        let err = parse(&[
            "volume",
            "create",
            "c",
            "--size",
            "4",
            "--policy",
            "p",
            "--from-snapshot",
            bad,
        ])
        .expect_err(bad);
        assert!(
            err.to_string().contains("expected VOLUME/SNAPSHOT"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn node_add_needs_an_address_and_force_needs_a_file() {
    match parse(&[
        "node",
        "add",
        "host-7",
        "--address",
        "10.0.0.7",
        "--credential-file",
        "/tmp/c",
        "--force",
    ]) {
        Ok(Command::Node {
            command:
                NodeCommand::Add {
                    name,
                    address,
                    zone,
                    credential_file,
                    force,
                    role,
                },
            ..
        }) => {
            assert_eq!((name.as_str(), address.as_str()), ("host-7", "10.0.0.7"));
            assert_eq!(zone, None);
            assert_eq!(credential_file, Some(PathBuf::from("/tmp/c")));
            assert!(force);
            assert_eq!(role, svs_client::nodes::CredentialRole::Agent);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        parse(&["node", "add", "host-7"]).is_err(),
        "--address is required"
    );
    assert!(parse(&["node", "add", "h", "--address", "10.0.0.7", "--force"]).is_err());
    assert!(matches!(
        parse(&["node", "revoke", "h"]),
        Ok(Command::Node {
            command: NodeCommand::Revoke { .. },
            ..
        })
    ));
}

#[test]
fn attachment_get_defaults_to_the_live_volume() {
    match parse(&["attachment", "get", "db", "host-1"]) {
        Ok(Command::Attachment {
            command:
                AttachmentCommand::Get {
                    volume,
                    node,
                    snapshot,
                },
            ..
        }) => assert_eq!(
            (volume, node, snapshot),
            ("db".into(), "host-1".into(), "top".into())
        ),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        parse(&["attachment", "list"]),
        Ok(Command::Attachment {
            command: AttachmentCommand::List { volume: None },
            ..
        })
    ));
}

#[test]
fn snapshot_create_defaults_to_crash_consistency() {
    match parse(&["snapshot", "create", "v", "s1"]) {
        Ok(Command::Snapshot {
            command: SnapshotCommand::Create {
                consistency, wait, ..
            },
            ..
        }) => {
            assert_eq!(consistency, Consistency::Crash);
            assert!(!wait.wait);
        }
        other => panic!("{other:?}"),
    }
    assert!(parse(&["snapshot", "create", "v", "s1", "--consistency", "fuzzy"]).is_err());
    assert!(matches!(
        parse(&["snapshot", "list"]),
        Ok(Command::Snapshot {
            command: SnapshotCommand::List { volume: None },
            ..
        })
    ));
    assert!(
        parse(&["snapshot", "attach", "v", "s1"]).is_err(),
        "--node is required"
    );
}

#[test]
fn every_argument_has_a_help_line() {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if arg.is_hide_set() || id == "help" || id == "version" {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{path} {id}"));
            }
        }
        for sub in cmd.get_subcommands() {
            if !sub.is_hide_set() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
    }
    let mut missing = Vec::new();
    walk(&Cli::command(), "svs", &mut missing);
    assert!(missing.is_empty(), "arguments without help: {missing:#?}");
}

#[test]
fn client_options_belong_to_client_commands_only() {
    for args in [
        &["serve", "--output", "json"][..],
        &["serve", "--profile", "p"],
        &[
            "user", "add", "--email", "a@b.c", "--tenant", "t", "--output", "json",
        ],
        &[
            "user",
            "add",
            "--email",
            "a@b.c",
            "--tenant",
            "t",
            "--profile",
            "p",
        ],
        &["backup", "--out", "f", "--output", "json"],
        &["serve", "--ca-cert", "ca.pem"],
    ] {
        let err = parse(args).expect_err(&args.join(" "));
        assert_eq!(
            err.kind(),
            clap::error::ErrorKind::UnknownArgument,
            "{args:?}"
        );
    }
    for args in [
        &["volume", "list", "--output", "json"][..],
        &["volume", "--output", "json", "list"],
        &["job", "list", "--profile", "other", "--output", "json"],
        &["logout", "--profile", "other"],
        &["user", "list", "--output", "json"],
        &["volume", "list", "--ca-cert", "ca.pem", "--output", "json"],
        &["user", "disable", "bob@example.com", "--profile", "other"],
    ] {
        let command = parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let client = command.client_args().expect("a client command");
        assert!(
            client.output == OutputFormat::Json || client.profile == "other",
            "{args:?}: {client:?}"
        );
    }
}

#[test]
fn sizes_are_whole_gib_with_or_without_a_unit() {
    for (text, gib) in [
        ("20", 20),
        ("20G", 20),
        ("20g", 20),
        ("20GiB", 20),
        ("20 GiB", 20),
        ("20Gi", 20),
        ("2T", 2048),
        ("1TiB", 1024),
    ] {
        assert_eq!(parse_size_gib(text), Ok(gib), "{text}");
    }
    assert_eq!(
        parse_size_gib("20GB"),
        Err("'20GB': sizes are in binary units; write 20G or 20GiB (20 GiB)".into())
    );
    for bad in [
        "",
        "0",
        "0G",
        "G",
        "1.5G",
        "-1",
        "20M",
        "20 apples",
        "99999999999999999999T",
    ] {
        assert!(parse_size_gib(bad).is_err(), "{bad}");
    }
    match parse(&["volume", "resize", "db", "--size", "30GiB"]) {
        Ok(Command::Volume {
            command: VolumeCommand::Resize { size, .. },
            ..
        }) => assert_eq!(size, 30),
        other => panic!("{other:?}"),
    }
}
