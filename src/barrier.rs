//! Memory barriers, one name per purpose (as rdma-core's `util/udma_barrier.h`).
