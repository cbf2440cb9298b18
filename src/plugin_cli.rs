//! The plugin authors' commands around a project: `plugin new`, `build`, `test`, `deploy`, and
//! `record`. Results go to stdout, progress and errors to stderr; exit 1 when something is
//! wrong, 2 for a command line or input that cannot be used.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use hookrelay::{
    Config, EventFilter, PluginSet,
    authoring::{AuthoringError, Lang, Project, cases, deploy, load_chain, new, record, toolchain},
    check_file,
};

fn fail(e: &AuthoringError) -> ExitCode {
    eprintln!("hookrelay: {e}");
    match e {
        AuthoringError::Usage(_) | AuthoringError::Case { .. } => ExitCode::from(2),
        _ => ExitCode::FAILURE,
    }
}

/// `hookrelay plugin new NAME --lang L`.
#[derive(clap::Args)]
pub(crate) struct NewArgs {
    /// The plugin's name: lowercase letters, digits and '-' (the project's folder, and the
    /// deployed NAME.wasm).
    name: String,
    /// rust, python or js.
    #[arg(long)]
    lang: Lang,
    /// Where to make the project folder (default: the current folder).
    #[arg(long, value_name = "DIR", default_value = ".")]
    dir: PathBuf,
}

pub(crate) fn new(args: &NewArgs) -> ExitCode {
    match new::create(&args.dir, &args.name, args.lang) {
        Ok(dir) => {
            println!("{}", dir.display());
            eprintln!(
                "next: hookrelay plugin build {0} && hookrelay plugin test {0}",
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// `hookrelay plugin build [DIR]`.
#[derive(clap::Args)]
pub(crate) struct BuildArgs {
    /// The project (default: the current folder).
    #[arg(default_value = ".")]
    dir: PathBuf,
}

pub(crate) fn build(args: &BuildArgs) -> ExitCode {
    let built = Project::open(&args.dir).and_then(|p| toolchain::build(&p));
    match built {
        Ok(wasm) => {
            println!("{}", wasm.display());
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// `hookrelay plugin test [DIR or CASES...]`.
#[derive(clap::Args)]
pub(crate) struct TestArgs {
    /// Projects (their build and tests/*.jsonl) or case files; default: the current folder.
    paths: Vec<PathBuf>,
    /// For case files: a plugin folder (NAME.wasm and NAME.toml files) to run, in order.
    #[arg(long, value_name = "DIR", conflicts_with = "plugin")]
    plugins: Option<PathBuf>,
    /// For case files: one plugin file (its NAME.toml beside it is read).
    #[arg(long, value_name = "FILE.wasm")]
    plugin: Option<PathBuf>,
    /// Write what came out as each case's expectation (turns a recording into cases).
    #[arg(long)]
    update: bool,
    /// The relay's configuration, for its [plugins] defaults and event filters.
    #[arg(long, short, value_name = "FILE", env = "HOOKRELAY_CONFIG")]
    config: Option<PathBuf>,
}

/// How many cases passed and failed.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
}

pub(crate) fn test(args: &TestArgs) -> ExitCode {
    let config = match load_config(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let mut tally = Tally::default();
    for path in &paths {
        if let Err(e) = test_path(path, args, &config, &mut tally) {
            return fail(&e);
        }
    }
    println!(
        "plugin test: {} passed, {} failed",
        tally.passed, tally.failed
    );
    if tally.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn test_path(
    path: &Path,
    args: &TestArgs,
    config: &Config,
    tally: &mut Tally,
) -> Result<(), AuthoringError> {
    let defaults = config.plugins.defaults();
    let (chain_dir, files, _staging) = if path.is_dir() {
        let project = Project::open(path)?;
        let files = project.case_files();
        if files.is_empty() {
            return Err(AuthoringError::Usage(format!(
                "{}: no test cases (tests/*.jsonl)",
                project.dir.display()
            )));
        }
        (project.staged()?, files, None)
    } else if let Some(dir) = &args.plugins {
        (dir.clone(), vec![path.to_path_buf()], None)
    } else if let Some(wasm) = &args.plugin {
        let staging = stage_file(wasm)?;
        (
            staging.path().to_path_buf(),
            vec![path.to_path_buf()],
            Some(staging),
        )
    } else {
        let project = Project::around(path)
            .or_else(|| Project::open(Path::new(".")).ok())
            .ok_or_else(|| {
                AuthoringError::Usage(format!(
                    "which plugin runs {}? give --plugin FILE.wasm or --plugins DIR, or keep it in a project's tests/",
                    path.display()
                ))
            })?;
        (project.staged()?, vec![path.to_path_buf()], None)
    };
    // A case file that cannot be read is said before any plugin is compiled.
    let files = files
        .iter()
        .map(|f| cases::read(f))
        .collect::<Result<Vec<_>, _>>()?;
    let chain = load_chain(&chain_dir, &defaults)?;
    for file in &files {
        run_file(file, &chain, config, args.update, tally)?;
    }
    Ok(())
}

/// A folder holding one plugin file and the NAME.toml beside it, as the relay loads plugins.
fn stage_file(wasm: &Path) -> Result<tempfile::TempDir, AuthoringError> {
    let staging = tempfile::tempdir().map_err(|e| AuthoringError::io(Path::new("/tmp"), e))?;
    let name = wasm
        .file_name()
        .ok_or_else(|| AuthoringError::Usage(format!("{} is not a file", wasm.display())))?;
    std::fs::copy(wasm, staging.path().join(name)).map_err(|e| AuthoringError::io(wasm, e))?;
    let toml = wasm.with_extension("toml");
    if toml.is_file() {
        let to = staging.path().join(Path::new(name).with_extension("toml"));
        std::fs::copy(&toml, to).map_err(|e| AuthoringError::io(&toml, e))?;
    }
    Ok(staging)
}

fn run_file(
    cases: &cases::CaseFile,
    chain: &PluginSet,
    config: &Config,
    update: bool,
    tally: &mut Tally,
) -> Result<(), AuthoringError> {
    let file = &cases.path;
    let filter = EventFilter::of(config);
    let results = cases::run(cases, chain, filter);
    if update {
        cases::update(file, &results)?;
        println!("updated {}: {} cases", file.display(), results.len());
        tally.passed += results.len();
        return Ok(());
    }
    let checked = results.iter().filter(|r| r.case.expect.is_some()).count();
    let failed: Vec<_> = results.iter().filter(|r| !r.passed()).collect();
    for r in &failed {
        let name = r
            .case
            .name
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        println!("FAIL {} line {}{name}", file.display(), r.case.line);
        print!("{}", r.describe());
    }
    println!(
        "{}: {checked} cases, {} passed, {} failed ({} set-up lines)",
        file.display(),
        checked - failed.len(),
        failed.len(),
        results.len() - checked
    );
    tally.passed += checked - failed.len();
    tally.failed += failed.len();
    Ok(())
}

/// `hookrelay plugin deploy [DIR] --to PLUGINS_DIR [--name NN-NAME]`.
#[derive(clap::Args)]
pub(crate) struct DeployArgs {
    /// The project (default: the current folder).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The relay's plugin folder ([plugins] dir).
    #[arg(long, value_name = "PLUGINS_DIR")]
    to: PathBuf,
    /// The deployed name, e.g. 05-my-plugin (the number sets the order); default: the
    /// project's name.
    #[arg(long, value_name = "NN-NAME")]
    name: Option<String>,
    /// The relay's configuration, for its [plugins] defaults.
    #[arg(long, short, value_name = "FILE", env = "HOOKRELAY_CONFIG")]
    config: Option<PathBuf>,
}

pub(crate) fn deploy(args: &DeployArgs) -> ExitCode {
    let config = match load_config(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    match try_deploy(args, &config) {
        Ok(done) => {
            println!("{}", done.wasm.display());
            if let Some(s) = &done.settings {
                println!("{}", s.display());
            }
            eprintln!("deployed: a running relay watching that folder reloads it now");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn try_deploy(args: &DeployArgs, config: &Config) -> Result<deploy::Deployed, AuthoringError> {
    let project = Project::open(&args.dir)?;
    let name = deploy::deployed_name(&project, args.name.as_deref())?;
    let staged = project.staged()?;
    let defaults = config.plugins.defaults();
    let wasm = staged.join(format!("{}.wasm", project.name));
    check_file(&wasm, &defaults)
        .map_err(|e| AuthoringError::Plugin(format!("not deployed: the check failed: {e}")))?;
    let chain = load_chain(&staged, &defaults)?;
    let mut tally = Tally::default();
    for file in project.case_files() {
        run_file(&cases::read(&file)?, &chain, config, false, &mut tally)?;
    }
    if tally.failed > 0 {
        return Err(AuthoringError::Plugin(format!(
            "not deployed: {} test cases failed",
            tally.failed
        )));
    }
    deploy::deploy(&project, &staged, &args.to, &name)
}

/// `hookrelay record --out FILE [--duration D] [--count N]`.
#[derive(clap::Args)]
pub(crate) struct RecordArgs {
    /// The file to write (one bus message a line).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Stop after this long (e.g. 90s, 10m, 1h).
    #[arg(long, value_parser = humantime::parse_duration, value_name = "D")]
    duration: Option<Duration>,
    /// Stop after this many messages.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// With [[sources]]: which server's bus (default: the first).
    #[arg(long, value_name = "NAME")]
    source: Option<String>,
    /// The relay's configuration (its Redis and channels).
    #[arg(long, short, value_name = "FILE", env = "HOOKRELAY_CONFIG")]
    config: Option<PathBuf>,
}

pub(crate) fn record(args: &RecordArgs) -> ExitCode {
    let config = match load_config(args.config.as_deref()) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hookrelay: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let until = record::Until {
        duration: args.duration,
        count: args.count,
    };
    let out = &args.out;
    let done = runtime.block_on(record::record(
        &config,
        args.source.as_deref(),
        out,
        until,
        |source, channels| {
            eprintln!(
                "recording the bus of {source} ({channels} channels) to {}",
                out.display()
            );
        },
    ));
    match done {
        Ok(r) => {
            println!(
                "recorded {} messages to {} ({} not JSON, skipped)",
                r.messages,
                out.display(),
                r.skipped
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// The configuration when one is named (else defaults, without a secret: these commands sign
/// nothing).
fn load_config(path: Option<&Path>) -> Result<Config, ExitCode> {
    let Some(path) = path else {
        return Ok(Config::default());
    };
    Config::load(Some(path)).map_err(|e| {
        eprintln!("hookrelay: {e}");
        ExitCode::from(2)
    })
}
