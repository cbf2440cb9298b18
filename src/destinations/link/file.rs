//! A file destination: one JSON object a line, appended; a line counts as published once
//! written and flushed. A file moved or removed (logrotate) is noticed before the next line,
//! which goes to a new file at the configured path. The calls are the plain system calls, made
//! in place: a line is one `write` to the page cache, and a thread hop for each (as async file
//! I/O makes) cost more than the call.

use std::{fs, io::Write, os::unix::fs::MetadataExt, path::PathBuf};

use super::Failure;
use crate::destinations::Message;

pub(crate) struct FileLink {
    path: PathBuf,
    /// The open file and its (device, inode).
    open: Option<(fs::File, (u64, u64))>,
}

impl FileLink {
    pub(crate) fn new(path: PathBuf) -> Self {
        Self { path, open: None }
    }

    pub(crate) async fn publish(&mut self, m: &Message) -> Result<(), Failure> {
        let mut line = one_line(&m.body);
        line.push('\n');
        let file = self.file()?;
        file.write_all(line.as_bytes()).map_err(io)?;
        file.flush().map_err(io)
    }

    pub(crate) fn reset(&mut self) {
        self.open = None;
    }

    /// The file to write to: the open one while it is still at the path, else the path's.
    fn file(&mut self) -> Result<&mut fs::File, Failure> {
        let at_path = fs::metadata(&self.path).ok().map(|m| (m.dev(), m.ino()));
        if self.open.as_ref().map(|(_, id)| *id) != at_path || at_path.is_none() {
            let file = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)
                .map_err(io)?;
            let meta = file.metadata().map_err(io)?;
            self.open = Some((file, (meta.dev(), meta.ino())));
        }
        match &mut self.open {
            Some((f, _)) => Ok(f),
            None => Err(Failure::Io("the file is not open".into())),
        }
    }
}

fn io(e: std::io::Error) -> Failure {
    Failure::Io(e.to_string())
}

/// `body` on one line: a JSON text with line ends between its tokens is written again
/// compactly (line ends inside its strings are escaped already).
fn one_line(body: &str) -> String {
    if !body.contains(['\n', '\r']) {
        return body.to_string();
    }
    serde_json::from_str::<serde_json::Value>(body)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| body.replace(['\n', '\r'], " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> Message {
        Message {
            body: body.into(),
            event: "e".into(),
            meeting: String::new(),
            server: String::new(),
            tenant: String::new(),
            target: String::new(),
            id: "i".into(),
            queued_ms: 0,
            for_plugins: None,
            trace: None,
        }
    }

    #[tokio::test]
    async fn lines_follow_the_file_when_it_is_rotated() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("events.jsonl");
        let mut link = FileLink::new(path.clone());
        link.publish(&message("{\"a\":1}")).await.expect("written");
        link.publish(&message("{\n\"b\": 2\n}"))
            .await
            .expect("written");
        std::fs::rename(&path, dir.path().join("events.jsonl.1")).expect("rotated");
        link.publish(&message("{\"c\":3}")).await.expect("written");
        let old = std::fs::read_to_string(dir.path().join("events.jsonl.1")).expect("old");
        assert_eq!(old, "{\"a\":1}\n{\"b\":2}\n");
        let new = std::fs::read_to_string(&path).expect("new");
        assert_eq!(new, "{\"c\":3}\n");
    }

    #[tokio::test]
    async fn a_folder_that_cannot_be_written_is_a_failure_not_a_panic() {
        let mut link = FileLink::new(PathBuf::from("/proc/no/such/events.jsonl"));
        assert!(matches!(
            link.publish(&message("{}")).await,
            Err(Failure::Io(_))
        ));
    }
}
