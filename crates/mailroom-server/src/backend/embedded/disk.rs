//! The store directory's size on disk, for the metrics.

use std::fs;
use std::path::Path;

use crate::backend::DiskUsage;

/// The directory under the data directory that holds one directory per topic (the
/// store's layout, `docs/storage.md`).
const TOPICS_DIR: &str = "topics";

/// The bytes of every file under `dir`, and under each topic's directory. Files that
/// vanish during the walk (a segment deleted, a topic dropped) count as nothing, and an
/// unreadable directory as empty: the figure is a gauge, not an inventory.
pub(super) fn usage(dir: &Path) -> DiskUsage {
    let mut topics = Vec::new();
    if let Ok(entries) = fs::read_dir(dir.join(TOPICS_DIR)) {
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            topics.push((name, tree_bytes(&entry.path())));
        }
    }
    topics.sort();
    DiskUsage {
        total_bytes: tree_bytes(dir),
        topics,
    }
}

fn tree_bytes(path: &Path) -> u64 {
    let Ok(metadata) = fs::symlink_metadata(path) else {
        return 0;
    };
    if !metadata.is_dir() {
        return metadata.len();
    }
    let Ok(entries) = fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| tree_bytes(&entry.path()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the total counts every file and each topic counts its own tree.
    #[test]
    fn counts_files_per_topic() {
        let dir = tempfile::tempdir().unwrap();
        let orders = dir.path().join("topics/orders/groups");
        fs::create_dir_all(&orders).unwrap();
        fs::write(dir.path().join("STORE"), b"1234").unwrap();
        fs::write(orders.join("log"), vec![0u8; 100]).unwrap();
        let usage = usage(dir.path());
        assert_eq!(usage.total_bytes, 104);
        assert_eq!(usage.topics, vec![("orders".to_owned(), 100)]);
    }
}
