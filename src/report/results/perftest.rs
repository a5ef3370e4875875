//! perftest's `--out_json` files as result files: [`from_perftest`] maps one perftest report
//! (4.5's relaxed dialect or the standard JSON of 24.01 and later) to a one-row [`RunFile`],
//! refusing reports that have no curve to draw.

use crate::report::json::Value;

use super::fields::Obj;
use crate::perf::stats::{BwRow, BwUnit, Histogram, LatRow};

use super::{Rows, RunFile};

/// A perftest `--out_json` document (parsed by [`crate::report::json::parse`]) as a
/// one-row run.
///
/// perftest writes `{"test_info": {...}, "results": {...}}`. `test_info.test` is built as
/// `<verb>_[<atomic op>_][Bidirectional_][Post_List_](BW|Latency)_[forwarding_][Multicast_]Test`
/// with verb `Send`, `RDMA_Write`, `RDMA_Read` or `Atomic`; `Device`, `Connection_type`
/// (RC, UC, UD, ...) and the other `test_info` keys (`Mtu`, `TX_depth`, `Max_inline_data`,
/// `CQ_Moderation`, ...) become options. `results` of a latency test: `MsgSize`,
/// `n_iterations`, `t_min`, `t_max`, `t_typical`, `t_avg`, `t_stdev`, `percentile_99`,
/// `percentile_99.9` (usec); of a bandwidth test: `MsgSize`, `n_iterations`, `BW_peak`,
/// `BW_average`, `MsgRate` (Mpps). Reports that hold only one figure (`--output`) or a
/// duration run (`-D`: `t_avg`, `tps_average`) are refused: they have no curve to draw.
pub fn from_perftest(v: &Value) -> Result<RunFile, String> {
    let info = Obj::new(v.get("test_info").unwrap_or(&Value::Null), "test_info")?;
    let res = Obj::new(
        v.get("results")
            .ok_or("perftest file without \"results\" (the run did not finish?)")?,
        "results",
    )?;
    let name = info.str("test")?;
    let verb = if name.starts_with("RDMA_Write_") {
        "write"
    } else if name.starts_with("RDMA_Read_") {
        "read"
    } else if name.starts_with("Send_") {
        "send"
    } else if name.starts_with("Atomic_") {
        "atomic"
    } else {
        return Err(format!(
            "test_info.test: \"{name}\" is not a perftest RDMA test (Send_, RDMA_Write_, RDMA_Read_, Atomic_)"
        ));
    };
    let lat = name.contains("_Latency_");
    if !lat && !name.contains("_BW_") {
        return Err(format!(
            "test_info.test: \"{name}\" is neither a _Latency_ nor a _BW_ test"
        ));
    }
    for only in ["avg_lat", "bw_avg", "msgRate_avg", "tps_average"] {
        if res.v.get(only).is_some() {
            return Err(format!(
                "results.{only}: this perftest report holds a single figure (--output or -D duration mode); rerun perftest without them to get a full row"
            ));
        }
    }
    let bytes = res.u64("MsgSize")?;
    let iters = res.u64("n_iterations")?;
    let rows = if lat {
        Rows::Lat(vec![LatRow {
            bytes,
            iters,
            t_min: res.f64("t_min")?,
            t_max: res.f64("t_max")?,
            t_typical: res.f64("t_typical")?,
            t_avg: res.f64("t_avg")?,
            t_stdev: res.f64("t_stdev")?,
            p99: res.f64("percentile_99")?,
            p99_9: res.f64("percentile_99.9")?,
            p99_99: None,
            p99_999: None,
            hist: Histogram::EMPTY,
        }])
    } else {
        Rows::Bw(vec![BwRow {
            bytes,
            iters,
            bw_peak: res.f64("BW_peak")?,
            bw_avg: res.f64("BW_average")?,
            msg_rate_mpps: res.f64("MsgRate")?,
            unit: BwUnit::MiBps,
        }])
    };
    let mut options: Vec<(String, Value)> = Vec::new();
    if let Value::Obj(kv) = info.v {
        for (k, val) in kv {
            if !matches!(k.as_str(), "test" | "Device" | "Connection_type") {
                options.push((k.clone(), val.clone()));
            }
        }
    }
    for flag in ["Bidirectional", "Post_List"] {
        if name.contains(&format!("_{flag}_")) {
            options.push((flag.to_lowercase(), Value::Bool(true)));
        }
    }
    Ok(RunFile {
        tool: "perftest".to_string(),
        version: String::new(),
        test: format!("{verb}_{}", if lat { "lat" } else { "bw" }),
        // perftest drives the device through libibverbs (libmlx5 on a ConnectX).
        provider: "verbs".to_string(),
        device: info.str("Device")?,
        transport: info.str_or("Connection_type", "")?,
        options,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perftest 4.5's `print_report_lat` output for `ib_write_lat -d rxe0 -s 2`, key for key
    /// in the order `write_test_info_to_file` and `REPORT_FMT_LAT_JSON` write them.
    const PERFTEST_45_LAT: &str = "{\ntest_info: {\ntest: RDMA_Write_Latency_Test,\nDual_port: OFF,\nDevice: \"rxe0\",\nNumber_of_qps: 1,\nTransport_type: IB,\nConnection_type: RC,\nUsing_SRQ: OFF,\n PCIe_relax_order: Unsupported,\nibv_wr_API: ON,\nTX_depth : 1,\nMtu: 1024,\nLink_type: Ethernet,\nGID_index: 1,\nMax_inline_data: 220,\nrdma_cm_QPs: OFF,\nData_ex_method: Ethernet,\n},\nresults: {\nMsgSize: 2,\nn_iterations: 1000,\nt_min: 19.73,\nt_max: 61.27,\nt_typical: 24.95,\nt_avg: 25.84,\nt_stdev: 4.21,\npercentile_99: 41.02,\npercentile_99.9: 61.27,\n},\n}\n";

    #[test]
    fn perftest_45_latency() {
        let r = RunFile::from_text(PERFTEST_45_LAT).unwrap();
        assert_eq!(
            (
                r.tool.as_str(),
                r.test.as_str(),
                r.provider.as_str(),
                r.device.as_str(),
                r.transport.as_str()
            ),
            ("perftest", "write_lat", "verbs", "rxe0", "RC")
        );
        let Rows::Lat(rows) = &r.rows else {
            panic!("not latency")
        };
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].bytes, rows[0].iters), (2, 1000));
        assert_eq!(
            [rows[0].t_min, rows[0].t_typical, rows[0].p99, rows[0].p99_9],
            [19.73, 24.95, 41.02, 61.27]
        );
        assert!(r.options.contains(&("Mtu".into(), Value::Num(1024.0))));
        assert!(r.options.contains(&("TX_depth".into(), Value::Num(1.0))));
    }

    #[test]
    fn perftest_fixtures() {
        let lat = RunFile::from_text(include_str!(
            "../../../fixtures/perftest/ib_write_lat_rxe0_2.json"
        ))
        .unwrap();
        assert_eq!(
            (lat.test.as_str(), lat.rows.sizes()),
            ("write_lat", vec![2])
        );
        let bw = RunFile::from_text(include_str!(
            "../../../fixtures/perftest/ib_write_bw_rxe0_65536.json"
        ))
        .unwrap();
        assert_eq!(
            (bw.test.as_str(), bw.rows.sizes()),
            ("write_bw", vec![65536])
        );
        let Rows::Bw(b) = &bw.rows else {
            panic!("not bandwidth")
        };
        assert_eq!(
            (b[0].bw_peak, b[0].bw_avg, b[0].msg_rate_mpps),
            (298.41, 291.07, 0.004657)
        );
        assert!(bw
            .options
            .contains(&("CQ_Moderation".into(), Value::Num(100.0))));
        let std = RunFile::from_text(include_str!(
            "../../../fixtures/perftest/ib_send_lat_rxe0_2_json24.json"
        ))
        .unwrap();
        assert_eq!(
            (std.test.as_str(), std.device.as_str()),
            ("send_lat", "rxe0")
        );
    }

    #[test]
    fn perftest_standard_json_bandwidth() {
        // perftest 24.01+ quotes every key and value and drops the trailing commas.
        let t = "{\n\"test_info\": {\n\"test\": \"Send_Post_List_BW_Test\",\n\"Device\": \"mlx5_0\",\n\"Connection_type\": \"UC\",\n\"CQ_Moderation\": 100\n},\n\"results\": {\n\"MsgSize\": 65536,\n\"n_iterations\": 5000,\n\"BW_peak\": 11000.12,\n\"BW_average\": 10987.65,\n\"MsgRate\": 0.175803\n}\n}\n";
        let r = RunFile::from_text(t).unwrap();
        assert_eq!((r.test.as_str(), r.transport.as_str()), ("send_bw", "UC"));
        assert_eq!(
            r.rows,
            Rows::Bw(vec![BwRow {
                bytes: 65536,
                iters: 5000,
                bw_peak: 11000.12,
                bw_avg: 10987.65,
                msg_rate_mpps: 0.175803,
                unit: BwUnit::MiBps,
            }])
        );
        assert!(r.options.contains(&("post_list".into(), Value::Bool(true))));
    }

    #[test]
    fn perftest_refusals_and_truncation() {
        let only = "{\ntest_info: {\ntest: RDMA_Write_Latency_Test,\nDevice: \"rxe0\",\n},\nresults: {\navg_lat: 25.000000,\n},\n}\n";
        let e = RunFile::from_text(only).unwrap_err();
        assert!(
            e.contains("results.avg_lat") && e.contains("--output"),
            "{e}"
        );
        let e = RunFile::from_text(&PERFTEST_45_LAT.replace("t_stdev: 4.21,\n", "")).unwrap_err();
        assert_eq!(e, "results.t_stdev: missing");
        let e = RunFile::from_text(&PERFTEST_45_LAT.replace("RDMA_Write_", "Raw_Ethernet_"))
            .unwrap_err();
        assert!(e.contains("not a perftest RDMA test"), "{e}");
        for end in 0..PERFTEST_45_LAT.trim_end().len() {
            let Some(t) = PERFTEST_45_LAT.get(..end) else {
                continue;
            };
            assert!(
                RunFile::from_text(t).is_err(),
                "prefix of {end} bytes accepted"
            );
        }
        // Truncated inside results: the error points into the perftest text, not at line 2.
        let cut = &PERFTEST_45_LAT[..PERFTEST_45_LAT.find("t_avg").unwrap()];
        let e = RunFile::from_text(cut).unwrap_err();
        assert!(e.contains("end of file inside the object"), "{e}");
    }
}
