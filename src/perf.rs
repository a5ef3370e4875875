//! perftest-style latency and bandwidth runs over any provider.
