//! Helpers of the `workers` tests, shared with other test files.

use crate::harness::*;

/// A 15 GiB mirrored volume "data" with 16 MiB of data on each copy, on m1
/// and m2, and a resize to 18 GiB under way that moves copy 1 from m2
/// (16 GiB) to m3 at 4 MiB/s: about 4 s. Returns the resize's job id.
pub async fn start_slow_movement(app: &TestApp) -> String {
    let id = app.mirror_beside_filler().await;
    app.delete_volume("filler").await;
    for slice in app.slices("data").await {
        let path = app.slice_file(&id, &slice);
        for i in 0..16u64 {
            write_at(&path, i << 20, &pattern(i, 1 << 20));
        }
    }
    app.start_resize("data", 18, true).await
}
