//! Volatile access to device memory (UAR / BlueFlame registers, doorbell records).
