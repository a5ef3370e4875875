//! Out-of-band endpoint exchange.
//!
//! - [`QpEndpoint`]: the versioned binary endpoint message ([`QpEndpoint::encode`],
//!   [`QpEndpoint::decode`]); pure, no I/O.
//! - [`PingpongMsg`]: rdma-core's `ibv_rc_pingpong` text format; pure, no I/O.
//! - The exchange: one message over a byte stream ([`write_endpoint`], [`read_endpoint`]),
//!   endpoint swaps over TCP with timeouts ([`exchange_server`], [`exchange_client`]) and the
//!   whole RC/UC bring-up through the control path ([`connect_server`], [`connect_client`]).
//!
//! Connecting a provider's QP over TCP in one call (`connect_qp_server` /
//! `connect_qp_client`) needs the provider traits, so it lives one floor up, in the providers
//! crate; `rdma_direct::endpoint` re-exports both halves under one name.
//!
//! The two codecs depend only on the shared vocabulary ([`crate::types`], [`crate::error`]);
//! only the exchange touches sockets and the control path.

pub mod codec;
mod exchange;
pub mod rc_pingpong;

pub use crate::types::Mtu;
pub use codec::{
    QpEndpoint, RemoteMr, BODY_LEN, BODY_LEN_MR, ENDPOINT_MAGIC, ENDPOINT_VERSION, HEADER_LEN,
    MAX_MESSAGE_LEN, MAX_WINDOW_LEN,
};
pub use exchange::{
    connect, connect_client, connect_server, exchange_client, exchange_server, local_endpoint,
    random_psn, read_endpoint, sync, write_endpoint, DEFAULT_TIMEOUT,
};
// The same steps under one caller-held deadline, for bring-ups built on the exchange (the
// providers' `connect_qp_*`, rdma_cm's private data).
pub use exchange::{
    accept_by, exchange_client_by, exchange_server_by, read_endpoint_by, sync_by,
    write_endpoint_by, Deadline,
};
pub use rc_pingpong::{PingpongMsg, PINGPONG_DONE, PINGPONG_MSG_LEN, PINGPONG_PORT};
