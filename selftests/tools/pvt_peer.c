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
 *   pvt_peer server ADDR PORT HEX [reject|hangup]
 *                                   accept one connection with HEX as private
 *                                   data (4 Receives posted, never answered);
 *                                   print the client's, wait for the
 *                                   disconnect (at most 20 s). "reject":
 *                                   reject it instead; "hangup": disconnect
 *                                   right after ESTABLISHED
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

/* Waits up to 3 s for one completion on @cq; 1 if one came (in @wc). */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	struct timespec d = { 0, 10 * 1000 * 1000 };
	int i, n;

	for (i = 0; i < 300; i++) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n > 0;
		nanosleep(&d, NULL);
	}
	return 0;
}

/* Sends each message of @msgs and prints what comes back. */
static int talk(struct rdma_cm_id *id, char **msgs, int n)
{
	static unsigned char sbuf[MSG_MAX], rbuf[NRECV][MSG_MAX];
	struct ibv_mr *smr, *rmr;
	struct ibv_wc wc;
	int i, len;

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
		len = parse_hex(msgs[i], sbuf, MSG_MAX);
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

	if (argc < 5 || (strcmp(argv[1], "client") && strcmp(argv[1], "server")) ||
	    (argc > 6 && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: %s client|server ADDR PORT HEX [MSG...]\n", argv[0]);
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
