//! Typed attribute sets of volumes and policies, and the one place where
//! they are converted to and from the JSON maps the store keeps them in.
//! Values in the store were validated on the way in; reading them back is
//! lenient (a value of the wrong type reads as absent).

use serde_json::{Map, Value};
use svs_domain::svs_names;
use svs_store::Policy;

/// A reference Volume field that svs stores and returns without
/// interpreting it. The wire name is also the key in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StoredField {
    ConsistencyGroup,
    ZoneReplica,
    VolumeGroupName,
    ReplicationNode,
    ReplicationVolumeGroupName,
    CapacityGroup,
    ThrottlingScheme,
}

impl StoredField {
    pub const ALL: [StoredField; 7] = [
        StoredField::ConsistencyGroup,
        StoredField::ZoneReplica,
        StoredField::VolumeGroupName,
        StoredField::ReplicationNode,
        StoredField::ReplicationVolumeGroupName,
        StoredField::CapacityGroup,
        StoredField::ThrottlingScheme,
    ];

    pub fn wire_name(self) -> &'static str {
        match self {
            StoredField::ConsistencyGroup => "consistencygroup",
            StoredField::ZoneReplica => "zonereplica",
            StoredField::VolumeGroupName => "volumegroupname",
            StoredField::ReplicationNode => "replicationnode",
            StoredField::ReplicationVolumeGroupName => "replicationvolumegroupname",
            StoredField::CapacityGroup => "capacitygroup",
            StoredField::ThrottlingScheme => "throttlingscheme",
        }
    }
}

/// How the volume is presented to its host (reference `flavor`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Flavor {
    #[default]
    Regular,
    FileDirect,
}

svs_names!(Flavor {
    Regular = "regular",
    FileDirect = "filedirect",
});

/// The filesystem svs makes on a `file` volume (svs extension).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Filesystem {
    #[default]
    Ext4,
    Xfs,
}

svs_names!(Filesystem {
    Ext4 = "ext4",
    Xfs = "xfs",
});

const FLAVOR_KEY: &str = "flavor";
const FILESYSTEM_KEY: &str = "filesystem";
const FILESYSTEM_PROVISIONED_KEY: &str = "filesystemprovisioned";
const CONTENT_VOLUME_KEY: &str = "contentvolume";
const CONTENT_SNAPSHOT_KEY: &str = "contentsnapshot";

/// A volume's stored reference fields. Only non-empty values are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeAttributes {
    stored: Vec<(StoredField, String)>,
    /// None when the creator did not choose one (shown as `regular`).
    pub flavor: Option<Flavor>,
    /// A clone's source as named at creation: (contentvolume, contentsnapshot).
    pub content: Option<(String, String)>,
    /// The filesystem of a `file` volume; None for `block` volumes.
    pub filesystem: Option<Filesystem>,
    /// True once svs made the filesystem (the `volume_create` job's last
    /// step); only such a filesystem is grown by a resize.
    pub filesystem_provisioned: bool,
}

impl VolumeAttributes {
    /// Sets a stored field; an empty value clears it.
    pub fn set(&mut self, field: StoredField, value: &str) {
        self.stored.retain(|(f, _)| *f != field);
        if !value.is_empty() {
            self.stored.push((field, value.to_string()));
        }
    }

    /// The field's value, `""` when not set.
    pub fn get(&self, field: StoredField) -> &str {
        self.stored
            .iter()
            .find(|(f, _)| *f == field)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// A clone's (contentvolume, contentsnapshot); empty for other volumes.
    pub fn content(&self) -> (&str, &str) {
        self.content
            .as_ref()
            .map_or(("", ""), |(v, s)| (v.as_str(), s.as_str()))
    }

    /// The flavor the volume has: the chosen one, else `regular`.
    pub fn flavor(&self) -> Flavor {
        self.flavor.unwrap_or_default()
    }

    pub fn from_record(map: &Map<String, Value>) -> VolumeAttributes {
        let mut attributes = VolumeAttributes::default();
        for field in StoredField::ALL {
            if let Some(v) = map.get(field.wire_name()).and_then(Value::as_str) {
                attributes.set(field, v);
            }
        }
        attributes.flavor = map
            .get(FLAVOR_KEY)
            .and_then(Value::as_str)
            .and_then(Flavor::parse);
        let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
        attributes.content = text(CONTENT_VOLUME_KEY).zip(text(CONTENT_SNAPSHOT_KEY));
        attributes.filesystem = map
            .get(FILESYSTEM_KEY)
            .and_then(Value::as_str)
            .and_then(Filesystem::parse);
        attributes.filesystem_provisioned = map
            .get(FILESYSTEM_PROVISIONED_KEY)
            .and_then(Value::as_bool)
            .unwrap_or(false);
        attributes
    }

    pub fn to_record(&self) -> Map<String, Value> {
        let mut map = Map::new();
        for (field, value) in &self.stored {
            map.insert(field.wire_name().to_string(), Value::from(value.as_str()));
        }
        if let Some(flavor) = self.flavor {
            map.insert(FLAVOR_KEY.to_string(), Value::from(flavor.as_str()));
        }
        if let Some((volume, snapshot)) = &self.content {
            map.insert(CONTENT_VOLUME_KEY.to_string(), Value::from(volume.as_str()));
            map.insert(
                CONTENT_SNAPSHOT_KEY.to_string(),
                Value::from(snapshot.as_str()),
            );
        }
        if let Some(filesystem) = self.filesystem {
            map.insert(FILESYSTEM_KEY.to_string(), Value::from(filesystem.as_str()));
        }
        if self.filesystem_provisioned {
            map.insert(FILESYSTEM_PROVISIONED_KEY.to_string(), Value::from(true));
        }
        map
    }
}

/// What a policy favours when placing data (reference `capacityoptimization`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CapacityOptimization {
    Capacity,
    Balanced,
    #[default]
    Performance,
}

svs_names!(CapacityOptimization {
    Capacity = "capacity",
    Balanced = "balanced",
    Performance = "performance",
});

/// Policy fields other than name and resiliency, as a request sets them:
/// None leaves the field as it is (or absent, on creation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicySettings {
    pub iops_write: Option<u64>,
    pub iops_read: Option<u64>,
    pub bandwidth_write: Option<u64>,
    pub bandwidth_read: Option<u64>,
    pub latency_write: Option<u64>,
    pub latency_read: Option<u64>,
    pub local_zone_read: Option<bool>,
    pub failure_performance: Option<bool>,
    pub capacity_optimization: Option<CapacityOptimization>,
    pub capacity_reservation: Option<u64>,
    pub encryption: Option<bool>,
    pub sed: Option<bool>,
    pub integrity: Option<bool>,
    pub snapshot_keep: Option<u64>,
    pub snapshot_frequency: Option<String>,
    pub snapshot_day: Option<u64>,
    pub snapshot_hour: Option<u64>,
    pub snapshot_minute: Option<u64>,
}

const CAPACITY_OPTIMIZATION_KEY: &str = "capacityoptimization";

impl PolicySettings {
    /// The stored attributes after applying these settings to those of
    /// `base` (the current policy; None for a new one). A policy always has
    /// a capacity optimization: `performance` unless chosen.
    pub fn apply_to(&self, base: Option<&Policy>) -> Map<String, Value> {
        let mut map = base.map(|p| p.attributes.clone()).unwrap_or_default();
        let numbers = [
            ("iopswrite", self.iops_write),
            ("iopsread", self.iops_read),
            ("bandwidthwrite", self.bandwidth_write),
            ("bandwidthread", self.bandwidth_read),
            ("latencywrite", self.latency_write),
            ("latencyread", self.latency_read),
            ("capacityreservation", self.capacity_reservation),
            ("snapshotkeep", self.snapshot_keep),
            ("snapshotday", self.snapshot_day),
            ("snapshothour", self.snapshot_hour),
            ("snapshotminute", self.snapshot_minute),
        ];
        for (key, value) in numbers {
            if let Some(v) = value {
                map.insert(key.to_string(), Value::from(v));
            }
        }
        let flags = [
            ("localzoneread", self.local_zone_read),
            ("failureperformance", self.failure_performance),
            ("encryption", self.encryption),
            ("sed", self.sed),
            ("integrity", self.integrity),
        ];
        for (key, value) in flags {
            if let Some(v) = value {
                map.insert(key.to_string(), Value::from(v));
            }
        }
        if let Some(v) = &self.snapshot_frequency {
            map.insert("snapshotfrequency".to_string(), Value::from(v.as_str()));
        }
        if let Some(v) = self.capacity_optimization {
            map.insert(
                CAPACITY_OPTIMIZATION_KEY.to_string(),
                Value::from(v.as_str()),
            );
        }
        if !map.contains_key(CAPACITY_OPTIMIZATION_KEY) {
            map.insert(
                CAPACITY_OPTIMIZATION_KEY.to_string(),
                Value::from(CapacityOptimization::default().as_str()),
            );
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_attributes_round_trip_through_the_stored_map() {
        let mut a = VolumeAttributes::default();
        a.set(StoredField::CapacityGroup, "cg1");
        a.set(StoredField::ZoneReplica, "");
        a.flavor = Some(Flavor::FileDirect);
        a.filesystem = Some(Filesystem::Xfs);
        a.filesystem_provisioned = true;
        let map = a.to_record();
        assert_eq!(map.len(), 4, "empty values are not stored: {map:?}");
        assert_eq!(map["capacitygroup"], "cg1");
        assert_eq!(map["flavor"], "filedirect");
        assert_eq!(map["filesystem"], "xfs");
        assert_eq!(map["filesystemprovisioned"], true);
        assert_eq!(VolumeAttributes::from_record(&map), a);
    }

    #[test]
    fn a_volume_without_a_chosen_flavor_is_regular() {
        let a = VolumeAttributes::from_record(&Map::new());
        assert_eq!(a.flavor, None);
        assert_eq!(a.flavor(), Flavor::Regular);
        assert_eq!(a.filesystem, None);
        assert!(!a.filesystem_provisioned);
        assert_eq!(a.get(StoredField::ConsistencyGroup), "");
    }

    #[test]
    fn policy_settings_change_only_what_they_set() {
        let created = PolicySettings {
            iops_write: Some(5),
            ..PolicySettings::default()
        }
        .apply_to(None);
        assert_eq!(created["iopswrite"], 5);
        assert_eq!(created["capacityoptimization"], "performance");
        let base = Policy {
            id: 1,
            name: "gold".into(),
            resiliency: Default::default(),
            attributes: created,
            created_ms: 0,
            created_by_name: "a".into(),
            created_by_email: "a@b.c".into(),
            updated_ms: None,
            updated_by_name: None,
            updated_by_email: None,
        };
        let updated = PolicySettings {
            encryption: Some(true),
            capacity_optimization: Some(CapacityOptimization::Balanced),
            ..PolicySettings::default()
        }
        .apply_to(Some(&base));
        assert_eq!(updated["iopswrite"], 5);
        assert_eq!(updated["encryption"], true);
        assert_eq!(updated["capacityoptimization"], "balanced");
        assert_eq!(updated.len(), 3);
    }
}
