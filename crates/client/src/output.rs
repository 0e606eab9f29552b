//! What the commands print: aligned tables for people, the server's JSON
//! as is for scripts.

use serde_json::Value;
use svs_wire::views::{AttachmentView, SliceView, VolumeView};

/// `--output`: a table (default) or the server's JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Table,
    Json,
}

/// A column: header, the field it shows and how.
pub struct Column {
    pub header: &'static str,
    pub field: &'static str,
    pub show: Show,
    /// Left out of a table where no row has a value (e.g. FILESYSTEM in a
    /// list of block volumes).
    pub optional: bool,
}

/// How a column shows its field.
pub enum Show {
    /// As text, with this suffix appended to non-empty values (e.g. " GiB").
    Text(&'static str),
    /// A byte count as B, KiB, MiB…
    Bytes,
    /// A clone's source snapshot as "volume@snapshot" (the field is the
    /// snapshot's name, `contentvolume` the volume's); empty for others.
    CloneSource,
    /// A boolean as "yes" / "no".
    YesNo,
    /// As text, "-" when unset (e.g. no agent has reported yet).
    OrDash,
}

const fn shown(header: &'static str, field: &'static str, show: Show) -> Column {
    Column {
        header,
        field,
        show,
        optional: false,
    }
}

pub const fn col(header: &'static str, field: &'static str) -> Column {
    shown(header, field, Show::Text(""))
}

pub const fn gib(header: &'static str, field: &'static str) -> Column {
    shown(header, field, Show::Text(" GiB"))
}

pub const fn bytes(header: &'static str, field: &'static str) -> Column {
    shown(header, field, Show::Bytes)
}

pub const fn clone_source(header: &'static str) -> Column {
    shown(header, "contentsnapshot", Show::CloneSource)
}

pub const fn yes_no(header: &'static str, field: &'static str) -> Column {
    shown(header, field, Show::YesNo)
}

pub const fn or_dash(header: &'static str, field: &'static str) -> Column {
    shown(header, field, Show::OrDash)
}

/// A column only shown when some row has a value.
pub const fn optional(column: Column) -> Column {
    Column {
        optional: true,
        ..column
    }
}

pub const VOLUME_COLUMNS: &[Column] = &[
    col("NAME", "name"),
    col("TYPE", "type"),
    optional(col("FILESYSTEM", "filesystem")),
    gib("SIZE", "size"),
    col("POLICY", "policy"),
    col("ZONE", "zone"),
    col("STATE", "state"),
    col("STATUS", "status"),
    col("PROGRESS", "progress"),
    clone_source("SOURCE"),
];

pub const SNAPSHOT_COLUMNS: &[Column] = &[
    col("VOLUME", "volumename"),
    col("NAME", "name"),
    col("TIME", "time"),
    gib("VOLUMESIZE", "volumesize"),
    bytes("USED", "used"),
    col("CONSISTENCY", "consistency"),
    col("STATE", "state"),
    col("ATTACHMENTS", "numberofattachments"),
];

pub const POLICY_COLUMNS: &[Column] = &[
    col("NAME", "name"),
    col("MEDIA", "resiliencymedia"),
    col("NODE", "resiliencynode"),
    col("ZONE", "resiliencyzone"),
    col("CAPACITY", "capacityoptimization"),
    col("CREATED BY", "createdbyuseremail"),
];

pub const MEDIA_COLUMNS: &[Column] = &[
    col("MEDIA", "mediaid"),
    col("NODE", "node"),
    col("ZONE", "zone"),
    gib("SIZE", "size"),
    gib("FREE", "freesize"),
    bytes("WRITTEN", "writtenbytes"),
    col("VOLUMES", "volumescount"),
    col("MANAGED BY", "managedby"),
    col("STATE", "state"),
];

pub const NODE_COLUMNS: &[Column] = &[
    col("NAME", "name"),
    col("ZONE", "zone"),
    col("ADDRESS", "address"),
    col("ROLE", "role"),
    gib("SIZE", "size"),
    gib("FREE", "freesize"),
    col("MEDIA", "mediacount"),
    col("COPIES", "copiescount"),
    optional(or_dash("LAST HEARTBEAT", "lastheartbeat")),
    col("VOLUMES", "volumescount"),
    col("MANAGED BY", "managedby"),
    col("STATE", "state"),
    yes_no("AGENT", "agentcredential"),
    or_dash("AGENT SEEN", "agentseen"),
];

/// The copies on a node's media (`svs node get`).
pub const NODE_COPY_COLUMNS: &[Column] = &[
    col("VOLUME", "volumename"),
    col("COPY", "copy"),
    col("COLUMN", "column"),
    col("MEDIA", "media"),
    gib("SIZE", "size"),
    col("STATE", "state"),
];

/// Attachments; HOST is what the node's agent last reported.
pub const ATTACHMENT_COLUMNS: &[Column] = &[
    col("VOLUME", "volumename"),
    col("SNAPSHOT", "snapshotname"),
    col("NODE", "node"),
    col("STATE", "state"),
    yes_no("READONLY", "readonly"),
    or_dash("HOST", "hoststate"),
    optional(gib("FS SIZE", "filesystemsize")),
    col("URI", "uri"),
];

pub const JOB_COLUMNS: &[Column] = &[
    col("ID", "id"),
    col("TYPE", "type"),
    col("NAME", "objectname"),
    col("OBJECT", "object"),
    col("STATE", "state"),
    col("PROGRESS", "progress"),
    col("STATUS", "status"),
    col("START", "starttime"),
    col("END", "endtime"),
];

/// A scalar as text (strings without quotes; arrays joined by "; ").
pub fn text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join("; "),
        other => other.to_string(),
    }
}

pub use svs_domain::units::human_bytes;

/// Rows of strings as aligned columns (two spaces apart, no trailing blanks).
pub fn render_rows(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0usize; width];
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count();
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A list of objects as a table with a header line.
pub fn render_table(items: &Value, columns: &[Column]) -> String {
    let items = items.as_array().map(Vec::as_slice).unwrap_or(&[]);
    let columns: Vec<&Column> = columns
        .iter()
        .filter(|c| !c.optional || items.iter().any(|i| !text(&i[c.field]).is_empty()))
        .collect();
    let mut rows = vec![columns.iter().map(|c| c.header.to_string()).collect()];
    for item in items {
        rows.push(columns.iter().map(|c| cell(item, c)).collect());
    }
    render_rows(&rows)
}

/// What one column shows of one item.
fn cell(item: &Value, column: &Column) -> String {
    let value = text(&item[column.field]);
    match column.show {
        Show::Bytes => item[column.field].as_u64().map_or(value, human_bytes),
        Show::CloneSource if value.is_empty() => value,
        Show::CloneSource => format!("{}@{value}", text(&item["contentvolume"])),
        Show::YesNo => match item[column.field].as_bool() {
            Some(true) => "yes".into(),
            Some(false) => "no".into(),
            None => value,
        },
        Show::OrDash if value.is_empty() => "-".into(),
        Show::OrDash => value,
        Show::Text(_) if value.is_empty() => value,
        Show::Text(suffix) => format!("{value}{suffix}"),
    }
}

/// One object as "field  value" lines, one per field.
pub fn render_object(item: &Value) -> String {
    let rows: Vec<Vec<String>> = match item.as_object() {
        Some(map) => map
            .iter()
            .map(|(k, v)| match v {
                // Job details: one line each, under the first.
                Value::Array(items) if !items.is_empty() => {
                    let lines: Vec<String> = items.iter().map(text).collect();
                    vec![k.clone(), lines.join("\n")]
                }
                _ => vec![k.clone(), text(v)],
            })
            .collect(),
        None => vec![vec![text(item)]],
    };
    render_fields(&rows)
}

/// "key  value" rows; a value's further lines stay in the value column.
fn render_fields(rows: &[Vec<String>]) -> String {
    let rendered = render_rows(
        &rows
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(v) = r.get_mut(1) {
                    *v = v.lines().next().unwrap_or("").to_string();
                }
                r
            })
            .collect::<Vec<_>>(),
    );
    let key_width = rows.iter().map(|r| r[0].chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (line, row) in rendered.lines().zip(rows) {
        out.push_str(line);
        out.push('\n');
        if let Some(v) = row.get(1) {
            for extra in v.lines().skip(1) {
                out.push_str(&" ".repeat(key_width + 2));
                out.push_str(extra);
                out.push('\n');
            }
        }
    }
    out
}

/// What `volume get` adds to a slice's line when the copy is not healthy:
/// lost, and for a stale copy the generation it missed (it is not read
/// until rebuilt).
fn copy_health(slice: &SliceView) -> String {
    if slice.health != "Lost" {
        return String::new();
    }
    match slice.stalegeneration {
        Some(g) => format!(": Lost, stale (missed generation {g}; not read until rebuilt)"),
        None => ": Lost".to_string(),
    }
}

/// `volume get` for people: what the volume is, where each copy of each
/// column lives, and where it is attached; `--output json` gives the
/// server's object instead.
pub fn render_volume_summary(
    volume: &VolumeView,
    slices: &[SliceView],
    attachments: &[AttachmentView],
) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |k: &str, v: String| rows.push(vec![k.to_string(), v]);
    row(
        "Volume",
        format!("{} (id {})", volume.name, volume.volumeid),
    );
    match &volume.filesystem {
        Some(fs) => row("Type", format!("{}, {fs} filesystem", volume.kind)),
        None => row("Type", volume.kind.clone()),
    }
    row(
        "Size",
        format!(
            "{} GiB (a resize may grow it to {} GiB)",
            volume.size, volume.maxsize
        ),
    );
    if let Some(line) = filesystem_line(volume) {
        row("Filesystem", line);
    }
    row("Policy", volume.policy.clone());
    if let Some(zone) = volume.zone.as_ref().filter(|z| !z.is_empty()) {
        row("Zone", zone.clone());
    }
    row(
        "State",
        if volume.status == "Online" {
            volume.state.clone()
        } else {
            format!("{}: {} ({}%)", volume.state, volume.status, volume.progress)
        },
    );
    if let Some(job) = &volume.volumerecoveryjob {
        row("Recovery", format!("job {job}"));
    }
    if !volume.contentvolume.is_empty() {
        row(
            "Cloned from",
            format!("{}@{}", volume.contentvolume, volume.contentsnapshot),
        );
    }
    let copies = slices.iter().map(|s| s.copy).max();
    let columns = slices.iter().map(|s| s.column).max();
    match (copies, columns) {
        (Some(copies), Some(columns)) => {
            let placement: Vec<String> = slices
                .iter()
                .map(|s| {
                    // Named as the API, job statuses and the console name it.
                    let (copy, column) = (s.copy, s.column);
                    format!(
                        "slice c{copy}-k{column} (copy {copy}, column {column}): {} GiB on medium {} (node {}, zone {}){}",
                        s.size,
                        s.media,
                        s.node,
                        s.zone,
                        copy_health(s),
                    )
                })
                .collect();
            row(
                "Slices",
                format!(
                    "{} {} of {} {}\n{}",
                    copies + 1,
                    if copies == 0 { "copy" } else { "copies" },
                    columns + 1,
                    if columns == 0 { "column" } else { "columns" },
                    placement.join("\n")
                ),
            );
        }
        _ => row("Slices", "none placed yet".to_string()),
    }
    if attachments.is_empty() {
        row("Attached", "no".to_string());
    } else {
        let lines: Vec<String> = attachments
            .iter()
            .map(|a| {
                let snapshot = &a.snapshotname;
                let what = if snapshot.is_empty() || snapshot == "top" {
                    String::new()
                } else {
                    format!("snapshot {snapshot} ")
                };
                let mode = if a.readonly {
                    "read-only"
                } else {
                    "read-write"
                };
                let mut host = match &a.hoststate {
                    Some(h) => format!(", host {h}"),
                    None => String::new(),
                };
                if let Some(fs) = a.filesystemsize {
                    if fs < a.volumesize {
                        host.push_str(&format!(", filesystem {fs} GiB of {} GiB", a.volumesize));
                    }
                }
                format!("{what}to {} {mode}: {} {}{host}", a.node, a.state, a.uri)
            })
            .collect();
        row("Attached", lines.join("\n"));
    }
    render_fields(&rows)
}

/// The filesystem's size against the volume's: a growth that failed
/// leaves it smaller, which the summary says with the way out.
fn filesystem_line(volume: &VolumeView) -> Option<String> {
    let (fs, size) = (volume.filesystemsize?, volume.size);
    if fs >= size {
        return Some(format!("fills the volume ({fs} GiB)"));
    }
    let why = volume
        .filesystemerror
        .as_ref()
        .map(|e| format!(": {e}"))
        .unwrap_or_default();
    Some(format!(
        "{fs} GiB, smaller than the volume's {size} GiB (its growth failed{why}); \
         grow it with: svs volume grow-filesystem {}",
        volume.name
    ))
}

/// A typed answer as the server sent it, pretty-printed.
pub fn render_view<T: serde::Serialize>(view: &T) -> String {
    render_json(&serde_json::to_value(view).unwrap_or_default())
}

/// The server's JSON, pretty-printed.
pub fn render_json(value: &Value) -> String {
    let mut s = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `fields` over a whole view's required ones, read as the client reads
    /// the server's answer.
    fn view<T: serde::de::DeserializeOwned>(base: Value, fields: &Value) -> T {
        let mut whole = base;
        for (k, v) in fields.as_object().expect("an object") {
            whole[k] = v.clone();
        }
        serde_json::from_value(whole).expect("a whole view")
    }

    fn volume(fields: Value) -> VolumeView {
        let base = json!({"name": "", "volumeid": "", "type": "block", "contentvolume": "",
            "contentsnapshot": "", "size": 0, "maxsize": 0, "policy": "", "consistencygroup": "",
            "node": "", "zones": [], "writtenbytes": null, "zonereplica": "", "volumegroupid": "",
            "replicationnode": "", "state": "", "status": "", "progress": 0,
            "allowdatamovement": false, "flavor": "regular", "filesystemprovisioned": false});
        view(base, &fields)
    }

    fn slices(items: Value) -> Vec<SliceView> {
        let base = json!({"sliceid": 0, "name": "", "copy": 0, "column": 0, "media": "",
            "node": "", "zone": "", "size": 0, "health": "Healthy"});
        let items = items.as_array().expect("an array");
        items.iter().map(|s| view(base.clone(), s)).collect()
    }

    fn attachments(items: Value) -> Vec<AttachmentView> {
        let base = json!({"volumename": "", "volumeid": "", "snapshotname": "top",
            "snapshotid": "top", "node": "", "state": "", "status": "", "progress": 100,
            "mountpoint": "", "readonly": false, "exportname": "", "uri": "", "manager": "agent",
            "volumesize": 0});
        let items = items.as_array().expect("an array");
        items.iter().map(|a| view(base.clone(), a)).collect()
    }

    #[test]
    fn tables_are_aligned() {
        let items = json!([
            {"mediaid": "a1", "node": "node-a", "zone": "z", "size": 10, "freesize": 2, "volumescount": 1, "state": "Ready"},
            {"mediaid": "media-long", "node": "n", "zone": "zone-b", "size": 200, "freesize": 200, "volumescount": 0, "state": "Ready"},
        ]);
        let out = render_table(&items, MEDIA_COLUMNS);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("MEDIA       NODE    ZONE    SIZE     FREE"));
        assert!(lines[1].starts_with("a1          node-a  z       10 GiB   2 GiB"));
        assert!(lines[2].starts_with("media-long  n       zone-b  200 GiB  200 GiB"));
    }

    #[test]
    fn snapshot_tables_show_used_bytes_in_binary_units() {
        let out = render_table(
            &json!([{"volumename": "v", "name": "s1", "used": 131072, "volumesize": 4}]),
            SNAPSHOT_COLUMNS,
        );
        let row = out.lines().nth(1).unwrap_or_default();
        assert!(row.starts_with("v       s1"), "{out}");
        assert!(row.contains("4 GiB       128.0 KiB"), "{out}");
    }

    #[test]
    fn a_clone_shows_its_source_snapshot() {
        let out = render_table(
            &json!([
                {"name": "c", "type": "block", "size": 6, "policy": "p", "state": "Ready",
                 "status": "Online", "progress": 100, "contentvolume": "v", "contentsnapshot": "s2"},
                {"name": "v", "type": "block", "size": 4, "policy": "p", "state": "Degraded",
                 "status": "Online", "progress": 100, "contentvolume": "", "contentsnapshot": ""},
            ]),
            VOLUME_COLUMNS,
        );
        assert_eq!(
            out,
            "NAME  TYPE   SIZE   POLICY  ZONE  STATE     STATUS  PROGRESS  SOURCE\n\
             c     block  6 GiB  p             Ready     Online  100       v@s2\n\
             v     block  4 GiB  p             Degraded  Online  100\n"
        );
    }

    #[test]
    fn the_filesystem_column_is_shown_only_where_a_volume_has_one() {
        let block = json!({"name": "b", "type": "block", "size": 1, "policy": "p", "state": "Ready",
                           "status": "Online", "progress": 100, "filesystem": null});
        let file = json!({"name": "f", "type": "file", "size": 2, "policy": "p", "state": "Ready",
                          "status": "Online", "progress": 100, "filesystem": "xfs"});
        let only_block = render_table(&json!([block.clone()]), VOLUME_COLUMNS);
        assert!(!only_block.contains("FILESYSTEM"), "{only_block}");
        let both = render_table(&json!([block, file]), VOLUME_COLUMNS);
        assert_eq!(
            both,
            "NAME  TYPE   FILESYSTEM  SIZE   POLICY  ZONE  STATE  STATUS  PROGRESS  SOURCE\n\
             b     block              1 GiB  p             Ready  Online  100\n\
             f     file   xfs         2 GiB  p             Ready  Online  100\n"
        );
    }

    #[test]
    fn a_volume_summary_shows_lost_and_stale_copies() {
        let volume_fields = json!({"name": "m", "volumeid": "i", "type": "block", "size": 2,
                            "maxsize": 20, "policy": "p", "state": "Degraded",
                            "status": "Online", "progress": 100});
        let slice = |copy: u64, media: &str, health: &str, stale: Value| {
            json!({"copy": copy, "column": 0, "size": 2, "media": media, "node": "n",
                   "zone": "z", "health": health, "stalegeneration": stale})
        };
        let slice_items = json!([
            slice(0, "a1", "Lost", json!(3)),
            slice(1, "b1", "Healthy", Value::Null),
            slice(2, "c1", "Lost", Value::Null),
        ]);
        let out = render_volume_summary(&volume(volume_fields), &slices(slice_items), &[]);
        assert!(
            out.contains(
                "slice c0-k0 (copy 0, column 0): 2 GiB on medium a1 (node n, zone z): Lost, \
                 stale (missed generation 3; not read until rebuilt)\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("slice c1-k0 (copy 1, column 0): 2 GiB on medium b1 (node n, zone z)\n"),
            "{out}"
        );
        assert!(
            out.contains(
                "slice c2-k0 (copy 2, column 0): 2 GiB on medium c1 (node n, zone z): Lost\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn a_volume_summary_shows_a_filesystem_smaller_than_the_volume_and_the_way_out() {
        let volume_fields = json!({"name": "g", "volumeid": "i", "type": "file", "filesystem": "ext4",
                            "size": 4, "maxsize": 40, "policy": "p", "state": "Ready",
                            "status": "Online", "progress": 100, "filesystemsize": 2,
                            "filesystemerror": "resize2fs: Permission denied to resize filesystem"});
        let attached = json!([{"node": "host-1", "state": "Attached", "uri": "nbd://h:1/e",
                               "hoststate": "Mounted", "volumesize": 4, "filesystemsize": 2}]);
        let out = render_volume_summary(&volume(volume_fields), &[], &attachments(attached));
        assert!(
            out.contains(
                "2 GiB, smaller than the volume's 4 GiB (its growth failed: resize2fs: \
                 Permission denied to resize filesystem); grow it with: svs volume \
                 grow-filesystem g"
            ),
            "{out}"
        );
        assert!(
            out.contains("host Mounted, filesystem 2 GiB of 4 GiB"),
            "{out}"
        );
        let grown = json!({"name": "g", "size": 4, "filesystemsize": 4});
        assert_eq!(
            filesystem_line(&volume(grown)).as_deref(),
            Some("fills the volume (4 GiB)")
        );
        assert_eq!(
            filesystem_line(&volume(json!({"name": "b", "size": 4}))),
            None
        );
    }

    #[test]
    fn nodes_show_their_agent_and_attachments_the_host_state() {
        let out = render_table(
            &json!([
                {"name": "a", "zone": "z", "address": "10.0.0.1", "size": 0, "freesize": 0,
                 "mediacount": 0, "volumescount": 0, "state": "Online",
                 "agentcredential": true, "agentseen": "2026-11-23T21:00:00Z"},
                {"name": "b", "zone": "z", "address": "", "size": 0, "freesize": 0,
                 "mediacount": 0, "volumescount": 0, "state": "Online", "agentcredential": false},
            ]),
            NODE_COLUMNS,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].ends_with("STATE   AGENT  AGENT SEEN"), "{out}");
        assert!(
            lines[1].ends_with("Online  yes    2026-11-23T21:00:00Z"),
            "{out}"
        );
        assert!(lines[2].ends_with("Online  no     -"), "{out}");

        let out = render_table(
            &json!([
                {"volumename": "v", "snapshotname": "top", "node": "h", "state": "Attached",
                 "readonly": false, "hoststate": "Mounted", "uri": "nbd://x:1/e"},
                {"volumename": "v", "snapshotname": "s1", "node": "h", "state": "Attached",
                 "readonly": true, "hoststate": null, "uri": "nbd://x:1/f"},
            ]),
            ATTACHMENT_COLUMNS,
        );
        assert_eq!(
            out,
            "VOLUME  SNAPSHOT  NODE  STATE     READONLY  HOST     URI\n\
             v       top       h     Attached  no        Mounted  nbd://x:1/e\n\
             v       s1        h     Attached  yes       -        nbd://x:1/f\n"
        );
    }

    #[test]
    fn objects_show_every_field() {
        let out = render_object(&json!({"id": 3, "details": ["one", "two"], "state": "Error"}));
        assert_eq!(
            out,
            "details  one\n         two\nid       3\nstate    Error\n"
        );
    }

    #[test]
    fn a_volume_summary_shows_a_running_job_a_clone_and_a_snapshot_attachment() {
        let volume_fields = json!({"name": "c", "volumeid": "id-1", "type": "file", "filesystem": "xfs",
                            "size": 4, "maxsize": 40, "policy": "p", "zone": null, "state": "Resizing",
                            "status": "Moving slice 1 of 2", "progress": 40,
                            "contentvolume": "v", "contentsnapshot": "s1"});
        let attached = json!([{"snapshotname": "s2", "node": "h", "readonly": true,
                                  "state": "Attached", "uri": "nbd://x/e", "hoststate": "Mounted"}]);
        assert_eq!(
            render_volume_summary(&volume(volume_fields), &[], &attachments(attached)),
            "Volume       c (id id-1)\n\
             Type         file, xfs filesystem\n\
             Size         4 GiB (a resize may grow it to 40 GiB)\n\
             Policy       p\n\
             State        Resizing: Moving slice 1 of 2 (40%)\n\
             Cloned from  v@s1\n\
             Slices       none placed yet\n\
             Attached     snapshot s2 to h read-only: Attached nbd://x/e, host Mounted\n"
        );
    }
}
