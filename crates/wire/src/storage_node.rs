//! The JSON of a storage node's registration and heartbeat (`PUT
//! /nodes/{node}/storage`): the body the node sends and the control
//! plane's answer. The node, the API's handler and its document use these
//! types; field names are the JSON names. The control plane reads the body
//! with its own checks (`api::storage_nodes`), whose messages name the
//! medium at fault.

use serde::{Deserialize, Serialize};
use svs_common::metrics::IoTotals;
use utoipa::ToSchema;

/// `PUT /nodes/{node}/storage` (svs extension, storage nodes only).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = StorageNodeRegistration)]
pub struct StorageNodeRegistration {
    /// IP:PORT where fronts reach the node's slice server.
    #[schema(min_length = 1)]
    pub sliceaddress: String,
    #[serde(default)]
    pub media: Vec<StorageMedium>,
    /// The node's slice public key (PEM "PUBLIC KEY", ECDSA P-256), sent
    /// when it needs a slice certificate; with `tls = "auto"` the answer
    /// carries one signed by svs's CA for the slice address.
    #[schema(max_length = 4096)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slicepublickey: Option<String>,
    /// IP:PORT where attaching hosts reach the node's NBD server of
    /// volumes' fronts (setting `fronts = "nodes"` of svs serve).
    pub frontaddress: Option<String>,
    /// What the fronts the node runs served, one object per volume id
    /// (at most 1024): `{volume, reads, writes, readbytes, writtenbytes,
    /// flushes, trims, errors, connections, latency}`, `latency` three
    /// histograms (read, write, flush) of `{buckets: [17 counts], count,
    /// sumnanos}`; the metrics of those volumes (docs/metrics.md).
    #[schema(value_type = Option<Vec<Object>>, max_items = 1024)]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io: Vec<IoTotals>,
}

/// One medium of a storage node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = StorageNodeMedium)]
pub struct StorageMedium {
    #[schema(
        pattern = "^([A-Za-z0-9_][A-Za-z0-9._-]*|[.]+[A-Za-z0-9_-][A-Za-z0-9._-]*)$",
        max_length = 63
    )]
    pub name: String,
    /// Bytes (whole GiB are offered); at least 1 GiB.
    #[schema(minimum = 1073741824)]
    pub size: u64,
    /// The medium's directory on the node (shown only).
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub directory: String,
}

/// The answer to a storage node's registration or heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StorageNodeRegistered {
    /// The secret fronts present to the node's slice server; its slice
    /// server accepts only it. Changes when the node's credential is
    /// reissued or revoked.
    pub slicecredential: String,
    /// Seconds between two heartbeats.
    pub heartbeatseconds: u64,
    /// How fronts connect to the node's slice server: `off` (plain TCP,
    /// the service has no TLS), `issued` (TLS with a certificate svs's CA
    /// issues: send `slicepublickey`), `own` (TLS with the node's own
    /// `slice_tls_cert`).
    #[schema(pattern = "^(off|issued|own)$", required = true)]
    // Absent from an older control plane's answer, as the three below.
    #[serde(default)]
    pub slicetls: String,
    /// SHA-256 fingerprint of the CA issuing slice certificates (`issued`;
    /// else empty): a node whose certificate is from another CA asks again.
    #[schema(required = true)]
    #[serde(default)]
    pub sliceca: String,
    /// The certificate issued for `slicepublickey` (PEM); empty when none
    /// was sent or the service issues none.
    #[schema(required = true)]
    #[serde(default)]
    pub slicecertificate: String,
    /// The end of its validity (RFC 3339); empty with no certificate.
    #[schema(required = true)]
    #[serde(default)]
    pub slicecertificateexpires: String,
}
