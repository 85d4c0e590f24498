/*
 * xstate.c: a preload for Debian's linux.uml (User-Mode Linux 6.1) on hosts
 * whose XSAVE area is larger than UML's buffer for it (Intel CPUs with AMX:
 * 11,008 bytes on a Xeon VM here, CPUID leaf 0xD). UML sets a guest
 * process's floating-point state with
 * ptrace(PTRACE_SETREGSET, NT_X86_XSTATE) from a buffer of a size fixed
 * when it was built; the host kernel takes only a whole XSAVE area
 * (count == its own size, else EFAULT), so the guest's init dies as it
 * starts: "userspace - ptrace set fp regs failed, errno = 14" and a kernel
 * panic. Upstream UML sizes the buffer from the host since 2024 ("um:
 * switch to regset API and depend on XSTATE"); Debian's 6.1 does not.
 *
 * What this does: once the host has refused such a call with EFAULT, it
 * learns the host's size (a PTRACE_GETREGSET with a buffer large enough)
 * and makes that call, and every later one, with a whole area: UML's bytes
 * first, zeros after them. On this host (Xeon with AMX) UML's buffer is
 * 2,696 bytes: x87, SSE, AVX, AVX-512 and PKRU; only AMX's tile state lies
 * past it, which no guest process can use without asking the host for it
 * (arch_prctl), so its bits in the area's XSTATE_BV, which UML read from
 * the host, are clear and the zeros are its initial state. Every other call
 * goes to the C library's ptrace unchanged, and on a host that takes UML's
 * buffer as it is nothing changes at all.
 *
 * internal/uml builds it with cc and puts it in LD_PRELOAD of each kernel
 * it boots.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifndef NT_X86_XSTATE
#define NT_X86_XSTATE 0x202
#endif

typedef long (*ptrace_fn)(enum __ptrace_request, pid_t, void *, void *);

static ptrace_fn real;
static size_t whole; /* the host's XSAVE area; 0 until it refused UML's */

/* setWhole sets the XSAVE area of pid from uml's bytes and zeros after. */
static long setWhole(pid_t pid, void *addr, const struct iovec *uml)
{
	struct iovec iov = {.iov_len = whole};
	long r;
	int saved;

	iov.iov_base = calloc(1, whole);
	if (!iov.iov_base) {
		errno = ENOMEM;
		return -1;
	}
	memcpy(iov.iov_base, uml->iov_base, uml->iov_len < whole ? uml->iov_len : whole);
	r = real(PTRACE_SETREGSET, pid, addr, &iov);
	saved = errno;
	free(iov.iov_base);
	errno = saved;
	return r;
}

long ptrace(enum __ptrace_request req, ...)
{
	va_list ap;
	pid_t pid;
	void *addr, *data;
	long r;
	int xsave;

	va_start(ap, req);
	pid = va_arg(ap, pid_t);
	addr = va_arg(ap, void *);
	data = va_arg(ap, void *);
	va_end(ap);
	if (!real)
		real = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace");
	xsave = req == PTRACE_SETREGSET && (long)addr == NT_X86_XSTATE && data;
	if (xsave && whole)
		return setWhole(pid, addr, data);
	r = real(req, pid, addr, data);
	if (r == 0 || !xsave || errno != EFAULT)
		return r;
	{
		struct iovec probe = {.iov_len = 1 << 16};
		int saved = errno;

		probe.iov_base = malloc(probe.iov_len);
		if (probe.iov_base && real(PTRACE_GETREGSET, pid, addr, &probe) == 0 &&
		    probe.iov_len > ((struct iovec *)data)->iov_len)
			whole = probe.iov_len;
		free(probe.iov_base);
		if (!whole) {
			errno = saved;
			return r;
		}
	}
	return setWhole(pid, addr, data);
}
