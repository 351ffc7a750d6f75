//! What the subcommands write to the terminal.

/// A progress bar on stderr when it is a terminal; nothing otherwise, so
/// logs and pipes stay clean.
pub(crate) fn progress_bar(message: &str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal as _;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0).with_message(message.to_owned());
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(bar)
}

/// Writes a command's output. A reader that stops early (`| head`) is not
/// an error: the output is simply no longer wanted, and `println!` would
/// panic on the broken pipe.
pub(crate) fn stdout(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(format!("cannot write to stdout: {e}")),
        _ => Ok(()),
    }
}
