/*
 * target.c: the fuzz target of examples/afl: a parser of a tiny
 * type-length-value format with a real bug.
 *
 * Input: the magic "LT", then records of a type byte, a length byte and
 * that many bytes of value. 'N' sets the name, 'C' counts, 'E' ends.
 * The bug: a name ('N') is copied into a 16-byte buffer with the length
 * byte the input gives, before that length is checked: a record 'N' whose
 * length byte is more than 16 writes past the end of the buffer, a heap
 * overflow that AddressSanitizer reports (the target is built with
 * AFL_USE_ASAN=1; see build.sh).
 *
 * Usage: target FILE   (afl-fuzz runs it as `target @@`)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct state {
	char name[16];
	unsigned count;
};

static int parse(const unsigned char *p, size_t n, struct state *st) {
	size_t i = 2;
	if (n < 2 || p[0] != 'L' || p[1] != 'T')
		return -1;
	while (i + 2 <= n) {
		unsigned char type = p[i], len = p[i + 1];
		const unsigned char *val = p + i + 2;
		if (type == 'N') {
			/* The bug: the name is copied with the length the input
			 * gives, before that length is checked against anything. */
			memcpy(st->name, val, len);
		}
		if (i + 2 + len > n)
			return -1;
		switch (type) {
		case 'N':
			break;
		case 'C':
			if (len == 1)
				st->count += val[0];
			break;
		case 'E':
			return 0;
		default:
			return -1;
		}
		i += 2 + (size_t)len;
	}
	return 0;
}

int main(int argc, char **argv) {
	static unsigned char buf[4096];
	struct state *st;
	FILE *f;
	size_t n;
	int rc;
	if (argc != 2) {
		fprintf(stderr, "usage: target FILE\n");
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 2;
	}
	n = fread(buf, 1, sizeof buf, f);
	fclose(f);
	st = calloc(1, sizeof *st);
	if (!st)
		return 2;
	rc = parse(buf, n, st);
	printf("%s: %s, count %u\n", argv[1], rc == 0 ? "ok" : "invalid", st->count);
	free(st);
	return 0;
}
