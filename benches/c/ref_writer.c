/*
 * Reference: the least a C writer does for the same work as benches/mlx5_hot.rs's callgrind
 * workloads, with rdma-core's mlx5dv.h definitions, on plain memory. No validation, no
 * accounting, no wr_id tracking: a lower bound to compare instruction counts with. Two
 * workloads (*_same) instead do in C what rdma-direct's code guarantees, check for check: what
 * those guarantees cost in C.
 *
 *   ref_writer single N    N single inline 8-byte RDMA WRITEs, 8-byte doorbell each
 *   ref_writer batch32 N   the same in batches of 32, one doorbell per batch
 *   ref_writer poll16 N    poll N CQEs in batches of 16 (owner check, load barrier, four
 *                          fields, dbrec once per batch)
 *   ref_writer poll1 N     poll N requester CQEs one per call; wr_id from the send queue's
 *                          wr_id array by wqe_counter
 *   ref_writer poll0 N     N polls of an empty CQ, 16 slots each: the owner byte of the CQE
 *                          at ci, nothing else (cg_poll0)
 *   ref_writer recv16 N    responder CQEs, one poll of 16 per round (cg_round16); wr_id from
 *                          the receive queue's wr_id array at its tail, byte_len from the CQE
 *   ref_writer mixed16 N   requester and responder CQEs alternating, as above
 *   ref_writer poll16_one N    N polls of 16 slots, each finding one requester CQE (written
 *                          before the call): the busy poller's case when completions
 *                          trickle in
 *   ref_writer rt N        N order round trips: one inline WRITE WITH IMMEDIATE posted (cg_rt_post),
 *                          its requester CQE and the peer's receive CQE polled one per call
 *                          (cg_rt_poll); the CQEs written in between
 *   ref_writer single_same N   cg_single with the guarantees rdma-direct's post and ring
 *                          keep (cg_single_same below): not a lower bound, the same work
 *   ref_writer batch32_same N  cg_batch32 with the same guarantees (cg_batch32_same)
 *   ref_writer poll1_same N    cg_poll1 with the checks of rdma-direct's dedicated poll
 *                          (cg_poll1_same below), one CQE per call
 *   ref_writer one_same N      the same with the checks of poll_one on a CQ that QPs share
 *                          (cg_one_same below): the polling flag, liveness, purge, the
 *                          producer position from the QP's dbrec
 *   ref_writer cover16 N   selective signaling: rounds of 32 inline WRITEs, one signaled per
 *                          16, posted (cg_cover16_post) and polled (cg_cover16_poll) with
 *                          rdma-direct's guarantees and a per-slot running count (see
 *                          sig_post, poll_sig below); per WQE
 *   ref_writer every1 N    the same rounds, every WQE signaled
 *   ref_writer cover_one N N CQEs each covering 15 unsignaled SENDs, one per call (cg_cover_one)
 *   ref_writer time single|batch32|single_rec|single_same|batch32_same|poll1 N RUNS
 *   ref_writer time cover16|every1|cover_one N RUNS
 *                          wall time: RUNS runs of N posts (poll1: N CQEs), prints the median
 *                          ns per post (per CQE); the same functions, for benches/compare.sh's
 *                          side-by-side. single_rec is single plus a 16-byte wr_id and size
 *                          record per WQE (what rdma-direct's poster keeps for its poller):
 *                          a measurement of that record's cost, not a compared workload
 *
 * Counted by callgrind inside the cg_* functions only (benches/compare.sh).
 */
#include <infiniband/mlx5dv.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <endian.h>
#include <time.h>

#define SQ_WQE_CNT 4096u
#define CQE_CNT 8192u

#define to_device_barrier() asm volatile("" ::: "memory")
#if defined(__x86_64__)
#define wc_fence() asm volatile("sfence" ::: "memory")
#define load_barrier() asm volatile("lfence" ::: "memory")
#else
#define wc_fence() asm volatile("dsb st" ::: "memory")
#define load_barrier() asm volatile("dmb oshld" ::: "memory")
#endif

struct sq {
	uint8_t *buf;
	uint32_t pi;
	uint32_t qpn;
	volatile uint32_t *dbrec;
	uint8_t *bf;
	uint32_t bf_off;
	uint32_t bf_size;
};

/* The same bytes as mlx5dv_set_ctrl_seg + the raddr and inline segments, written as 64-bit
 * stores; returns the ctrl segment's first 8 bytes, which the doorbell reuses from a register
 * (reading them back from the ring right after narrower stores would stall store
 * forwarding). */
static inline uint64_t write_inline8(struct sq *sq, uint64_t raddr, uint32_t rkey,
				     const void *data, uint8_t fm)
{
	uint8_t *wqe = sq->buf + (sq->pi & (SQ_WQE_CNT - 1)) * 64;
	uint64_t ctrl = (uint64_t)htobe32((sq->pi & 0xffff) << 8 | MLX5_OPCODE_RDMA_WRITE) |
			(uint64_t)htobe32(sq->qpn << 8 | 3) << 32;
	uint64_t d;

	*(uint64_t *)wqe = ctrl;
	/* signature, dci stream channel id, fm_ce_se, imm */
	*(uint64_t *)(wqe + 8) = (uint64_t)fm << 24;
	*(uint64_t *)(wqe + 16) = htobe64(raddr);
	*(uint64_t *)(wqe + 24) = htobe32(rkey); /* rkey, reserved 0 */
	*(uint64_t *)(wqe + 32) = htobe32(8 | MLX5_INLINE_SEG); /* header, then zero */
	*(uint64_t *)(wqe + 40) = 0;
	memcpy(&d, data, 8);
	memcpy(wqe + 36, &d, 8);
	sq->pi++;
	return ctrl;
}

static inline void ring(struct sq *sq, uint64_t ctrl)
{
	to_device_barrier();
	sq->dbrec[1] = htobe32(sq->pi & 0xffff);
	wc_fence();
	*(volatile uint64_t *)(sq->bf + sq->bf_off) = ctrl;
	wc_fence();
	sq->bf_off ^= sq->bf_size;
}

__attribute__((noinline)) void cg_single(struct sq *sq, unsigned n, const void *data)
{
	for (unsigned i = 0; i < n; i++)
		ring(sq, write_inline8(sq, 0x100000, 7, data, 0));
}

/* What rdma-direct's poster keeps per WQE for its poller: wr_id and size, 16 bytes. */
struct rec {
	uint64_t wr_id;
	uint32_t nbb;
	uint32_t head; /* requests posted up to and including this one (libmlx5's wqe_head);
			* kept by the selective-signaling workloads only */
};
static struct rec recs[SQ_WQE_CNT];

/* cg_single plus the poster's record of each WQE (a measurement of what the record costs,
 * not a workload compare.sh counts). */
__attribute__((noinline)) void cg_single_rec(struct sq *sq, unsigned n, const void *data)
{
	for (unsigned i = 0; i < n; i++) {
		struct rec *r = &recs[sq->pi & (SQ_WQE_CNT - 1)];
		r->wr_id = i;
		r->nbb = 1;
		ring(sq, write_inline8(sq, 0x100000, 7, data, 0));
	}
}

__attribute__((noinline)) void cg_batch32(struct sq *sq, unsigned n, const void *data)
{
	for (unsigned i = 0; i < n; i += 32) {
		uint64_t ctrl = 0;
		for (unsigned k = 0; k < 32 && i + k < n; k++)
			ctrl = write_inline8(sq, 0x100000, 7, data, 0);
		ring(sq, ctrl);
	}
}

struct cq {
	uint8_t *buf;
	uint32_t ci;
	volatile uint32_t *dbrec;
};

struct wc {
	uint64_t wr_id;
	uint32_t qpn;
	uint32_t byte_len;
	uint16_t wqe_counter;
	uint8_t opcode;
};

__attribute__((noinline)) unsigned cg_poll16(struct cq *cq, unsigned n, struct wc *out)
{
	unsigned got = 0;

	while (got < n) {
		unsigned k = 0;
		for (; k < 16; k++) {
			struct mlx5_cqe64 *cqe = (void *)(cq->buf + (cq->ci & (CQE_CNT - 1)) * 64);
			uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;

			if ((op_own >> 4) == MLX5_CQE_INVALID ||
			    ((op_own & MLX5_CQE_OWNER_MASK) ^ !!(cq->ci & CQE_CNT)))
				break;
			load_barrier();
			out[k].qpn = be32toh(cqe->sop_drop_qpn) & 0xffffff;
			out[k].wqe_counter = be16toh(cqe->wqe_counter);
			out[k].byte_len = be32toh(cqe->byte_cnt);
			out[k].opcode = op_own >> 4;
			out[k].wr_id = out[k].wqe_counter;
			cq->ci++;
		}
		if (!k)
			break;
		to_device_barrier();
		cq->dbrec[0] = htobe32(cq->ci & 0xffffff);
		got += k;
	}
	return got;
}

#define RQ_WQE_CNT 4096u

/* The same owner check, load barrier and dbrec as cg_poll16, plus the wr_id lookups a real
 * poller needs: by wqe_counter in the send queue's array, at the tail of the receive
 * queue's. */
struct cq2 {
	uint8_t *buf;
	uint32_t ci;
	uint32_t rq_tail;
	volatile uint32_t *dbrec;
	uint64_t *sq_wrid;
	uint64_t *rq_wrid;
};

static inline unsigned poll_batch(struct cq2 *cq, struct wc *out, unsigned max)
{
	unsigned k = 0;

	for (; k < max; k++) {
		struct mlx5_cqe64 *cqe = (void *)(cq->buf + (cq->ci & (CQE_CNT - 1)) * 64);
		uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;

		if ((op_own >> 4) == MLX5_CQE_INVALID ||
		    ((op_own & MLX5_CQE_OWNER_MASK) ^ !!(cq->ci & CQE_CNT)))
			break;
		load_barrier();
		out[k].qpn = be32toh(cqe->sop_drop_qpn) & 0xffffff;
		out[k].opcode = op_own >> 4;
		if ((op_own >> 4) == MLX5_CQE_REQ) {
			out[k].wr_id = cq->sq_wrid[be16toh(cqe->wqe_counter) & (SQ_WQE_CNT - 1)];
			out[k].byte_len = 0;
		} else {
			out[k].wr_id = cq->rq_wrid[cq->rq_tail++ & (RQ_WQE_CNT - 1)];
			out[k].byte_len = be32toh(cqe->byte_cnt);
		}
		cq->ci++;
	}
	if (k) {
		to_device_barrier();
		cq->dbrec[0] = htobe32(cq->ci & 0xffffff);
	}
	return k;
}

__attribute__((noinline)) unsigned cg_poll1(struct cq2 *cq, unsigned n, struct wc *out)
{
	unsigned got = 0;

	while (got < n) {
		unsigned k = poll_batch(cq, out, 1);
		if (!k)
			break;
		got += k;
	}
	return got;
}

__attribute__((noinline)) unsigned cg_poll0(struct cq2 *cq, unsigned n, struct wc *out)
{
	unsigned got = 0;

	for (unsigned i = 0; i < n; i++)
		got += poll_batch(cq, out, 16);
	return got;
}

__attribute__((noinline)) unsigned cg_round16(struct cq2 *cq, struct wc *out)
{
	return poll_batch(cq, out, 16);
}

/* The order round trip (rt): one inline 8-byte RDMA WRITE WITH IMMEDIATE, signaled, its wr_id
 * recorded for the poller, rung with the 8-byte doorbell (cg_rt_post); then its requester CQE
 * and the peer's receive CQE (RESP_WR_IMM, the immediate) polled one per call (cg_rt_poll). */
__attribute__((noinline)) void cg_rt_post(struct sq *sq, uint64_t *wrid, uint64_t id,
					 const void *data)
{
	uint8_t *wqe = sq->buf + (sq->pi & (SQ_WQE_CNT - 1)) * 64;
	uint64_t ctrl;

	wrid[sq->pi & (SQ_WQE_CNT - 1)] = id;
	ctrl = write_inline8(sq, 0x100000, 7, data, MLX5_WQE_CTRL_CQ_UPDATE);
	/* opcode WRITE_IMM and the immediate (ctrl bytes 3 and 12..15) */
	ctrl = (ctrl & ~(0xffull << 24)) | (uint64_t)MLX5_OPCODE_RDMA_WRITE_IMM << 24;
	*(uint64_t *)wqe = ctrl;
	*(uint32_t *)(wqe + 12) = htobe32(0x1234);
	ring(sq, ctrl);
}

__attribute__((noinline)) unsigned cg_rt_poll(struct cq2 *cq, struct wc *out)
{
	unsigned got = 0;

	got += poll_batch(cq, out, 1);
	got += poll_batch(cq, out + 1, 1);
	return got;
}

/* cg_single with what rdma-direct's SendQueue::post and ring keep per post: the posting
 * budget in one compare against a limit another thread (the poller) may lower, read through a
 * pointer; the poster's record (wr_id, size) for its poller; the doorbell value kept for ring;
 * ring's test of the WQEBBs staged since the last doorbell (the 8-byte doorbell above the
 * BlueFlame size, nothing when none). */
struct sq_same {
	struct sq sq;
	const volatile uint32_t *limit; /* posts while pi < *limit */
	struct rec *recs;
	uint32_t rung_pi;
	uint32_t bf_bbs;
	uint64_t last_ctrl;
};

__attribute__((noinline)) unsigned cg_single_same(struct sq_same *s, unsigned n,
						  const void *data)
{
	unsigned i = 0;

	for (; i < n; i++) {
		struct rec *r;
		uint32_t staged;

		if (s->sq.pi >= *s->limit)
			break; /* rdma-direct: the general path refills or refuses */
		r = &s->recs[s->sq.pi & (SQ_WQE_CNT - 1)];
		r->wr_id = i;
		r->nbb = 1;
		s->last_ctrl = write_inline8(&s->sq, 0x100000, 7, data, 0);
		staged = s->sq.pi - s->rung_pi;
		if (staged > s->bf_bbs) {
			s->rung_pi = s->sq.pi;
			ring(&s->sq, s->last_ctrl);
		} else if (staged) {
			break; /* BlueFlame copy: off in this workload */
		}
	}
	return i;
}

/* cg_batch32 with the same guarantees as cg_single_same: per post the budget compare, the
 * record and the doorbell value kept; per doorbell the staged test. */
__attribute__((noinline)) unsigned cg_batch32_same(struct sq_same *s, unsigned n,
						   const void *data)
{
	unsigned i = 0;

	while (i < n) {
		for (unsigned k = 0; k < 32 && i < n; k++, i++) {
			struct rec *r;

			if (s->sq.pi >= *s->limit)
				return i;
			r = &s->recs[s->sq.pi & (SQ_WQE_CNT - 1)];
			r->wr_id = i;
			r->nbb = 1;
			s->last_ctrl = write_inline8(&s->sq, 0x100000, 7, data, 0);
		}
		if (s->sq.pi - s->rung_pi > s->bf_bbs) {
			s->rung_pi = s->sq.pi;
			ring(&s->sq, s->last_ctrl);
		}
	}
	return i;
}

/* cg_poll1 with the checks rdma-direct's dedicated poll (a QP and the CQ it alone completes
 * into) makes per CQE: a plain requester CQE of this QP (owner, opcode, no scatter, then the
 * QP number and a WQE opcode without byte length in one compare); it completes the oldest
 * outstanding WQE (wqe_counter equal to the send queue's retired position); that WQE, at its
 * recorded size, lies below the last doorbell; wr_id from the poster's record. The whole
 * 64-byte completion written; the send queue's retired position and count, the dbrec and the
 * ci posters read (CQ accounting) updated. Anything else: 0 (rdma-direct: the general poll). */
struct wc64 {
	uint64_t wr_id;
	uint32_t byte_len, qpn;
	uint32_t opcode, status;
	uint64_t covered_from;
	uint32_t covered, imm, src_qp, vendor_err, flags, pad[3];
};

struct cq_same {
	uint8_t *buf;
	uint32_t ci;
	uint32_t tag; /* sop_drop_qpn as read: the QP number, big-endian, in bytes 1..3 */
	volatile uint32_t *dbrec;
	volatile uint32_t *pub_ci;
	struct rec *recs;
	uint32_t sq_ci, sq_retired; /* the send queue's retired position and count */
	uint32_t rung; /* the send queue's producer position at its last doorbell */
	uint64_t len_qpn;
};

static const uint32_t req_opcode[16] = { [MLX5_OPCODE_RDMA_WRITE] = 1, [MLX5_OPCODE_RDMA_WRITE_IMM] = 1,
					 [MLX5_OPCODE_SEND] = 2, [MLX5_OPCODE_SEND_IMM] = 2 };

static inline int poll_same(struct cq_same *cq, struct wc64 *out)
{
	struct mlx5_cqe64 *cqe = (void *)(cq->buf + (cq->ci & (CQE_CNT - 1)) * 64);
	uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
	uint32_t w, sci, nbb;
	struct rec *r;

	/* requester, no scatter bits, owner of ci's lap */
	if ((op_own & 0xfd) != (MLX5_CQE_REQ << 4 | !!(cq->ci & CQE_CNT)))
		return 0;
	load_barrier();
	w = cqe->sop_drop_qpn ^ cq->tag; /* the WQE opcode in the low byte when the QP matches */
	if (w >= 16)
		return 0;
	sci = cq->sq_ci;
	if (be16toh(cqe->wqe_counter) != (uint16_t)sci)
		return 0;
	r = &cq->recs[sci & (SQ_WQE_CNT - 1)];
	nbb = r->nbb;
	if (nbb > cq->rung - sci)
		return 0;
	out->wr_id = r->wr_id;
	memcpy(&out->byte_len, &cq->len_qpn, 8);
	out->opcode = req_opcode[w];
	out->status = 0;
	memset(&out->covered_from, 0, 40);
	cq->sq_ci = sci + nbb;
	cq->sq_retired++;
	cq->ci++;
	to_device_barrier();
	cq->dbrec[0] = htobe32(cq->ci & 0xffffff);
	*cq->pub_ci = cq->ci;
	return 1;
}

__attribute__((noinline)) unsigned cg_poll1_same(struct cq_same *cq, unsigned n, struct wc64 *out)
{
	unsigned got = 0;

	while (got < n) {
		if (!poll_same(cq, out))
			break;
		got++;
	}
	return got;
}

/* cg_poll1_same on a CQ that QPs share, with the checks rdma-direct's poll_one makes there:
 * the polling flag set (a plain store; the QP drop's fence makes it enough) before any QP
 * state is read and cleared after; the hot QP's record found by the tag compare; its purge
 * mark and liveness; its retired position and count in its own shared state; the published
 * producer position read from the QP's send dbrec (the poster is another thread). */
struct qp_shared {
	volatile uint32_t purge_send;
	volatile uint8_t alive;
	uint32_t sq_ci, sq_retired;
	struct rec *recs;
	volatile uint32_t *dbrec; /* [1]: the send counter, big-endian */
};

struct cq_shared_same {
	uint8_t *buf;
	uint32_t ci;
	uint32_t tag;
	struct qp_shared *hot;
	volatile uint8_t *polling;
	volatile uint32_t *dbrec;
	volatile uint32_t *pub_ci;
	uint64_t len_qpn;
};

static inline int poll_shared_same(struct cq_shared_same *cq, struct wc64 *out)
{
	struct mlx5_cqe64 *cqe = (void *)(cq->buf + (cq->ci & (CQE_CNT - 1)) * 64);
	uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
	struct qp_shared *qp;
	uint32_t w, sci, nbb, posted;
	struct rec *r;

	if ((op_own & 0xfd) != (MLX5_CQE_REQ << 4 | !!(cq->ci & CQE_CNT)))
		return 0;
	*cq->polling = 1;
	to_device_barrier();
	load_barrier();
	w = cqe->sop_drop_qpn ^ cq->tag;
	if (w >= 16)
		goto other;
	qp = cq->hot;
	if (qp->purge_send || !qp->alive)
		goto other;
	sci = qp->sq_ci;
	if (be16toh(cqe->wqe_counter) != (uint16_t)sci)
		goto other;
	posted = (be32toh(qp->dbrec[1]) - sci) & 0xffff;
	r = &qp->recs[sci & (SQ_WQE_CNT - 1)];
	nbb = r->nbb;
	if (nbb > posted)
		goto other;
	out->wr_id = r->wr_id;
	memcpy(&out->byte_len, &cq->len_qpn, 8);
	out->opcode = req_opcode[w];
	out->status = 0;
	memset(&out->covered_from, 0, 40);
	qp->sq_ci = sci + nbb;
	qp->sq_retired++;
	cq->ci++;
	to_device_barrier();
	cq->dbrec[0] = htobe32(cq->ci & 0xffffff);
	*cq->pub_ci = cq->ci;
	to_device_barrier();
	*cq->polling = 0;
	return 1;
other:
	to_device_barrier();
	*cq->polling = 0;
	return 0;
}

__attribute__((noinline)) unsigned cg_one_same(struct cq_shared_same *cq, unsigned n,
					       struct wc64 *out)
{
	unsigned got = 0;

	while (got < n) {
		if (!poll_shared_same(cq, out))
			break;
		got++;
	}
	return got;
}

/* Selective signaling (cover16, every1, cover_one), C doing what rdma-direct does.
 * The post side (cg_*_post): cg_batch32_same's guarantees per post (the budget compare, the
 * record, the doorbell value kept, the staged test per doorbell) plus the running request
 * count in the record (libmlx5's wqe_head) and the signaled flag. The poll side (cg_*_poll,
 * cg_cover_one): poll_shared_same's checks once per poll (the polling flag, liveness, purge,
 * the producer position from the QP's dbrec) and per CQE (a plain requester CQE of the hot QP
 * with a WQE opcode without byte length), then the covered count in O(1): the WQE named lies
 * below the published producer position, its running count minus the oldest outstanding
 * one's is at most its distance (an entry of an earlier lap fails), the whole WQE published;
 * the whole 64-byte completion (covered, covered_from), the retired position and count, the
 * dbrec, the CQ entries given back (unreleased) and the ci posters read. */
struct sq_sig {
	struct sq_same s;
	uint32_t posted; /* requests posted (free-running) */
};

static inline void sig_post(struct sq_sig *q, uint64_t base, unsigned period, const void *data)
{
	struct sq_same *s = &q->s;

	for (unsigned k = 0; k < 32; k++) {
		struct rec *r;

		if (s->sq.pi >= *s->limit)
			return;
		r = &s->recs[s->sq.pi & (SQ_WQE_CNT - 1)];
		r->wr_id = base + k;
		r->nbb = 1;
		r->head = ++q->posted;
		s->last_ctrl = write_inline8(&s->sq, 0x100000, 7, data,
					     k % period == period - 1 ? MLX5_WQE_CTRL_CQ_UPDATE : 0);
	}
	if (s->sq.pi - s->rung_pi > s->bf_bbs) {
		s->rung_pi = s->sq.pi;
		ring(&s->sq, s->last_ctrl);
	}
}

struct cq_sig {
	uint8_t *buf;
	uint32_t ci;
	uint32_t tag;
	struct qp_shared *hot;
	volatile uint8_t *polling;
	volatile uint32_t *dbrec;
	volatile uint32_t *pub_ci;
	volatile uint32_t *pub_unreleased;
	uint32_t unreleased;
	uint64_t len_qpn;
};

static inline unsigned poll_sig(struct cq_sig *cq, struct wc64 *out, unsigned max)
{
	struct qp_shared *qp = cq->hot;
	uint32_t sci, posted, retired = 0;
	unsigned k = 0;

	*cq->polling = 1;
	to_device_barrier();
	if (qp->purge_send || !qp->alive)
		goto done;
	sci = qp->sq_ci;
	posted = (be32toh(qp->dbrec[1]) - sci) & 0xffff;
	for (; k < max; k++) {
		uint32_t ci = cq->ci + k;
		struct mlx5_cqe64 *cqe = (void *)(cq->buf + (ci & (CQE_CNT - 1)) * 64);
		uint8_t op_own = *(volatile uint8_t *)&cqe->op_own;
		uint32_t w, dist, covered, used;
		struct rec *r, *o;

		if ((op_own & 0xfd) != (MLX5_CQE_REQ << 4 | !!(ci & CQE_CNT)))
			break;
		load_barrier();
		w = cqe->sop_drop_qpn ^ cq->tag;
		if (w >= 16)
			break;
		dist = (be16toh(cqe->wqe_counter) - sci) & 0xffff;
		if (dist >= posted)
			break;
		r = &qp->recs[(sci + dist) & (SQ_WQE_CNT - 1)];
		o = &qp->recs[sci & (SQ_WQE_CNT - 1)];
		covered = r->head - o->head;
		if (covered > dist)
			break;
		used = dist + r->nbb;
		if (used > posted)
			break;
		out[k].wr_id = r->wr_id;
		memcpy(&out[k].byte_len, &cq->len_qpn, 8);
		out[k].opcode = req_opcode[w];
		out[k].status = 0;
		memset(&out[k].covered_from, 0, 40);
		if (covered) {
			out[k].covered_from = o->wr_id;
			out[k].covered = covered;
		}
		sci += used;
		posted -= used;
		retired += covered + 1;
	}
	if (k) {
		qp->sq_ci = sci;
		qp->sq_retired += retired;
		cq->ci += k;
		to_device_barrier();
		cq->dbrec[0] = htobe32(cq->ci & 0xffffff);
		if (retired != k) {
			cq->unreleased -= retired - k;
			*cq->pub_unreleased = cq->unreleased;
		}
		*cq->pub_ci = cq->ci;
	}
done:
	to_device_barrier();
	*cq->polling = 0;
	return k;
}

static inline unsigned sig_poll(struct cq_sig *cq, unsigned want, struct wc64 *out)
{
	unsigned got = 0;

	while (got < want) {
		unsigned k = poll_sig(cq, out, 16);
		if (!k)
			break;
		got += k;
	}
	return got;
}

__attribute__((noinline)) void cg_cover16_post(struct sq_sig *q, uint64_t base, const void *data)
{
	sig_post(q, base, 16, data);
}

__attribute__((noinline)) unsigned cg_cover16_poll(struct cq_sig *cq, struct wc64 *out)
{
	return sig_poll(cq, 2, out);
}

__attribute__((noinline)) void cg_every1_post(struct sq_sig *q, uint64_t base, const void *data)
{
	sig_post(q, base, 1, data);
}

__attribute__((noinline)) unsigned cg_every1_poll(struct cq_sig *cq, struct wc64 *out)
{
	return sig_poll(cq, 32, out);
}

__attribute__((noinline)) unsigned cg_cover_one(struct cq_sig *cq, unsigned n, struct wc64 *out)
{
	unsigned got = 0;

	while (got < n) {
		if (!poll_sig(cq, out, 1))
			break;
		got++;
	}
	return got;
}

/* The selective-signaling rig: a send queue (4096 WQEBBs, records with running counts) and a
 * CQ shared in form (CQE_CNT CQEs, hardware-owned at first) with its one QP; the device side
 * (sig_device) answers every rung WQE with CQ_UPDATE by a requester CQE. */
struct sig_rig {
	struct sq_sig q;
	struct cq_sig cq;
	struct qp_shared qp;
	uint32_t dev_pi, dev_ci;
};

static volatile uint32_t sig_limit, sig_dbrec, sig_pub_ci, sig_pub_unrel;
static volatile uint8_t sig_polling;

static void sig_rig_new(struct sig_rig *g)
{
	memset(g, 0, sizeof(*g));
	g->q.s.sq.buf = aligned_alloc(4096, SQ_WQE_CNT * 64);
	g->q.s.sq.dbrec = aligned_alloc(64, 64);
	g->q.s.sq.bf = aligned_alloc(4096, 512);
	g->q.s.sq.bf_size = 256;
	g->q.s.sq.qpn = 0x4242;
	memset(g->q.s.sq.buf, 0, SQ_WQE_CNT * 64);
	memset((void *)g->q.s.sq.dbrec, 0, 64);
	g->q.s.limit = &sig_limit;
	g->q.s.recs = recs;
	g->qp.alive = 1;
	g->qp.recs = recs;
	g->qp.dbrec = g->q.s.sq.dbrec;
	g->cq.buf = aligned_alloc(4096, CQE_CNT * 64);
	memset(g->cq.buf, 0, CQE_CNT * 64);
	for (unsigned i = 0; i < CQE_CNT; i++)
		g->cq.buf[i * 64 + 63] = 0xf0;
	g->cq.tag = htobe32(0x4242);
	g->cq.hot = &g->qp;
	g->cq.polling = &sig_polling;
	g->cq.dbrec = &sig_dbrec;
	g->cq.pub_ci = &sig_pub_ci;
	g->cq.pub_unreleased = &sig_pub_unrel;
	g->cq.len_qpn = (uint64_t)0x4242 << 32;
}

/* The device: a requester CQE for every rung WQE with CQ_UPDATE; returns how many. The
 * posting budget follows the retired position (what rdma-direct's refill does). */
static unsigned sig_device(struct sig_rig *g)
{
	uint32_t target = be32toh(g->q.s.sq.dbrec[1]) & 0xffff;
	unsigned n = 0;

	while ((g->dev_pi & 0xffff) != target) {
		uint8_t *wqe = g->q.s.sq.buf + (g->dev_pi & (SQ_WQE_CNT - 1)) * 64;
		uint32_t op = be32toh(*(uint32_t *)wqe);
		if (wqe[11] & MLX5_WQE_CTRL_CQ_UPDATE) {
			uint32_t ci = g->dev_ci++;
			struct mlx5_cqe64 *c = (void *)(g->cq.buf + (ci & (CQE_CNT - 1)) * 64);
			c->sop_drop_qpn = htobe32((op & 0xff) << 24 | 0x4242);
			c->wqe_counter = htobe16(g->dev_pi & 0xffff);
			to_device_barrier();
			c->op_own = MLX5_CQE_REQ << 4 | !!(ci & CQE_CNT);
			n++;
		}
		g->dev_pi++;
	}
	sig_limit = g->qp.sq_ci + SQ_WQE_CNT;
	return n;
}

/* One cover_one batch: k rounds of 15 unsignaled SENDs and a signaled one (the records and
 * the CQEs as the post and the device would leave them), not timed or counted. */
static void cover_batch(struct sig_rig *g, unsigned k)
{
	for (unsigned i = 0; i < k * 16; i++) {
		uint32_t pi = g->q.s.sq.pi;
		uint8_t *wqe = g->q.s.sq.buf + (pi & (SQ_WQE_CNT - 1)) * 64;
		struct rec *r = &recs[pi & (SQ_WQE_CNT - 1)];
		r->wr_id = i;
		r->nbb = 1;
		r->head = ++g->q.posted;
		*(uint32_t *)wqe = htobe32((pi & 0xffff) << 8 | MLX5_OPCODE_SEND);
		wqe[11] = i % 16 == 15 ? MLX5_WQE_CTRL_CQ_UPDATE : 0;
		g->q.s.sq.pi++;
	}
	g->q.s.sq.dbrec[1] = htobe32(g->q.s.sq.pi & 0xffff);
	sig_device(g);
}

#define COVER_BATCH 240u

/* Rounds of 32 (cover16: one signaled per 16; every1: all) until n WQEs: the post and the
 * poll counted (or timed, *ns), the device between them not. Returns the WQEs posted, 0 when
 * a round did not poll its CQEs. */
static unsigned sig_rounds(struct sig_rig *g, int cover, unsigned n, double *ns)
{
	uint64_t payload = 0x0807060504030201ull;
	struct wc64 out[16];
	unsigned posted = 0;
	struct timespec t0, t1;

	if (ns)
		*ns = 0;
	while (posted < n) {
		unsigned got;
		if (ns)
			clock_gettime(CLOCK_MONOTONIC, &t0);
		if (cover)
			cg_cover16_post(&g->q, posted, &payload);
		else
			cg_every1_post(&g->q, posted, &payload);
		if (ns) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			*ns += (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
		}
		sig_device(g);
		if (ns)
			clock_gettime(CLOCK_MONOTONIC, &t0);
		got = cover ? cg_cover16_poll(&g->cq, out) : cg_every1_poll(&g->cq, out);
		if (ns) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			*ns += (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
		}
		if (got != (cover ? 2u : 32u) || out[cover ? 1 : 15].wr_id != posted + 31 ||
		    out[cover ? 1 : 15].covered != (cover ? 15u : 0u))
			return 0;
		posted += 32;
	}
	return posted;
}

static int cmp_double(const void *a, const void *b);

/* Median ns per WQE (cover16, every1) or per CQE (cover_one) over `runs` runs. */
static double time_sig(const char *kind, unsigned n, unsigned runs)
{
	struct sig_rig g;
	double *per = calloc(runs, sizeof(double));

	sig_rig_new(&g);
	sig_limit = SQ_WQE_CNT;
	for (unsigned r = 0; r < runs + 5; r++) {
		double ns;
		unsigned ops;
		if (!strcmp(kind, "cover_one")) {
			struct wc64 out[1];
			struct timespec t0, t1;
			ops = n < COVER_BATCH ? n : COVER_BATCH;
			cover_batch(&g, ops);
			clock_gettime(CLOCK_MONOTONIC, &t0);
			if (cg_cover_one(&g.cq, ops, out) != ops)
				exit(1);
			clock_gettime(CLOCK_MONOTONIC, &t1);
			ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
		} else {
			ops = sig_rounds(&g, !strcmp(kind, "cover16"), n, &ns);
			if (!ops)
				exit(1);
		}
		if (r >= 5)
			per[r - 5] = ns / ops;
	}
	qsort(per, runs, sizeof(double), cmp_double);
	return per[runs / 2];
}

/* A new CQ for the cq2 pollers: CQE_CNT 64-byte CQEs (every op_own 0xf0, the rest zero), its
 * dbrec and the queues' wr_id arrays (zero). */
static void cq2_new(struct cq2 *cq)
{
	memset(cq, 0, sizeof(*cq));
	cq->buf = aligned_alloc(4096, CQE_CNT * 64);
	cq->dbrec = aligned_alloc(64, 64);
	cq->sq_wrid = calloc(SQ_WQE_CNT, 8);
	cq->rq_wrid = calloc(RQ_WQE_CNT, 8);
	for (unsigned i = 0; i < CQE_CNT; i++)
		memset(cq->buf + i * 64, 0, 63), cq->buf[i * 64 + 63] = 0xf0;
}

/* For the *_same pollers: a CQ ring of CQE_CNT 64-byte CQEs whose first n are successful
 * requester CQEs of SENDs of QP 0x4242, one per WQE in order (the rest hardware-owned), and
 * the poster's records of those WQEs (wr_id i, one WQEBB each). */
static uint8_t *req_cqes_recorded(unsigned n)
{
	uint8_t *buf = aligned_alloc(4096, CQE_CNT * 64);

	memset(buf, 0, CQE_CNT * 64);
	for (unsigned i = 0; i < CQE_CNT; i++) {
		struct mlx5_cqe64 *c = (void *)(buf + i * 64);
		c->op_own = i < n ? MLX5_CQE_REQ << 4 : 0xf0;
		c->sop_drop_qpn = htobe32(MLX5_OPCODE_SEND << 24 | 0x4242);
		c->wqe_counter = htobe16(i);
	}
	for (unsigned i = 0; i < SQ_WQE_CNT; i++)
		recs[i].wr_id = i, recs[i].nbb = 1;
	return buf;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Median ns per post over `runs` runs of `n` posts of `kind`. */
static double time_posts(const char *kind, unsigned n, unsigned runs)
{
	uint64_t payload = 0x0807060504030201ull;
	struct sq sq = {0};
	double *per = calloc(runs, sizeof(double));
	sq.buf = aligned_alloc(4096, SQ_WQE_CNT * 64);
	sq.dbrec = aligned_alloc(64, 64);
	sq.bf = aligned_alloc(4096, 512);
	sq.bf_size = 256;
	sq.qpn = 0x4242;
	memset(sq.buf, 0, SQ_WQE_CNT * 64);
	for (unsigned r = 0; r < runs + 5; r++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (!strcmp(kind, "single"))
			cg_single(&sq, n, &payload);
		else if (!strcmp(kind, "single_same") || !strcmp(kind, "batch32_same")) {
			static volatile uint32_t limit;
			struct sq_same same = { .sq = sq, .limit = &limit, .recs = recs };
			unsigned done;
			/* the run's posts within the budget; the positions go on from the last run */
			same.rung_pi = sq.pi;
			limit = sq.pi + n;
			if (!strcmp(kind, "single_same"))
				done = cg_single_same(&same, n, &payload);
			else
				done = cg_batch32_same(&same, n, &payload);
			if (done != n)
				exit(1);
			sq = same.sq;
		} else if (!strcmp(kind, "single_rec"))
			cg_single_rec(&sq, n, &payload);
		else
			cg_batch32(&sq, n, &payload);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (r >= 5) /* warm-up runs first */
			per[r - 5] = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
	}
	qsort(per, runs, sizeof(double), cmp_double);
	return per[runs / 2];
}

/* Median ns per CQE over `runs` runs of `n` requester CQEs polled one per call (cg_poll1); the
 * CQEs of each run are written (untimed) at the positions the poller reaches next, with the
 * owner bit of their lap. */
static double time_polls(unsigned n, unsigned runs)
{
	struct cq2 cq;
	struct wc out[1];
	double *per = calloc(runs, sizeof(double));
	cq2_new(&cq);
	for (unsigned r = 0; r < runs + 5; r++) {
		struct timespec t0, t1;
		unsigned got;
		for (unsigned i = cq.ci; i < cq.ci + n; i++) {
			struct mlx5_cqe64 *c = (void *)(cq.buf + (i & (CQE_CNT - 1)) * 64);
			c->sop_drop_qpn = htobe32(0x0a004242);
			c->wqe_counter = htobe16(i);
			c->op_own = MLX5_CQE_REQ << 4 | !!(i & CQE_CNT);
		}
		clock_gettime(CLOCK_MONOTONIC, &t0);
		got = cg_poll1(&cq, n, out);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (got != n) {
			fprintf(stderr, "ref_writer time poll1: polled %u of %u\n", got, n);
			exit(1);
		}
		if (r >= 5)
			per[r - 5] = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
	}
	qsort(per, runs, sizeof(double), cmp_double);
	return per[runs / 2];
}

int main(int argc, char **argv)
{
	const char *kind = argc > 1 ? argv[1] : "single";

	if (!strcmp(kind, "time") && argc > 4) {
		unsigned n = (unsigned)atoi(argv[3]), runs = (unsigned)atoi(argv[4]);
		if (n < 1 || n > 4000 || runs < 1) {
			fprintf(stderr, "ref_writer time: 1 <= N <= 4000, RUNS >= 1\n");
			return 2;
		}
		if (!strcmp(argv[2], "poll1"))
			printf("%.2f\n", time_polls(n, runs));
		else if (!strcmp(argv[2], "cover16") || !strcmp(argv[2], "every1") ||
			 !strcmp(argv[2], "cover_one"))
			printf("%.2f\n", time_sig(argv[2], n, runs));
		else
			printf("%.2f\n", time_posts(argv[2], n, runs));
		return 0;
	}
	unsigned n = argc > 2 ? (unsigned)atoi(argv[2]) : 4000;
	uint64_t payload = 0x0807060504030201ull;

	if (n > 4000)
		n = 4000;
	if (!strcmp(kind, "single") || !strcmp(kind, "batch32")) {
		struct sq sq = {0};
		sq.buf = aligned_alloc(4096, SQ_WQE_CNT * 64);
		sq.dbrec = aligned_alloc(64, 64);
		sq.bf = aligned_alloc(4096, 512);
		sq.bf_size = 256;
		sq.qpn = 0x4242;
		memset(sq.buf, 0, SQ_WQE_CNT * 64);
		if (!strcmp(kind, "single"))
			cg_single(&sq, n, &payload);
		else
			cg_batch32(&sq, n, &payload);
		printf("posted %u\n", sq.pi);
	} else if (!strcmp(kind, "single_same") || !strcmp(kind, "batch32_same")) {
		static volatile uint32_t limit = SQ_WQE_CNT;
		struct sq_same s = {0};
		s.sq.buf = aligned_alloc(4096, SQ_WQE_CNT * 64);
		s.sq.dbrec = aligned_alloc(64, 64);
		s.sq.bf = aligned_alloc(4096, 512);
		s.sq.bf_size = 256;
		s.sq.qpn = 0x4242;
		memset(s.sq.buf, 0, SQ_WQE_CNT * 64);
		s.limit = &limit;
		s.recs = recs;
		unsigned done = !strcmp(kind, "single_same") ? cg_single_same(&s, n, &payload) :
							       cg_batch32_same(&s, n, &payload);
		printf("posted %u\n", done);
		if (done != n)
			return 1; /* a count per op over fewer ops would mislead */
	} else if (!strcmp(kind, "poll1_same")) {
		static volatile uint32_t dbrec, pub_ci;
		struct cq_same cq = {0};
		struct wc64 out[1];
		cq.buf = req_cqes_recorded(n);
		cq.tag = htobe32(0x4242);
		cq.dbrec = &dbrec;
		cq.pub_ci = &pub_ci;
		cq.recs = recs;
		cq.rung = n;
		cq.len_qpn = (uint64_t)0x4242 << 32;
		unsigned got = cg_poll1_same(&cq, n, out);
		printf("polled %u\n", got);
		if (got != n)
			return 1; /* a check refused a CQE: the count per CQE would mislead */
	} else if (!strcmp(kind, "one_same")) {
		static volatile uint32_t dbrec, pub_ci, qp_dbrec[2];
		static volatile uint8_t polling;
		struct qp_shared qp = { .alive = 1, .recs = recs, .dbrec = qp_dbrec };
		struct cq_shared_same cq = {0};
		struct wc64 out[1];
		cq.buf = req_cqes_recorded(n);
		qp_dbrec[1] = htobe32(n & 0xffff);
		cq.tag = htobe32(0x4242);
		cq.hot = &qp;
		cq.polling = &polling;
		cq.dbrec = &dbrec;
		cq.pub_ci = &pub_ci;
		cq.len_qpn = (uint64_t)0x4242 << 32;
		unsigned got = cg_one_same(&cq, n, out);
		printf("polled %u\n", got);
		if (got != n)
			return 1; /* a check refused a CQE: the count per CQE would mislead */
	} else if (!strcmp(kind, "cover16") || !strcmp(kind, "every1")) {
		struct sig_rig g;
		unsigned posted;
		sig_rig_new(&g);
		sig_limit = SQ_WQE_CNT;
		posted = sig_rounds(&g, !strcmp(kind, "cover16"), n, NULL);
		printf("posted %u\n", posted);
		if (posted < n)
			return 1; /* a round did not poll what it must: the count would mislead */
	} else if (!strcmp(kind, "cover_one")) {
		struct sig_rig g;
		struct wc64 out[1];
		unsigned got = 0;
		sig_rig_new(&g);
		sig_limit = SQ_WQE_CNT;
		while (got < n) {
			unsigned k = n - got < COVER_BATCH ? n - got : COVER_BATCH;
			cover_batch(&g, k);
			if (cg_cover_one(&g.cq, k, out) != k || out[0].covered != 15)
				return 1;
			got += k;
		}
		printf("polled %u\n", got);
	} else if (!strcmp(kind, "poll16")) {
		struct cq cq = {0};
		struct wc out[16];
		cq.buf = aligned_alloc(4096, CQE_CNT * 64);
		cq.dbrec = aligned_alloc(64, 64);
		memset(cq.buf, 0, CQE_CNT * 64);
		for (unsigned i = 0; i < CQE_CNT; i++) {
			struct mlx5_cqe64 *c = (void *)(cq.buf + i * 64);
			c->op_own = i < n ? 0x00 : 0xf0;
			c->sop_drop_qpn = htobe32(0x0a004242);
			c->wqe_counter = htobe16(i);
		}
		printf("polled %u\n", cg_poll16(&cq, n, out));
	} else if (!strcmp(kind, "poll0")) {
		struct cq2 cq;
		struct wc out[16];
		cq2_new(&cq);
		printf("polled %u\n", cg_poll0(&cq, n, out));
	} else if (!strcmp(kind, "poll16_one")) {
		struct cq2 cq;
		struct wc out[16];
		unsigned got = 0;
		cq2_new(&cq);
		for (unsigned i = 0; i < n; i++) {
			struct mlx5_cqe64 *c = (void *)(cq.buf + i * 64);
			c->sop_drop_qpn = htobe32(0x0a004242);
			c->wqe_counter = htobe16(i);
			c->op_own = MLX5_CQE_REQ << 4;
			got += cg_round16(&cq, out);
		}
		printf("polled %u\n", got);
	} else if (!strcmp(kind, "rt")) {
		struct sq sq = {0};
		struct cq2 cq;
		struct wc out[2];
		unsigned got = 0;
		sq.buf = aligned_alloc(4096, SQ_WQE_CNT * 64);
		sq.dbrec = aligned_alloc(64, 64);
		sq.bf = aligned_alloc(4096, 512);
		sq.bf_size = 256;
		sq.qpn = 0x4242;
		memset(sq.buf, 0, SQ_WQE_CNT * 64);
		cq2_new(&cq);
		for (unsigned i = 0; i < n; i++) {
			/* the device: the requester CQE, then the peer's receive CQE */
			struct mlx5_cqe64 *c;
			cg_rt_post(&sq, cq.sq_wrid, i, &payload);
			c = (void *)(cq.buf + (2 * i) * 64);
			c->sop_drop_qpn = htobe32(MLX5_OPCODE_RDMA_WRITE_IMM << 24 | 0x4242);
			c->wqe_counter = htobe16(i);
			c->op_own = MLX5_CQE_REQ << 4;
			c = (void *)(cq.buf + (2 * i + 1) * 64);
			c->sop_drop_qpn = htobe32(0x4242);
			c->byte_cnt = htobe32(8);
			c->imm_inval_pkey = htobe32(0x1234);
			c->op_own = MLX5_CQE_RESP_WR_IMM << 4;
			got += cg_rt_poll(&cq, out);
		}
		printf("round trips %u, completions %u\n", n, got);
	} else if (!strcmp(kind, "poll1") || !strcmp(kind, "recv16") || !strcmp(kind, "mixed16")) {
		struct cq2 cq;
		struct wc out[16];
		unsigned got = 0;
		cq2_new(&cq);
		for (unsigned i = 0; i < CQE_CNT; i++) {
			struct mlx5_cqe64 *c = (void *)(cq.buf + i * 64);
			int req = !strcmp(kind, "poll1") || (!strcmp(kind, "mixed16") && i % 2 == 0);
			c->op_own = i < n ? (req ? MLX5_CQE_REQ : MLX5_CQE_RESP_SEND) << 4 : 0xf0;
			c->sop_drop_qpn = htobe32(0x0a004242);
			c->wqe_counter = htobe16(i);
			c->byte_cnt = htobe32(8);
		}
		if (!strcmp(kind, "poll1")) {
			got = cg_poll1(&cq, n, out);
		} else {
			while (got < n) {
				unsigned k = cg_round16(&cq, out);
				if (!k)
					break;
				got += k;
			}
		}
		printf("polled %u\n", got);
	} else {
		fprintf(stderr, "usage: ref_writer single|batch32|poll16|poll1|poll0|recv16|mixed16|poll16_one|rt [n]\n");
		return 2;
	}
	return 0;
}
