/*
 * A stand-in for libibverbs.so.1 with one loopback "NIC", built by the
 * ibverbs_fake integration test so that the hardware backend's data path
 * runs where no RDMA hardware exists. It is compiled against the real
 * <infiniband/verbs.h>, so every struct it hands out has rdma-core's layout.
 *
 * It exports the verbs the backend resolves, and serves the inline verbs
 * (poll_cq, req_notify_cq, post_send, post_recv) through the context's
 * function table and ibv_query_port through verbs_context::query_port, as
 * real providers do. The "wire" is memory: RDMA WRITE/READ copy between
 * registered regions found by rkey (bounds and access checked), SEND
 * consumes a receive WQE of the destination QP (RC: dest_qp_num; UD: the
 * work request's remote QPN and Q_Key, behind a 40-byte GRH).
 *
 * Hooks for the test: fake_last_modify() returns the last ibv_modify_qp
 * attributes and mask of a QP; fake_compat_query_port_calls() counts calls
 * of the exported compat ibv_query_port (the backend must not use it when
 * the extended one exists).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <endian.h>
#include <sys/eventfd.h>
#include <infiniband/verbs.h>

#undef ibv_query_port
#undef ibv_reg_mr

#define MAX_MR 64
#define MAX_QP 16
#define CQ_RING 1024
#define RQ_DEPTH 256
#define MAX_SGE_FAKE 8

struct fake_cq {
	struct ibv_cq cq;
	struct ibv_wc ring[CQ_RING];
	unsigned head, tail;
	int armed;
};

struct fake_channel {
	struct ibv_comp_channel ch;
	struct fake_cq *cq;
};

struct fake_recv {
	uint64_t wr_id;
	int num_sge;
	struct ibv_sge sge[MAX_SGE_FAKE];
};

struct fake_qp {
	struct ibv_qp qp;
	int sq_sig_all;
	uint32_t dest_qp_num;
	uint32_t qkey;
	struct ibv_qp_attr last_attr;
	int last_mask;
	struct fake_recv rq[RQ_DEPTH];
	unsigned rq_head, rq_tail;
};

static struct ibv_device fake_device = {
	.node_type = IBV_NODE_CA,
	.transport_type = IBV_TRANSPORT_IB,
	.name = "fake0",
	.dev_name = "uverbs0",
};

static struct ibv_mr *mrs[MAX_MR];
static struct fake_qp *qps[MAX_QP];
static uint32_t next_key = 0x100;
static uint32_t next_qpn = 0x11;
static int compat_query_port_calls;

int fake_compat_query_port_calls(void) { return compat_query_port_calls; }

int fake_last_modify(uint32_t qpn, struct ibv_qp_attr *attr, int *mask)
{
	for (int i = 0; i < MAX_QP; i++)
		if (qps[i] && qps[i]->qp.qp_num == qpn) {
			*attr = qps[i]->last_attr;
			*mask = qps[i]->last_mask;
			return 0;
		}
	return ENOENT;
}

struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = &fake_device;
	if (num)
		*num = 1;
	return list;
}

void ibv_free_device_list(struct ibv_device **list) { free(list); }
const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }
__be64 ibv_get_device_guid(struct ibv_device *d)
{
	(void)d;
	return htobe64(0x0002c90300a1b2c3ULL);
}

static int fake_query_port_ex(struct ibv_context *ctx, uint8_t port,
			      struct ibv_port_attr *attr, size_t len)
{
	(void)ctx;
	if (len != sizeof(*attr) || port != 1)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = IBV_MTU_1024;
	attr->gid_tbl_len = 2;
	attr->link_layer = IBV_LINK_LAYER_ETHERNET;
	return 0;
}

int ibv_query_port(struct ibv_context *ctx, uint8_t port,
		   struct _compat_ibv_port_attr *attr)
{
	(void)ctx;
	(void)port;
	(void)attr;
	compat_query_port_calls++;
	return ENOSYS;
}

static void push_wc(struct fake_cq *cq, struct ibv_wc *wc)
{
	if (cq->tail - cq->head >= CQ_RING)
		return; /* overrun: dropped, as a real CQ would error */
	cq->ring[cq->tail++ % CQ_RING] = *wc;
	if (cq->armed && cq->cq.channel) {
		uint64_t one = 1;
		cq->armed = 0;
		if (write(cq->cq.channel->fd, &one, sizeof(one)) < 0)
			return;
	}
}

static int fake_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	int got = 0;
	while (got < n && cq->head != cq->tail)
		wc[got++] = cq->ring[cq->head++ % CQ_RING];
	return got;
}

static int fake_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	(void)solicited_only;
	((struct fake_cq *)ibcq)->armed = 1;
	return 0;
}

static struct ibv_mr *find_mr_rkey(uint32_t rkey)
{
	for (int i = 0; i < MAX_MR; i++)
		if (mrs[i] && mrs[i]->rkey == rkey)
			return mrs[i];
	return NULL;
}

static int sge_ok(struct ibv_sge *sge)
{
	for (int i = 0; i < MAX_MR; i++)
		if (mrs[i] && mrs[i]->lkey == sge->lkey &&
		    sge->addr >= (uintptr_t)mrs[i]->addr &&
		    sge->addr + sge->length <= (uintptr_t)mrs[i]->addr + mrs[i]->length)
			return 1;
	return 0;
}

static struct fake_qp *find_qp(uint32_t qpn)
{
	for (int i = 0; i < MAX_QP; i++)
		if (qps[i] && qps[i]->qp.qp_num == qpn)
			return qps[i];
	return NULL;
}

/* Copies `len` bytes between the SGE list and `buf` (to_sges: into them). */
static void copy_sges(struct ibv_sge *sge, int n, uint8_t *buf, uint32_t len, int to_sges)
{
	for (int i = 0; i < n && len; i++) {
		uint32_t chunk = sge[i].length < len ? sge[i].length : len;
		uint8_t *p = (uint8_t *)(uintptr_t)sge[i].addr;
		if (to_sges)
			memcpy(p, buf, chunk);
		else
			memcpy(buf, p, chunk);
		buf += chunk;
		len -= chunk;
	}
}

static int fake_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad)
{
	struct fake_qp *qp = (struct fake_qp *)ibqp;
	for (; wr; wr = wr->next) {
		struct ibv_wc wc = { .wr_id = wr->wr_id, .qp_num = ibqp->qp_num };
		uint32_t len = 0;
		static uint8_t staging[1 << 20];
		if (ibqp->state != IBV_QPS_RTS || wr->num_sge > MAX_SGE_FAKE ||
		    wr->opcode == IBV_WR_SEND_WITH_INV) {
			*bad = wr;
			return EINVAL;
		}
		for (int i = 0; i < wr->num_sge; i++) {
			if (!(wr->send_flags & IBV_SEND_INLINE) && !sge_ok(&wr->sg_list[i])) {
				wc.status = IBV_WC_LOC_PROT_ERR;
				goto complete;
			}
			len += wr->sg_list[i].length;
		}
		if (len + 40 > sizeof(staging)) {
			*bad = wr;
			return EINVAL;
		}
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
		case IBV_WR_RDMA_READ: {
			struct ibv_mr *mr = find_mr_rkey(wr->wr.rdma.rkey);
			int read = wr->opcode == IBV_WR_RDMA_READ;
			int need = read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
			uint8_t *remote = (uint8_t *)(uintptr_t)wr->wr.rdma.remote_addr;
			wc.opcode = read ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
			if (!mr || !(mr->handle & need) || remote < (uint8_t *)mr->addr ||
			    remote + len > (uint8_t *)mr->addr + mr->length) {
				wc.status = IBV_WC_REM_ACCESS_ERR;
				goto complete;
			}
			if (read) {
				copy_sges(wr->sg_list, wr->num_sge, remote, len, 1);
			} else {
				copy_sges(wr->sg_list, wr->num_sge, staging, len, 0);
				memcpy(remote, staging, len);
			}
			wc.byte_len = len;
			if (wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
				break;
			/* WRITE with immediate also consumes a receive WQE. */
			__attribute__((fallthrough));
		}
		case IBV_WR_SEND:
		case IBV_WR_SEND_WITH_IMM: {
			int ud = ibqp->qp_type == IBV_QPT_UD;
			uint32_t dest = ud ? wr->wr.ud.remote_qpn : qp->dest_qp_num;
			uint32_t grh = ud ? 40 : 0;
			struct fake_qp *peer = find_qp(dest);
			struct fake_recv *rwqe;
			struct ibv_wc rwc = { .qp_num = dest, .src_qp = ibqp->qp_num };
			if (wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
				wc.opcode = IBV_WC_SEND;
			if (ud && (!wr->wr.ud.ah || wr->wr.ud.ah->pd != ibqp->pd)) {
				*bad = wr;
				return EINVAL;
			}
			if (ud && (!peer || peer->qp.qp_type != IBV_QPT_UD ||
				   peer->qkey != wr->wr.ud.remote_qkey ||
				   peer->rq_head == peer->rq_tail))
				goto complete; /* UD: silently dropped on the "wire" */
			if (!peer || peer->rq_head == peer->rq_tail) {
				wc.status = IBV_WC_RNR_RETRY_EXC_ERR;
				goto complete;
			}
			rwqe = &peer->rq[peer->rq_head++ % RQ_DEPTH];
			rwc.wr_id = rwqe->wr_id;
			if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
				rwc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
			} else {
				uint32_t room = 0;
				for (int i = 0; i < rwqe->num_sge; i++)
					room += rwqe->sge[i].length;
				rwc.opcode = IBV_WC_RECV;
				if (room < len + grh) {
					rwc.status = IBV_WC_LOC_LEN_ERR;
					wc.status = IBV_WC_REM_INV_REQ_ERR;
				} else {
					/* A UD receive starts with the GRH (zeroed here). */
					memset(staging, 0, grh);
					copy_sges(wr->sg_list, wr->num_sge, staging + grh, len, 0);
					copy_sges(rwqe->sge, rwqe->num_sge, staging, len + grh, 1);
				}
			}
			rwc.byte_len = len + grh;
			if (ud)
				rwc.wc_flags |= IBV_WC_GRH;
			if (wr->opcode != IBV_WR_SEND) {
				rwc.wc_flags |= IBV_WC_WITH_IMM;
				rwc.imm_data = wr->imm_data;
			}
			push_wc((struct fake_cq *)peer->qp.recv_cq, &rwc);
			wc.byte_len = len;
			break;
		}
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
		case IBV_WR_ATOMIC_CMP_AND_SWP: {
			struct ibv_mr *mr = find_mr_rkey(wr->wr.atomic.rkey);
			uint64_t *target = (uint64_t *)(uintptr_t)wr->wr.atomic.remote_addr;
			uint64_t old;
			wc.opcode = wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD
									: IBV_WC_COMP_SWAP;
			if (!mr || !(mr->handle & IBV_ACCESS_REMOTE_ATOMIC) ||
			    (uint8_t *)target < (uint8_t *)mr->addr ||
			    (uint8_t *)(target + 1) > (uint8_t *)mr->addr + mr->length) {
				wc.status = IBV_WC_REM_ACCESS_ERR;
				goto complete;
			}
			old = *target;
			if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
				*target = old + wr->wr.atomic.compare_add;
			else if (old == wr->wr.atomic.compare_add)
				*target = wr->wr.atomic.swap;
			memcpy((void *)(uintptr_t)wr->sg_list[0].addr, &old, 8);
			wc.byte_len = 8;
			break;
		}
		default:
			*bad = wr;
			return EINVAL;
		}
	complete:
		if (wc.status != IBV_WC_SUCCESS || qp->sq_sig_all ||
		    (wr->send_flags & IBV_SEND_SIGNALED))
			push_wc((struct fake_cq *)ibqp->send_cq, &wc);
	}
	return 0;
}

static int fake_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad)
{
	struct fake_qp *qp = (struct fake_qp *)ibqp;
	for (; wr; wr = wr->next) {
		struct fake_recv *r;
		if (wr->num_sge > MAX_SGE_FAKE || qp->rq_tail - qp->rq_head >= RQ_DEPTH ||
		    ibqp->state == IBV_QPS_RESET) {
			*bad = wr;
			return ENOMEM;
		}
		r = &qp->rq[qp->rq_tail++ % RQ_DEPTH];
		r->wr_id = wr->wr_id;
		r->num_sge = wr->num_sge;
		memcpy(r->sge, wr->sg_list, wr->num_sge * sizeof(struct ibv_sge));
	}
	return 0;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct verbs_context *vctx = calloc(1, sizeof(*vctx));
	if (!vctx) {
		errno = ENOMEM;
		return NULL;
	}
	vctx->sz = sizeof(*vctx);
	vctx->query_port = fake_query_port_ex;
	vctx->context.device = device;
	vctx->context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	vctx->context.ops.poll_cq = fake_poll_cq;
	vctx->context.ops.req_notify_cq = fake_req_notify_cq;
	vctx->context.ops.post_send = fake_post_send;
	vctx->context.ops.post_recv = fake_post_recv;
	vctx->context.num_comp_vectors = 1;
	return &vctx->context;
}

int ibv_close_device(struct ibv_context *ctx)
{
	free((uint8_t *)ctx - offsetof(struct verbs_context, context));
	return 0;
}

int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	(void)ctx;
	memset(attr, 0, sizeof(*attr));
	strcpy(attr->fw_ver, "1.2.3");
	attr->node_guid = htobe64(0x0002c90300a1b2c3ULL);
	attr->vendor_id = 0x02c9;
	attr->max_mr_size = 1ULL << 40;
	attr->max_qp_wr = 1024;
	attr->max_cqe = CQ_RING;
	attr->phys_port_cnt = 1;
	return 0;
}

int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	static const uint8_t v4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1 };
	(void)ctx;
	if (port != 1 || index != 0)
		return EINVAL;
	memcpy(gid->raw, v4, 16);
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));
	if (pd)
		pd->context = ctx;
	else
		errno = ENOMEM;
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	free(pd);
	return 0;
}

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t len, unsigned access)
{
	for (int i = 0; i < MAX_MR; i++)
		if (!mrs[i]) {
			struct ibv_mr *mr = calloc(1, sizeof(*mr));
			if (!mr)
				break;
			mr->context = pd->context;
			mr->pd = pd;
			mr->addr = addr;
			mr->length = len;
			mr->handle = access; /* the fake keeps the access bits here */
			mr->lkey = next_key++;
			mr->rkey = next_key++ | 0x80000000u;
			mrs[i] = mr;
			return mr;
		}
	errno = ENOMEM;
	return NULL;
}

struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	if ((unsigned)access & IBV_ACCESS_OPTIONAL_RANGE) {
		errno = EINVAL; /* the header routes these to ibv_reg_mr_iova2 */
		return NULL;
	}
	return reg(pd, addr, len, (unsigned)access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				unsigned access)
{
	if (iova != (uintptr_t)addr) {
		errno = EINVAL;
		return NULL;
	}
	return reg(pd, addr, len, access & ~IBV_ACCESS_OPTIONAL_RANGE);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	for (int i = 0; i < MAX_MR; i++)
		if (mrs[i] == mr) {
			mrs[i] = NULL;
			free(mr);
			return 0;
		}
	return EINVAL;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct fake_channel *ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.context = ctx;
	ch->ch.fd = eventfd(0, 0);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	return &ch->ch;
}

int ibv_destroy_comp_channel(struct ibv_comp_channel *ch)
{
	close(ch->fd);
	free(ch);
	return 0;
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int vector)
{
	struct fake_cq *cq;
	(void)vector;
	if (cqe < 1 || cqe > CQ_RING) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->cq.context = ctx;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = cqe;
	if (channel)
		((struct fake_channel *)channel)->cq = cq;
	return &cq->cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	free(cq);
	return 0;
}

int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context)
{
	uint64_t count;
	if (read(ch->fd, &count, sizeof(count)) != sizeof(count))
		return -1; /* errno from read: EAGAIN on a non-blocking fd */
	*cq = &((struct fake_channel *)ch)->cq->cq;
	*cq_context = (*cq)->cq_context;
	return 0;
}

void ibv_ack_cq_events(struct ibv_cq *cq, unsigned n)
{
	(void)cq;
	(void)n;
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct fake_qp *qp;
	if ((init->qp_type != IBV_QPT_RC && init->qp_type != IBV_QPT_UD) ||
	    init->cap.max_send_sge > MAX_SGE_FAKE ||
	    init->cap.max_recv_sge > MAX_SGE_FAKE || init->cap.max_recv_wr > RQ_DEPTH) {
		errno = EINVAL;
		return NULL;
	}
	for (int i = 0; i < MAX_QP; i++)
		if (!qps[i]) {
			qp = calloc(1, sizeof(*qp));
			if (!qp)
				break;
			qp->qp.context = pd->context;
			qp->qp.pd = pd;
			qp->qp.send_cq = init->send_cq;
			qp->qp.recv_cq = init->recv_cq;
			qp->qp.qp_num = next_qpn++;
			qp->qp.state = IBV_QPS_RESET;
			qp->qp.qp_type = init->qp_type;
			qp->sq_sig_all = init->sq_sig_all;
			/* Round the send queue up to a power of two, as mlx5 does. */
			while (init->cap.max_send_wr & (init->cap.max_send_wr - 1))
				init->cap.max_send_wr++;
			init->cap.max_inline_data = 64;
			qps[i] = qp;
			return &qp->qp;
		}
	errno = ENOMEM;
	return NULL;
}

int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct fake_qp *qp = (struct fake_qp *)ibqp;
	if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RTR &&
	    ibqp->qp_type == IBV_QPT_RC && (!(mask & IBV_QP_AV) || !attr->ah_attr.is_global ||
	     attr->ah_attr.grh.dgid.global.interface_id == 0))
		return EINVAL; /* RoCE needs a global address vector */
	qp->last_attr = *attr;
	qp->last_mask = mask;
	if (mask & IBV_QP_DEST_QPN)
		qp->dest_qp_num = attr->dest_qp_num;
	if (mask & IBV_QP_QKEY)
		qp->qkey = attr->qkey;
	if (mask & IBV_QP_STATE)
		ibqp->state = attr->qp_state;
	return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init)
{
	(void)mask;
	(void)init;
	attr->qp_state = qp->state;
	return 0;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	for (int i = 0; i < MAX_QP; i++)
		if (qps[i] == (struct fake_qp *)qp)
			qps[i] = NULL;
	free(qp);
	return 0;
}

struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibv_ah *ah;
	if (!attr->is_global) {
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (ah) {
		ah->context = pd->context;
		ah->pd = pd;
	}
	return ah;
}

int ibv_destroy_ah(struct ibv_ah *ah)
{
	free(ah);
	return 0;
}
