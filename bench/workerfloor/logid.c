/*
 * logid: the items' command in bench/worker (issue 39): appends its item's
 * ID and a newline to the file named by $BENCH_LOG with one O_APPEND write,
 * so that the benchmark can check that every item ran exactly once; the ID
 * is its first argument, or $LEASE_ID under lease work. It costs what
 * /bin/true costs plus one open and one write (no sync).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *id = argc > 1 ? argv[1] : getenv("LEASE_ID");
	const char *log = getenv("BENCH_LOG");
	if (!id || !log) {
		fprintf(stderr, "logid: no ID (argument or LEASE_ID) or no BENCH_LOG\n");
		return 2;
	}
	char line[512];
	int n = snprintf(line, sizeof line, "%s\n", id);
	if (n <= 0 || n >= (int)sizeof line)
		return 2;
	int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, line, n) != n) {
		perror("logid");
		return 1;
	}
	return 0;
}
