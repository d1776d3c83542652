fn main() {
    std::process::exit(topo::cli::main_entry());
}
