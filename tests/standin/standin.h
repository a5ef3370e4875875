/*
 * The stand-in's device backend: the table of callbacks the process that loads the stand-in
 * hands it (rdma_direct_standin_attach), through which the stand-in's objects are created
 * on a device engine. rdma-direct fills it with its software mlx5 device (providers/sim,
 * providers/sim/standin.rs mirrors these structs; the sizes are checked on both sides).
 *
 * Every callback returns 0 or a positive errno. `dev` is the stand-in device index.
 * Descriptors are what the device hands out for an object: the memory mlx5dv_init_obj
 * describes. `handle` is the backend's own, passed back to destroy the object.
 */
#ifndef RDMA_DIRECT_STANDIN_H
#define RDMA_DIRECT_STANDIN_H

#include <stdint.h>
#include <stddef.h>

#define STANDIN_BACKEND_VERSION 2

struct standin_cq_desc {
	uint64_t handle;
	void *buf;
	uint32_t *dbrec;
	void *uar;
	uint32_t cqn;
	uint32_t cqe_cnt;
	uint32_t cqe_size;
	uint32_t reserved;
};

struct standin_srq_desc {
	uint64_t handle;
	void *buf;
	uint32_t *dbrec;
	uint32_t srqn;
	uint32_t wqe_cnt;
	uint32_t stride;
	uint32_t head;
	uint32_t tail;
	uint32_t reserved;
};

struct standin_qp_caps {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

struct standin_qp_desc {
	uint64_t handle;
	void *sq_buf;
	void *rq_buf;
	uint32_t *dbrec;
	void *bf_reg;
	uint32_t qpn;
	uint32_t sq_wqe_cnt;
	uint32_t sq_stride;
	uint32_t rq_wqe_cnt;
	uint32_t rq_stride;
	uint32_t bf_size;
	struct standin_qp_caps caps;
	uint32_t reserved;
};

/* What ibv_modify_qp set, accumulated over the transitions (the sim's SimQpAttr). */
struct standin_qp_attr {
	uint32_t remote_qpn;
	uint32_t path_mtu; /* bytes */
	uint32_t access;   /* IBV_ACCESS_* remote bits and LOCAL_WRITE */
	uint32_t qkey;
	uint8_t rnr_retry;
	uint8_t retry_cnt;
	uint8_t min_rnr_timer;
	uint8_t timeout;
	uint32_t flags; /* STANDIN_QP_ATTR_* */
	/* With STANDIN_QP_ATTR_DGID: the destination GID of the path (ah_attr.grh.dgid), not
	 * one of this device's: the backend reaches it (another process's device) or refuses
	 * it (EINVAL). */
	uint8_t dgid[16];
};

#define STANDIN_QP_ATTR_DGID 1u

/* The clock-info page's fields (mlx5dv_clock_info's). */
struct standin_clock {
	uint64_t nsec;
	uint64_t last_cycles;
	uint64_t frac;
	uint32_t mult;
	uint32_t shift;
	uint64_t mask;
};

struct standin_backend {
	uint32_t version; /* STANDIN_BACKEND_VERSION */
	uint32_t size;	  /* sizeof(struct standin_backend) */
	/* The GID at `index` of the device's GID table (0..3: 0/1 link-local, 2/3 the
	 * device's own address), distinct per device and per process. */
	int (*gid)(uint32_t dev, uint32_t index, uint8_t out[16]);
	int (*alloc_pd)(uint32_t dev, uint32_t *pdn);
	int (*reg_mr)(uint32_t dev, uint32_t pdn, uint64_t addr, uint64_t len, uint32_t access,
		      uint32_t *key);
	int (*dereg_mr)(uint32_t dev, uint32_t key);
	/* ts: 0 no timestamps, 1 free-running, 2 real-time */
	int (*create_cq)(uint32_t dev, uint32_t cqe, uint32_t ts, struct standin_cq_desc *out);
	/* From now on the CQ's completion events are written (the CQN, 4 bytes) to `fd`, a
	 * pipe's write end the backend owns from here on (closes it). */
	int (*cq_channel)(uint32_t dev, uint64_t handle, int fd);
	int (*destroy_cq)(uint32_t dev, uint64_t handle);
	int (*create_srq)(uint32_t dev, uint32_t pdn, uint32_t max_wr, uint32_t max_sge,
			  struct standin_srq_desc *out);
	int (*destroy_srq)(uint32_t dev, uint64_t handle);
	/* qp_type: enum ibv_qp_type; srqn < 0: none */
	int (*create_qp)(uint32_t dev, uint32_t pdn, uint32_t qp_type,
			 const struct standin_qp_caps *req, uint32_t send_cqn, uint32_t recv_cqn,
			 int64_t srqn, struct standin_qp_desc *out);
	/* state: enum ibv_qp_state; attr may be NULL */
	int (*modify_qp)(uint32_t dev, uint32_t qpn, uint32_t state,
			 const struct standin_qp_attr *attr);
	int (*qp_state)(uint32_t dev, uint32_t qpn, uint32_t *state);
	int (*destroy_qp)(uint32_t dev, uint64_t handle);
	int (*clock_info)(uint32_t dev, struct standin_clock *out);
	/* The free-running counter, and the real-time clock as `seconds << 32 | ns`. */
	int (*clock_now)(uint32_t dev, uint64_t *cycles, uint64_t *real_time);
};

/* Counters the tests read (rdma_direct_standin_stats). */
struct standin_stats {
	uint64_t violations; /* rules of libmlx5/libibverbs broken by the caller */
	uint64_t live_objects;
	uint64_t contexts;
	uint64_t bf_writes_past_doorbell; /* reserved */
};

#endif
