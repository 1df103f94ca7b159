//! Running the `tessera` binary the way a user does, from the package root.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};

/// The `tessera` binary with `args`, run from the package root.
pub fn tessera<S: AsRef<OsStr>>(args: &[S]) -> Output {
    tessera_command(args)
        .output()
        .expect("the tessera binary runs")
}

/// The command [`tessera`] runs, to add arguments, environment or pipes.
pub fn tessera_command<S: AsRef<OsStr>>(args: &[S]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    command.args(args).current_dir(package_root());
    command
}

/// The package root (where `suites/`, `examples/` and `schedules/` are).
pub fn package_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}
