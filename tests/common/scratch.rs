//! Temporary folders that are removed when the test ends, pass or fail.

use std::ops::Deref;
use std::path::{Path, PathBuf};

/// A fresh, empty folder under the system's temporary directory, named after
/// the test's area and the process, removed on drop (also when the test
/// panics) unless `TESSERA_KEEP_SCRATCH` is set, to look at the files.
/// Dereferences to its path.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh folder `tessera-<name>-<pid>`; an older one of that name is
    /// removed first. Names must be unique among the tests of one binary.
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("tessera-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create a scratch folder");
        Scratch(dir)
    }

    /// The folder's path, owned.
    pub fn path_buf(&self) -> PathBuf {
        self.0.clone()
    }
}

impl Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("TESSERA_KEEP_SCRATCH").is_some() {
            eprintln!("kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
