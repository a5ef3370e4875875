//! The verbs fallback provider (rxe and any verbs device) over libibverbs' post/poll.
