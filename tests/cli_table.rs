//! Every command of `rdma-direct` off its happy path, as a table: one row per command line
//! (defaults, options at their bounds, each kind of bad input) with the exit status it must
//! give and a text it must print.
//!
//! A row passes when the process
//! - ends by itself within [`LIMIT`] (it is killed and the row fails otherwise: a hang);
//! - exits with the row's status, never by a signal (an abort);
//! - prints no panic and no backtrace;
//! - for status 0: prints the row's text on stdout;
//! - for status 1 or 2: prints exactly one line on stderr, `rdma-direct CMD...: PROBLEM`,
//!   and the row's text is in it (the problem, named).
//!
//! Rows run without an RDMA device (the software device `sim0` and plain memory), so they
//! hold on any host; a named device that does not exist (`mlx5_9`) gets the one "no RDMA
//! device" diagnosis. `{tmp}` is a scratch directory (with the garbage, truncated and binary
//! files `plot` is given), `{fx}` the fixtures directory.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Longest a row may run (debug build, busy 2-core machine). The limit is enforced by
/// killing the child, not by asserting timings.
const LIMIT: Duration = Duration::from_secs(60);

/// One command line and what it must do.
struct Row {
    /// The arguments after `rdma-direct`, split at spaces (`{tmp}`, `{fx}` substituted).
    args: &'static str,
    /// The exit status: 0, 1 (the run failed) or 2 (bad command line).
    status: i32,
    /// Status 0: a text on stdout; otherwise a text in the one stderr line.
    text: &'static str,
}

const fn r(args: &'static str, status: i32, text: &'static str) -> Row {
    Row { args, status, text }
}

const NO_DEV: &str = "no RDMA device 'mlx5_9'";

const ROWS: &[Row] = &[
    // ---- the top level
    r("", 2, "rdma-direct: which command? (`rdma-direct help` lists the commands)"),
    r("help perf", 0, "usage: rdma-direct perf"),
    r("help pingpong", 0, "usage: rdma-direct pingpong"),
    r("help frobnicate", 2, "unknown command 'frobnicate'"),
    r("perf write_lat --json /proc/x.json", 1, "(no file can be created there)"),
    r("help", 0, "commands:"),
    r("--help", 0, "commands:"),
    r("-h", 0, "commands:"),
    r("--version", 0, "rdma-direct 0."),
    r("-V", 0, "rdma-direct 0."),
    r("version", 0, "rdma-direct 0."),
    r("frobnicate", 2, "unknown command 'frobnicate'"),
    r("--bogus", 2, "unknown command '--bogus'"),
    // ---- devices
    r("devices", 0, "sim0"),
    r("devices --help", 0, "usage: rdma-direct devices"),
    r("devices -h", 0, "usage: rdma-direct devices"),
    r("devices --bogus", 2, "unknown option '--bogus'"),
    r("devices extra", 2, "unexpected argument 'extra'"),
    // ---- info
    r("info", 0, "hca_id:\tsim0"),
    r("info -d sim0", 0, "hca_id:\tsim0"),
    r("info --ib-dev sim0", 0, "software (not hardware)"),
    r("info -dsim0", 0, "hca_id:\tsim0"),
    r("info --provider sim", 0, "hca_id:\tsim0"),
    r("info -v", 0, "sim0"),
    r("info -i 1", 0, "port:\t1"),
    r("info --help", 0, "usage: rdma-direct info"),
    r("info -i 2", 1, "port 2"),
    r("info -d sim0 -i 2", 1, "one port"),
    r("info -i 0", 2, "bad port '0'"),
    r("info -i -1", 2, "bad port '-1'"),
    r("info -i 256", 2, "bad port '256'"),
    r("info -i x", 2, "bad port 'x'"),
    r("info -i", 2, "-i needs a port number"),
    r("info -d", 2, "-d needs a device name"),
    r("info -d mlx5_9", 1, NO_DEV),
    r("info --provider", 2, "--provider needs a value"),
    r("info --provider rxe", 2, "'rxe' is not auto, mlx5, verbs or sim"),
    r("info --provider sim -d mlx5_9", 2, "not 'mlx5_9'"),
    r("info --bogus", 2, "unexpected argument '--bogus'"),
    r("info extra", 2, "unexpected argument 'extra'"),
    // ---- pingpong (on the sim without -d)
    r("pingpong -n 20", 0, "iters in"),
    r("pingpong -d sim0 -n 20", 0, "iters in"),
    r("pingpong --ib-dev sim0 -n 20", 0, "not a link rate"),
    r("pingpong --provider sim -n 20", 0, "iters in"),
    r("pingpong -s 1 -n 20", 0, "iters in"),
    r("pingpong --size=64 -n 20", 0, "iters in"),
    r("pingpong -s 65536 -n 5", 0, "iters in"),
    r("pingpong -n 1", 0, "1 iters in"),
    r("pingpong -c UC -n 20", 0, "iters in"),
    r("pingpong -c rc -n 20", 0, "iters in"),
    r("pingpong -m 256 -n 20", 0, "iters in"),
    r("pingpong -m 4096 -n 20", 0, "iters in"),
    r("pingpong -r 2 -n 20", 0, "iters in"),
    r("pingpong -l 15 -n 20", 0, "iters in"),
    r("pingpong -u 31 -n 20", 0, "iters in"),
    r("pingpong --retry-cnt 0 -n 20", 0, "iters in"),
    r("pingpong -g 0 -n 20", 0, "iters in"),
    r("pingpong --help", 0, "usage: rdma-direct pingpong"),
    r("pingpong --loopback -n 20", 0, "iters in"),
    r("pingpong -d sim0 --loopback -n 20", 0, "iters in"),
    r("pingpong --loopback HOST", 2, "--loopback runs both ends in this process"),
    // A client with no server: after 10 s of retries, the command that starts the server.
    r(
        "pingpong -p 1 127.0.0.1",
        1,
        "is the server running? start it first: `rdma-direct pingpong -p 1`",
    ),
    r("pingpong -d rxe0 --loopback -p 19000", 2, "-p: --loopback exchanges no TCP"),
    r("pingpong -s 0", 2, "size (-s) 0: out of range"),
    r("pingpong -s 1073741825", 2, "out of range 1..=1073741824"),
    r("pingpong -s 99999999999", 2, "size (-s) 99999999999: out of range"),
    r("pingpong -s 999999999999999999999999", 2, "out of range"),
    r("pingpong -s -1", 2, "-s: -1 is negative"),
    r("pingpong -s x", 2, "-s: 'x' is not a number"),
    r("pingpong -s", 2, "-s needs a value"),
    r("pingpong -n 0", 2, "iterations (-n) 0: out of range"),
    r("pingpong -n 16777217", 2, "out of range 1..=16777216"),
    r("pingpong -n 4000000000", 2, "iterations (-n) 4000000000: out of range"),
    r("pingpong -n 99999999999", 2, "out of range"),
    r("pingpong -n -5", 2, "-n: -5 is negative"),
    r("pingpong -n many", 2, "-n: 'many' is not a number"),
    r("pingpong -c UD", 2, "'UD' is not RC or UC"),
    r("pingpong -c", 2, "-c needs a value"),
    r("pingpong -c -n 10", 2, "ibv_rc_pingpong's -c is --chk"),
    r("pingpong --chk -n 20", 0, "20 iters in"),
    r("pingpong -c UC --chk -n 20", 0, "20 iters in"),
    r("pingpong -e", 2, "-e: not supported: sleeping on completion events"),
    r("pingpong --events", 2, "--events: not supported"),
    r("pingpong -m 1500", 2, "MTU 1500 is not 256"),
    r("pingpong -m 0", 2, "MTU 0 is not 256"),
    r("pingpong -r 1", 2, "rx-depth 1 out of range"),
    r("pingpong -r 16385", 2, "rx-depth 16385 out of range"),
    r("pingpong -u 32", 2, "timeout 32 out of range"),
    r("pingpong --retry-cnt 8", 2, "retry-cnt 8 out of range"),
    r("pingpong -l 256", 2, "-l: 256 is out of range (at most 255)"),
    r("pingpong -i 0", 2, "ib-port is 1-based"),
    r("pingpong -i 2", 2, "one port (1)"),
    r("pingpong -g 1", 2, "one GID (index 0)"),
    r("pingpong -p 70000", 2, "-p: 70000 is out of range (at most 65535)"),
    r("pingpong -d", 2, "-d needs a value"),
    r("pingpong -d mlx5_9", 1, NO_DEV),
    r("pingpong -d mlx5_9 somehost", 1, NO_DEV),
    r("pingpong --provider verbs", 2, "--provider verbs needs a device"),
    r("pingpong --provider rxe", 2, "is not auto, mlx5, verbs or sim"),
    r("pingpong --bogus", 2, "unknown option '--bogus'"),
    r("pingpong a b", 2, "more than one HOST"),
    // ---- perf: every test at its defaults (short -n) on the sim
    r("perf write_lat -n 20", 0, "t_typical[usec]"),
    r("perf send_lat -n 20", 0, "t_typical[usec]"),
    r("perf read_lat -n 20", 0, "t_typical[usec]"),
    r("perf atomic_lat -n 20", 0, "t_typical[usec]"),
    r("perf write_bw -n 1000", 0, "BW average"),
    r("perf send_bw -n 1000", 0, "BW average"),
    r("perf read_bw -n 1000", 0, "BW average"),
    r("perf write_lat -d sim0 -n 20", 0, "Device          : sim0"),
    r("perf write_lat -p 1 127.0.0.1", 1, "connect to 127.0.0.1:1 (is the server running?)"),
    r("perf write_lat --use_event", 2, "--use_event: completion events are not used"),
    r("perf send_bw -c UD -s 8192 -n 1000", 2, "UD: 8192 B does not fit the path MTU of 4096 B"),
    r("perf write_lat -d sim0 -n 20", 0, "(auto: no -d or -d sim0,"),
    r("perf send_lat -d sim0 -c UD 127.0.0.1", 2, "-c UD: two processes run RC only"),
    r("perf write_lat --provider sim -n 20", 0, "sim0"),
    r("perf write_lat --loopback -n 20", 0, "t_typical[usec]"),
    r("perf write_lat -n 4", 0, "t_typical[usec]"),
    r("perf write_lat -s 1 -n 20", 0, "t_typical[usec]"),
    r("perf write_lat -s 8388608 -n 4", 0, "8388608"),
    r("perf write_lat -I 0 -n 20", 0, "t_typical[usec]"),
    r("perf write_lat -I 512 -n 20", 0, "Inline data     : up to 512 B"),
    r(
        "perf write_lat -I 1024 -n 20",
        1,
        "max_inline_data 1024 above the sim's 512 bytes",
    ),
    r("perf write_bw -l 128 -n 1000", 0, "Post list       : 128"),
    r("perf write_bw -Q 1 -n 1000", 0, "BW average"),
    r("perf write_bw -Q 128 -n 1024", 0, "BW average"),
    r("perf write_bw --report_gbits -n 1000", 0, "Gb/sec"),
    r("perf write_lat --histogram -n 20", 0, "histogram"),
    r("perf write_lat --threads 2 -n 20", 0, "each on its own thread"),
    r("perf write_lat --hw-ts -n 20", 0, "NIC time"),
    r("perf write_lat -F -n 20", 0, "t_typical[usec]"),
    r("perf --help", 0, "usage: rdma-direct perf"),
    r("perf write_bw --help", 0, "usage: rdma-direct perf"),
    r("perf help", 0, "usage: rdma-direct perf"),
    // ---- perf: bad input
    r("perf", 2, "which test?"),
    r("perf flood", 2, "unknown test 'flood'"),
    r("perf write_lat --bogus", 2, "unknown option '--bogus'"),
    r("perf write_lat -s", 2, "-s needs a value"),
    r("perf write_lat -s 0", 2, "size (-s) 0: out of range"),
    r("perf write_lat -s 8388609", 2, "out of range 1..=8388608"),
    r("perf write_lat -s 99999999999", 2, "size (-s) 99999999999: out of range"),
    r("perf write_lat -s -2", 2, "-s: -2 is negative"),
    r("perf write_lat -s big", 2, "-s: 'big' is not a number"),
    r("perf write_lat -n 0", 2, "-n"),
    r("perf write_lat -n 3", 2, "4 iterations"),
    r("perf write_lat -n 16777217", 2, "at most 16777216"),
    r("perf write_lat -n 4294967296", 2, "out of range"),
    r("perf write_lat -n x", 2, "'x' is not a number"),
    r("perf write_lat -a -s 4", 2, "-a and -s exclude each other"),
    r("perf write_lat -I 1025", 2, "inline (-I): at most 1024"),
    r("perf read_lat -I 16", 2, "inline"),
    r("perf atomic_lat -s 64", 2, "8 bytes"),
    r("perf write_lat -l 4", 2, "bandwidth"),
    r("perf write_bw -l 0", 2, "-l"),
    r("perf write_bw -l 129", 2, "post list (-l) 129: out of range"),
    r("perf write_bw -Q 0", 2, "-Q"),
    r("perf write_bw -l 32 -Q 5", 2, "multiple"),
    r("perf write_lat -c UD", 2, "UD only does SEND"),
    r("perf read_bw -c UC", 2, "UC has no READ"),
    r("perf write_lat -c XRC", 2, "'XRC' is not RC, UC or UD"),
    r("perf write_lat -i 2", 2, "one port (1)"),
    r("perf write_lat -i 0", 2, "-i"),
    r("perf write_lat -x 1", 2, "one GID (index 0)"),
    r("perf write_lat -x 256", 2, "-x: 256 is out of range (at most 255)"),
    r("perf write_lat -c UC somehost", 2, "-c UC: two processes run RC only"),
    r("perf write_lat -d sim0 -R somehost", 2, "-R: the software mlx5 device has no RDMA CM"),
    r("perf write_lat -d mlx5_9", 1, NO_DEV),
    r("perf write_lat -d mlx5_9 --loopback", 1, NO_DEV),
    r("perf write_lat -d mlx5_9 somehost", 1, NO_DEV),
    r("perf write_lat -d mlx5_9 -c UC somehost", 2, "RC only"),
    r("perf atomic_lat -d mlx5_9", 1, NO_DEV),
    r("perf write_lat --provider verbs", 2, "--provider verbs needs a device"),
    r("perf write_lat --provider rxe", 2, "is not auto, mlx5, verbs or sim"),
    r("perf write_bw --histogram", 2, "latency tests only"),
    r("perf write_lat --threads 3", 2, "1 or 2"),
    r("perf send_lat --hw-ts", 2, "--hw-ts"),
    r("perf write_lat -q 2", 2, "one pair only"),
    r("perf write_lat -D 5", 2, "use -n"),
    r("perf write_lat --json {tmp}/no/such/dir/r.json -n 20", 1, "the directory does not exist"),
    r("perf write_lat --svg {tmp}/no/such/dir/r.svg -n 20", 1, "the directory does not exist"),
    r("perf write_lat --svg {tmp} -n 20", 1, "is a directory"),
    r("perf write_lat --json", 2, "--json needs a value"),
    r("perf write_lat --json {tmp}/garbage.json/r.json -n 20", 1, "Not a directory"),
    r("perf write_bw --svg {tmp}/garbage.json/r.svg -n 1000", 1, "Not a directory"),
    // ---- plot
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json --svg {tmp}/p.svg", 0, "curve"),
    r("plot --help", 0, "usage: rdma-direct plot"),
    r("plot", 2, "--svg OUT.svg is required"),
    r("plot --svg {tmp}/p.svg", 2, "no result files given"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json", 2, "--svg OUT.svg is required"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json --svg", 2, "--svg needs a value"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json --svg {tmp}/no/dir/p.svg", 1, "the directory does not exist"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json --svg {tmp}", 1, "is a directory"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json --svg /proc/version", 1, "/proc/version"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json --svg {tmp}/garbage.json/p.svg", 1, "Not a directory"),
    r("plot {tmp}/garbage.json --svg {tmp}/p.svg", 1, "garbage.json"),
    r("plot {tmp}/bench.json --svg {tmp}/p.svg", 1, "this is a `bench` result file"),
    r("plot {tmp}/truncated.json --svg {tmp}/p.svg", 1, "truncated.json"),
    r("plot {tmp}/binary.json --svg {tmp}/p.svg", 1, "binary.json"),
    r("plot {tmp}/empty.json --svg {tmp}/p.svg", 1, "empty.json"),
    r("plot {tmp}/missing.json --svg {tmp}/p.svg", 1, "missing.json"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json {fx}/perftest/ib_write_bw_rxe0_65536.json --svg {tmp}/p.svg", 2, "cannot mix latency and bandwidth"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json --metric bw --svg {tmp}/p.svg", 2, "does not apply"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json --metric nope --svg {tmp}/p.svg", 2, "expected typical"),
    r("plot {fx}/perftest/ib_write_lat_rxe0_2.json --bogus --svg {tmp}/p.svg", 2, "unknown option '--bogus'"),
    // ---- bench post / poll (plain memory)
    r("bench post -n 1000", 0, "t_typical[nsec]"),
    r("bench poll -n 1000", 0, "t_typical[nsec]"),
    r("bench post -n 1000 -l 64", 0, "t_typical[nsec]"),
    r("bench post -n 1000 -s 256", 0, "t_typical[nsec]"),
    r("bench post -n 1000 -o read", 0, "t_typical[nsec]"),
    r("bench post -n 1000 --bf", 0, "t_typical[nsec]"),
    r("bench post -n 1000 --per-sample 512", 0, "t_typical[nsec]"),
    r("bench post --help", 0, "usage: rdma-direct bench"),
    r("bench --help", 0, "usage: rdma-direct bench"),
    r("bench", 2, "which benchmark?"),
    r("bench frobnicate", 2, "unknown benchmark 'frobnicate'"),
    r("bench post -s 300", 2, "inline payloads are at most 256 bytes"),
    r("bench post -l 0", 2, "-l 0: must be 1..=64"),
    r("bench post -l 65", 2, "-l 65: must be 1..=64"),
    r("bench post -n x", 2, "'x' is not a number"),
    r("bench post -n -1", 2, "-1 is negative"),
    r("bench post -n 99999999999", 2, "out of range"),
    r("bench post -n", 2, "-n needs a value"),
    r("bench post -o nope", 2, "unknown op 'nope'"),
    r("bench post --per-sample 63", 2, "--per-sample 63"),
    r("bench post --provider verbs", 2, "auto and mlx5 only"),
    r("bench post -d mlx5_9", 2, "no device is involved"),
    r("bench post --bogus", 2, "unknown option '--bogus'"),
    r("bench post -n 1000 --json {tmp}/no/dir/b.json", 1, "the directory does not exist"),
    // ---- bench batching
    r("bench batching -l 1,4 -Q 1 -m db8 -r 3 -w 1 -n 64", 0, "Doorbell batching"),
    r("bench batching --provider sim -l 1,4 -Q 1 -m db8 -r 3 -w 1 -n 64", 0, "Doorbell batching"),
    r("bench batching -d sim0 -l 1 -Q 1 -m db8 -r 3 -w 1 -n 64", 0, "Doorbell batching"),
    r("bench batching --help", 0, "usage: rdma-direct bench batching"),
    r("bench batching -d mlx5_9", 1, NO_DEV),
    r("bench batching -d mlx5_9 --provider mlx5", 1, NO_DEV),
    r("bench batching --provider verbs", 2, "--provider verbs needs -d DEV"),
    r("bench batching --provider sim -d mlx5_9", 2, "drop -d mlx5_9"),
    r("bench batching -l 0", 2, "-l 0: a batch is 1..=64"),
    r("bench batching -l 65", 2, "-l 65: a batch is 1..=64"),
    r("bench batching -s 2000000", 2, "-s 2000000"),
    r("bench batching --bogus", 2, "unknown option '--bogus'"),
    r("bench batching -n", 2, "-n"),
    r("bench batching -l 1 -r 3 -w 1 -n 64 --svg {tmp}/no/dir/b.svg", 1, "the directory does not exist"),
    r("bench batching -l 1 -r 3 -w 1 -n 64 --json {tmp}", 1, "is a directory"),
    // ---- events
    r("events", 0, "DEVICE_FATAL"),
    r("events -d sim0", 0, "DEVICE_FATAL"),
    r("events --count 3", 0, "CQ_ERR"),
    r("events --count=1", 0, "PORT_ACTIVE"),
    r("events --help", 0, "usage: rdma-direct events"),
    r("events --count 0", 2, "--count 0: at least 1"),
    r("events --count -1", 2, "--count: -1 is negative"),
    r("events --count x", 2, "--count: 'x' is not a number"),
    r("events --count 99999999999999999999", 2, "out of range"),
    r("events --count", 2, "--count needs a value"),
    r("events -d", 2, "-d needs a value"),
    r("events -d mlx5_9", 1, NO_DEV),
    r("events --bogus", 2, "unknown option '--bogus'"),
    r("events extra", 2, "unexpected argument 'extra'"),
    // ---- selftest (-d sim0 is the software device, as everywhere)
    r("selftest", 0, "selftest: no rung failed: 12 passed, 7 not applicable (of 19)"),
    r("selftest -d sim0", 0, "selftest: no rung failed: 12 passed"),
    r("selftest --ib-dev sim0 --json", 0, "\"device\":\"sim0\""),
    r("selftest -d mlx5_9", 1, NO_DEV),
    r("selftest -d", 2, "-d needs a value"),
    r("selftest --bogus", 2, "unknown option '--bogus'"),
    // ---- doctor (no device on the host: the checks of the host still run)
    r("doctor --help", 0, "usage: rdma-direct doctor"),
    r("doctor --peer-mtu 1500", 2, "bad MTU '1500'"),
    r("doctor --peer-mtu", 2, "--peer-mtu needs an MTU"),
    r("doctor -i 0", 2, "bad port '0'"),
    r("doctor -i x", 2, "bad port 'x'"),
    r("doctor -d", 2, "-d needs a device name"),
    r("doctor --bogus", 2, "unexpected argument '--bogus'"),
    r("doctor --latency --cpu 0", 0, "latency: CPU 0"),
    r("doctor --latency --cpu 0 --json", 0, "\"verdict\":\"CPU 0 is"),
    r("doctor --latency --cpu x", 2, "--cpu: 'x' is not a number"),
    r("doctor --latency --cpu", 2, "--cpu needs a CPU number"),
    r("doctor --cpu 0", 2, "--cpu is for --latency"),
    // ---- jitter (runs of 20 ms)
    r("jitter --help", 0, "usage: rdma-direct jitter"),
    r("jitter -c 0 -D 0.02", 0, "cpu 0:"),
    r("jitter -c 0 -D 0.02 --threshold 1000000000", 0, "quiet"),
    r("jitter -c 0 -D 0.02 --json {tmp}/j.json --svg {tmp}/j.svg", 0, "wrote"),
    r("jitter -c 4095 -D 0.02", 1, "CPU 4095 is not one this process may run on"),
    r("jitter -c x", 2, "-c: 'x' is not a CPU list"),
    r("jitter -c", 2, "-c needs a value"),
    r("jitter -D 0", 2, "-D: 0 is out of range"),
    r("jitter -D x", 2, "-D: 'x' is not a number of seconds"),
    r("jitter --threshold 0", 2, "--threshold 0: every gap"),
    r("jitter --json {tmp}/no/such/dir/j.json", 2, "the directory does not exist"),
    r("jitter --bogus", 2, "unknown option '--bogus'"),
    r("jitter extra", 2, "unexpected argument 'extra'"),
];

/// The binary cargo built.
fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_rdma-direct")
}

/// A scratch directory with the broken inputs for `plot`.
fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("rdma-direct-cli-table-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    let good = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/perftest/ib_write_lat_rxe0_2.json"),
    )
    .expect("fixture");
    let files: [(&str, Vec<u8>); 5] = [
        ("garbage.json", b"this is not json at all".to_vec()),
        (
            "bench.json",
            br#"{"tool":"rdma-direct bench batching","version":"0.1.0","configs":[]}"#.to_vec(),
        ),
        ("truncated.json", good.as_bytes()[..good.len() / 2].to_vec()),
        ("binary.json", (0..=255u8).cycle().take(600).collect()),
        ("empty.json", Vec::new()),
    ];
    for (name, bytes) in files {
        std::fs::write(d.join(name), bytes).expect("write an input");
    }
    d
}

/// Run `args`, killing it after [`LIMIT`]: (status, stdout, stderr), or why it failed to
/// end by itself.
fn run(args: &[String]) -> Result<(Option<i32>, String, String), String> {
    let mut child = Command::new(exe())
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    // Drain both pipes on their own threads, so a chatty child never blocks on a full pipe.
    let t_out = common::drain(child.stdout.take().expect("stdout"));
    let t_err = common::drain(child.stderr.take().expect("stderr"));
    let status = common::wait_or_kill(&mut child, LIMIT)?;
    let out = String::from_utf8_lossy(&t_out.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned();
    Ok((status.code(), out, err))
}

/// What is wrong with the outcome of `row`, if anything.
fn check(row: &Row, got: Result<(Option<i32>, String, String), String>) -> Option<String> {
    let (code, out, err) = match got {
        Ok(g) => g,
        Err(e) => return Some(e),
    };
    let Some(code) = code else {
        return Some(format!("ended by a signal (an abort?); stderr: {err}"));
    };
    for bad in ["panicked", "stack backtrace", "RUST_BACKTRACE"] {
        if err.contains(bad) || out.contains(bad) {
            return Some(format!("'{bad}' in the output; stderr: {err}"));
        }
    }
    if code != row.status {
        return Some(format!(
            "exit status {code}, expected {}; stderr: {err}",
            row.status
        ));
    }
    if row.status == 0 {
        if !out.contains(row.text) {
            return Some(format!("stdout lacks {:?}: {out}", row.text));
        }
        return None;
    }
    let lines: Vec<&str> = err.lines().collect();
    if lines.len() != 1 {
        return Some(format!(
            "{} lines on stderr, expected one: {err}",
            lines.len()
        ));
    }
    if !lines[0].starts_with("rdma-direct") {
        return Some(format!("the stderr line does not name the command: {err}"));
    }
    if !lines[0].contains(row.text) {
        return Some(format!("stderr lacks {:?}: {err}", row.text));
    }
    None
}

#[test]
fn every_command_on_and_off_its_happy_path() {
    assert!(ROWS.len() >= 150, "{} rows", ROWS.len());
    let tmp = scratch();
    let fx = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut failures = Vec::new();
    for row in ROWS {
        let args: Vec<String> = row
            .args
            .split_whitespace()
            .map(|a| {
                a.replace("{tmp}", &tmp.display().to_string())
                    .replace("{fx}", &fx.display().to_string())
            })
            .collect();
        if let Some(why) = check(row, run(&args)) {
            failures.push(format!("rdma-direct {}: {why}", row.args));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        ROWS.len(),
        failures.join("\n")
    );
}

/// A bandwidth run too short to mean much says so (on the sim `write_bw -a -n 200` read
/// 0.15 Mpps where the default `-n` reads over 5); a run of perftest's length does not.
#[test]
fn short_bandwidth_runs_are_called_short() {
    let note = "is short for a bandwidth test";
    for (args, noted) in [
        ("perf write_bw -s 64 -n 200", true),
        ("perf send_bw -a -n 20", true),
        ("perf write_bw -s 64 -n 1000", false),
        ("perf write_lat -n 20", false),
    ] {
        let a: Vec<String> = args.split_whitespace().map(String::from).collect();
        let (code, _, err) = run(&a).unwrap_or_else(|e| panic!("{args}: {e}"));
        assert_eq!(code, Some(0), "{args}: {err}");
        assert_eq!(err.contains(note), noted, "{args}: {err}");
    }
}

/// A reader that goes away early (`rdma-direct devices | head -1`) ends the tool quietly by
/// SIGPIPE, as C tools end, never with a panic on the failed write.
#[test]
fn a_closed_pipe_ends_the_tool_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    // The read end is closed before the tool starts, so its first write fails whatever the
    // scheduler does (a read end dropped after spawn raced a fast child that had already
    // written everything into the pipe's buffer).
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe(2) returns.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 succeeded: both descriptors are open and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    let mut child = Command::new(exe())
        .args(["bench", "post", "-n", "1000"])
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = String::new();
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    let st = child.wait().expect("wait");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(st.signal(), Some(libc::SIGPIPE), "{st:?}: {err}");
}

/// `selftest --json` is what a user sends back: it prints one document even when the device
/// is not there (the ladder stopped at its list rung, with the diagnosis), exit status 1.
#[test]
fn selftest_json_is_a_document_even_without_the_device() {
    let args: Vec<String> = ["selftest", "-d", "mlx5_9", "--json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (code, out, err) = run(&args).expect("run");
    assert_eq!(code, Some(1), "{err}");
    let doc = out.trim();
    assert!(
        doc.starts_with('{') && doc.ends_with('}') && !doc.contains('\n'),
        "{out}"
    );
    assert!(doc.starts_with("{\"device\":\"mlx5_9\","), "{doc}");
    if doc.contains("\"stopped_at\":1,") {
        // A host without libibverbs (the aarch64 stage's emulated one) stops at the load.
        assert!(
            doc.contains("\"name\":\"load libraries\",\"result\":\"fail\""),
            "{doc}"
        );
        assert!(doc.contains("libibverbs.so.1 not found"), "{doc}");
    } else {
        assert!(doc.contains("\"stopped_at\":2,"), "{doc}");
        assert!(
            doc.contains("\"name\":\"list\",\"result\":\"fail\""),
            "{doc}"
        );
        assert!(doc.contains(NO_DEV), "{doc}");
    }
    assert!(err.is_empty(), "{err}");
}

/// A pingpong client whose HOST:PORT answers with something that is not rc_pingpong's
/// address message (another service) says so, naming the peer: one line, exit status 1.
#[test]
fn a_pingpong_client_names_a_peer_that_is_not_rc_pingpong() {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = l.local_addr().expect("port").port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept().expect("accept");
        let mut theirs = [0u8; 52];
        let _ = s.read_exact(&mut theirs);
        // An HTTP server's answer, 52 bytes of it (no terminating NUL).
        let reply = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent";
        let _ = s.write_all(&reply[..52]);
    });
    let args = ["pingpong", "-p", &port.to_string(), "127.0.0.1"].map(String::from);
    let row = Row {
        args: "pingpong -p PORT 127.0.0.1 (an HTTP server)",
        status: 1,
        text: "did not send rc_pingpong's address message: is it another service?",
    };
    let got = run(&args);
    server.join().expect("server thread");
    if let Some(why) = check(&row, got) {
        panic!("{why}");
    }
}
