/*
 * floor.c: the floor responder of bench/responder/run.sh (FLOOR=1). One
 * thread blocked in recvmmsg(2) on a UDP socket (IPv4) sets the QR bit
 * of every datagram that holds a DNS header and sends the batch back
 * with one sendmmsg(2): no DNS work, no runtime, what a server on this
 * host cannot go below per query. Prints "ready" and runs until killed.
 *
 *   cc -O2 -o floor floor.c && ./floor 127.0.0.1 5303
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define BATCH 64 /* as lbdnsd's readers */

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: floor ADDR PORT\n");
		return 2;
	}
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
	if (fd < 0 || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
		perror("floor: socket");
		return 1;
	}
	static char bufs[BATCH][4096];
	static struct sockaddr_in names[BATCH];
	static struct iovec riov[BATCH], wiov[BATCH];
	static struct mmsghdr rh[BATCH], wh[BATCH];
	for (int i = 0; i < BATCH; i++) {
		riov[i].iov_base = bufs[i];
		riov[i].iov_len = sizeof bufs[i];
		rh[i].msg_hdr.msg_iov = &riov[i];
		rh[i].msg_hdr.msg_iovlen = 1;
		rh[i].msg_hdr.msg_name = &names[i];
		wh[i].msg_hdr.msg_iov = &wiov[i];
		wh[i].msg_hdr.msg_iovlen = 1;
	}
	printf("ready %s:%s\n", argv[1], argv[2]);
	fflush(stdout);
	for (;;) {
		for (int i = 0; i < BATCH; i++)
			rh[i].msg_hdr.msg_namelen = sizeof names[i];
		int n = recvmmsg(fd, rh, BATCH, MSG_WAITFORONE, NULL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			perror("floor: recvmmsg");
			return 1;
		}
		int k = 0;
		for (int i = 0; i < n; i++) {
			unsigned char *b = (unsigned char *)bufs[i];
			if (rh[i].msg_len < 12 || (b[2] & 0x80))
				continue; /* not a query */
			b[2] |= 0x80;
			wiov[k].iov_base = b;
			wiov[k].iov_len = rh[i].msg_len;
			wh[k].msg_hdr.msg_name = &names[i];
			wh[k].msg_hdr.msg_namelen = rh[i].msg_hdr.msg_namelen;
			k++;
		}
		for (int sent = 0; sent < k;) {
			int m = sendmmsg(fd, wh + sent, k - sent, 0);
			if (m < 0) {
				if (errno == EINTR)
					continue;
				break; /* the rest lost, as a busy server loses replies */
			}
			sent += m;
		}
	}
}
