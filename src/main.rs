fn main() -> std::process::ExitCode {
    toolcage::cli::main()
}
