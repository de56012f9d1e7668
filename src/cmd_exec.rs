//! `rocelab exec -- PROGRAM ARGS...` and `rocelab env`: run unmodified
//! ibverbs programs over the UDP emulation.
//!
//! Both put rocelab's `libibverbs.so.1` (the `ibverbs-shim` crate, built as
//! `libibverbs.so` next to the `rocelab` binary) and `librdmacm.so.1` (the
//! `rdmacm-shim` crate, `librdmacm.so`, found beside `libibverbs.so`) first
//! on the loader's path: a directory holding `libibverbs.so.1` and
//! `librdmacm.so.1` links to them goes in front of `LD_LIBRARY_PATH`.
//! Without a `librdmacm.so` beside the ibverbs library only libibverbs is
//! replaced (and a note says so). `--device NAME=IPV4[:PORT]` sets the device list
//! (`ROCELAB_IBV_DEVICES`); without it the library's default applies (one
//! loopback device, `rocelab0`, with an address per process).
//!
//! `exec` (not `env`, which only prints variables) also runs the program in
//! a private mount namespace that shows the devices' sysfs view
//! (`/sys/class/infiniband/<dev>/...`, `/dev/infiniband/uverbsN`: see
//! `verbs_emu::sysfs`), so that consumers that read sysfs (rdma-core's
//! tests, UCX) find them; the host's mounts do not change. Where the
//! namespace cannot be made, a note says why and the program runs without
//! the view; `--no-sysfs` skips it.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The variable naming the shim library (a file or its directory).
const LIB_ENV: &str = "ROCELAB_IBVERBS_LIB";
/// The device list variable the library reads.
const DEVICES_ENV: &str = "ROCELAB_IBV_DEVICES";
/// The file cargo builds.
const BUILT_NAME: &str = "libibverbs.so";
/// The soname programs ask the loader for.
const SONAME: &str = "libibverbs.so.1";
/// The rdma_cm library cargo builds, beside [`BUILT_NAME`].
const RDMACM_BUILT_NAME: &str = "librdmacm.so";
/// Its soname.
const RDMACM_SONAME: &str = "librdmacm.so.1";

/// Options shared by `exec` and `env`.
#[derive(Debug, clap::Args)]
pub struct ShimArgs {
    /// A device as NAME=IPV4[:PORT] (repeat for more); default: one
    /// loopback device, rocelab0, with its own 127.0.x.y per process.
    #[arg(long = "device", value_name = "NAME=IPV4[:PORT]")]
    devices: Vec<String>,
    /// The shim library (libibverbs.so) to use; default: next to rocelab,
    /// or $ROCELAB_IBVERBS_LIB. The librdmacm.so beside it is used too.
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
}

/// Arguments of `rocelab exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    #[command(flatten)]
    shim: ShimArgs,
    /// Run without the private mount namespace that shows the devices'
    /// sysfs view (/sys/class/infiniband, /dev/infiniband).
    #[arg(long)]
    no_sysfs: bool,
    /// The program and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    command: Vec<OsString>,
}

/// How `rocelab env` prints the settings.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum EnvFormat {
    /// `export NAME='VALUE'` lines for sh, bash and zsh (`eval "$(rocelab env)"`).
    Shell,
    /// `NAME=VALUE` lines, as GitHub Actions' $GITHUB_ENV and .env files take.
    Dotenv,
}

/// Arguments of `rocelab env`.
#[derive(Debug, clap::Args)]
pub struct EnvArgs {
    #[command(flatten)]
    shim: ShimArgs,
    /// Output format.
    #[arg(long, value_enum, default_value = "shell")]
    format: EnvFormat,
}

/// Where to look for the built library, first match wins.
fn candidates(explicit: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut push = |p: PathBuf| {
        if p.is_dir() {
            out.push(p.join(BUILT_NAME));
            out.push(p.join(SONAME));
        } else {
            out.push(p);
        }
    };
    if let Some(p) = explicit {
        push(p.to_path_buf());
        return out;
    }
    if let Some(p) = std::env::var_os(LIB_ENV) {
        push(PathBuf::from(p));
        return out;
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            push(dir.to_path_buf());
            if let Some(up) = dir.parent() {
                push(up.to_path_buf());
            }
        }
    }
    out
}

/// The command that builds the two libraries where this binary looks for
/// them: the workspace's default members are rocelab and both shims, so a
/// plain build of the profile this binary came from puts them beside it.
fn build_command() -> &'static str {
    let release = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.ends_with("release")))
        .unwrap_or(false);
    if release {
        "cargo build --release"
    } else {
        "cargo build"
    }
}

/// The shim library to load, or why there is none.
fn find_library(explicit: Option<&Path>) -> Result<PathBuf, String> {
    let c = candidates(explicit);
    c.iter()
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
        .ok_or_else(|| {
            let tried: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
            format!(
                "rocelab's libibverbs was not found (tried {}); build it with `{}` in the \
                 rocelab checkout (it builds rocelab and both libraries next to the rocelab \
                 binary), or name it with --lib or ${LIB_ENV}",
                tried.join(", "),
                build_command(),
            )
        })
}

/// The rdma_cm library beside `lib` (the ibverbs one), if built.
fn find_rdmacm(lib: &Path) -> Option<PathBuf> {
    let dir = lib.parent()?;
    [RDMACM_BUILT_NAME, RDMACM_SONAME]
        .iter()
        .map(|n| dir.join(n))
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
}

/// A directory whose `libibverbs.so.1` is `lib` and whose `librdmacm.so.1`
/// is `rdmacm` (when given): the libraries' own directory when they carry
/// those names already, else `rocelab-ibverbs/` beside the library, or a
/// per-user one in the temporary directory when that is not writable.
fn loader_dir(lib: &Path, rdmacm: Option<&Path>) -> Result<PathBuf, String> {
    let named = |p: &Path, soname: &str| p.file_name().is_some_and(|n| n == soname);
    if named(lib, SONAME)
        && rdmacm.map_or(true, |r| {
            named(r, RDMACM_SONAME) && r.parent() == lib.parent()
        })
    {
        if let Some(d) = lib.parent() {
            return Ok(d.to_path_buf());
        }
    }
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let beside = lib.parent().map(|d| d.join("rocelab-ibverbs"));
    let temp = std::env::temp_dir().join(format!("rocelab-ibverbs-{uid}"));
    let mut last = String::new();
    for dir in beside.into_iter().chain([temp]) {
        let linked = link_into(&dir, lib, SONAME).and_then(|()| match rdmacm {
            Some(r) => link_into(&dir, r, RDMACM_SONAME),
            None => Ok(()),
        });
        match linked {
            Ok(()) => return Ok(dir),
            Err(e) => last = format!("{}: {e}", dir.display()),
        }
    }
    Err(format!("cannot make the {SONAME} link ({last})"))
}

/// Make `dir/NAME` a link to `lib` (replacing another atomically).
fn link_into(dir: &Path, lib: &Path, name: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let link = dir.join(name);
    if std::fs::read_link(&link).is_ok_and(|t| t == lib) {
        return Ok(());
    }
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(lib, &tmp)?;
    std::fs::rename(&tmp, &link)
}

/// The variables a program needs to run over the emulation, in order.
fn settings(shim: &ShimArgs) -> Result<Vec<(&'static str, String)>, String> {
    let lib = find_library(shim.lib.as_deref())?;
    let rdmacm = find_rdmacm(&lib);
    if rdmacm.is_none() {
        eprintln!(
            "note: no {RDMACM_BUILT_NAME} beside {}: rdma_cm programs (rping, ib_write_bw -R) \
             will not find the emulated devices; build it with `{}` in the rocelab checkout",
            lib.display(),
            build_command(),
        );
    }
    let dir = loader_dir(&lib, rdmacm.as_deref())?;
    let dir = dir.to_string_lossy().into_owned();
    let path = match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => ld_path(&dir, &old),
        _ => dir,
    };
    let mut out = vec![("LD_LIBRARY_PATH", path)];
    if !shim.devices.is_empty() {
        out.push((DEVICES_ENV, shim.devices.join(",")));
    } else if let Ok(d) = std::env::var(DEVICES_ENV) {
        out.push((DEVICES_ENV, d));
    }
    Ok(out)
}

/// `dir` in front of the path list `old`, without repeating it.
fn ld_path(dir: &str, old: &str) -> String {
    let rest: Vec<&str> = old.split(':').filter(|p| *p != dir).collect();
    if rest.is_empty() {
        dir.to_owned()
    } else {
        format!("{dir}:{}", rest.join(":"))
    }
}

/// Quote for POSIX shells: single quotes, `'` as `'\''`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Runs `rocelab exec`: replaces this process with the program.
pub fn run_exec(args: ExecArgs) -> ExitCode {
    let vars = match settings(&args.shim) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut cmd = std::process::Command::new(&args.command[0]);
    cmd.args(&args.command[1..]);
    for (k, v) in &vars {
        cmd.env(k, v);
    }
    if !args.no_sysfs {
        let list = vars
            .iter()
            .find(|(k, _)| *k == DEVICES_ENV)
            .map(|(_, v)| v.as_str());
        let view = verbs_emu::sysfs::SysfsDevice::parse_list(list, std::process::id())
            .and_then(|devices| verbs_emu::sysfs::namespace::enter(&devices));
        if let Err(e) = view {
            eprintln!("note: no sysfs view of the devices ({e}); running without it");
        }
    }
    let err = cmd.exec();
    eprintln!(
        "error: cannot run {}: {err}",
        args.command[0].to_string_lossy()
    );
    ExitCode::from(127)
}

/// Runs `rocelab env`: prints the settings.
pub fn run_env(args: &EnvArgs) -> ExitCode {
    match settings(&args.shim) {
        Ok(vars) => {
            for (k, v) in vars {
                match args.format {
                    EnvFormat::Shell => println!("export {k}={}", sh_quote(&v)),
                    EnvFormat::Dotenv => println!("{k}={v}"),
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_goes_first_once() {
        assert_eq!(ld_path("/a", "/b:/a:/c"), "/a:/b:/c");
        assert_eq!(ld_path("/a", "/a"), "/a");
    }

    #[test]
    fn shell_quoting_survives_quotes() {
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn a_missing_library_says_how_to_build_it() {
        let e = find_library(Some(Path::new("/nonexistent/libibverbs.so"))).unwrap_err();
        assert!(e.contains(build_command()), "{e}");
        assert!(e.contains("cargo build"), "{e}");
        assert!(e.contains("/nonexistent/libibverbs.so"), "{e}");
    }

    #[test]
    fn the_link_names_the_library() {
        let dir = std::env::temp_dir().join(format!("rocelab-exec-test-{}", std::process::id()));
        let lib = dir.join("libibverbs.so");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&lib, b"x").unwrap();
        let d = loader_dir(&lib, None).unwrap();
        assert_eq!(std::fs::read_link(d.join(SONAME)).unwrap(), lib);
        // Idempotent.
        assert_eq!(loader_dir(&lib, None).unwrap(), d);
        // The rdma_cm library beside it is found and linked too.
        let cm = dir.join(RDMACM_BUILT_NAME);
        std::fs::write(&cm, b"y").unwrap();
        let cm = find_rdmacm(&lib).unwrap();
        let d = loader_dir(&lib, Some(&cm)).unwrap();
        assert_eq!(std::fs::read_link(d.join(SONAME)).unwrap(), lib);
        assert_eq!(std::fs::read_link(d.join(RDMACM_SONAME)).unwrap(), cm);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
