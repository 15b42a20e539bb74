use std::process::ExitCode;

fn main() -> ExitCode {
    // The binary doubles as the fake HTCondor commands (see src/fake_condor/) when
    // it is invoked under their names, busybox-style.
    let argv0 = std::env::args_os().next().unwrap_or_default();
    let name = std::path::Path::new(&argv0).file_name().and_then(|n| n.to_str()).unwrap_or("");
    if let Some(code) = cosched::fake_condor::main_as(name) {
        return code;
    }
    cosched::cli::main()
}
