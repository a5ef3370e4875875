//! The safe control path over libibverbs.
