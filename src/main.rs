use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = svs::cli::Cli::parse();
    match svs::cli::run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            svs::cli::report_failure(&message);
            std::process::ExitCode::FAILURE
        }
    }
}
