//! Output a candle loader prints where the caller did not ask for it.

use std::io::Write;

/// Runs `f` with file descriptor 1 pointing at descriptor 2, so that what candle prints with
/// `println!` reaches stderr and stdout carries only what the caller writes there. Stdout is
/// flushed on both sides of the swap (Rust's stdout is line-buffered and `print!` may leave a
/// partial line in the buffer).
#[cfg(unix)]
pub fn stdout_to_stderr<T>(f: impl FnOnce() -> T) -> T {
    let _ = std::io::stdout().flush();
    // SAFETY: dup/dup2/close on descriptors this process owns; a failed dup leaves stdout alone.
    let saved = unsafe { libc::dup(1) };
    if saved < 0 || unsafe { libc::dup2(2, 1) } < 0 {
        return f();
    }
    let out = f();
    let _ = std::io::stdout().flush();
    unsafe {
        libc::dup2(saved, 1);
        libc::close(saved);
    }
    out
}

#[cfg(not(unix))]
pub fn stdout_to_stderr<T>(f: impl FnOnce() -> T) -> T {
    f()
}
