//! The list of hot functions (`link/hot-symbols.txt`) as lld takes it: read by `build.rs`,
//! and by the library's unit tests (this file has no other dependency).

/// The list's names, split: those that end in `.llvm.<number>` (a function ThinLTO made
/// visible across the crate's parts, numbered by a hash of its part, which changes with the
/// code and with the folder it is built in) as patterns of a linker script that puts their
/// sections first (`.text.hot`, before `.text`); the others, one a line, as a symbol ordering
/// file. A function LLVM deems cold (`#[cold]`, such as `RawVec`'s `finish_grow`, or one that
/// only calls such) is in a section `.text.unlikely.NAME`, so each pattern names both. Comment
/// lines (`#`) and blank ones are skipped.
pub(crate) fn split(names: &str) -> (String, String) {
    let mut exact = String::new();
    let mut script = String::from("SECTIONS {\n  .text.hot : {\n");
    for name in names.lines().map(str::trim) {
        if name.is_empty() || name.starts_with('#') {
            continue;
        }
        match name.find(".llvm.") {
            Some(at) => {
                let name = &name[..at];
                script.push_str(&format!(
                    "    *(.text.{name}.llvm.* .text.unlikely.{name}.llvm.*)\n"
                ));
            }
            None => {
                exact.push_str(name);
                exact.push('\n');
            }
        }
    }
    script.push_str("  }\n}\nINSERT BEFORE .text;\n");
    (exact, script)
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn numbered_names_become_patterns_and_the_rest_an_ordering() {
        let list = "# a comment\n\
                    _ZN4sha18compress4soft8compress17hcbdee3c54f603e8dE\n\
                    \n\
                    _ZN5tokio7runtime4task3raw4poll17h0123456789abcdefE.llvm.14853728435435914027\n\
                    _RNvCs1_9hookrelay4main\n";
        let (exact, script) = split(list);
        assert_eq!(
            exact,
            "_ZN4sha18compress4soft8compress17hcbdee3c54f603e8dE\n_RNvCs1_9hookrelay4main\n"
        );
        assert_eq!(
            script,
            "SECTIONS {\n  .text.hot : {\n    \
             *(.text._ZN5tokio7runtime4task3raw4poll17h0123456789abcdefE.llvm.* \
             .text.unlikely._ZN5tokio7runtime4task3raw4poll17h0123456789abcdefE.llvm.*)\n  \
             }\n}\nINSERT BEFORE .text;\n"
        );
    }

    #[test]
    fn the_committed_list_is_well_formed() {
        let list = include_str!("hot-symbols.txt");
        let (exact, script) = split(list);
        let names: Vec<&str> = exact.lines().collect();
        assert!(names.len() > 1000, "{} names", names.len());
        // One name a line: a linker symbol has no blanks, and the list names each once.
        assert!(names.iter().all(|n| !n.contains(char::is_whitespace)));
        let unique: std::collections::HashSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len());
        assert!(script.lines().filter(|l| l.contains(".llvm.*")).count() > 100);
    }
}
