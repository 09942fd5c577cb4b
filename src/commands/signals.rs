//! What the terminal's signals do to a run.

use std::sync::Arc;

use anyhow::Context;

use clhip::runner::RunControl;

use super::note;

/// Ctrl-C and SIGTERM stop the run (a second one ends the process at once); Ctrl-Z stops the
/// workers with the runner, and SIGCONT continues both, the time stopped counting against no
/// case. Workers lead their own process groups, so the terminal's signals reach them only
/// through here.
pub fn handle_signals(control: Arc<RunControl>) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGCONT, SIGHUP, SIGINT, SIGTERM, SIGTSTP};
    // SIGHUP (a closed ssh session) ends the run as Ctrl-C does: the results are written.
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGTSTP, SIGCONT])
            .context("installing signal handlers")?;
    std::thread::Builder::new()
        .name("clhip-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                match sig {
                    SIGINT | SIGTERM | SIGHUP if control.is_interrupted() => {
                        note("clhip: interrupted again: exiting now; the journal keeps what finished");
                        std::process::exit(130);
                    }
                    SIGINT | SIGTERM | SIGHUP => {
                        note("clhip: interrupted: stopping the workers and writing what finished (again to exit at once)");
                        control.interrupt();
                    }
                    SIGTSTP => {
                        control.pause();
                        let _ = signal_hook::low_level::emulate_default_handler(SIGTSTP);
                    }
                    SIGCONT => control.resume(),
                    _ => {}
                }
            }
        })
        .context("starting the signal thread")?;
    Ok(())
}
