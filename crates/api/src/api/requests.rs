//! Request bodies and queries → the services' typed commands, with the 400
//! messages clients see. Checks here need nothing but the request; rules
//! that need the store are the services'.

use super::parse::{bad, opt_str, Body, ParseResult};
use std::collections::BTreeMap;

/// A command read from a JSON object body.
pub trait FromBody: Sized {
    fn from_body(body: &Body) -> ParseResult<Self>;
}

/// A command read from the query string.
pub trait FromQuery: Sized {
    fn from_query(query: &BTreeMap<String, String>) -> ParseResult<Self>;
}

/// A string field where `""` means "not given".
pub(super) fn opt_non_empty<'a>(body: &'a Body, key: &str) -> ParseResult<Option<&'a str>> {
    Ok(opt_str(body, key)?.filter(|s| !s.is_empty()))
}

/// A boolean query parameter: `true` or `false`.
pub(super) fn query_bool(query: &BTreeMap<String, String>, key: &str) -> ParseResult<Option<bool>> {
    match query.get(key).map(String::as_str) {
        None => Ok(None),
        Some("true") => Ok(Some(true)),
        Some("false") => Ok(Some(false)),
        Some(_) => Err(bad(format!("{key} must be true or false"))),
    }
}

/// A paging parameter (`page`, `count`): `default` when absent, else a whole
/// number from 1 to `max`.
pub(super) fn page_number(
    query: &BTreeMap<String, String>,
    key: &str,
    default: u32,
    max: u32,
) -> ParseResult<u32> {
    match query.get(key) {
        None => Ok(default),
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| bad(format!("{key} must be a whole number from 1 to {max}"))),
    }
}

/// `?force=true|false` (absent: false).
pub(super) fn force_query(query: &BTreeMap<String, String>) -> ParseResult<bool> {
    match query.get("force").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        // Strict like every boolean of the API: `?force=` is not `true`.
        Some(_) => Err(bad("force must be true or false")),
    }
}

/// Bodies of the node and agent routes (svs extensions) take only their
/// own fields: an unknown one is a 400, not silently dropped.
pub(super) fn only_fields(body: &Body, known: &[&str]) -> ParseResult<()> {
    match body.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(bad(format!(
            "unknown field '{key}' (accepted: {})",
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::agents::*;
    use crate::api::attachments::*;

    use crate::api::parse::body;
    use serde_json::json;
    use serde_json::Value;
    use svs_control::service::attributes::*;
    use svs_control::service::commands::*;
    use svs_domain::{Consistency, JobState};

    fn message<T: std::fmt::Debug>(r: ParseResult<T>) -> String {
        r.expect_err("refused").message
    }

    #[test]
    fn omitted_policy_fields_are_left_to_the_service() {
        let p = CreatePolicy::from_body(&body(json!({"name": "gold"}))).unwrap();
        assert_eq!(p.resiliency, ResiliencyLevels::default());
        assert_eq!(p.settings, PolicySettings::default());
    }

    #[test]
    fn resiliency_above_two_is_refused() {
        assert_eq!(
            message(CreatePolicy::from_body(&body(
                json!({"name": "x", "resiliencyzone": 3})
            ))),
            "resiliencyzone must be a whole number from 0 to 2"
        );
    }

    #[test]
    fn wrong_policy_types_and_enum_values_are_refused() {
        for b in [
            json!({"name": "x", "encryption": "yes"}),
            json!({"name": "x", "capacityoptimization": "fast"}),
            json!({"name": "bad name"}),
            json!({"name": ""}),
            json!({}),
        ] {
            assert!(CreatePolicy::from_body(&body(b.clone())).is_err(), "{b}");
        }
        assert_eq!(
            message(UpdatePolicy::from_body(&body(json!({"name": ""})))),
            "policy name must be 1 to 63 characters of letters, digits, '.', '_' or '-'"
        );
    }

    #[test]
    fn a_resize_keeps_the_writable_fields_sent_and_refuses_non_strings() {
        let r = ResizeVolume::from_body(&body(json!({
            "size": 20, "name": "v", "zone": "", "policy": null, "state": "Ready", "flavor": "regular"
        })))
        .unwrap();
        assert_eq!(r.size, 20);
        assert!(!r.allow_data_movement);
        assert_eq!(
            r.repeated,
            vec![
                (FixedVolumeField::Name, "v".to_string()),
                (FixedVolumeField::Flavor, "regular".to_string())
            ]
        );
        assert_eq!(
            message(ResizeVolume::from_body(&body(
                json!({"size": 20, "type": 1})
            ))),
            "type cannot be changed: only size and allowdatamovement can be modified"
        );
    }

    #[test]
    fn a_volume_from_a_whole_volume_or_of_an_unknown_flavor_is_refused() {
        let base = json!({"name": "v", "size": 1, "policy": "p"});
        assert!(CreateVolume::from_body(&body(base.clone())).is_ok());
        let mut with = base.clone();
        with["contentvolume"] = json!("other");
        assert_eq!(
            message(CreateVolume::from_body(&body(with.clone()))),
            "contentvolume: creating a volume from a whole volume is not supported; \
             name one of its snapshots in contentsnapshot"
        );
        with["contentsnapshot"] = json!("daily");
        let clone = CreateVolume::from_body(&body(with)).unwrap();
        assert_eq!(
            clone.clone_from,
            Some(CloneFrom {
                volume: "other".into(),
                snapshot: "daily".into()
            })
        );
        let mut with = base;
        with["flavor"] = json!("fast");
        assert_eq!(
            message(CreateVolume::from_body(&body(with))),
            "flavor must be \"regular\" or \"filedirect\""
        );
    }

    #[test]
    fn a_file_volume_gets_ext4_unless_xfs_is_chosen_and_a_block_volume_none() {
        let fs = |b: Value| {
            CreateVolume::from_body(&body(b))
                .unwrap()
                .attributes
                .filesystem
        };
        assert_eq!(fs(json!({"name": "v", "size": 1, "policy": "p"})), None);
        assert_eq!(
            fs(json!({"name": "v", "size": 1, "policy": "p", "type": "file"})),
            Some(Filesystem::Ext4)
        );
        assert_eq!(
            fs(json!({"name": "v", "size": 1, "policy": "p", "type": "file", "filesystem": "xfs"})),
            Some(Filesystem::Xfs)
        );
        assert_eq!(
            message(CreateVolume::from_body(&body(
                json!({"name": "v", "size": 1, "policy": "p", "filesystem": "ext4"})
            ))),
            "filesystem: only a volume of type \"file\" has one"
        );
        assert_eq!(
            message(CreateVolume::from_body(&body(
                json!({"name": "v", "size": 1, "policy": "p", "type": "file", "filesystem": "zfs"})
            ))),
            "filesystem must be \"ext4\" or \"xfs\""
        );
    }

    #[test]
    fn a_snapshot_keeps_its_stored_fields_and_ignores_read_only_ones_of_their_type() {
        let s = CreateSnapshot::from_body(&body(json!({
            "name": "daily", "consistency": "application", "consistencygroupname": "cg",
            "policy": true, "volumesize": 7, "used": 1e20, "snapshotid": "", "state": "Ready"
        })))
        .unwrap();
        assert_eq!(s.name.as_str(), "daily");
        assert_eq!(s.consistency, Consistency::Application);
        assert_eq!(
            Value::Object(s.attributes),
            json!({"policy": true, "consistencygroupname": "cg"})
        );
        let refused = |v: Value| message(CreateSnapshot::from_body(&body(v)));
        assert_eq!(
            refused(json!({"name": "s", "consistency": "crash", "progress": 1.5})),
            "progress must be a whole number"
        );
        assert_eq!(
            refused(json!({"name": "s", "consistency": "crash", "volumeid": 3})),
            "volumeid must be a string"
        );
        assert_eq!(
            refused(json!({"name": "s", "consistency": "crash", "policy": "yes"})),
            "policy must be true or false"
        );
        let m = ModifySnapshot::from_body(&body(json!({"name": "", "targetsecret": "x"}))).unwrap();
        assert!(m.name.is_none(), "an empty name changes nothing");
        assert_eq!(Value::Object(m.attributes), json!({"targetsecret": "x"}));
    }

    #[test]
    fn an_attachment_change_must_name_readonly_or_mountpoint() {
        let parse = |v: Value| ModifyAttachment::from_body(&body(v));
        for nothing in [
            json!({}),
            json!({"": null}),
            json!({"node": "n", "volumename": "v", "allocated_resources": 5}),
        ] {
            assert_eq!(
                message(parse(nothing.clone())),
                NOTHING_TO_CHANGE,
                "{nothing}"
            );
        }
        assert_eq!(
            message(parse(json!({"readonly": null}))),
            "readonly must be true or false"
        );
        let m = parse(json!({"mountpoint": ""})).unwrap();
        assert_eq!((m.readonly, m.mountpoint.as_deref()), (None, Some("")));
        assert_eq!(
            parse(json!({"readonly": true})).unwrap().readonly,
            Some(true)
        );
    }

    #[test]
    fn node_addresses_must_be_ip_addresses_or_empty() {
        let parse = |v: Value| SetNodeAddress::from_body(&body(v));
        assert_eq!(
            parse(json!({"address": "10.0.0.5"})).unwrap().address,
            Some("10.0.0.5".parse().unwrap())
        );
        assert_eq!(parse(json!({"address": ""})).unwrap().address, None);
        assert_eq!(message(parse(json!({}))), "address is required");
        assert_eq!(
            message(parse(json!({"address": "host"}))),
            "address 'host' is not an IP address"
        );
    }

    #[test]
    fn job_queries_check_numbers_and_states() {
        let q = |pairs: &[(&str, &str)]| {
            ListJobs::from_query(
                &pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let all = q(&[("type", ""), ("state", "Done")]).unwrap();
        assert_eq!(all.kind, None);
        assert_eq!(all.state, Some(JobState::Done));
        assert_eq!((all.page, all.count), (1, ListJobs::DEFAULT_COUNT));
        assert_eq!(
            message(q(&[("count", "1001")])),
            "count must be a whole number from 1 to 1000"
        );
        assert!(q(&[("state", "done")]).is_err());
    }

    #[test]
    fn agent_polls_wait_zero_to_sixty_seconds() {
        let q = |pairs: &[(&str, &str)]| {
            AgentPoll::from_query(
                &pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let poll = q(&[]).unwrap();
        assert_eq!((poll.revision, poll.wait.as_secs()), (None, 0));
        let poll = q(&[("revision", "ab12"), ("wait", "60")]).unwrap();
        assert_eq!(
            (poll.revision.as_deref(), poll.wait.as_secs()),
            (Some("ab12"), 60)
        );
        for bad in ["61", "-1", "1.5", "soon"] {
            assert_eq!(
                message(q(&[("wait", bad)])),
                "wait must be a whole number of seconds from 0 to 60",
                "{bad}"
            );
        }
    }

    #[test]
    fn host_reports_take_known_fields_and_null_clears() {
        let parse = |v: Value| ReportHostState::from_body(&body(v));
        let r = parse(
            json!({"hoststate": "Mounted", "filesystemsize": 6, "growerror": null, "growjob": 9}),
        )
        .unwrap();
        assert_eq!(r.state, HostState::Mounted);
        assert_eq!((r.filesystem_size, r.grow_error), (Some(6), None));
        assert_eq!(r.grow_job, Some(9));
        assert_eq!(
            message(parse(json!({"hoststate": "Mounted", "growjob": -1}))),
            "growjob must be a whole number from 0 to 9223372036854775807"
        );
        assert_eq!(
            message(parse(json!({"hoststate": "Mounted", "extra": 1}))),
            "unknown field 'extra' (accepted: hoststate, hostdetail, device, mountpath, filesystembytes, filesystemsize, growerror, growjob)"
        );
        assert_eq!(
            message(parse(json!({"hoststate": "Mounted", "growerror": 5}))),
            "growerror must be a string or null"
        );
        assert!(parse(json!({"hoststate": "mounted"})).is_err());
    }

    #[test]
    fn new_nodes_need_a_name_and_an_ip_address() {
        let parse = |v: Value| CreateNode::from_body(&body(v));
        let n = parse(json!({"name": "host-7", "address": "::1"})).unwrap();
        assert_eq!((n.name.as_str(), n.zone.as_str()), ("host-7", ""));
        assert_eq!(
            message(parse(
                json!({"name": "host-7", "address": "::1", "zone": "a b"})
            )),
            "zone name must be 1 to 63 characters of letters, digits, '.', '_' or '-'"
        );
        assert_eq!(
            message(parse(json!({"address": "::1"}))),
            "name is required"
        );
        assert!(IssueCredential::from_body(&body(json!({}))).is_ok());
        assert!(IssueCredential::from_body(&body(json!({"a": 1}))).is_err());
    }
}
