//! The default case matrix on this machine's OpenCL devices (PoCL on CI), one test per case,
//! run in-process through the same `ops::execute` the workers use. A case passes the test when
//! its outcome is what its expectation allows: `pass` (or an honest `unsupported`), and for a
//! negative control also `fail` (the stale read it exists to show). Without OpenCL every case is
//! ignored, unless CLHIP_REQUIRE_OPENCL=1, when the run fails.

use std::cell::RefCell;

use clhip::cases::Matrix;
use clhip::expectations::Baseline;
use clhip::ops::{WorkerState, execute};
use libtest_mimic::{Arguments, Failed, Trial};

thread_local! {
    static STATE: RefCell<WorkerState> = RefCell::new(WorkerState::default());
}

fn main() {
    let mut args = Arguments::from_args();
    // One OpenCL session per thread would rebuild the program per thread; one thread is faster.
    args.test_threads = Some(1);
    let trials = match clhip::runtimes::opencl::test_device() {
        None => vec![Trial::test("opencl-matrix", || Ok(())).with_ignored_flag(true)],
        Some(_) => {
            let pairs = clhip::pairs::discover().expect("enumerated above");
            Matrix::default_matrix()
                .expand(&pairs)
                .into_iter()
                .map(|case| {
                    let expectation = Baseline::unbaselined(&case);
                    Trial::test(case.id(), move || {
                        let outcome = STATE.with(|s| execute(&mut s.borrow_mut(), &case, 0x5EED));
                        if expectation.is_unexpected(outcome.kind()) {
                            Err(Failed::from(format!(
                                "{}: {}",
                                outcome.kind(),
                                outcome.reason()
                            )))
                        } else {
                            Ok(())
                        }
                    })
                })
                .collect()
        }
    };
    libtest_mimic::run(&args, trials).exit();
}
