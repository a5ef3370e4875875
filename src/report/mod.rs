//! Reports of measurements: result files, JSON, perftest-style tables and SVG charts.
//!
//! Contract:
//! - [`json`] reads JSON (and perftest 4.5's `--out_json` dialect) into a
//!   [`Value`](json::Value) and writes JSON text; it never panics on input.
//! - [`table`] formats [`perf`](crate::perf) rows as perftest prints its tables; [`perftest`]
//!   the text around them (header block, device-time table).
//! - [`results`] is the result file of one run: made from a [`perf::Report`](crate::perf::Report),
//!   written, and read back (perftest's `--out_json` files too), each refusal naming the file,
//!   line and field.
//! - [`devinfo`] lays a device's and its ports' attributes out as `ibv_devinfo` does.
//! - [`plot`] renders [`Chart`](plot::Chart)s as one SVG document, a pure function of its input.
//!
//! Nothing here prints: every function returns text, a value or an error; the file readers
//! and writers return `std::io`/text errors naming the path. Behind the `report` feature
//! (part of `cli`), which needs `perf`.

pub mod devinfo;
pub mod json;
pub mod perftest;
pub mod plot;
pub mod results;
pub mod table;
