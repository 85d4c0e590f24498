/*
 * floor: the least a durable file queue can do for an item (issue 39), one
 * worker process of it:
 *
 *   floor DIR CMD [ARG...]
 *
 * DIR has q/ (one empty file per item, named by its ID), run/ and done/.
 * For each item: claim it by rename(q/ID, run/ID) and fsync run/ (the
 * claim survives a crash); fork and exec CMD ARG... ID and wait for it;
 * create done/ID, fsync it and fsync done/. One spawn and 3 syncs an item,
 * no locks, no records, no checks. A rename that fails with ENOENT lost
 * the item to another worker: the next entry is tried. It exits 0 when a
 * pass over q/ finds nothing left, 1 on any other error or a CMD that
 * fails. bench/worker runs N of these side by side (bench/workbench run
 * --system floor).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what, const char *name)
{
	fprintf(stderr, "floor: %s %s: %s\n", what, name, strerror(errno));
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: floor DIR CMD [ARG...]\n");
		return 2;
	}
	int root = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (root < 0)
		die("open", argv[1]);
	int qfd = openat(root, "q", O_RDONLY | O_DIRECTORY);
	int runfd = openat(root, "run", O_RDONLY | O_DIRECTORY);
	int donefd = openat(root, "done", O_RDONLY | O_DIRECTORY);
	if (qfd < 0 || runfd < 0 || donefd < 0)
		die("open", "q/, run/ or done/");
	DIR *q = fdopendir(qfd);
	if (!q)
		die("fdopendir", "q");
	int n = argc - 2;
	char **cmd = calloc(n + 2, sizeof *cmd);
	memcpy(cmd, argv + 2, n * sizeof *cmd);
	for (;;) {
		int claimed = 0;
		rewinddir(q);
		struct dirent *e;
		while ((errno = 0, e = readdir(q)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			char id[256];
			snprintf(id, sizeof id, "%s", e->d_name);
			if (renameat(qfd, id, runfd, id) != 0) {
				if (errno == ENOENT)
					continue; /* another worker has it */
				die("rename", id);
			}
			claimed++;
			if (fsync(runfd) != 0)
				die("fsync", "run/");
			cmd[n] = id;
			pid_t pid = fork();
			if (pid < 0)
				die("fork", id);
			if (pid == 0) {
				execvp(cmd[0], cmd);
				_exit(127);
			}
			int st;
			if (waitpid(pid, &st, 0) < 0)
				die("waitpid", id);
			if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				fprintf(stderr, "floor: %s %s: status %d\n", cmd[0], id, st);
				return 1;
			}
			int fd = openat(donefd, id, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd < 0)
				die("create done/", id);
			if (fsync(fd) != 0)
				die("fsync done/", id);
			close(fd);
			if (fsync(donefd) != 0)
				die("fsync", "done/");
		}
		if (errno != 0)
			die("readdir", "q/");
		if (!claimed)
			return 0;
	}
}
