//! Ordinary least squares for cost models: `y ≈ Σ coef[j] · x[j]` over observed rows, with the
//! residuals, standard errors and 95 % confidence intervals a report can print.
//!
//! Contract: [`least_squares`] takes rows of regressors and a response (every row the same
//! width `p >= 1`) and returns `None` when the model cannot be identified: fewer rows than
//! coefficients, or regressors that are linearly dependent on these rows (a singular normal
//! matrix). Otherwise it returns the coefficients that minimise the sum of squared residuals,
//! one residual per row (observed minus fitted), and, when there are more rows than
//! coefficients, each coefficient's standard error `sqrt(s² · (XᵀX)⁻¹[j][j])` with
//! `s² = RSS / (n − p)` and its 95 % interval half-width `t(0.975, n − p) · se` (Student's t;
//! a table up to 30 degrees of freedom, 1.96 beyond). With exactly `p` rows the fit is exact
//! and the errors are `None`. Pure arithmetic: Gauss-Jordan elimination with partial pivoting
//! on the `p × p` normal equations (fine for the handful of coefficients a cost model has).

/// A fitted model.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// One per regressor.
    pub coef: Vec<f64>,
    /// Observed minus fitted, one per row.
    pub residuals: Vec<f64>,
    /// Standard error per coefficient (`None` with no degrees of freedom left).
    pub stderr: Option<Vec<f64>>,
    /// 95 % confidence half-width per coefficient.
    pub ci95: Option<Vec<f64>>,
}

impl Fit {
    /// Root mean square of the residuals.
    pub fn rms(&self) -> f64 {
        let n = self.residuals.len().max(1) as f64;
        (self.residuals.iter().map(|r| r * r).sum::<f64>() / n).sqrt()
    }
    /// Index and value of the residual largest in magnitude.
    pub fn worst(&self) -> Option<(usize, f64)> {
        self.residuals
            .iter()
            .copied()
            .enumerate()
            .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
    }
}

/// Student's t quantile 0.975 for `dof` degrees of freedom (1..=30 tabulated, 1.96 beyond).
pub fn t975(dof: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match dof {
        0 => f64::INFINITY,
        1..=30 => T[dof - 1],
        _ => 1.96,
    }
}

/// Invert a `p × p` matrix (Gauss-Jordan, partial pivoting); `None` when singular.
fn invert(mut a: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let p = a.len();
    let scale = a
        .iter()
        .flatten()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    let mut inv: Vec<Vec<f64>> = (0..p)
        .map(|i| (0..p).map(|j| if i == j { 1.0 } else { 0.0 }).collect())
        .collect();
    for col in 0..p {
        let piv = (col..p).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[piv][col].abs() <= 1e-12 * scale {
            return None;
        }
        a.swap(col, piv);
        inv.swap(col, piv);
        let d = a[col][col];
        for j in 0..p {
            a[col][j] /= d;
            inv[col][j] /= d;
        }
        for i in 0..p {
            if i != col {
                let f = a[i][col];
                if f != 0.0 {
                    for j in 0..p {
                        a[i][j] -= f * a[col][j];
                        inv[i][j] -= f * inv[col][j];
                    }
                }
            }
        }
    }
    Some(inv)
}

/// Fit `y ≈ x · coef` (see the module doc).
pub fn least_squares(rows: &[(Vec<f64>, f64)]) -> Option<Fit> {
    let p = rows.first()?.0.len();
    let n = rows.len();
    if p == 0 || n < p || rows.iter().any(|(x, y)| x.len() != p || !y.is_finite()) {
        return None;
    }
    let mut xtx = vec![vec![0.0; p]; p];
    let mut xty = vec![0.0; p];
    for (x, y) in rows {
        for i in 0..p {
            xty[i] += x[i] * y;
            for j in 0..p {
                xtx[i][j] += x[i] * x[j];
            }
        }
    }
    let inv = invert(xtx)?;
    let coef: Vec<f64> = (0..p)
        .map(|i| (0..p).map(|j| inv[i][j] * xty[j]).sum())
        .collect();
    let residuals: Vec<f64> = rows
        .iter()
        .map(|(x, y)| y - x.iter().zip(&coef).map(|(a, b)| a * b).sum::<f64>())
        .collect();
    let (stderr, ci95) = if n > p {
        let s2 = residuals.iter().map(|r| r * r).sum::<f64>() / (n - p) as f64;
        let se: Vec<f64> = (0..p).map(|j| (s2 * inv[j][j]).max(0.0).sqrt()).collect();
        let t = t975(n - p);
        let ci = se.iter().map(|s| t * s).collect();
        (Some(se), Some(ci))
    } else {
        (None, None)
    };
    Some(Fit {
        coef,
        residuals,
        stderr,
        ci95,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of `t(b, q) = w + d/b + c·q` over batches and completion rates.
    fn model_rows(w: f64, d: f64, c: f64, noise: &[f64]) -> Vec<(Vec<f64>, f64)> {
        let mut rows = Vec::new();
        let mut k = 0;
        for b in [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0] {
            for q in [1.0, 1.0 / 16.0] {
                let e = noise.get(k % noise.len().max(1)).copied().unwrap_or(0.0);
                rows.push((vec![1.0, 1.0 / b, q], w + d / b + c * q + e));
                k += 1;
            }
        }
        rows
    }

    #[test]
    fn recovers_known_coefficients_exactly_without_noise() {
        let f = least_squares(&model_rows(3.5, 20.0, 7.25, &[])).unwrap();
        for (got, want) in f.coef.iter().zip([3.5, 20.0, 7.25]) {
            assert!((got - want).abs() < 1e-9, "{:?}", f.coef);
        }
        assert!(f.rms() < 1e-9);
        assert!(f.ci95.unwrap().iter().all(|c| *c < 1e-6));
    }

    #[test]
    fn noise_gives_residuals_and_intervals_that_cover_the_truth() {
        let noise = [0.3, -0.2, 0.1, -0.4, 0.25, -0.05, 0.15];
        let f = least_squares(&model_rows(3.5, 20.0, 7.25, &noise)).unwrap();
        let ci = f.ci95.clone().unwrap();
        for ((got, want), h) in f.coef.iter().zip([3.5, 20.0, 7.25]).zip(&ci) {
            assert!(*h > 0.0);
            assert!((got - want).abs() <= *h, "{got} vs {want} ± {h}");
        }
        assert_eq!(f.residuals.len(), 14);
        assert!(f.rms() > 0.0 && f.rms() < 0.4);
        let (_, worst) = f.worst().unwrap();
        assert!(worst.abs() >= f.rms());
    }

    #[test]
    fn a_straight_line_by_hand() {
        // y = 1 + 2x at x = 0, 1, 2 with residuals +0.5, -1, +0.5 added: the same line
        // (the residuals sum to 0 and are orthogonal to x), s² = 1.5 / 1, (XᵀX)⁻¹ = [[5/6, -1/2],
        // [-1/2, 1/2]]: se = sqrt(1.25), sqrt(0.75); t(0.975, 1) = 12.706.
        let rows = vec![
            (vec![1.0, 0.0], 1.5),
            (vec![1.0, 1.0], 2.0),
            (vec![1.0, 2.0], 5.5),
        ];
        let f = least_squares(&rows).unwrap();
        assert!((f.coef[0] - 1.0).abs() < 1e-12 && (f.coef[1] - 2.0).abs() < 1e-12);
        let r = &f.residuals;
        assert!((r[0] - 0.5).abs() < 1e-12 && (r[1] + 1.0).abs() < 1e-12);
        let se = f.stderr.unwrap();
        assert!((se[0] - 1.25f64.sqrt()).abs() < 1e-12 && (se[1] - 0.75f64.sqrt()).abs() < 1e-12);
        assert!((f.ci95.unwrap()[1] - 12.706 * 0.75f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn unidentifiable_models_are_refused() {
        // q constant: its column is the intercept's.
        let rows: Vec<(Vec<f64>, f64)> = [1.0, 2.0, 4.0]
            .iter()
            .map(|b| (vec![1.0, 1.0 / b, 1.0], 5.0 + 1.0 / b))
            .collect();
        assert_eq!(least_squares(&rows), None);
        assert_eq!(least_squares(&rows[..1]), None);
        assert_eq!(least_squares(&[]), None);
        // Exactly determined: a fit without errors.
        let f = least_squares(&[(vec![1.0], 4.0)]).unwrap();
        assert_eq!((f.coef[0], f.stderr.is_none()), (4.0, true));
    }
}
