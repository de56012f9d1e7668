//! A private mount namespace holding the sysfs view (Linux).
//!
//! [`enter`] moves the calling process into a new mount namespace (and,
//! when it is not root, a new user namespace mapping its own user and
//! group ids, so that it may mount there) and then, in that namespace
//! only:
//!
//! * `/sys/class` becomes a small tmpfs holding the host's class
//!   directories (bind mounts of the originals, reached through a
//!   descriptor opened before they were covered) plus the generated
//!   `infiniband` and `infiniband_verbs` directories of [`super::tree`];
//!   a host's own `infiniband*` directories are left out;
//! * `/dev` becomes a tmpfs holding the host's entries the same way
//!   (`/dev/shm`, `/dev/pts` and the others are the host's, so shared
//!   memory between two such processes still meets), plus
//!   `/dev/infiniband/uverbsN`: a bind mount of `/dev/null`, a character
//!   device that anyone may open, as UCX asks of a verbs device.
//!
//! The host's mounts are untouched, and the namespace ends with its last
//! process. It must be called while the process has one thread (a user
//! namespace requires it). An error names the step that failed; the
//! process is then in no defined namespace state it relies on (the caller
//! runs the program without the view).

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use super::{device_nodes, write_tree, SysfsDevice};

/// Directories of `/sys/class` the view replaces.
const REPLACED_CLASSES: [&str; 3] = ["infiniband", "infiniband_verbs", "infiniband_mad"];

/// Enters a private mount namespace in which `devices` have their sysfs
/// view and device nodes (see the module documentation).
pub fn enter(devices: &[SysfsDevice]) -> Result<(), String> {
    unshare_namespaces()?;
    mount_raw(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
    .map_err(|e| format!("making / private: {e}"))?;
    cover_dir(Path::new("/sys/class"), &REPLACED_CLASSES)
        .map_err(|e| format!("/sys/class: {e}"))?;
    write_tree(Path::new("/sys/class"), devices)
        .map_err(|e| format!("writing /sys/class/infiniband: {e}"))?;
    cover_dir(Path::new("/dev"), &["infiniband"]).map_err(|e| format!("/dev: {e}"))?;
    let ib = Path::new("/dev/infiniband");
    std::fs::create_dir_all(ib).map_err(|e| format!("/dev/infiniband: {e}"))?;
    for node in device_nodes(devices) {
        let path = ib.join(node);
        File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        mount_raw(
            Some(Path::new("/dev/null")),
            &path,
            None,
            libc::MS_BIND,
            None,
        )
        .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// A new mount namespace; a new user namespace first when not root.
fn unshare_namespaces() -> Result<(), String> {
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    if uid == 0 {
        // SAFETY: unshare takes flags only; it changes this process's
        // namespaces and touches no memory of ours.
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
            return Err(format!(
                "unshare(mount namespace): {}",
                io::Error::last_os_error()
            ));
        }
        return Ok(());
    }
    // SAFETY: as above.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
        return Err(format!(
            "unshare(user and mount namespaces): {}",
            io::Error::last_os_error()
        ));
    }
    let write = |file: &str, text: String| {
        std::fs::write(file, text).map_err(|e| format!("writing {file}: {e}"))
    };
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    Ok(())
}

/// Covers `dir` with a tmpfs that holds the same entries (bind mounts of
/// the covered ones, symbolic links copied), except those named in `skip`.
fn cover_dir(dir: &Path, skip: &[&str]) -> io::Result<()> {
    let entries: Vec<(std::ffi::OsString, std::fs::FileType)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.file_name(), e.file_type().ok()?)))
        .filter(|(n, _)| !skip.iter().any(|s| OsStr::new(s) == n.as_os_str()))
        .collect();
    // The originals stay reachable through this descriptor once covered.
    let old = File::open(dir)?;
    let via = Path::new("/proc/self/fd").join(old.as_raw_fd().to_string());
    mount_raw(
        Some(Path::new("tmpfs")),
        dir,
        Some("tmpfs"),
        libc::MS_NOSUID,
        Some("mode=755"),
    )?;
    for (name, kind) in entries {
        let source = via.join(&name);
        let target = dir.join(&name);
        // One entry that cannot be rebuilt (a socket, a busy node) is left
        // out; the others still come.
        let _ = if kind.is_symlink() {
            std::fs::read_link(&source).and_then(|t| std::os::unix::fs::symlink(t, &target))
        } else if kind.is_dir() {
            std::fs::create_dir(&target).and_then(|()| {
                mount_raw(
                    Some(&source),
                    &target,
                    None,
                    libc::MS_BIND | libc::MS_REC,
                    None,
                )
            })
        } else {
            File::create(&target)
                .and_then(|_| mount_raw(Some(&source), &target, None, libc::MS_BIND, None))
        };
    }
    drop(old);
    Ok(())
}

/// `mount(2)` with paths taken as they are (never canonicalised: a
/// `/proc/self/fd/N/...` source must reach the covered directory).
fn mount_raw(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let c = |b: &[u8]| CString::new(b).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput));
    let source = source.map(|s| c(s.as_os_str().as_bytes())).transpose()?;
    let target = c(target.as_os_str().as_bytes())?;
    let fstype = fstype.map(|s| c(s.as_bytes())).transpose()?;
    let data = data.map(|s| c(s.as_bytes())).transpose()?;
    let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that lives
    // until mount returns; `data` is a string as tmpfs expects (or null).
    let rc = unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
