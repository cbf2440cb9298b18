//! `hookrelay events`: the processed event ids and who gets each (`events list`), and their
//! JSON Schemas (`events schema [ID]`, `events schema --out DIR` writes docs/schemas/).

use std::{path::PathBuf, process::ExitCode};

use clap::Subcommand;
use hookrelay::event_schema;

#[derive(Subcommand)]
pub(crate) enum EventsCommand {
    /// Every event id hookrelay can send, one a line, with who gets it: every matching hook,
    /// or only hooks whose eventID names it.
    List,
    /// Print the JSON Schema (draft 2020-12) of event ID; without ID, the schema that refers
    /// to every event's (events.schema.json).
    Schema {
        id: Option<String>,
        /// Write every schema file into DIR instead (as the package installs them in
        /// /usr/share/hookrelay/schemas).
        #[arg(long, conflicts_with = "id")]
        out: Option<PathBuf>,
    },
}

pub(crate) fn run(command: &EventsCommand) -> ExitCode {
    match command {
        EventsCommand::List => {
            for id in event_schema::ids() {
                println!("{id:<32} {}", event_schema::audience(id));
            }
            ExitCode::SUCCESS
        }
        EventsCommand::Schema {
            id: None,
            out: None,
        } => print(&event_schema::index()),
        EventsCommand::Schema { id: Some(id), .. } => {
            let id = id.to_ascii_lowercase();
            match event_schema::of(&id) {
                Some(schema) => print(&schema),
                None => {
                    eprintln!(
                        "hookrelay: no event is called {id:?}; `hookrelay events list` names them"
                    );
                    ExitCode::from(2)
                }
            }
        }
        EventsCommand::Schema { out: Some(dir), .. } => write(dir),
    }
}

fn print(schema: &serde_json::Value) -> ExitCode {
    match serde_json::to_string_pretty(schema) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hookrelay: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write(dir: &std::path::Path) -> ExitCode {
    if let Err(e) = std::fs::create_dir_all(dir) {
        eprintln!("hookrelay: cannot create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let files = event_schema::files();
    for (name, text) in &files {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("hookrelay: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    println!("wrote {} schemas into {}", files.len(), dir.display());
    ExitCode::SUCCESS
}
