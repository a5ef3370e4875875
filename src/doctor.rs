//! Diagnostics: the troubleshooting order as checks.
