//! Output files that appear whole or not at all: written under a temporary name in the
//! destination's folder, renamed over the destination on success, removed on failure.
//!
//! Who calls it: `record`, `import_champsim`, and the CLI's `--json` / `--csv` outputs. A
//! recording that fails (or a report that cannot be written) then leaves no partial file a
//! later replay would trip over, and never destroys the previous file of that name.
//!
//! rename(2) within one file system is atomic, which is why the temporary file sits beside the
//! destination rather than in the system's temporary folder.
//!
//! A destination that exists and is not a regular file (a character device such as /dev/null,
//! a pipe, /dev/stdout's target) is written in place: renaming over it would replace the device
//! node or the link with a regular file (as root, /dev/null itself). A symbolic link to a
//! regular file keeps the link: the file it names is the one replaced.

use std::fs::File;
use std::path::{Path, PathBuf};

/// The pending destination of an output file. Dropping it without [`AtomicOutput::commit`]
/// removes the temporary file.
#[derive(Debug)]
pub struct AtomicOutput {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
    /// Written in place (a destination that is not a regular file): nothing to rename or remove.
    direct: bool,
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
        let cannot = |e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("cannot create {}: {e}", dest.display()))
        };
        // Not a regular file (metadata follows links): written in place.
        if let Ok(md) = std::fs::metadata(dest) {
            if !md.is_file() {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(dest)
                    .map_err(cannot)?;
                return Ok((
                    f,
                    AtomicOutput {
                        tmp: PathBuf::new(),
                        dest: dest.to_owned(),
                        done: false,
                        direct: true,
                    },
                ));
            }
        }
        // A link to a regular file: replace the file it names, beside it.
        let is_link = std::fs::symlink_metadata(dest).is_ok_and(|m| m.file_type().is_symlink());
        let real = if is_link {
            std::fs::canonicalize(dest).map_err(cannot)?
        } else {
            dest.to_owned()
        };
        let name = real.file_name().unwrap_or(name);
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".splab-tmp-{}", std::process::id()));
        let tmp = real.with_file_name(tmp_name);
        let f = File::create(&tmp).map_err(cannot)?;
        Ok((
            f,
            AtomicOutput {
                tmp,
                dest: real,
                done: false,
                direct: false,
            },
        ))
    }

    /// Renames the temporary file over the destination. The caller has flushed what it wrote.
    pub fn commit(mut self) -> std::io::Result<()> {
        if self.direct {
            self.done = true;
            return Ok(());
        }
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
        if !self.done && !self.direct {
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

    /// A destination that is not a regular file is written in place and stays what it was:
    /// a pipe here (/dev/null and /dev/stdout are the everyday cases: renaming over them as
    /// root replaced the device node with a regular file). A link to a regular file stays a
    /// link, and the file it names gets the output.
    #[test]
    fn a_pipe_or_a_link_is_written_through_not_replaced() {
        use std::os::unix::fs::FileTypeExt;
        let dir = std::env::temp_dir().join(format!("splab-atomic-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A link to a regular file first (without the in-place rule its assertion fails; the
        // pipe's reader would wait for a writer that never comes).
        let target = dir.join("real.json");
        std::fs::write(&target, "old").unwrap();
        let link = dir.join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let (mut f, g) = AtomicOutput::create(&link).unwrap();
        f.write_all(b"new").unwrap();
        drop(f);
        g.commit().unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        let fifo = dir.join("pipe");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(st.success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        let (mut f, g) = AtomicOutput::create(&fifo).unwrap();
        f.write_all(b"through the pipe").unwrap();
        drop(f);
        g.commit().unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
        // Nothing left beside them: the pipe, the file and the link.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
