//! Arguments several client commands share: `--wait`, where to attach,
//! sizes in GiB and `VOLUME/SNAPSHOT`.

use clap::Args;

/// Where and how `volume attach` and `attachment create` attach.
#[derive(Debug, Args)]
pub struct AttachTo {
    /// The node (host) it is attached to.
    #[arg(long)]
    pub node: String,
    /// Where the node's agent mounts a `file` volume (absolute path;
    /// default: under the agent's mount root).
    #[arg(long)]
    pub mountpoint: Option<String>,
    /// Attach read-only (writes are refused).
    #[arg(long)]
    pub readonly: bool,
}

#[derive(Debug, Args, Clone, Copy)]
pub struct WaitArgs {
    /// Follow the job until it ends (exit status 1 if it ends in Error).
    #[arg(long)]
    pub wait: bool,
}

/// A snapshot named as `VOLUME/SNAPSHOT` (`--from-snapshot`). Names and
/// ids never hold a `/`, so the one slash splits them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotRef {
    pub volume: String,
    pub snapshot: String,
}

impl std::str::FromStr for SnapshotRef {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<SnapshotRef, String> {
        match s.split_once('/') {
            Some((volume, snapshot))
                if !volume.is_empty() && !snapshot.is_empty() && !snapshot.contains('/') =>
            {
                Ok(SnapshotRef {
                    volume: volume.to_string(),
                    snapshot: snapshot.to_string(),
                })
            }
            _ => Err(format!("expected VOLUME/SNAPSHOT, e.g. db/s1: {s:?}")),
        }
    }
}

/// A size in whole GiB, the unit of every volume size: `20`, `20G`,
/// `20GiB`, `2T`, `2TiB` (any case). Decimal units (`20GB`) are refused
/// rather than silently read as GiB, which they are not.
pub fn parse_size_gib(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let per_unit: u64 = match unit.as_str() {
        "" | "g" | "gi" | "gib" => 1,
        "t" | "ti" | "tib" => 1024,
        "gb" | "tb" => {
            return Err(format!(
                "'{text}': sizes are in binary units; write {digits}G or {digits}GiB ({digits} GiB)"
            ))
        }
        _ => {
            return Err(format!(
                "'{text}' is not a size: give whole GiB, e.g. 20, 20G, 20GiB or 1T"
            ))
        }
    };
    let n: u64 = digits.parse().map_err(|_| {
        format!("'{text}' is not a size: give whole GiB, e.g. 20, 20G, 20GiB or 1T")
    })?;
    if n == 0 {
        return Err(format!("'{text}': a size must be at least 1 GiB"));
    }
    n.checked_mul(per_unit)
        .ok_or_else(|| format!("'{text}' is too large"))
}
