//! Gives back the pages of the relay's own binary that its start made resident and running
//! does not need: the code of configuration, of WebAssembly's compiler, of the connections'
//! set-up, and the relocations the dynamic loader read once.
//!
//! Every page of the binary that a process touches stays mapped in it, and counts in its RSS,
//! until the process ends or the kernel reclaims it under pressure; a fault also maps the 64
//! KiB around it (the kernel's fault-around). Once the relay is ready, the pages of the
//! binary's never-written mappings (its code and read-only data) are dropped from its page
//! tables with `MADV_DONTNEED`. They stay in the page cache: the code that runs from then on
//! maps its pages back at its first use, a minor fault each. Only mappings of the executable
//! that hold no page of their own (`Anonymous: 0 kB` in `/proc/self/smaps`: never written, not
//! relocated) and cannot be written are dropped, so what is read back is what was there.

/// One mapping of the binary that may be dropped: its addresses and what of it is resident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub resident_kib: u64,
}

/// The mappings of `/proc/self/smaps` (its text) that are the file of inode `inode`, private,
/// not writable, without a page of their own, and with something resident.
pub fn droppable(smaps: &str, inode: u64) -> Vec<Span> {
    let mut spans = Vec::new();
    // The mapping being read: its span, whether it qualifies so far, its Rss.
    let mut current: Option<(Span, bool)> = None;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let Some(first) = fields.next() else { continue };
        if let Some(name) = first.strip_suffix(':') {
            let Some((span, ok)) = current.as_mut() else {
                continue;
            };
            let kib = fields.next().and_then(|v| v.parse::<u64>().ok());
            match (name, kib) {
                ("Rss", Some(kib)) => span.resident_kib = kib,
                ("Anonymous", Some(kib)) if kib > 0 => *ok = false,
                ("Anonymous", None) => *ok = false,
                _ => {}
            }
            continue;
        }
        finish(current.take(), &mut spans);
        current = header(first, fields, inode).map(|span| (span, true));
    }
    finish(current, &mut spans);
    spans
}

/// Keeps the mapping just read when it qualifies and has pages.
fn finish(current: Option<(Span, bool)>, spans: &mut Vec<Span>) {
    if let Some((span, true)) = current
        && span.resident_kib > 0
    {
        spans.push(span);
    }
}

/// A mapping's header line (`start-end perms offset dev inode path`), when the mapping is a
/// private, non-writable one of inode `inode`.
fn header<'a>(range: &str, mut fields: impl Iterator<Item = &'a str>, inode: u64) -> Option<Span> {
    let perms = fields.next()?.as_bytes();
    let (_offset, _dev) = (fields.next()?, fields.next()?);
    let ino: u64 = fields.next()?.parse().ok()?;
    let (start, end) = range.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let readable_only = perms.len() == 4 && perms[1] != b'w' && perms[3] == b'p';
    (readable_only && ino == inode && ino != 0 && start < end).then_some(Span {
        start,
        end,
        resident_kib: 0,
    })
}

/// Drops the resident pages of the binary's droppable mappings; returns how many KiB were
/// resident in them. A process that cannot read its own maps (not Linux, a locked-down
/// `/proc`) drops nothing. Never inlined: `scripts/symbol-order.sh` has callgrind mark the end
/// of the relay's start by this function's name.
#[inline(never)]
pub fn give_back() -> u64 {
    let Some((smaps, inode)) = own_maps() else {
        return 0;
    };
    let mut given = 0;
    for span in droppable(&smaps, inode) {
        if drop_pages(span) {
            given += span.resident_kib;
        }
    }
    given
}

#[cfg(target_os = "linux")]
fn own_maps() -> Option<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let inode = std::fs::metadata("/proc/self/exe").ok()?.ino();
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    Some((smaps, inode))
}

#[cfg(not(target_os = "linux"))]
fn own_maps() -> Option<(String, u64)> {
    None
}

#[cfg(target_os = "linux")]
fn drop_pages(span: Span) -> bool {
    // SAFETY: the span is a whole mapping the kernel listed for this process: a private,
    // read-only (or read and execute) mapping of the relay's own executable holding no
    // page of its own, so every resident page in it is the file's page-cache page, and it
    // cannot be written while the process runs (the kernel refuses writes to a running
    // executable, and the mapping has no write permission). Dropping its pages only makes the
    // next access map the same page again, as after the kernel itself reclaims them under
    // memory pressure; no reference into it is invalidated.
    let done = unsafe {
        libc::madvise(
            span.start as *mut libc::c_void,
            span.end - span.start,
            libc::MADV_DONTNEED,
        )
    };
    done == 0
}

#[cfg(not(target_os = "linux"))]
fn drop_pages(_span: Span) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::{Span, droppable, give_back};

    const SMAPS: &str = "\
55d4c0a00000-55d4c0c00000 r--p 00000000 fd:01 4242                       /usr/bin/hookrelay
Size:               2048 kB
Rss:                1536 kB
Anonymous:             0 kB
55d4c0c00000-55d4c2a00000 r-xp 00200000 fd:01 4242                       /usr/bin/hookrelay
Size:              30720 kB
Rss:               12000 kB
Anonymous:             0 kB
55d4c2a00000-55d4c2b40000 r--p 02000000 fd:01 4242                       /usr/bin/hookrelay
Size:               1280 kB
Rss:                1280 kB
Anonymous:          1280 kB
55d4c2b40000-55d4c2b50000 rw-p 02140000 fd:01 4242                       /usr/bin/hookrelay
Size:                 64 kB
Rss:                  64 kB
Anonymous:            16 kB
55d4c2b50000-55d4c2b60000 r--p 00000000 fd:01 4242                       /usr/bin/hookrelay
Size:                 64 kB
Rss:                   0 kB
Anonymous:             0 kB
7f0000000000-7f0000200000 r-xp 00000000 fd:01 777                        /usr/lib/x86_64-linux-gnu/libc.so.6
Size:               2048 kB
Rss:                1024 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 rw-p 00000000 00:00 0
Size:               1024 kB
Rss:                 512 kB
Anonymous:           512 kB
7ffd00000000-7ffd00001000 r-xp 00000000 00:00 0                          [vdso]
Rss:                   4 kB
Anonymous:             0 kB
";

    #[test]
    fn only_the_binary_s_unwritten_read_only_mappings_with_pages_are_dropped() {
        assert_eq!(
            droppable(SMAPS, 4242),
            vec![
                Span {
                    start: 0x55d4_c0a0_0000,
                    end: 0x55d4_c0c0_0000,
                    resident_kib: 1536
                },
                Span {
                    start: 0x55d4_c0c0_0000,
                    end: 0x55d4_c2a0_0000,
                    resident_kib: 12000
                },
            ],
            "the relocated read-only data, the writable data, an empty mapping, the \
             libraries and the anonymous mappings stay"
        );
        assert_eq!(
            droppable(SMAPS, 777).len(),
            1,
            "a library's by its own inode"
        );
        assert!(droppable(SMAPS, 0).is_empty(), "anonymous mappings never");
        assert!(droppable("garbage\nRss: x kB\n-\n", 4242).is_empty());
    }

    #[test]
    fn a_mapping_whose_anonymous_line_cannot_be_read_is_kept() {
        let smaps = "1000-2000 r-xp 00000000 fd:01 5 /bin/x\nRss: 4 kB\nAnonymous: ? kB\n";
        assert!(droppable(smaps, 5).is_empty());
        let smaps = "1000-2000 r-xp 00000000 fd:01 5 /bin/x\nRss: 4 kB\nAnonymous: 0 kB\n";
        assert_eq!(droppable(smaps, 5).len(), 1);
    }

    /// The test binary's own pages: given back, and the code that runs afterwards (this test's,
    /// the harness') maps its pages again and goes on.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_running_binary_gives_its_pages_back_and_goes_on() {
        use std::os::unix::fs::MetadataExt;
        let resident = || {
            let inode = std::fs::metadata("/proc/self/exe").expect("exe").ino();
            let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
            droppable(&smaps, inode)
                .iter()
                .map(|s| s.resident_kib)
                .sum::<u64>()
        };
        let before = resident();
        assert!(before > 0, "the test binary has resident code");
        let given = give_back();
        assert!(given >= before / 2, "gave back {given} of {before} KiB");
        let after = resident();
        assert!(
            after < before,
            "resident in the binary's read-only mappings: {before} KiB before, {after} after"
        );
        // Code that ran before and was dropped runs again.
        let text = format!("{:?}", droppable(SMAPS, 4242));
        assert!(text.contains("resident_kib: 12000"));
    }
}
