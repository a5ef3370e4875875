/*
 * rdma-direct's stand-in for libibverbs and libmlx5 (see README.md in this directory).
 *
 * Built from rdma-core's installed headers (<infiniband/verbs.h>, <infiniband/mlx5dv.h>):
 * every struct handed to or filled for the caller is rdma-core's own, so a wrong Rust mirror
 * reads the wrong bytes here and a test fails. The devices are a model: their queues live on
 * the device engine the loading process attaches (rdma_direct_standin_attach, standin.h).
 *
 * The rules of libmlx5 and the kernel that the stand-in enforces, each a test in
 * tests/standin.rs: destroy order (EBUSY while referenced), thread domains need a free
 * dynamic UAR, mlx5dv_* only on mlx5 objects, the attribute mask of each QP transition,
 * ENOMEM/EINVAL on create. A broken rule is counted (rdma_direct_standin_stats) and printed
 * on stderr, prefixed "rdma-direct stand-in:".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <endian.h>

#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#include "standin.h"

#define EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(struct standin_cq_desc) == 48, "standin_cq_desc");
_Static_assert(sizeof(struct standin_srq_desc) == 48, "standin_srq_desc");
_Static_assert(sizeof(struct standin_qp_desc) == 88, "standin_qp_desc");
_Static_assert(sizeof(struct standin_qp_attr) == 40, "standin_qp_attr");
_Static_assert(sizeof(struct standin_clock) == 40, "standin_clock");

/* ------------------------------------------------------------------ devices */

#define NDEV 3
#define NGID 4

struct sdev {
	struct ibv_device ibdev; /* first: the list hands out &ibdev */
	uint32_t index;
	int mlx5;
	int ports;
	uint64_t guid;
};

static struct sdev devs[NDEV];
static pthread_once_t devs_once = PTHREAD_ONCE_INIT;
static const struct standin_backend *backend;
static atomic_ulong violations, live_objects, contexts;
/* Rules broken by calls made on this thread (a test's own count). */
static __thread unsigned long thread_violations;

static void init_devs(void)
{
	static const char *names[NDEV] = { "mlx5_0", "mlx5_1", "rxe_standin0" };
	for (int i = 0; i < NDEV; i++) {
		struct sdev *d = &devs[i];
		d->index = i;
		d->mlx5 = i < 2;
		d->ports = i == 1 ? 2 : 1;
		d->guid = 0x0c42a10300a0b000ull + i;
		d->ibdev.node_type = IBV_NODE_CA;
		d->ibdev.transport_type = IBV_TRANSPORT_IB;
		snprintf(d->ibdev.name, sizeof d->ibdev.name, "%s", names[i]);
		snprintf(d->ibdev.dev_name, sizeof d->ibdev.dev_name, "uverbs%d", i);
		snprintf(d->ibdev.dev_path, sizeof d->ibdev.dev_path,
			 "/sys/class/infiniband_verbs/uverbs%d", i);
		snprintf(d->ibdev.ibdev_path, sizeof d->ibdev.ibdev_path,
			 "/sys/class/infiniband/%s", names[i]);
	}
}

static void violation(const char *fmt, ...)
{
	va_list ap;
	atomic_fetch_add(&violations, 1);
	thread_violations++;
	fprintf(stderr, "rdma-direct stand-in: rule broken: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* ------------------------------------------------------------------ objects */

/* Knobs of one context (rdma_direct_standin_knob; process defaults from
 * RDMA_DIRECT_STANDIN_FAULT at open). */
struct knobs {
	long td_uars;	    /* dynamic UARs left for thread domains */
	long td_bf_size;    /* bf.size reported for a thread domain's bfreg */
	long dbrec_offset;  /* bytes added to the dbrec mlx5dv_init_obj(QP) reports */
	long fail_create;   /* errno of the next create (one shot), 0 none */
	long td_busy;	    /* ibv_dealloc_td always EBUSY (a planted wrong destroy order) */
};

struct sctx {
	struct verbs_context vctx; /* ends with the struct ibv_context the caller sees */
	struct sdev *dev;
	pthread_mutex_t lock;
	long objects;
	struct knobs k;
	int async_pipe[2];
};

struct std_ {
	struct ibv_td td;
	int refs; /* parent domains */
};

struct spd {
	struct ibv_pd pd;
	uint32_t pdn;
	int refs; /* MRs, QPs, SRQs, AHs, parent domains */
	struct spd *base; /* parent domain: its PD */
	struct std_ *td;  /* parent domain: its TD, or NULL */
};

struct smr {
	struct ibv_mr mr;
	struct spd *pd;
};

struct schan {
	struct ibv_comp_channel ch;
	int refs; /* CQs */
	int wfd;  /* the pipe's write end: each CQ on the channel gets a dup for its device */
};

struct scq {
	struct ibv_cq_ex cqx; /* first: ibv_cq_ex_to_cq is a cast */
	struct standin_cq_desc d;
	int refs; /* QPs */
	int dv_owned;
	struct schan *chan;
	uint32_t arm_sn;
	uint32_t ts;
};

struct ssrq {
	struct ibv_srq srq;
	struct standin_srq_desc d;
	struct spd *pd;
	int refs;
};

struct sqp {
	struct ibv_qp qp;
	struct standin_qp_desc d;
	struct spd *pd; /* the PD or parent domain it was created on */
	struct scq *scq, *rcq;
	struct ssrq *srq;
	int scatter_to_cqe;
	int dedicated_bfreg;
	struct standin_qp_attr attr;
	struct ibv_qp_attr seen; /* for ibv_query_qp */
	struct ibv_qp_cap cap;
};

struct sah {
	struct ibv_ah ah;
	struct spd *pd;
	struct mlx5_wqe_av av;
};

/* Every object a caller is handed, for mlx5dv_init_obj and ibv_get_cq_event lookups. */
#define MAXQ 4096
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sqp *qps[MAXQ];
static struct scq *cqs[MAXQ];

static struct sctx *sctx_of(struct ibv_context *c)
{
	return (struct sctx *)((char *)c - offsetof(struct verbs_context, context));
}

static int ctx_is_ours(struct ibv_context *c)
{
	return c && c->abi_compat == __VERBS_ABI_IS_EXTENDED && c->device >= &devs[0].ibdev &&
	       c->device <= &devs[NDEV - 1].ibdev;
}

static void obj_add(struct sctx *s, int n)
{
	pthread_mutex_lock(&s->lock);
	s->objects += n;
	pthread_mutex_unlock(&s->lock);
	if (n > 0)
		atomic_fetch_add(&live_objects, n);
	else
		atomic_fetch_sub(&live_objects, -n);
}

static int need_backend(void)
{
	if (!backend) {
		errno = ENODEV;
		return ENODEV;
	}
	return 0;
}

/* One-shot failure planted with the fail_create knob. */
static int planted_failure(struct sctx *s)
{
	int e = 0;
	pthread_mutex_lock(&s->lock);
	if (s->k.fail_create) {
		e = (int)s->k.fail_create;
		s->k.fail_create = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return e;
}

static void *fail_null(int e)
{
	errno = e;
	return NULL;
}

/* ------------------------------------------------------------------ attach, knobs */

EXPORT int rdma_direct_standin_attach(const struct standin_backend *be)
{
	if (!be || be->version != STANDIN_BACKEND_VERSION || be->size != sizeof(*be))
		return EINVAL;
	backend = be;
	return 0;
}

EXPORT void rdma_direct_standin_stats(struct standin_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->violations = atomic_load(&violations);
	out->live_objects = atomic_load(&live_objects);
	out->contexts = atomic_load(&contexts);
}

/* Rules broken by calls made on the calling thread so far. */
EXPORT unsigned long rdma_direct_standin_thread_violations(void)
{
	return thread_violations;
}

/* Objects alive on a context (PDs, parent domains, TDs, MRs, CQs, channels, SRQs, QPs,
 * AHs); -1 for a foreign context. */
EXPORT long rdma_direct_standin_ctx_objects(struct ibv_context *c)
{
	if (!ctx_is_ours(c))
		return -1;
	struct sctx *s = sctx_of(c);
	pthread_mutex_lock(&s->lock);
	long n = s->objects;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static long *knob(struct knobs *k, const char *name)
{
	if (!strcmp(name, "td_uars"))
		return &k->td_uars;
	if (!strcmp(name, "td_bf_size"))
		return &k->td_bf_size;
	if (!strcmp(name, "dbrec_offset"))
		return &k->dbrec_offset;
	if (!strcmp(name, "fail_create"))
		return &k->fail_create;
	if (!strcmp(name, "td_busy"))
		return &k->td_busy;
	return NULL;
}

/* Set a knob of one context: 0, or EINVAL for an unknown name or a foreign context. */
EXPORT int rdma_direct_standin_knob(struct ibv_context *c, const char *name, long value)
{
	if (!ctx_is_ours(c))
		return EINVAL;
	struct sctx *s = sctx_of(c);
	pthread_mutex_lock(&s->lock);
	long *p = knob(&s->k, name);
	if (p)
		*p = value;
	pthread_mutex_unlock(&s->lock);
	return p ? 0 : EINVAL;
}

/* Whether a QP of this process has scatter-to-CQE enabled (-1: no such QP). */
EXPORT int rdma_direct_standin_qp_scatter_to_cqe(uint32_t qpn)
{
	int r = -1;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < MAXQ; i++)
		if (qps[i] && qps[i]->qp.qp_num == qpn)
			r = qps[i]->scatter_to_cqe;
	pthread_mutex_unlock(&reg_lock);
	return r;
}

/* The BlueFlame register of a QP as libmlx5 reports it (0, or ENOENT). */
EXPORT int rdma_direct_standin_qp_bf(uint32_t qpn, void **reg, uint32_t *size)
{
	int r = ENOENT;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < MAXQ; i++)
		if (qps[i] && qps[i]->qp.qp_num == qpn) {
			*reg = qps[i]->d.bf_reg;
			*size = qps[i]->dedicated_bfreg ? (uint32_t)sctx_of(qps[i]->qp.context)->k.td_bf_size
							: qps[i]->d.bf_size;
			r = 0;
		}
	pthread_mutex_unlock(&reg_lock);
	return r;
}

static void default_knobs(struct knobs *k)
{
	k->td_uars = 512;
	k->td_bf_size = 256;
	k->dbrec_offset = 0;
	k->fail_create = 0;
	k->td_busy = 0;
	/* RDMA_DIRECT_STANDIN_FAULT: comma-separated planted faults for every context. */
	const char *f = getenv("RDMA_DIRECT_STANDIN_FAULT");
	if (!f)
		return;
	if (strstr(f, "bf_size0"))
		k->td_bf_size = 0;
	if (strstr(f, "dbrec_misalign"))
		k->dbrec_offset = 2;
	if (strstr(f, "no_td"))
		k->td_uars = 0;
	if (strstr(f, "td_busy"))
		k->td_busy = 1;
	if (strstr(f, "enomem"))
		k->fail_create = ENOMEM;
}

/* ------------------------------------------------------------------ device list */

#undef ibv_get_device_list
EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	pthread_once(&devs_once, init_devs);
	struct ibv_device **l = calloc(NDEV + 1, sizeof(*l));
	if (!l)
		return fail_null(ENOMEM);
	for (int i = 0; i < NDEV; i++)
		l[i] = &devs[i].ibdev;
	if (num)
		*num = NDEV;
	return l;
}

EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

EXPORT const char *ibv_get_device_name(struct ibv_device *d)
{
	return d->name;
}

EXPORT __be64 ibv_get_device_guid(struct ibv_device *d)
{
	return htobe64(((struct sdev *)d)->guid);
}

/* ------------------------------------------------------------------ context */

static int sz_ok(void) { return 1; }

static struct ibv_td *s_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *a);
static int s_dealloc_td(struct ibv_td *td);
static struct ibv_pd *s_alloc_parent_domain(struct ibv_context *c,
					    struct ibv_parent_domain_init_attr *a);
static struct ibv_cq_ex *s_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *a);
static int s_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v);
static struct ibv_qp *s_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a);
static int s_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int s_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int s_post_srq_recv(struct ibv_srq *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int s_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int s_req_notify_cq(struct ibv_cq *cq, int solicited);

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *d)
{
	(void)sz_ok;
	struct sctx *s = calloc(1, sizeof(*s));
	if (!s)
		return fail_null(ENOMEM);
	struct ibv_context *c = &s->vctx.context;
	s->dev = (struct sdev *)d;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&c->mutex, NULL);
	default_knobs(&s->k);
	c->device = d;
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->num_comp_vectors = 1;
	c->cmd_fd = -1;
	if (pipe2(s->async_pipe, O_CLOEXEC) != 0) {
		free(s);
		return NULL;
	}
	c->async_fd = s->async_pipe[0];
	/* A planted asynchronous event: port 1 went active (for `rdma-direct events`). */
	const char *f = getenv("RDMA_DIRECT_STANDIN_FAULT");
	if (f && strstr(f, "port_event") && write(s->async_pipe[1], "p", 1) != 1) {
		close(s->async_pipe[0]);
		close(s->async_pipe[1]);
		free(s);
		return NULL;
	}
	/* The data path is the caller's own on mlx5 (the mlx5 hot path writes WQEs); the ops a
	 * verbs user would call fail with EOPNOTSUPP, naming the stand-in (see README). */
	c->ops.post_send = s_post_send;
	c->ops.post_recv = s_post_recv;
	c->ops.post_srq_recv = s_post_srq_recv;
	c->ops.poll_cq = s_poll_cq;
	c->ops.req_notify_cq = s_req_notify_cq;
	s->vctx.sz = sizeof(struct verbs_context);
	s->vctx.alloc_parent_domain = s_alloc_parent_domain;
	s->vctx.create_cq_ex = s_create_cq_ex;
	s->vctx.query_rt_values = s_query_rt_values;
	s->vctx.create_qp_ex = s_create_qp_ex;
	if (s->dev->mlx5) {
		/* libmlx5 has thread domains; rxe's slot holds libibverbs' EOPNOTSUPP stub, here
		 * an empty slot (both are "unsupported" to the caller). */
		s->vctx.alloc_td = s_alloc_td;
		s->vctx.dealloc_td = s_dealloc_td;
	}
	atomic_fetch_add(&contexts, 1);
	return c;
}

EXPORT int ibv_close_device(struct ibv_context *c)
{
	struct sctx *s = sctx_of(c);
	if (s->objects != 0)
		violation("ibv_close_device(%s) with %ld objects still alive (destroy them first)",
			  s->dev->ibdev.name, s->objects);
	close(s->async_pipe[0]);
	close(s->async_pipe[1]);
	atomic_fetch_sub(&contexts, 1);
	free(s);
	return 0;
}

EXPORT int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	struct sdev *d = sctx_of(c)->dev;
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof a->fw_ver, "%s", d->mlx5 ? "16.35.2000 (stand-in)" : "0.0 (stand-in)");
	a->node_guid = htobe64(d->guid);
	a->sys_image_guid = htobe64(d->guid);
	a->max_mr_size = ~0ull;
	a->page_size_cap = 0xfffffffffffff000ull;
	a->vendor_id = d->mlx5 ? 0x02c9 : 0xffffff;
	a->vendor_part_id = d->mlx5 ? 4119 : 0;
	a->hw_ver = 0;
	a->max_qp = 1 << 17;
	a->max_qp_wr = 1 << 14;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE;
	a->max_sge = 16;
	a->max_sge_rd = 16;
	a->max_cq = 1 << 16;
	a->max_cqe = 1 << 22;
	a->max_mr = 1 << 16;
	a->max_pd = 1 << 16;
	a->max_qp_rd_atom = 16;
	a->max_res_rd_atom = 1 << 20;
	a->max_qp_init_rd_atom = 16;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ah = 1 << 16;
	a->max_srq = 1 << 16;
	a->max_srq_wr = 1 << 15;
	a->max_srq_sge = 31;
	a->max_pkeys = 128;
	a->local_ca_ack_delay = 16;
	a->phys_port_cnt = (uint8_t)d->ports;
	return 0;
}

#undef ibv_query_port
EXPORT int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *out)
{
	struct sdev *d = sctx_of(c)->dev;
	struct ibv_port_attr *a = (struct ibv_port_attr *)out;
	if (port < 1 || port > d->ports)
		return EINVAL;
	int up = port == 1;
	memset(a, 0, sizeof(*a));
	a->state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = up ? IBV_MTU_4096 : IBV_MTU_1024;
	a->gid_tbl_len = NGID;
	a->port_cap_flags = IBV_PORT_CM_SUP;
	a->max_msg_sz = 1u << 30;
	a->pkey_tbl_len = 1;
	a->max_vl_num = 4;
	a->active_width = 2;	/* 4X */
	a->active_speed = 32;	/* EDR */
	a->phys_state = up ? 5 : 3;
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

/* The GID table of every port: 0/1 link-local (RoCE v1/v2), 2/3 the device's own address
 * (RoCE v1/v2). With a backend, the backend's (distinct per process: two processes' mlx5_0
 * are two devices that reach each other); without, from the GUID and an IPv4-mapped
 * loopback address. */
static int gid_of(struct sdev *d, int index, union ibv_gid *g)
{
	memset(g, 0, sizeof(*g));
	if (index < 0 || index >= NGID)
		return EINVAL;
	if (backend)
		return backend->gid(d->index, (uint32_t)index, g->raw);
	if (index < 2) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
		uint64_t guid = htobe64(d->guid);
		memcpy(&g->raw[8], &guid, 8);
		return 0;
	}
	g->raw[10] = g->raw[11] = 0xff;
	g->raw[12] = 127;
	g->raw[15] = (uint8_t)(1 + d->index);
	return 0;
}

EXPORT int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	struct sdev *d = sctx_of(c)->dev;
	if (port < 1 || port > d->ports)
		return EINVAL;
	int e = gid_of(d, index, gid);
	if (e)
		errno = e;
	return e ? -1 : 0;
}

/* ------------------------------------------------------------------ PD, TD, parent domain */

EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c)
{
	struct sctx *s = sctx_of(c);
	int e = need_backend();
	if (!e)
		e = planted_failure(s);
	if (e)
		return fail_null(e);
	struct spd *p = calloc(1, sizeof(*p));
	if (!p)
		return fail_null(ENOMEM);
	e = backend->alloc_pd(s->dev->index, &p->pdn);
	if (e) {
		free(p);
		return fail_null(e);
	}
	p->pd.context = c;
	p->pd.handle = p->pdn;
	obj_add(s, 1);
	return &p->pd;
}

static int pd_ref(struct spd *p, int n)
{
	struct sctx *s = sctx_of(p->pd.context);
	pthread_mutex_lock(&s->lock);
	p->refs += n;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* The PD objects are registered against: a parent domain's own PD. */
static struct spd *base_pd(struct spd *p)
{
	return p->base ? p->base : p;
}

EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct spd *p = (struct spd *)pd;
	struct sctx *s = sctx_of(pd->context);
	if (p->refs) {
		violation("ibv_dealloc_pd(%s %u) while %d object(s) use it: EBUSY (libmlx5 counts "
			  "references; destroy QPs, SRQs, MRs, AHs and parent domains first)",
			  p->base ? "parent domain" : "PD", p->pdn, p->refs);
		return EBUSY;
	}
	if (p->base) {
		pd_ref(p->base, -1);
		if (p->td) {
			pthread_mutex_lock(&s->lock);
			p->td->refs--;
			pthread_mutex_unlock(&s->lock);
		}
	}
	obj_add(s, -1);
	free(p);
	return 0;
}

static struct ibv_td *s_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *a)
{
	struct sctx *s = sctx_of(c);
	if (a->comp_mask) {
		return fail_null(EINVAL);
	}
	/* libmlx5 gives each thread domain a dedicated bfreg on a dynamic UAR; none left means
	 * no thread domain (ENOMEM). */
	pthread_mutex_lock(&s->lock);
	int ok = s->k.td_uars > 0;
	if (ok)
		s->k.td_uars--;
	pthread_mutex_unlock(&s->lock);
	if (!ok)
		return fail_null(ENOMEM);
	struct std_ *t = calloc(1, sizeof(*t));
	if (!t)
		return fail_null(ENOMEM);
	t->td.context = c;
	obj_add(s, 1);
	return &t->td;
}

static int s_dealloc_td(struct ibv_td *td)
{
	struct std_ *t = (struct std_ *)td;
	struct sctx *s = sctx_of(td->context);
	if (s->k.td_busy) {
		violation("ibv_dealloc_td: EBUSY (planted fault td_busy)");
		return EBUSY;
	}
	if (t->refs) {
		violation("ibv_dealloc_td while %d parent domain(s) use it: EBUSY (free the parent "
			  "domain first)", t->refs);
		return EBUSY;
	}
	pthread_mutex_lock(&s->lock);
	s->k.td_uars++;
	pthread_mutex_unlock(&s->lock);
	obj_add(s, -1);
	free(t);
	return 0;
}

static struct ibv_pd *s_alloc_parent_domain(struct ibv_context *c,
					    struct ibv_parent_domain_init_attr *a)
{
	struct sctx *s = sctx_of(c);
	if (!a->pd || a->pd->context != c || ((struct spd *)a->pd)->base ||
	    (a->td && a->td->context != c) || a->comp_mask)
		return fail_null(EINVAL);
	struct spd *p = calloc(1, sizeof(*p));
	if (!p)
		return fail_null(ENOMEM);
	p->base = (struct spd *)a->pd;
	p->pdn = p->base->pdn;
	p->td = (struct std_ *)a->td;
	p->pd.context = c;
	p->pd.handle = p->pdn;
	pd_ref(p->base, 1);
	if (p->td) {
		pthread_mutex_lock(&s->lock);
		p->td->refs++;
		pthread_mutex_unlock(&s->lock);
	}
	obj_add(s, 1);
	return &p->pd;
}

/* ------------------------------------------------------------------ MR */

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
			     unsigned access)
{
	struct spd *p = base_pd((struct spd *)pd);
	struct sctx *s = sctx_of(pd->context);
	int e = need_backend();
	if (!e)
		e = planted_failure(s);
	if (e)
		return fail_null(e);
	if (!addr || !len || iova != (uintptr_t)addr)
		return fail_null(EINVAL);
	/* IBV_ACCESS_REMOTE_WRITE / ATOMIC need LOCAL_WRITE (the kernel's rule). */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return fail_null(EINVAL);
	struct smr *m = calloc(1, sizeof(*m));
	if (!m)
		return fail_null(ENOMEM);
	uint32_t key;
	e = backend->reg_mr(s->dev->index, p->pdn, (uintptr_t)addr, len, access & 0xf, &key);
	if (e) {
		free(m);
		return fail_null(e);
	}
	m->pd = p;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->mr.lkey = key;
	m->mr.rkey = key;
	m->mr.handle = key;
	pd_ref(p, 1);
	obj_add(s, 1);
	return &m->mr;
}

#undef ibv_reg_mr
EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return reg_mr(pd, addr, len, (uintptr_t)addr, (unsigned)access);
}

EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				       unsigned int access)
{
	return reg_mr(pd, addr, len, iova, access);
}

EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct smr *m = (struct smr *)mr;
	struct sctx *s = sctx_of(mr->context);
	backend->dereg_mr(s->dev->index, mr->lkey);
	pd_ref(m->pd, -1);
	obj_add(s, -1);
	free(m);
	return 0;
}

/* ------------------------------------------------------------------ completion channel, CQ */

EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *c)
{
	struct schan *ch = calloc(1, sizeof(*ch));
	int fds[2];
	if (!ch)
		return fail_null(ENOMEM);
	if (pipe2(fds, O_CLOEXEC) != 0) {
		free(ch);
		return NULL;
	}
	ch->ch.context = c;
	ch->ch.fd = fds[0];
	ch->wfd = fds[1];
	obj_add(sctx_of(c), 1);
	return &ch->ch;
}

EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *chan)
{
	struct schan *ch = (struct schan *)chan;
	if (ch->refs) {
		violation("ibv_destroy_comp_channel while %d CQ(s) use it: EBUSY", ch->refs);
		errno = EBUSY;
		return -1;
	}
	close(ch->ch.fd);
	close(ch->wfd);
	obj_add(sctx_of(chan->context), -1);
	free(ch);
	return 0;
}

static int cq_register(struct scq *q)
{
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < MAXQ; i++)
		if (!cqs[i]) {
			cqs[i] = q;
			pthread_mutex_unlock(&reg_lock);
			return 0;
		}
	pthread_mutex_unlock(&reg_lock);
	return ENOMEM;
}

static void cq_unregister(struct scq *q)
{
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < MAXQ; i++)
		if (cqs[i] == q)
			cqs[i] = NULL;
	pthread_mutex_unlock(&reg_lock);
}

static struct scq *create_cq(struct ibv_context *c, int cqe, void *cq_context,
			     struct ibv_comp_channel *chan, uint32_t ts)
{
	struct sctx *s = sctx_of(c);
	int e = need_backend();
	if (!e)
		e = planted_failure(s);
	if (e)
		return fail_null(e);
	if (cqe < 1 || cqe > (1 << 22))
		return fail_null(EINVAL);
	if (chan && chan->context != c)
		return fail_null(EINVAL);
	struct scq *q = calloc(1, sizeof(*q));
	if (!q)
		return fail_null(ENOMEM);
	/* libmlx5 asks for cqe + 1 entries rounded up to a power of two. */
	e = backend->create_cq(s->dev->index, (uint32_t)cqe + 1, ts, &q->d);
	if (e) {
		free(q);
		return fail_null(e);
	}
	if (chan) {
		int fd = dup(((struct schan *)chan)->wfd);
		e = fd < 0 ? errno : backend->cq_channel(s->dev->index, q->d.handle, fd);
		if (e) {
			backend->destroy_cq(s->dev->index, q->d.handle);
			free(q);
			return fail_null(e);
		}
		q->chan = (struct schan *)chan;
		q->chan->refs++;
	}
	if (cq_register(q)) {
		backend->destroy_cq(s->dev->index, q->d.handle);
		free(q);
		return fail_null(ENOMEM);
	}
	q->ts = ts;
	q->cqx.context = c;
	q->cqx.channel = chan;
	q->cqx.cq_context = cq_context;
	q->cqx.handle = q->d.cqn;
	q->cqx.cqe = (int)q->d.cqe_cnt - 1;
	pthread_mutex_init(&q->cqx.mutex, NULL);
	pthread_cond_init(&q->cqx.cond, NULL);
	obj_add(s, 1);
	return q;
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *cq_context,
				    struct ibv_comp_channel *chan, int comp_vector)
{
	(void)comp_vector;
	struct scq *q = create_cq(c, cqe, cq_context, chan, 0);
	return q ? ibv_cq_ex_to_cq(&q->cqx) : NULL;
}

static struct ibv_cq_ex *s_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *a)
{
	uint64_t known = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK | IBV_WC_EX_WITH_BYTE_LEN |
			 IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
			 IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS;
	if (a->wc_flags & ~known || a->comp_mask)
		return fail_null(EOPNOTSUPP);
	uint32_t ts = 0;
	if (a->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		ts = 1;
	else if (a->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		ts = 2;
	struct scq *q = create_cq(c, (int)a->cqe, a->cq_context, a->channel, ts);
	return q ? &q->cqx : NULL;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct scq *q = (struct scq *)cq;
	struct sctx *s = sctx_of(cq->context);
	if (q->refs) {
		violation("ibv_destroy_cq(CQ %#x) while %d QP(s) use it: EBUSY", q->d.cqn, q->refs);
		return EBUSY;
	}
	backend->destroy_cq(s->dev->index, q->d.handle);
	cq_unregister(q);
	if (q->chan)
		q->chan->refs--;
	obj_add(s, -1);
	free(q);
	return 0;
}

EXPORT int ibv_get_cq_event(struct ibv_comp_channel *chan, struct ibv_cq **cq, void **cq_context)
{
	uint32_t cqn;
	ssize_t n = read(chan->fd, &cqn, 4);
	if (n != 4) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	struct scq *q = NULL;
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < MAXQ; i++)
		if (cqs[i] && cqs[i]->d.cqn == cqn && cqs[i]->chan == (struct schan *)chan)
			q = cqs[i];
	pthread_mutex_unlock(&reg_lock);
	if (!q) {
		errno = EIO;
		return -1;
	}
	/* libmlx5's mlx5_cq_event: the next arm carries the next sequence number. */
	q->arm_sn++;
	*cq = ibv_cq_ex_to_cq(&q->cqx);
	*cq_context = q->cqx.cq_context;
	return 0;
}

EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_mutex_unlock(&cq->mutex);
}

/* ------------------------------------------------------------------ SRQ */

EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a)
{
	struct spd *p = base_pd((struct spd *)pd);
	struct sctx *s = sctx_of(pd->context);
	int e = need_backend();
	if (!e)
		e = planted_failure(s);
	if (e)
		return fail_null(e);
	struct ssrq *q = calloc(1, sizeof(*q));
	if (!q)
		return fail_null(ENOMEM);
	e = backend->create_srq(s->dev->index, p->pdn, a->attr.max_wr, a->attr.max_sge, &q->d);
	if (e) {
		free(q);
		return fail_null(e);
	}
	q->pd = p;
	q->srq.context = pd->context;
	q->srq.srq_context = a->srq_context;
	q->srq.pd = pd;
	q->srq.handle = q->d.srqn;
	pthread_mutex_init(&q->srq.mutex, NULL);
	pthread_cond_init(&q->srq.cond, NULL);
	/* What libmlx5 grants: the free list minus the entry kept as its tail. */
	a->attr.max_wr = q->d.wqe_cnt - 1;
	a->attr.max_sge = (q->d.stride / 16) - 1;
	pd_ref(p, 1);
	obj_add(s, 1);
	return &q->srq;
}

EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int mask)
{
	(void)srq;
	(void)a;
	return mask & ~(IBV_SRQ_LIMIT) ? EINVAL : 0;
}

EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a)
{
	struct ssrq *q = (struct ssrq *)srq;
	a->max_wr = q->d.wqe_cnt - 1;
	a->max_sge = (q->d.stride / 16) - 1;
	a->srq_limit = 0;
	return 0;
}

EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct ssrq *q = (struct ssrq *)srq;
	struct sctx *s = sctx_of(srq->context);
	if (q->refs) {
		violation("ibv_destroy_srq(SRQ %#x) while %d QP(s) use it: EBUSY", q->d.srqn, q->refs);
		return EBUSY;
	}
	backend->destroy_srq(s->dev->index, q->d.handle);
	pd_ref(q->pd, -1);
	obj_add(s, -1);
	free(q);
	return 0;
}

/* ------------------------------------------------------------------ QP */

static int qp_register(struct sqp *q)
{
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < MAXQ; i++)
		if (!qps[i]) {
			qps[i] = q;
			pthread_mutex_unlock(&reg_lock);
			return 0;
		}
	pthread_mutex_unlock(&reg_lock);
	return ENOMEM;
}

static void qp_unregister(struct sqp *q)
{
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < MAXQ; i++)
		if (qps[i] == q)
			qps[i] = NULL;
	pthread_mutex_unlock(&reg_lock);
}

/* dv: called through mlx5dv_create_qp with these create flags (else -1: plain verbs). */
EXPORT struct ibv_qp *rdma_direct_standin_create_qp(struct ibv_context *c,
						    struct ibv_qp_init_attr_ex *a, long dv_flags)
{
	struct sctx *s = sctx_of(c);
	int e = need_backend();
	if (!e)
		e = planted_failure(s);
	if (e)
		return fail_null(e);
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != c)
		return fail_null(EINVAL);
	if (a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS))
		return fail_null(EOPNOTSUPP);
	if (a->create_flags)
		return fail_null(EOPNOTSUPP);
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD)
		return fail_null(EOPNOTSUPP);
	if (!a->send_cq || !a->recv_cq || a->send_cq->context != c || a->recv_cq->context != c)
		return fail_null(EINVAL);
	struct spd *on = (struct spd *)a->pd;
	struct spd *p = base_pd(on);
	struct scq *scq = (struct scq *)a->send_cq, *rcq = (struct scq *)a->recv_cq;
	struct ssrq *srq = (struct ssrq *)a->srq;
	if (srq && srq->srq.context != c)
		return fail_null(EINVAL);
	struct sqp *q = calloc(1, sizeof(*q));
	if (!q)
		return fail_null(ENOMEM);
	struct standin_qp_caps req = {
		.max_send_wr = a->cap.max_send_wr,
		.max_recv_wr = srq ? 0 : a->cap.max_recv_wr,
		.max_send_sge = a->cap.max_send_sge,
		.max_recv_sge = srq ? 0 : a->cap.max_recv_sge,
		.max_inline_data = a->cap.max_inline_data,
	};
	e = backend->create_qp(s->dev->index, p->pdn, a->qp_type, &req, scq->d.cqn, rcq->d.cqn,
			       srq ? (int64_t)srq->d.srqn : -1, &q->d);
	if (e) {
		free(q);
		return fail_null(e);
	}
	if (qp_register(q)) {
		backend->destroy_qp(s->dev->index, q->d.handle);
		free(q);
		return fail_null(ENOMEM);
	}
	q->pd = on;
	q->scq = scq;
	q->rcq = rcq;
	q->srq = srq;
	/* libmlx5 turns scatter-to-CQE on unless MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE (or
	 * MLX5_SCATTER_TO_CQE=0 in the environment). */
	const char *env = getenv("MLX5_SCATTER_TO_CQE");
	q->scatter_to_cqe = !(dv_flags >= 0 && (dv_flags & MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE)) &&
			    !(env && !strcmp(env, "0"));
	/* A QP on a parent domain with a thread domain rings the TD's own bfreg. */
	q->dedicated_bfreg = on->base && on->td;
	q->qp.context = c;
	q->qp.qp_context = a->qp_context;
	q->qp.pd = a->pd;
	q->qp.send_cq = a->send_cq;
	q->qp.recv_cq = a->recv_cq;
	q->qp.srq = a->srq;
	q->qp.handle = q->d.qpn;
	q->qp.qp_num = q->d.qpn;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = a->qp_type;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);
	q->attr.path_mtu = 1024;
	q->attr.rnr_retry = 6;
	q->attr.retry_cnt = 7;
	q->attr.min_rnr_timer = 12;
	q->attr.timeout = 14;
	q->attr.access = IBV_ACCESS_LOCAL_WRITE;
	/* The caps granted (libmlx5 writes them back into the attr). */
	a->cap.max_send_wr = q->d.caps.max_send_wr;
	a->cap.max_recv_wr = srq ? 0 : q->d.caps.max_recv_wr;
	a->cap.max_send_sge = q->d.caps.max_send_sge;
	a->cap.max_recv_sge = srq ? 0 : q->d.caps.max_recv_sge;
	a->cap.max_inline_data = q->d.caps.max_inline_data;
	q->cap = a->cap;
	pd_ref(on, 1); /* a parent domain holds its PD itself */
	pthread_mutex_lock(&s->lock);
	scq->refs++;
	if (rcq != scq)
		rcq->refs++;
	if (srq)
		srq->refs++;
	pthread_mutex_unlock(&s->lock);
	obj_add(s, 1);
	return &q->qp;
}

static struct ibv_qp *s_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a)
{
	return rdma_direct_standin_create_qp(c, a, -1);
}

EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
	struct ibv_qp_init_attr_ex ax;
	memset(&ax, 0, sizeof(ax));
	ax.qp_context = a->qp_context;
	ax.send_cq = a->send_cq;
	ax.recv_cq = a->recv_cq;
	ax.srq = a->srq;
	ax.cap = a->cap;
	ax.qp_type = a->qp_type;
	ax.sq_sig_all = a->sq_sig_all;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd;
	struct ibv_qp *qp = rdma_direct_standin_create_qp(pd->context, &ax, -1);
	if (qp)
		a->cap = ax.cap;
	return qp;
}

EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct sqp *q = (struct sqp *)qp;
	struct sctx *s = sctx_of(qp->context);
	backend->destroy_qp(s->dev->index, q->d.handle);
	qp_unregister(q);
	pd_ref(q->pd, -1);
	pthread_mutex_lock(&s->lock);
	q->scq->refs--;
	if (q->rcq != q->scq)
		q->rcq->refs--;
	if (q->srq)
		q->srq->refs--;
	pthread_mutex_unlock(&s->lock);
	obj_add(s, -1);
	free(q);
	return 0;
}

/* The kernel's table (ib_modify_qp_is_ok) for the transitions a QP of type RC, UC or UD
 * takes: required attributes, and the optional ones allowed beside them. */
static int mask_rule(enum ibv_qp_type t, enum ibv_qp_state from, enum ibv_qp_state to,
		     int *req, int *opt)
{
	*req = IBV_QP_STATE;
	*opt = 0;
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return 0;
	if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
		*req |= IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			(t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		return 0;
	}
	if (from == IBV_QPS_INIT && to == IBV_QPS_INIT) {
		*opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		       (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		return 0;
	}
	if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
		if (t == IBV_QPT_RC)
			*req |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		else if (t == IBV_QPT_UC)
			*req |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		*opt = t == IBV_QPT_UD ? IBV_QP_PKEY_INDEX | IBV_QP_QKEY
				       : IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		return 0;
	}
	if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
		*req |= IBV_QP_SQ_PSN;
		if (t == IBV_QPT_RC)
			*req |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_MAX_QP_RD_ATOMIC;
		*opt = IBV_QP_CUR_STATE |
		       (t == IBV_QPT_UD ? IBV_QP_QKEY
					: IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE |
						  (t == IBV_QPT_RC ? IBV_QP_MIN_RNR_TIMER : 0));
		return 0;
	}
	if (from == IBV_QPS_RTS && to == IBV_QPS_RTS) {
		*opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH |
		       IBV_QP_PATH_MIG_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_QKEY;
		return 0;
	}
	return -1;
}

static uint32_t mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 0;
}

EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct sqp *q = (struct sqp *)qp;
	struct sctx *s = sctx_of(qp->context);
	uint32_t cur = qp->state;
	if (backend->qp_state(s->dev->index, q->d.qpn, &cur) == 0)
		qp->state = cur;
	if (!(mask & IBV_QP_STATE))
		return EINVAL;
	int req, opt;
	if (mask_rule(qp->qp_type, qp->state, a->qp_state, &req, &opt) != 0)
		return EINVAL;
	if ((mask & req) != req || (mask & ~(req | opt)) != 0) {
		violation("ibv_modify_qp(QP %#x, %d -> %d): attribute mask %#x, the kernel wants "
			  "%#x (optional %#x): EINVAL", q->d.qpn, qp->state, a->qp_state, mask,
			  req, opt);
		return EINVAL;
	}
	if (mask & IBV_QP_PORT && (a->port_num < 1 || a->port_num > s->dev->ports))
		return EINVAL;
	if (mask & IBV_QP_AV) {
		/* A GID of this device loops back; any other goes to the backend, which reaches
		 * it (another process's device) or refuses it (EINVAL) at the transition. */
		if (!(a->ah_attr.is_global) || a->ah_attr.grh.sgid_index >= NGID)
			return EINVAL;
		int found = 0;
		for (int i = 0; i < NGID; i++) {
			union ibv_gid g;
			if (gid_of(s->dev, i, &g) == 0 && !memcmp(&g, &a->ah_attr.grh.dgid, 16))
				found = 1;
		}
		q->attr.flags = found ? 0 : STANDIN_QP_ATTR_DGID;
		if (found)
			memset(q->attr.dgid, 0, 16);
		else
			memcpy(q->attr.dgid, a->ah_attr.grh.dgid.raw, 16);
		q->seen.ah_attr = a->ah_attr;
	}
	if (mask & IBV_QP_PATH_MTU) {
		if (!mtu_bytes(a->path_mtu))
			return EINVAL;
		q->attr.path_mtu = mtu_bytes(a->path_mtu);
		q->seen.path_mtu = a->path_mtu;
	}
	if (mask & IBV_QP_DEST_QPN) {
		q->attr.remote_qpn = a->dest_qp_num;
		q->seen.dest_qp_num = a->dest_qp_num;
	}
	if (mask & IBV_QP_ACCESS_FLAGS) {
		q->attr.access = a->qp_access_flags & 0xf;
		q->seen.qp_access_flags = a->qp_access_flags;
	}
	if (mask & IBV_QP_QKEY) {
		q->attr.qkey = a->qkey;
		q->seen.qkey = a->qkey;
	}
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->attr.min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		q->attr.timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->attr.retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->attr.rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_SQ_PSN)
		q->seen.sq_psn = a->sq_psn;
	if (mask & IBV_QP_RQ_PSN)
		q->seen.rq_psn = a->rq_psn;
	if (mask & IBV_QP_PKEY_INDEX)
		q->seen.pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		q->seen.port_num = a->port_num;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		q->seen.max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		q->seen.max_dest_rd_atomic = a->max_dest_rd_atomic;
	int e = backend->modify_qp(s->dev->index, q->d.qpn, a->qp_state, &q->attr);
	if (e)
		return e;
	qp->state = a->qp_state;
	return 0;
}

EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
			struct ibv_qp_init_attr *init)
{
	struct sqp *q = (struct sqp *)qp;
	struct sctx *s = sctx_of(qp->context);
	(void)mask;
	uint32_t st = qp->state;
	if (backend->qp_state(s->dev->index, q->d.qpn, &st) == 0)
		qp->state = st;
	*a = q->seen;
	a->qp_state = qp->state;
	a->cur_qp_state = qp->state;
	a->cap = q->cap;
	a->timeout = q->attr.timeout;
	a->retry_cnt = q->attr.retry_cnt;
	a->rnr_retry = q->attr.rnr_retry;
	a->min_rnr_timer = q->attr.min_rnr_timer;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = qp->qp_context;
		init->send_cq = qp->send_cq;
		init->recv_cq = qp->recv_cq;
		init->srq = qp->srq;
		init->cap = q->cap;
		init->qp_type = qp->qp_type;
	}
	return 0;
}

/* The verbs data path: the stand-in models the mlx5 device under the direct path only. */
static int s_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	(void)qp;
	*bad = wr;
	return EOPNOTSUPP;
}

static int s_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)qp;
	*bad = wr;
	return EOPNOTSUPP;
}

static int s_post_srq_recv(struct ibv_srq *q, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	(void)q;
	*bad = wr;
	return EOPNOTSUPP;
}

static int s_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	(void)cq;
	(void)n;
	(void)wc;
	return -EOPNOTSUPP;
}

/* libmlx5's mlx5_arm_cq: the arm word into dbrec[1] (MLX5_CQ_ARM_DB in libmlx5's private
 * headers), the doorbell into the CQ's UAR. */
#define MLX5_CQ_ARM_DB 1
static int s_req_notify_cq(struct ibv_cq *cq, int solicited)
{
	struct scq *q = (struct scq *)cq;
	uint32_t ci = be32toh(q->d.dbrec[0]) & 0xffffff;
	uint32_t cmd = solicited ? MLX5_CQ_DB_REQ_NOT_SOL : MLX5_CQ_DB_REQ_NOT;
	uint32_t word = ((q->arm_sn & 3) << 28) | cmd | ci;
	uint64_t db = ((uint64_t)word << 32) | q->d.cqn;
	__atomic_store_n(&q->d.dbrec[MLX5_CQ_ARM_DB], htobe32(word), __ATOMIC_RELEASE);
	__atomic_store_n((uint64_t *)((char *)q->d.uar + MLX5_CQ_DOORBELL), htobe64(db),
			 __ATOMIC_RELEASE);
	return 0;
}

/* ------------------------------------------------------------------ AH */

EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a)
{
	struct sctx *s = sctx_of(pd->context);
	struct spd *p = base_pd((struct spd *)pd);
	if (a->port_num < 1 || a->port_num > s->dev->ports || !a->is_global ||
	    a->grh.sgid_index >= NGID)
		return fail_null(EINVAL);
	struct sah *h = calloc(1, sizeof(*h));
	if (!h)
		return fail_null(ENOMEM);
	/* The address vector as libmlx5's mlx5_create_ah fills it for a RoCE port. */
	h->av.stat_rate_sl = (uint8_t)((a->sl & 0x7) << 1);
	h->av.rlid = htobe16(a->dlid);
	h->av.hop_limit = a->grh.hop_limit;
	h->av.tclass = a->grh.traffic_class;
	h->av.grh_gid_fl = htobe32(((uint32_t)a->grh.sgid_index << 20) | a->grh.flow_label);
	memcpy(h->av.rgid, &a->grh.dgid, 16);
	h->pd = p;
	h->ah.context = pd->context;
	h->ah.pd = pd;
	pd_ref(p, 1);
	obj_add(s, 1);
	return &h->ah;
}

EXPORT int ibv_destroy_ah(struct ibv_ah *ah)
{
	struct sah *h = (struct sah *)ah;
	pd_ref(h->pd, -1);
	obj_add(sctx_of(ah->context), -1);
	free(h);
	return 0;
}

/* ------------------------------------------------------------------ async events */

EXPORT int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	/* The device engine raises no asynchronous event through the stand-in; the only ones
	 * are planted (RDMA_DIRECT_STANDIN_FAULT=port_event: port 1 active). A blocking caller
	 * sleeps on the fd, a non-blocking one gets EAGAIN. */
	char b;
	ssize_t n = read(c->async_fd, &b, 1);
	if (n == 1) {
		memset(ev, 0, sizeof(*ev));
		ev->event_type = IBV_EVENT_PORT_ACTIVE;
		ev->element.port_num = 1;
		return 0;
	}
	if (n == 0)
		errno = EIO;
	return -1;
}

EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
	(void)ev;
}

/* ------------------------------------------------------------------ strings */

EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s)
{
	static const char *const n[] = {
		"success", "local length error", "local QP operation error",
		"local EE context operation error", "local protection error",
		"Work Request Flushed Error", "memory management operation error",
		"bad response error", "local access error", "remote invalid request error",
		"remote access error", "remote operation error", "transport retry counter exceeded",
		"RNR retry counter exceeded", "local RDD violation error",
		"remote invalid RD request", "aborted error", "invalid EE context number",
		"invalid EE context state", "fatal error", "response timeout error",
		"general error", "TM error", "TM rendezvous error",
	};
	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "unknown";
}

EXPORT const char *ibv_event_type_str(enum ibv_event_type e)
{
	static const char *const n[] = {
		"CQ error", "local work queue catastrophic error", "invalid request local work queue error",
		"local access violation work queue error", "communication established",
		"send queue drained", "path migrated", "path migration request error",
		"local catastrophic error", "port active", "port error", "LID change",
		"P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
		"last WQE reached", "client reregistration", "GID table change",
		"WQ fatal",
	};
	return (unsigned)e < sizeof(n) / sizeof(n[0]) ? n[e] : "unknown";
}

/* ------------------------------------------------------------------ clock */

static int s_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v)
{
	struct sctx *s = sctx_of(c);
	if (need_backend())
		return ENODEV;
	if (v->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	uint64_t cycles, rt;
	int e = backend->clock_now(s->dev->index, &cycles, &rt);
	if (e)
		return e;
	v->raw_clock.tv_sec = 0;
	v->raw_clock.tv_nsec = (long)cycles;
	return 0;
}

/* ------------------------------------------------------------------ libmlx5 (mlx5.c exports) */

static int refuse_non_mlx5(const char *verb, struct ibv_context *c)
{
	if (!ctx_is_ours(c) || !sctx_of(c)->dev->mlx5) {
		violation("%s on %s, which libmlx5 does not drive (libmlx5 would cast its context "
			  "to its own struct and read garbage): ask mlx5dv_is_supported first",
			  verb, ctx_is_ours(c) ? sctx_of(c)->dev->ibdev.name : "a foreign context");
		return EOPNOTSUPP;
	}
	return 0;
}

EXPORT bool rdma_direct_standin_mlx5dv_is_supported(struct ibv_device *d)
{
	pthread_once(&devs_once, init_devs);
	for (int i = 0; i < NDEV; i++)
		if (d == &devs[i].ibdev)
			return devs[i].mlx5;
	return false;
}

EXPORT int rdma_direct_standin_mlx5dv_query_device(struct ibv_context *c, struct mlx5dv_context *a)
{
	int e = refuse_non_mlx5("mlx5dv_query_device", c);
	if (e)
		return e;
	uint64_t asked = a->comp_mask;
	a->version = 1;
	a->flags = MLX5DV_CONTEXT_FLAGS_CQE_V1 | MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED;
	a->comp_mask = 0;
	if (asked & MLX5DV_CONTEXT_MASK_DYN_BFREGS) {
		a->max_dynamic_bfregs = 512;
		a->comp_mask |= MLX5DV_CONTEXT_MASK_DYN_BFREGS;
	}
	if (asked & MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE) {
		a->max_clock_info_update_nsec = 1000000000ull;
		a->comp_mask |= MLX5DV_CONTEXT_MASK_CLOCK_INFO_UPDATE;
	}
	return 0;
}

EXPORT struct ibv_qp *rdma_direct_standin_mlx5dv_create_qp(struct ibv_context *c,
							   struct ibv_qp_init_attr_ex *a,
							   struct mlx5dv_qp_init_attr *dv)
{
	int e = refuse_non_mlx5("mlx5dv_create_qp", c);
	if (e)
		return fail_null(e);
	long flags = 0;
	if (dv) {
		if (dv->comp_mask & ~(uint64_t)MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS)
			return fail_null(EOPNOTSUPP);
		if (dv->comp_mask & MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) {
			if (dv->create_flags & ~(uint32_t)MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE)
				return fail_null(EOPNOTSUPP);
			flags = dv->create_flags;
		}
	}
	return rdma_direct_standin_create_qp(c, a, flags);
}

static int init_qp(struct ibv_qp *in, struct mlx5dv_qp *out)
{
	struct sqp *q = (struct sqp *)in;
	struct sctx *s = sctx_of(in->context);
	out->dbrec = (__be32 *)((char *)q->d.dbrec + s->k.dbrec_offset);
	out->sq.buf = q->d.sq_buf;
	out->sq.wqe_cnt = q->d.sq_wqe_cnt;
	out->sq.stride = q->d.sq_stride;
	out->rq.buf = q->d.rq_buf;
	out->rq.wqe_cnt = q->d.rq_wqe_cnt;
	out->rq.stride = q->d.rq_stride;
	out->bf.reg = q->d.bf_reg;
	out->bf.size = q->dedicated_bfreg ? (uint32_t)s->k.td_bf_size : q->d.bf_size;
	uint64_t asked = out->comp_mask;
	out->comp_mask = 0;
	if (asked & MLX5DV_QP_MASK_UAR_MMAP_OFFSET) {
		out->uar_mmap_offset = 0;
		out->comp_mask |= MLX5DV_QP_MASK_UAR_MMAP_OFFSET;
	}
	return 0;
}

static int init_cq(struct ibv_cq *in, struct mlx5dv_cq *out)
{
	struct scq *q = (struct scq *)in;
	out->buf = q->d.buf;
	out->dbrec = (__be32 *)q->d.dbrec;
	out->cqe_cnt = q->d.cqe_cnt;
	out->cqe_size = q->d.cqe_size;
	out->cq_uar = q->d.uar;
	out->cqn = q->d.cqn;
	out->comp_mask = 0;
	/* From now on libmlx5 leaves the CQ to the caller (MLX5_CQ_FLAGS_DV_OWNED): stale
	 * CQEs of a reset or destroyed QP are the caller's to drop. */
	q->dv_owned = 1;
	return 0;
}

static int init_srq(struct ibv_srq *in, struct mlx5dv_srq *out)
{
	struct ssrq *q = (struct ssrq *)in;
	out->buf = q->d.buf;
	out->dbrec = (__be32 *)q->d.dbrec;
	out->stride = q->d.stride;
	out->head = q->d.head;
	out->tail = q->d.tail;
	if (out->comp_mask & MLX5DV_SRQ_MASK_SRQN) {
		out->srqn = q->d.srqn;
		out->comp_mask = MLX5DV_SRQ_MASK_SRQN;
	} else {
		out->comp_mask = 0;
	}
	return 0;
}

EXPORT int rdma_direct_standin_mlx5dv_init_obj(struct mlx5dv_obj *obj, uint64_t type)
{
	static const uint64_t known = MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ | MLX5DV_OBJ_SRQ | MLX5DV_OBJ_AH;
	if (type & ~known)
		return EOPNOTSUPP;
	if (type & MLX5DV_OBJ_QP) {
		int e = refuse_non_mlx5("mlx5dv_init_obj(QP)", obj->qp.in->context);
		if (e || (e = init_qp(obj->qp.in, obj->qp.out)))
			return e;
	}
	if (type & MLX5DV_OBJ_CQ) {
		int e = refuse_non_mlx5("mlx5dv_init_obj(CQ)", obj->cq.in->context);
		if (e || (e = init_cq(obj->cq.in, obj->cq.out)))
			return e;
	}
	if (type & MLX5DV_OBJ_SRQ) {
		int e = refuse_non_mlx5("mlx5dv_init_obj(SRQ)", obj->srq.in->context);
		if (e || (e = init_srq(obj->srq.in, obj->srq.out)))
			return e;
	}
	if (type & MLX5DV_OBJ_AH) {
		int e = refuse_non_mlx5("mlx5dv_init_obj(AH)", obj->ah.in->context);
		if (e)
			return e;
		obj->ah.out->av = &((struct sah *)obj->ah.in)->av;
		obj->ah.out->comp_mask = 0;
	}
	return 0;
}

EXPORT int rdma_direct_standin_mlx5dv_get_clock_info(struct ibv_context *c,
						     struct mlx5dv_clock_info *out)
{
	int e = refuse_non_mlx5("mlx5dv_get_clock_info", c);
	if (e)
		return e;
	if (need_backend())
		return ENODEV;
	struct standin_clock k;
	e = backend->clock_info(sctx_of(c)->dev->index, &k);
	if (e)
		return e;
	out->nsec = k.nsec;
	out->last_cycles = k.last_cycles;
	out->frac = k.frac;
	out->mult = k.mult;
	out->shift = k.shift;
	out->mask = k.mask;
	return 0;
}
