/* nons: run a command where namespaces cannot be created, the way container
 * runtimes refuse them (Docker's default seccomp profile): unshare and clone
 * with any CLONE_NEW* flag fail with EPERM, clone3 fails with ENOSYS (its
 * flags sit in a struct a filter cannot read, so libc falls back to clone).
 * Everything else is allowed. The filter is inherited by every descendant.
 *
 * Usage: nons CMD [ARG...]     Build: gcc -O2 -o nons nons.c
 * Mirrored in Rust by tests/escape_support: without_namespaces(). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "nons: add the audit arch of this machine"
#endif

/* CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET; unshare also
 * takes CLONE_NEWTIME (0x80, the exit-signal byte in clone's flags). */
#define CLONE_NS_FLAGS 0x7E020000u
#define UNSHARE_NS_FLAGS (CLONE_NS_FLAGS | 0x80u)

/* args[0] low 32 bits (little-endian: the flags of clone and unshare). */
#define ARG0_LO (offsetof(struct seccomp_data, args[0]))

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: nons CMD [ARG...]\n");
        return 2;
    }
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unshare, 0, 2),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LO),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, UNSHARE_NS_FLAGS, 3, 4),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LO),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog fprog = {.len = sizeof prog / sizeof prog[0], .filter = prog};
    /* Root (CAP_SYS_ADMIN) may install a filter without no_new_privs, as
     * runc does; anyone else needs it first. */
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0) {
        if (errno != EACCES || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0) {
            fprintf(stderr, "nons: installing the seccomp filter: %s\n", strerror(errno));
            return 125;
        }
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "nons: %s: %s\n", argv[1], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
