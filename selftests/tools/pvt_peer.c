// SPDX-License-Identifier: GPL-2.0
/*
 * pvt_peer: an RDMA-CM peer that sends whatever private data it is told to, for
 * rpcrdma_cm's selftests (hostile and odd peers).
 *
 *   pvt_peer client ADDR PORT HEX [MSG...]
 *                                   connect with HEX as private data; print the
 *                                   server's private data in hex; send each MSG
 *                                   (hex, an RPC-over-RDMA message) and print
 *                                   the reply ("reply len=N HEX"), "no reply"
 *                                   after 3 s, or "connection lost"; then
 *                                   disconnect
 *   pvt_peer server ADDR PORT HEX [reject|hangup|reply REPLY...]
 *                                   accept one connection with HEX as private
 *                                   data (4 Receives posted, never answered);
 *                                   print the client's, wait for the
 *                                   disconnect (at most 20 s). "reject":
 *                                   reject it instead; "hangup": disconnect
 *                                   right after ESTABLISHED; "reply": answer
 *                                   the i-th call received with REPLY i (a
 *                                   hostile server), printing "call len=N
 *                                   xid=X handle=H" for each call (H: its
 *                                   first chunk segment's, 0 if none), then
 *                                   "sent len=N" or "connection lost" for
 *                                   each message sent
 *
 *   pvt_peer flood ADDR PORT HEX N SECONDS [SRC]
 *                                   open N connections one after the other
 *                                   (from SRC if given), each with HEX as
 *                                   private data; print "flood established=E
 *                                   rejected=R failed=F", hold the
 *                                   established ones SECONDS seconds, then
 *                                   disconnect them all
 *
 * A client MSG may start with "region=HEX:": HEX goes into a 4 KiB buffer the
 * server may read (RDMA Read), and in the message "RRRRRRRR" stands for its
 * rkey, "GGGGGGGGGGGGGGGk" for its address plus 4 * k (k a digit): a call
 * with Read chunks.
 *
 * REPLY is "-" (send nothing) or messages joined by '+', sent in order. Each
 * message is hex, where "XXXXXXXX" stands for the call's XID and "HHHHHHHH"
 * for H, with optional prefixes: "inv:" sends it with Send With Invalidate of
 * H, "inv=KKKKKKKK:" of rkey KKKKKKKK; "pad=N:" appends N zero octets.
 *
 * HEX may be empty ("") for no private data. A REQ carries at most 56 octets of
 * consumer private data with RDMA_PS_TCP, a REP at most 196. Exit status 0 when
 * the connection was established.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define MSG_MAX 4096
#define SEND_MAX 32768
#define NRECV 4

static int parse_hex(const char *hex, unsigned char *out, size_t max)
{
	size_t n = strlen(hex), i;

	if (n % 2 || n / 2 > max)
		return -1;
	for (i = 0; i < n / 2; i++) {
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		out[i] = b;
	}
	return n / 2;
}

static void print_hex(const char *what, const void *p, int len)
{
	const unsigned char *b = p;
	int i;

	printf("%s len=%d ", what, len);
	for (i = 0; i < len; i++)
		printf("%02x", b[i]);
	printf("\n");
	fflush(stdout);
}

static struct rdma_cm_event *expect(struct rdma_event_channel *ch,
				    enum rdma_cm_event_type type)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev)) {
		perror("rdma_get_cm_event");
		exit(2);
	}
	if (ev->event != type) {
		fprintf(stderr, "expected %s, got %s (status %d)\n",
			rdma_event_str(type), rdma_event_str(ev->event), ev->status);
		exit(3);
	}
	return ev;
}

static int qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 8, .max_recv_wr = NRECV + 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	return rdma_create_qp(id, NULL, &attr);
}

/* Waits up to @ms for one completion on @cq; 1 if one came (in @wc). */
static int poll_for(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	struct timespec d = { 0, 10 * 1000 * 1000 };
	int i, n;

	for (i = 0; i < ms / 10; i++) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n > 0;
		nanosleep(&d, NULL);
	}
	return 0;
}

/* Waits up to 3 s for one completion on @cq. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	return poll_for(cq, wc, 3000);
}

static unsigned int be32_at(const unsigned char *p)
{
	return (unsigned int)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

/*
 * The handle of the first segment of a call's chunk lists (RFC 8166 Section
 * 4.2: Read list, Write list, Reply chunk after the 16-octet fixed part), 0 if
 * the call carries none or is too short to tell.
 */
static unsigned int first_handle(const unsigned char *m, int len)
{
	int off = 16;

	if (off + 4 > len)
		return 0;
	if (be32_at(m + off))			/* Read segment: position, handle */
		return off + 12 <= len ? be32_at(m + off + 8) : 0;
	off += 4;
	if (off + 4 > len)
		return 0;
	if (be32_at(m + off))			/* Write chunk: count, handle */
		return off + 12 <= len ? be32_at(m + off + 8) : 0;
	off += 4;
	if (off + 4 <= len && be32_at(m + off))	/* Reply chunk: count, handle */
		return off + 12 <= len ? be32_at(m + off + 8) : 0;
	return 0;
}

/* Replaces each 8-character @what in @hex by @val in hex. */
static void subst(char *hex, const char *what, unsigned int val)
{
	char v[9], *p;

	snprintf(v, sizeof(v), "%08x", val);
	while ((p = strstr(hex, what)))
		memcpy(p, v, 8);
}

/* Sends one REPLY message (see the usage text) for a call. */
static int send_one(struct rdma_cm_id *id, struct ibv_mr *smr, unsigned char *sbuf,
		    const char *spec, unsigned int xid, unsigned int handle)
{
	static char hex[2 * SEND_MAX + 1];
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	unsigned int inv = 0;
	int pad = 0, len;

	for (;;) {
		if (!strncmp(spec, "inv:", 4)) {
			inv = 1;
			spec += 4;
		} else if (!strncmp(spec, "inv=", 4) && sscanf(spec + 4, "%8x:", &inv) == 1 &&
			   spec[12] == ':') {
			handle = inv;
			inv = 1;
			spec += 13;
		} else if (!strncmp(spec, "pad=", 4) && sscanf(spec + 4, "%d", &pad) == 1 &&
			   strchr(spec, ':')) {
			spec = strchr(spec, ':') + 1;
		} else {
			break;
		}
	}
	if (strlen(spec) >= sizeof(hex)) {
		fprintf(stderr, "REPLY message too long\n");
		return 1;
	}
	strcpy(hex, spec);
	subst(hex, "XXXXXXXX", xid);
	subst(hex, "HHHHHHHH", handle);
	len = parse_hex(hex, sbuf, SEND_MAX);
	if (len < 0 || pad < 0 || len + pad > SEND_MAX) {
		fprintf(stderr, "bad REPLY message '%s'\n", spec);
		return 1;
	}
	memset(sbuf + len, 0, pad);
	sge = (struct ibv_sge){ .addr = (uintptr_t)sbuf, .length = len + pad,
				.lkey = smr->lkey };
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = inv ? IBV_WR_SEND_WITH_INV : IBV_WR_SEND;
	wr.invalidate_rkey = handle;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(id->qp, &wr, &bad)) {
		perror("ibv_post_send");
		return 2;
	}
	if (!poll_one(id->send_cq, &wc) || wc.status != IBV_WC_SUCCESS) {
		printf("connection lost\n");
		fflush(stdout);
		return -1;
	}
	printf("sent len=%d%s\n", len + pad, inv ? " with invalidate" : "");
	fflush(stdout);
	return 0;
}

/* Answers the i-th call received with @replies[i] (see the usage text). */
static int serve(struct rdma_cm_id *id, char **replies, int n)
{
	static unsigned char sbuf[SEND_MAX], rbuf[NRECV][MSG_MAX];
	struct ibv_mr *smr, *rmr;
	struct ibv_wc wc;
	int i, rc;

	smr = rdma_reg_msgs(id, sbuf, sizeof(sbuf));
	rmr = rdma_reg_msgs(id, rbuf, sizeof(rbuf));
	if (!smr || !rmr) {
		perror("rdma_reg_msgs");
		return 2;
	}
	for (i = 0; i < NRECV; i++)
		if (rdma_post_recv(id, (void *)(uintptr_t)i, rbuf[i], MSG_MAX, rmr)) {
			perror("rdma_post_recv");
			return 2;
		}
	for (i = 0; i < n; i++) {
		unsigned char *m;
		unsigned int xid, handle;
		char *copy, *msg, *save;

		if (!poll_for(id->recv_cq, &wc, 60000)) {
			printf("no call\n");
			fflush(stdout);
			return 0;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			printf("connection lost\n");
			fflush(stdout);
			return 0;
		}
		m = rbuf[wc.wr_id];
		xid = wc.byte_len >= 4 ? be32_at(m) : 0;
		handle = first_handle(m, wc.byte_len);
		printf("call len=%u xid=%08x handle=%08x\n", wc.byte_len, xid, handle);
		fflush(stdout);
		if (rdma_post_recv(id, (void *)(uintptr_t)wc.wr_id, m, MSG_MAX, rmr)) {
			perror("rdma_post_recv");
			return 2;
		}
		if (!strcmp(replies[i], "-"))
			continue;
		copy = strdup(replies[i]);
		for (msg = strtok_r(copy, "+", &save); msg; msg = strtok_r(NULL, "+", &save)) {
			rc = send_one(id, smr, sbuf, msg, xid, handle);
			if (rc) {
				free(copy);
				return rc < 0 ? 0 : rc;
			}
		}
		free(copy);
	}
	return 0;
}

/* Sends each message of @msgs and prints what comes back. */
/*
 * Fills the readable region from a "region=HEX:" prefix of @msg and writes
 * @msg without it, its rkey and address tokens replaced, into @out.
 */
static int region_subst(const char *msg, unsigned char *region, struct ibv_mr *mr,
			char *out, size_t max)
{
	const char *colon;
	char hex[2 * MSG_MAX + 1], word[17];
	size_t n, i;
	char *t;

	if (!strncmp(msg, "region=", 7) && (colon = strchr(msg, ':'))) {
		n = colon - (msg + 7);
		if (n >= sizeof(hex))
			return -1;
		memcpy(hex, msg + 7, n);
		hex[n] = 0;
		if (parse_hex(hex, region, MSG_MAX) < 0)
			return -1;
		msg = colon + 1;
	}
	if (strlen(msg) >= max)
		return -1;
	strcpy(out, msg);
	while ((t = strstr(out, "RRRRRRRR"))) {
		snprintf(word, sizeof(word), "%08x", mr->rkey);
		memcpy(t, word, 8);
	}
	for (i = 0; (t = strstr(out, "GGGGGGGGGGGGGGG")) && i < 64; i++) {
		if (t[15] < '0' || t[15] > '9')
			return -1;
		snprintf(word, sizeof(word), "%016llx",
			 (unsigned long long)(uintptr_t)region + 4ULL * (t[15] - '0'));
		memcpy(t, word, 16);
	}
	return 0;
}

static int talk(struct rdma_cm_id *id, char **msgs, int n)
{
	static unsigned char sbuf[MSG_MAX], rbuf[NRECV][MSG_MAX], region[MSG_MAX];
	static char text[2 * MSG_MAX + 64];
	struct ibv_mr *smr, *rmr, *gmr;
	struct ibv_wc wc;
	int i, len;

	smr = rdma_reg_msgs(id, sbuf, sizeof(sbuf));
	rmr = rdma_reg_msgs(id, rbuf, sizeof(rbuf));
	gmr = ibv_reg_mr(id->pd, region, sizeof(region),
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!smr || !rmr || !gmr) {
		perror("rdma_reg_msgs");
		return 2;
	}
	for (i = 0; i < NRECV; i++)
		if (rdma_post_recv(id, (void *)(uintptr_t)i, rbuf[i], MSG_MAX, rmr)) {
			perror("rdma_post_recv");
			return 2;
		}
	for (i = 0; i < n; i++) {
		len = region_subst(msgs[i], region, gmr, text, sizeof(text)) ? -1 :
			parse_hex(text, sbuf, MSG_MAX);
		if (len <= 0) {
			fprintf(stderr, "bad MSG %d\n", i);
			return 1;
		}
		if (rdma_post_send(id, NULL, sbuf, len, smr, IBV_SEND_SIGNALED)) {
			perror("rdma_post_send");
			return 2;
		}
		if (!poll_one(id->send_cq, &wc) || wc.status != IBV_WC_SUCCESS) {
			printf("connection lost\n");
			fflush(stdout);
			return 0;
		}
		if (!poll_one(id->recv_cq, &wc)) {
			printf("no reply\n");
			fflush(stdout);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			printf("connection lost\n");
			fflush(stdout);
			return 0;
		}
		print_hex("reply", rbuf[wc.wr_id], wc.byte_len);
		if (rdma_post_recv(id, (void *)(uintptr_t)wc.wr_id, rbuf[wc.wr_id],
				   MSG_MAX, rmr)) {
			perror("rdma_post_recv");
			return 2;
		}
	}
	return 0;
}

/* Resolves and connects a new id on @ch; the event that ends it in *@ev. */
static int flood_one(struct rdma_event_channel *ch, struct addrinfo *dst,
		     struct addrinfo *src, struct rdma_conn_param *param,
		     struct rdma_cm_id **out)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int established;

	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return -1;
	*out = id;
	if (rdma_resolve_addr(id, src ? src->ai_addr : NULL, dst->ai_addr, 5000))
		return -1;
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(id, 5000))
		return -1;
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	if (qp(id) || rdma_connect(id, param))
		return -1;
	if (rdma_get_cm_event(ch, &ev))
		return -1;
	established = ev->event == RDMA_CM_EVENT_ESTABLISHED;
	if (!established && ev->event != RDMA_CM_EVENT_REJECTED)
		fprintf(stderr, "flood: %s (status %d)\n", rdma_event_str(ev->event),
			ev->status);
	rdma_ack_cm_event(ev);
	return established ? 1 : ev->event == RDMA_CM_EVENT_REJECTED ? 0 : -1;
}

/* The "flood" mode (see the usage text). */
static int flood(struct addrinfo *dst, const char *src_name, int n, int hold,
		 struct rdma_conn_param *param)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct addrinfo *src = NULL;
	struct rdma_cm_id **ids;
	int i, est = 0, rej = 0, failed = 0;

	if (!ch || n < 1 || !(ids = calloc(n, sizeof(*ids)))) {
		perror("flood");
		return 2;
	}
	if (src_name && getaddrinfo(src_name, NULL, NULL, &src)) {
		fprintf(stderr, "bad source address\n");
		return 1;
	}
	for (i = 0; i < n; i++) {
		switch (flood_one(ch, dst, src, param, &ids[i])) {
		case 1:
			est++;
			continue;
		case 0:
			rej++;
			break;
		default:
			failed++;
			break;
		}
		/* Not established: give its QP and id back at once. */
		if (ids[i]) {
			if (ids[i]->qp)
				rdma_destroy_qp(ids[i]);
			rdma_destroy_id(ids[i]);
			ids[i] = NULL;
		}
	}
	printf("flood established=%d rejected=%d failed=%d\n", est, rej, failed);
	fflush(stdout);
	sleep(hold);
	for (i = 0; i < n; i++)
		if (ids[i])
			rdma_disconnect(ids[i]);
	return 0;
}

int main(int argc, char **argv)
{
	struct rdma_conn_param param = { .responder_resources = 1,
					 .initiator_depth = 1, .retry_count = 6 };
	unsigned char pdata[196];
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id, *conn;
	struct rdma_cm_event *ev;
	struct addrinfo *ai;
	int server, len;

	if (argc >= 7 && argc <= 8 && !strcmp(argv[1], "flood")) {
		len = parse_hex(argv[4], pdata, 56);
		if (len < 0 || getaddrinfo(argv[2], argv[3], NULL, &ai)) {
			fprintf(stderr, "bad HEX or address\n");
			return 1;
		}
		param.private_data = len ? pdata : NULL;
		param.private_data_len = len;
		return flood(ai, argc == 8 ? argv[7] : NULL, atoi(argv[5]), atoi(argv[6]),
			     &param);
	}
	if (argc < 5 || (strcmp(argv[1], "client") && strcmp(argv[1], "server")) ||
	    (argc > 6 && strcmp(argv[1], "client") && strcmp(argv[5], "reply"))) {
		fprintf(stderr, "usage: %s client|server|flood ADDR PORT HEX ...\n", argv[0]);
		return 1;
	}
	server = !strcmp(argv[1], "server");
	len = parse_hex(argv[4], pdata, server ? 196 : 56);
	if (len < 0) {
		fprintf(stderr, "bad HEX (at most %d octets)\n", server ? 196 : 56);
		return 1;
	}
	param.private_data = len ? pdata : NULL;
	param.private_data_len = len;
	if (getaddrinfo(argv[2], argv[3], NULL, &ai)) {
		fprintf(stderr, "bad address\n");
		return 1;
	}
	ch = rdma_create_event_channel();
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP)) {
		perror("rdma_create_id");
		return 2;
	}

	if (server) {
		if (rdma_bind_addr(id, ai->ai_addr) || rdma_listen(id, 1)) {
			perror("listen");
			return 2;
		}
		printf("listening\n");
		fflush(stdout);
		ev = expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		conn = ev->id;
		print_hex("peer_pvt", ev->param.conn.private_data,
			  ev->param.conn.private_data_len);
		rdma_ack_cm_event(ev);
		if (argc > 5 && !strcmp(argv[5], "reject")) {
			rdma_reject(conn, NULL, 0);
			printf("rejected\n");
			return 0;
		}
		if (qp(conn) || rdma_accept(conn, &param)) {
			perror("accept");
			return 2;
		}
		rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ESTABLISHED));
		printf("established\n");
		fflush(stdout);
		if (argc > 5 && !strcmp(argv[5], "hangup")) {
			rdma_disconnect(conn);
			rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
			return 0;
		}
		if (argc > 5 && !strcmp(argv[5], "reply")) {
			if (serve(conn, argv + 6, argc - 6))
				return 2;
			alarm(20);
			rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
			return 0;
		}
		{
			static unsigned char rbuf[NRECV][MSG_MAX];
			struct ibv_mr *mr = rdma_reg_msgs(conn, rbuf, sizeof(rbuf));
			int i;

			for (i = 0; mr && i < NRECV; i++)
				rdma_post_recv(conn, NULL, rbuf[i], MSG_MAX, mr);
		}
		alarm(20);
		rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_DISCONNECTED));
		return 0;
	}

	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 5000)) {
		perror("rdma_resolve_addr");
		return 2;
	}
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	if (rdma_resolve_route(id, 5000)) {
		perror("rdma_resolve_route");
		return 2;
	}
	rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	if (qp(id) || rdma_connect(id, &param)) {
		perror("connect");
		return 2;
	}
	ev = expect(ch, RDMA_CM_EVENT_ESTABLISHED);
	print_hex("peer_pvt", ev->param.conn.private_data,
		  ev->param.conn.private_data_len);
	rdma_ack_cm_event(ev);
	printf("established\n");
	fflush(stdout);
	if (argc > 5 && talk(id, argv + 5, argc - 5))
		return 2;
	rdma_disconnect(id);
	return 0;
}
