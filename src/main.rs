//! The `svs` binary: the command line (`svs-cli`) with `svs serve` (here:
//! the one command above `svs-api`).

mod serve;

fn main() -> std::process::ExitCode {
    svs_cli::main(serve::run)
}
