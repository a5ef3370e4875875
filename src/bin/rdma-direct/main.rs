//! `rdma-direct`: the command-line tool.

mod bench;
mod devices;
mod info;
mod pingpong;
mod simpingpong;

const USAGE: &str = "\
rdma-direct — kernel-bypass RDMA data plane (mlx5 direct, verbs fallback, software mlx5 device)

usage: rdma-direct <command> [options]

commands:
  devices              list RDMA devices (like ibv_devices)
  info [-d DEV] [-v]   device and port attributes, GID table (like ibv_devinfo / ibstat)
  pingpong [opts]      RC/UC ping-pong; speaks ibv_rc_pingpong's protocol with -d DEV,
                       runs on the software mlx5 device without one
  bench <name> [opts]  hot-path benchmarks (see `rdma-direct bench --help`)
  help                 this text
";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let cmd = args.get(1).map(String::as_str).unwrap_or("help");
    let rest = if args.len() > 2 { &args[2..] } else { &[][..] };
    let code = match cmd {
        "devices" => devices::run(rest),
        "info" => info::run(rest),
        "pingpong" => pingpong::run(rest),
        "bench" => bench::run(rest),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            0
        }
        other => {
            eprintln!("rdma-direct: unknown command '{other}'\n\n{USAGE}");
            2
        }
    };
    std::process::exit(code);
}
