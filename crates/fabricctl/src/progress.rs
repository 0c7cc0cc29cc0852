//! Progress on standard error for long offline work (`analyze`, `route` on big fabrics): a
//! bar over [`fabric_metrics::Progress`] units, a spinner with the elapsed time where the work
//! has no count. Shown only when standard error is a terminal; otherwise (scripts, CI, pipes)
//! nothing is drawn and the work runs as is.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fabric_metrics::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often the bar reads the counters.
const TICK: Duration = Duration::from_millis(100);

/// Whether progress is drawn: standard error is a terminal.
pub fn enabled() -> bool {
    std::io::stderr().is_terminal()
}

/// Runs `work` with a spinner `message` and the elapsed time on a terminal.
pub fn spinner<T>(message: &str, work: impl FnOnce() -> T) -> T {
    if !enabled() {
        return work();
    }
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(message.to_string());
    pb.enable_steady_tick(TICK);
    let out = work();
    pb.finish_and_clear();
    out
}

/// Runs `work` with a bar `message` over the units it reports in its [`Progress`] on a
/// terminal (a thread of its own redraws the bar while `work` runs on this one).
pub fn bar<T: Send>(message: &str, work: impl FnOnce(&Progress) -> T + Send) -> T {
    let progress = Progress::new();
    if !enabled() {
        return work(&progress);
    }
    // Drawn from the first announced unit on (no empty "0/0" bar).
    let pb = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({elapsed}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_message(message.to_string());
    let finished = AtomicBool::new(false);
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            let mut shown = false;
            while !finished.load(Ordering::Relaxed) {
                pb.set_length(progress.total());
                pb.set_position(progress.done());
                if !shown && progress.total() > 0 {
                    pb.set_draw_target(ProgressDrawTarget::stderr());
                    shown = true;
                }
                std::thread::sleep(TICK);
            }
        });
        let out = work(&progress);
        finished.store(true, Ordering::Relaxed);
        out
    });
    pb.finish_and_clear();
    out
}
