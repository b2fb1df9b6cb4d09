//! Output files that appear whole or not at all: written under a temporary name in the
//! destination's folder, renamed over the destination on success, removed on failure.
//!
//! Who calls it: `record`, `import_champsim`, and the CLI's `--json` / `--csv` outputs. A
//! recording that fails (or a report that cannot be written) then leaves no partial file a
//! later replay would trip over, and never destroys the previous file of that name.
//!
//! rename(2) within one file system is atomic, which is why the temporary file sits beside the
//! destination rather than in the system's temporary folder.

use std::fs::File;
use std::path::{Path, PathBuf};

/// The pending destination of an output file. Dropping it without [`AtomicOutput::commit`]
/// removes the temporary file.
#[derive(Debug)]
pub struct AtomicOutput {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
}

impl AtomicOutput {
    /// Creates the temporary file for `dest` (`.NAME.splab-tmp-PID` in the same folder) and
    /// returns it with its guard. Fails, naming `dest`, when the folder is missing or not
    /// writable, or when `dest` is a folder: before any long work starts.
    pub fn create(dest: &Path) -> std::io::Result<(File, AtomicOutput)> {
        let name = dest.file_name().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} names no file", dest.display()),
            )
        })?;
        if dest.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} is a folder, not a file", dest.display()),
            ));
        }
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".splab-tmp-{}", std::process::id()));
        let tmp = dest.with_file_name(tmp_name);
        let f = File::create(&tmp).map_err(|e| {
            std::io::Error::new(e.kind(), format!("cannot create {}: {e}", dest.display()))
        })?;
        Ok((
            f,
            AtomicOutput {
                tmp,
                dest: dest.to_owned(),
                done: false,
            },
        ))
    }

    /// Renames the temporary file over the destination. The caller has flushed what it wrote.
    pub fn commit(mut self) -> std::io::Result<()> {
        std::fs::rename(&self.tmp, &self.dest).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "cannot rename {} to {}: {e}",
                    self.tmp.display(),
                    self.dest.display()
                ),
            )
        })?;
        self.done = true;
        Ok(())
    }

    /// The destination's path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }
}

impl Drop for AtomicOutput {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn commit_replaces_and_drop_leaves_nothing() {
        let dir = std::env::temp_dir().join(format!("splab-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dest = dir.join("out.txt");
        std::fs::write(&dest, "old").unwrap();
        // Dropped without commit: the old file survives and no temporary file remains.
        {
            let (mut f, _g) = AtomicOutput::create(&dest).unwrap();
            f.write_all(b"partial").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "old");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        let (mut f, g) = AtomicOutput::create(&dest).unwrap();
        f.write_all(b"new").unwrap();
        drop(f);
        g.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        // A folder or a missing folder is refused up front, naming the path.
        let e = AtomicOutput::create(&dir).unwrap_err().to_string();
        assert!(e.contains("folder"), "{e}");
        let e = AtomicOutput::create(&dir.join("no/such.json"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no/such.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
