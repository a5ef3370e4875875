//! The y axis of a chart panel ([`YAxis`]): log10 when the caller asks for it and some value
//! is positive, else linear (from 0 when no value is negative); a margin around the data;
//! ticks at 1, 2, 5 x 10^k with as many decimals as their spacing needs. The values never
//! choose the scale. Never panics.

/// A y tick value with as many decimals as the tick spacing needs.
fn num_label(v: f64, decimals: usize) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    if v.abs() >= 1e7 {
        return format!("{v:.0e}");
    }
    format!("{v:.decimals$}")
}

/// The y axis of a panel: its scale, range and ticks.
pub(super) struct YAxis {
    /// Log10, else linear.
    pub(super) log: bool,
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// (value, label, major)
    pub(super) ticks: Vec<(f64, String, bool)>,
}

impl YAxis {
    /// The axis for `values` (non-finite ones ignored), log10 when `log` is asked and some
    /// value is positive, a margin around the data, ticks at 1, 2, 5 x 10^k.
    pub(super) fn new(values: &[f64], log: bool) -> YAxis {
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
        let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let log = log && finite.iter().any(|v| *v > 0.0);
        if log {
            let pos: Vec<f64> = finite.iter().copied().filter(|v| *v > 0.0).collect();
            let (mut lo, mut hi) = (
                pos.iter().copied().fold(f64::INFINITY, f64::min),
                pos.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            );
            if pos.is_empty() {
                (lo, hi) = (1.0, 10.0);
            }
            // A margin of ~6 % of the span on each side, at least a factor 1.2.
            let span = (hi / lo).log10().max(0.3);
            let pad = 10f64.powf(span * 0.06).max(1.2);
            lo /= pad;
            hi *= pad;
            let d0 = lo.log10().floor() as i32;
            let d1 = hi.log10().ceil() as i32;
            // Label density follows the decades the axis really spans.
            let decades = ((hi / lo).log10().ceil() as i32).max(1);
            let mults: &[f64] = if decades <= 2 {
                &[1.0, 2.0, 5.0]
            } else if decades <= 4 {
                &[1.0, 3.0]
            } else {
                &[1.0]
            };
            let label_every = ((decades + 7) / 8).max(1);
            let mut ticks = Vec::new();
            for d in d0.clamp(-300, 300)..=d1.clamp(-300, 300) {
                for k in 1..10 {
                    let v = f64::from(k) * 10f64.powi(d);
                    if v < lo || v > hi {
                        continue;
                    }
                    let labelled = mults.contains(&f64::from(k)) && (d - d0) % label_every == 0;
                    let label = if labelled {
                        num_label(v, (-d).max(0) as usize)
                    } else {
                        String::new()
                    };
                    ticks.push((v, label, k == 1));
                }
            }
            return YAxis {
                log: true,
                lo,
                hi,
                ticks,
            };
        }
        let (mut lo, mut hi) = if finite.is_empty() {
            (0.0, 1.0)
        } else {
            (min.min(0.0), max.max(0.0))
        };
        if hi - lo <= 0.0 {
            hi = lo + 1.0;
        }
        let raw = (hi - lo) / 6.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        lo = (lo / step).floor() * step;
        hi = (hi / step).ceil() * step;
        if hi <= max {
            hi += step;
        }
        let decimals = (-(step.log10().floor()) as i32).max(0) as usize
            + usize::from((step / mag - 2.5).abs() < 1e-9);
        let mut ticks = Vec::new();
        let n = ((hi - lo) / step).round() as i64;
        for i in 0..=n.clamp(0, 100) {
            let v = lo + step * i as f64;
            ticks.push((v, num_label(v, decimals), true));
        }
        YAxis {
            log: false,
            lo,
            hi,
            ticks,
        }
    }

    /// 0 at the bottom, 1 at the top.
    pub(super) fn frac(&self, v: f64) -> f64 {
        if self.log {
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }

    pub(super) fn drawable(&self, v: f64) -> bool {
        v.is_finite() && (!self.log || v > 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn y_scale_is_the_callers_choice() {
        // A spike does not turn the axis log by itself.
        let spike = YAxis::new(&[3.0, 3.1, 2.9, 900.0], false);
        assert!(!spike.log);
        assert_eq!(spike.lo, 0.0);
        assert!(spike.hi >= 900.0);
        let wide = YAxis::new(&[0.5, 800.0], true);
        assert!(wide.log);
        assert!(wide.lo < 0.5 && wide.hi > 800.0);
        let labels: Vec<&str> = wide
            .ticks
            .iter()
            .filter(|t| !t.1.is_empty())
            .map(|t| t.1.as_str())
            .collect();
        assert!(
            labels.contains(&"1") && labels.contains(&"100"),
            "{labels:?}"
        );
        let narrow = YAxis::new(&[3.0, 7.5], false);
        assert!(!narrow.log);
        assert_eq!(narrow.lo, 0.0);
        assert!(narrow.hi > 7.5);
        let l: Vec<&str> = narrow.ticks.iter().map(|t| t.1.as_str()).collect();
        assert_eq!(l, ["0", "2", "4", "6", "8"]);
        let small = YAxis::new(&[0.01, 0.025], false);
        assert!(
            small.ticks.iter().any(|t| t.1 == "0.005"),
            "{:?}",
            small.ticks
        );
        // Asked for log with nothing positive: linear; zeros are left out of a log axis.
        assert!(!YAxis::new(&[0.0, -3.0], true).log);
        let z = YAxis::new(&[0.0, 1.0, 100.0], true);
        assert!(z.log && z.lo > 0.0 && z.lo < 1.0);
        let flat = YAxis::new(&[5.0, 5.0], false);
        assert!(flat.hi > flat.lo);
    }
}
