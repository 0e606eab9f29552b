//! What one answer of `POST /nodes/{node}/storage/fronts` asks of the
//! node's fronts, as steps: a pure function of what is open here and the
//! fronts wanted, so every decision is testable without I/O
//! ([`super`] carries the steps out).

use std::collections::{BTreeMap, BTreeSet};
use svs_front::wire::{FrontExport, FrontSpec};

/// A front as the node holds it: the spec it was opened with (kept up to
/// date as steps apply), or why opening it failed (nothing is open then).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub spec: FrontSpec,
    pub error: Option<String>,
}

/// One thing to do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Detach every export of the volume and close it (it is no longer
    /// wanted, or is reopened by the next step).
    Close { volume: String },
    /// Open the volume as the spec says, with all its exports.
    Open(FrontSpec),
    /// Reach the spec's nodes as it says now (an address, a credential or
    /// the TLS roots changed).
    Nodes(FrontSpec),
    /// The volume grew.
    Resize { volume: String, size: u64 },
    /// Media whose copies are lost now: the open volume stops using them.
    FailMedia { volume: String, media: Vec<String> },
    /// Export new, or changed (its host, view or read-only mode): it
    /// replaces the one of that name, whose connections close.
    Attach { volume: String, export: FrontExport },
    /// Export no longer wanted.
    Detach { volume: String, export: String },
}

/// The steps that take `held` to `wanted`. Closes of volumes no longer
/// wanted come first; then, per wanted volume in its order: a front not
/// open (or whose opening failed: tried again) is opened; one open at
/// another epoch, or over another layout, or with a lost copy back on a
/// medium it still uses, is closed and opened again (the open I/O cannot
/// take those back); else its node endpoints, size, lost media and exports
/// follow the spec, new and changed exports attached before removed ones
/// are detached. A volume listed twice counts once (its first spec).
pub fn plan(held: &BTreeMap<String, Held>, wanted: &[FrontSpec]) -> Vec<Step> {
    let mut seen = BTreeSet::new();
    let wanted: Vec<&FrontSpec> = wanted
        .iter()
        .filter(|s| seen.insert(s.volume.as_str()))
        .collect();
    let mut steps: Vec<Step> = held
        .keys()
        .filter(|v| !seen.contains(v.as_str()))
        .map(|v| Step::Close { volume: v.clone() })
        .collect();
    for spec in wanted {
        let Some(h) = held.get(&spec.volume) else {
            steps.push(Step::Open(spec.clone()));
            continue;
        };
        if h.error.is_some() {
            steps.push(Step::Open(spec.clone()));
            continue;
        }
        let was = &h.spec;
        // A lost medium the layout no longer uses (its copy was rebuilt
        // elsewhere) is not back: the open I/O goes on as it is.
        let lost_back = was.lostmedia.iter().any(|m| {
            !spec.lostmedia.contains(m) && spec.media.iter().flatten().any(|used| used == m)
        });
        if was.epoch != spec.epoch || was.media != spec.media || lost_back {
            steps.push(Step::Close {
                volume: spec.volume.clone(),
            });
            steps.push(Step::Open(spec.clone()));
            continue;
        }
        if was.nodes != spec.nodes || was.slicetlsroots != spec.slicetlsroots {
            steps.push(Step::Nodes(spec.clone()));
        }
        if was.size != spec.size {
            steps.push(Step::Resize {
                volume: spec.volume.clone(),
                size: spec.size,
            });
        }
        let newly_lost: Vec<String> = spec
            .lostmedia
            .iter()
            .filter(|m| !was.lostmedia.contains(m))
            .cloned()
            .collect();
        if !newly_lost.is_empty() {
            steps.push(Step::FailMedia {
                volume: spec.volume.clone(),
                media: newly_lost,
            });
        }
        for export in &spec.exports {
            if !was.exports.iter().any(|e| e == export) {
                steps.push(Step::Attach {
                    volume: spec.volume.clone(),
                    export: export.clone(),
                });
            }
        }
        for export in &was.exports {
            if !spec.exports.iter().any(|e| e.name == export.name) {
                steps.push(Step::Detach {
                    volume: spec.volume.clone(),
                    export: export.name.clone(),
                });
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;
    use svs_front::wire::{FrontNode, FrontSnapshot};

    fn export(name: &str, host: &str) -> FrontExport {
        FrontExport {
            name: name.into(),
            host: host.into(),
            hostaddress: "127.0.0.9".into(),
            readonly: false,
            snapshot: None,
        }
    }

    fn spec(volume: &str, epoch: u64, exports: &[FrontExport]) -> FrontSpec {
        FrontSpec {
            volume: volume.into(),
            epoch,
            size: 1 << 30,
            media: vec![vec!["a".into()], vec!["b".into()]],
            lostmedia: vec![],
            nodes: vec![FrontNode {
                node: "sn-1".into(),
                sliceaddress: "127.0.0.2:7450".into(),
                slicecredential: "secret".into(),
                media: vec!["a".into(), "b".into()],
            }],
            slicetlsroots: vec![],
            exports: exports.to_vec(),
        }
    }

    fn held(specs: &[FrontSpec]) -> BTreeMap<String, Held> {
        specs
            .iter()
            .map(|s| {
                (
                    s.volume.clone(),
                    Held {
                        spec: s.clone(),
                        error: None,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn nothing_changes_when_the_answer_is_what_is_open() {
        let open = [spec("v1", 3, &[export("e1", "h1")])];
        assert_eq!(plan(&held(&open), &open), vec![]);
        assert_eq!(plan(&BTreeMap::new(), &[]), vec![]);
    }

    #[test]
    fn wanted_fronts_open_and_unwanted_ones_close_first() {
        let v1 = spec("v1", 3, &[export("e1", "h1")]);
        let v2 = spec("v2", 4, &[export("e2", "h1")]);
        assert_eq!(
            plan(&held(std::slice::from_ref(&v1)), std::slice::from_ref(&v2)),
            vec![
                Step::Close {
                    volume: "v1".into()
                },
                Step::Open(v2.clone()),
            ]
        );
        // Listed twice: opened once, as first listed.
        let mut again = v2.clone();
        again.epoch = 9;
        assert_eq!(
            plan(&BTreeMap::new(), &[v2.clone(), again]),
            vec![Step::Open(v2)]
        );
    }

    #[test]
    fn a_new_epoch_a_new_layout_or_a_copy_back_reopens_the_volume() {
        let open = spec("v1", 3, &[export("e1", "h1")]);
        let mut newer = open.clone();
        newer.epoch = 4;
        let mut moved = open.clone();
        moved.media[1][0] = "c".into();
        let mut was_lost = open.clone();
        was_lost.lostmedia = vec!["b".into()];
        for (before, after) in [(&open, &newer), (&open, &moved), (&was_lost, &open)] {
            assert_eq!(
                plan(
                    &held(std::slice::from_ref(before)),
                    std::slice::from_ref(after)
                ),
                vec![
                    Step::Close {
                        volume: "v1".into()
                    },
                    Step::Open(after.clone())
                ]
            );
        }
    }

    #[test]
    fn a_lost_copy_rebuilt_elsewhere_leaves_the_volume_open() {
        // Lost on "b", rebuilt on "c" by this front (its live layout, which
        // the held spec follows, has "c" already): no longer lost, nor used.
        let mut rebuilt = spec("v1", 3, &[export("e1", "h1")]);
        rebuilt.media[1][0] = "c".into();
        let mut was = rebuilt.clone();
        was.lostmedia = vec!["b".into()];
        assert_eq!(
            plan(
                &held(std::slice::from_ref(&was)),
                std::slice::from_ref(&rebuilt)
            ),
            vec![]
        );
    }

    #[test]
    fn a_front_that_failed_to_open_is_tried_again_while_wanted_and_forgotten_after() {
        let v1 = spec("v1", 3, &[export("e1", "h1")]);
        let mut failed = held(std::slice::from_ref(&v1));
        failed.get_mut("v1").unwrap().error = Some("unreachable".into());
        assert_eq!(
            plan(&failed, std::slice::from_ref(&v1)),
            vec![Step::Open(v1.clone())]
        );
        assert_eq!(
            plan(&failed, &[]),
            vec![Step::Close {
                volume: "v1".into()
            }]
        );
    }

    #[test]
    fn newly_lost_media_fail_on_the_open_volume_and_it_follows_size_and_nodes() {
        let open = spec("v1", 3, &[export("e1", "h1")]);
        let mut now = open.clone();
        now.lostmedia = vec!["a".into()];
        now.size = 2 << 30;
        now.nodes[0].slicecredential = "reissued".into();
        assert_eq!(
            plan(
                &held(std::slice::from_ref(&open)),
                std::slice::from_ref(&now)
            ),
            vec![
                Step::Nodes(now.clone()),
                Step::Resize {
                    volume: "v1".into(),
                    size: 2 << 30
                },
                Step::FailMedia {
                    volume: "v1".into(),
                    media: vec!["a".into()]
                },
            ]
        );
    }

    #[test]
    fn exports_are_attached_when_new_or_changed_before_removed_ones_are_detached() {
        let open = spec("v1", 3, &[export("e1", "h1"), export("e2", "h2")]);
        let mut snap = export("e3", "h3");
        snap.snapshot = Some(FrontSnapshot {
            seq: 2,
            size: 1 << 30,
        });
        let mut moved = export("e2", "h2");
        moved.readonly = true;
        let now = spec("v1", 3, &[moved.clone(), snap.clone()]);
        assert_eq!(
            plan(
                &held(std::slice::from_ref(&open)),
                std::slice::from_ref(&now)
            ),
            vec![
                Step::Attach {
                    volume: "v1".into(),
                    export: moved
                },
                Step::Attach {
                    volume: "v1".into(),
                    export: snap
                },
                Step::Detach {
                    volume: "v1".into(),
                    export: "e1".into()
                },
            ]
        );
    }
}
