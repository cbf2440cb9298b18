//! Unix accounts as people name them: the group that owns a file, for messages that say who
//! may open it.

use std::path::Path;

/// The name of group `gid` (from `/etc/group`).
pub fn group_name(gid: u32) -> Option<String> {
    let groups = std::fs::read_to_string("/etc/group").ok()?;
    groups.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (id.parse::<u32>().ok()? == gid).then(|| name.to_string())
    })
}

/// The name of the group that owns `path`, or its folder when the file itself cannot be seen.
pub fn group_of(path: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(_) => std::fs::metadata(path.parent()?).ok()?,
    };
    group_name(meta.gid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_group_0() {
        assert_eq!(group_name(0).as_deref(), Some("root"));
        assert_eq!(group_of(Path::new("/etc/group")).as_deref(), Some("root"));
        assert_eq!(group_name(u32::MAX - 7), None);
    }
}
