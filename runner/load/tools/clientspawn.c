/* clientspawn: start N client programs together and report each one's rusage.
 *
 * Part of xferlab (runner/load/tools/spawn.py builds and runs it; docs/methodology.md,
 * "Real clients"). Usage:
 *
 *     clientspawn [-u UID -g GID] BOUND_MS JOBFILE
 *
 * JOBFILE holds one line per client: fields separated by TAB, no field empty except
 * the last arguments: CWD, STDOUT path, STDERR path, then argv (argv[0] looked up in
 * PATH). Every client is forked from this small process (so its ru_maxrss starts from
 * this process's few hundred KiB, not from the Python runner's resident set: exec(2)
 * keeps the high-water mark of the address space it replaces), with stdin on /dev/null,
 * stdout and stderr on its files, and blocks reading a pipe; when all are forked the
 * pipe is closed, which releases them together. Each child writes its start time
 * (CLOCK_MONOTONIC, after the release) into a shared page before exec. The parent reaps
 * every child with wait4(2); past BOUND_MS after the release every child still running
 * gets SIGKILL. Children get SIGKILL when this process dies (PR_SET_PDEATHSIG). This
 * process cannot use PR_SET_PDEATHSIG itself (the runner may start it from a thread that
 * ends at once: runner.net.netns), so it checks every TICK_MS whether its parent
 * process is gone (getppid() changed: the runner was killed) and then kills every child
 * and exits 3, so no client outlives a killed runner by more than TICK_MS.
 *
 * Descriptors: JOBFILE and every descriptor of this process are close-on-exec; each child
 * also marks every descriptor above 2 close-on-exec before exec (close_range(2), else one
 * by one from /proc/self/fd), so a client holds only its stdin, stdout and stderr.
 *
 * Credentials: with -u UID -g GID (both, neither 0), each child, after opening its
 * stdout/stderr files and entering CWD (as this process's user, in the namespace this
 * process runs in), drops every supplementary group (setgroups(0)), then sets its group
 * to GID (setgid) and its user to UID (setuid), checks that all real, effective and
 * saved ids are the new ones and that it cannot become root again, and only then sets
 * PR_SET_PDEATHSIG (a change of credentials clears it) and checks its parent again.
 * If any of that fails it does not exec: message on its stderr, exit status 125.
 * Resource limits are inherited unchanged (the runner raised RLIMIT_NOFILE).
 *
 * Output on stdout, after the last child is reaped:
 *     released MONO_NS REAL_NS
 *     client I PID START_NS END_NS WAITSTATUS UTIME_US STIME_US MAXRSS_KIB MINFLT MAJFLT KILLED
 * (START_NS/END_NS on CLOCK_MONOTONIC; END_NS when wait4 returned). Exit status 0, or 2
 * for bad arguments or a failure before any child ran (message on stderr). A child
 * exits 126 when it cannot open its files or enter CWD, 125 when it cannot drop its
 * credentials or close its descriptors, 127 when the program cannot be started.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 100000
#define MAX_ARGS 256

struct job {
    char *cwd, *out, *err;
    char *argv[MAX_ARGS + 1];
};

static volatile sig_atomic_t expired = 0;

static void on_alarm(int sig) { (void)sig; expired = 1; }
/* period of the timer that wakes wait4(2) to check the bound and the parent (ms) */
#define TICK_MS 100

static int64_t now_ns(clockid_t clk) {
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int die(const char *what) {
    fprintf(stderr, "clientspawn: %s: %s\n", what, strerror(errno));
    return 2;
}

static int parse(char *line, struct job *j) {
    size_t n = strlen(line);
    if (n && line[n - 1] == '\n') line[n - 1] = 0;
    char *fields[MAX_ARGS + 3];
    int k = 0;
    for (char *p = line, *tab; k < MAX_ARGS + 3; p = tab + 1) {
        fields[k++] = p;
        tab = strchr(p, '\t');
        if (!tab) break;
        *tab = 0;
    }
    if (k < 4 || k >= MAX_ARGS + 3 || !fields[3][0]) return -1;
    j->cwd = fields[0];
    j->out = fields[1];
    j->err = fields[2];
    for (int i = 3; i < k; i++) j->argv[i - 3] = fields[i];
    j->argv[k - 3] = NULL;
    return 0;
}

/* Mark every descriptor above 2 close-on-exec. 0 on success, -1 (errno set) if not. */
static int cloexec_from_3(void) {
#if defined(SYS_close_range)
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
    if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return 0;
    if (errno != ENOSYS && errno != EINVAL) return -1;
#endif
    /* older kernel: one by one, from the descriptors that exist */
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int self = dirfd(d), rc = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd <= 2 || fd == self) continue;
        int fl = fcntl((int)fd, F_GETFD);
        if (fl < 0 || fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC) < 0) rc = -1;
    }
    closedir(d);  /* closes self too */
    return rc;
}

/* Become uid/gid for good (header comment). 0 on success, else -1 with a message on fd 2. */
static int drop_to(uid_t uid, gid_t gid) {
    const char *what = NULL;
    if (setgroups(0, NULL) != 0) what = "setgroups";
    else if (setgid(gid) != 0) what = "setgid";
    else if (setuid(uid) != 0) what = "setuid";
    if (what) {
        dprintf(2, "clientspawn: %s (to uid %u gid %u): %s; not starting the client\n", what, (unsigned)uid,
                (unsigned)gid, strerror(errno));
        return -1;
    }
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    if (getresuid(&ru, &eu, &su) != 0 || getresgid(&rg, &eg, &sg) != 0 || ru != uid || eu != uid || su != uid ||
        rg != gid || eg != gid || sg != gid || getgroups(0, NULL) != 0 || setuid(0) == 0) {
        dprintf(2, "clientspawn: credentials not dropped to uid %u gid %u; not starting the client\n",
                (unsigned)uid, (unsigned)gid);
        return -1;
    }
    return 0;
}

static void child(struct job *j, int rd, int wr, pid_t parent, volatile int64_t *start, int drop, uid_t uid,
                  gid_t gid) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    close(wr);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int out = open(j->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int err = open(j->err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (in < 0 || out < 0 || err < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) _exit(126);
    if (chdir(j->cwd) != 0) {
        dprintf(2, "clientspawn: chdir %s: %s\n", j->cwd, strerror(errno));
        _exit(126);
    }
    if (cloexec_from_3() != 0) {
        dprintf(2, "clientspawn: cannot mark descriptors close-on-exec: %s; not starting the client\n",
                strerror(errno));
        _exit(125);
    }
    if (drop) {
        if (drop_to(uid, gid) != 0) _exit(125);
        /* a change of credentials cleared the parent-death signal: set it again, then make
         * sure the parent did not die before it was set */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
            dprintf(2, "clientspawn: PR_SET_PDEATHSIG: %s; not starting the client\n", strerror(errno));
            _exit(125);
        }
        if (getppid() != parent) _exit(127);
    }
    char c;
    while (read(rd, &c, 1) < 0 && errno == EINTR) {}
    close(rd);
    *start = now_ns(CLOCK_MONOTONIC);
    signal(SIGPIPE, SIG_DFL);
    execvp(j->argv[0], j->argv);
    dprintf(2, "clientspawn: cannot start %s: %s\n", j->argv[0], strerror(errno));
    _exit(127);
}

/* A decimal id of -u/-g: 1 .. 2^31-1 (0, root's, is refused). 0 when bad. */
static long parse_id(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return (errno || *end || end == s || v <= 0 || v > 0x7fffffffL) ? 0 : v;
}

int main(int argc, char **argv) {
    pid_t parent = getppid();
    int drop = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    if (argc == 7 && strcmp(argv[1], "-u") == 0 && strcmp(argv[3], "-g") == 0) {
        long u = parse_id(argv[2]), g = parse_id(argv[4]);
        if (!u || !g) {
            fprintf(stderr, "clientspawn: bad -u %s / -g %s (decimal ids, not 0)\n", argv[2], argv[4]);
            return 2;
        }
        drop = 1;
        uid = (uid_t)u;
        gid = (gid_t)g;
        argv += 4;
        argc -= 4;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: clientspawn [-u UID -g GID] BOUND_MS JOBFILE\n");
        return 2;
    }
    long bound_ms = strtol(argv[1], NULL, 10);
    if (bound_ms <= 0) {
        fprintf(stderr, "clientspawn: bad BOUND_MS %s\n", argv[1]);
        return 2;
    }
    FILE *f = fopen(argv[2], "re");  /* O_CLOEXEC */
    if (!f) return die(argv[2]);
    /* first pass: count and check the lines; nothing of them is kept, so the memory each
     * client inherits at fork (and reports in ru_maxrss) stays small whatever N is */
    int n = 0;
    char *line = NULL;
    size_t cap = 0;
    static struct job j;
    while (getline(&line, &cap, f) > 0) {
        if (n == MAX_CLIENTS || parse(line, &j) != 0) {
            fprintf(stderr, "clientspawn: bad job line %d (or more than %d clients)\n", n + 1, MAX_CLIENTS);
            return 2;
        }
        n++;
    }
    if (n == 0) {
        fprintf(stderr, "clientspawn: no clients in %s\n", argv[2]);
        return 2;
    }
    volatile int64_t *start = mmap(NULL, sizeof(int64_t) * n, PROT_READ | PROT_WRITE,
                                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t *pids = calloc(n, sizeof *pids);
    if (start == MAP_FAILED || !pids) return die("memory");
    int barrier[2];
    if (pipe2(barrier, O_CLOEXEC) != 0) return die("pipe");
    signal(SIGPIPE, SIG_IGN);
    pid_t self = getpid();
    rewind(f);
    for (int i = 0; i < n; i++) {
        if (getline(&line, &cap, f) <= 0 || parse(line, &j) != 0) {
            fprintf(stderr, "clientspawn: %s changed while read\n", argv[2]);
            for (int k = 0; k < i; k++) kill(pids[k], SIGKILL);
            return 2;
        }
        pid_t pid = fork();
        if (pid < 0) {
            int e = errno;
            for (int k = 0; k < i; k++) kill(pids[k], SIGKILL);
            errno = e;
            return die("fork");
        }
        if (pid == 0) child(&j, barrier[0], barrier[1], self, &start[i], drop, uid, gid);
        pids[i] = pid;
    }
    fclose(f);
    free(line);
    char *done = calloc(n, 1), *killed = calloc(n, 1);
    if (!done || !killed) {
        for (int k = 0; k < n; k++) kill(pids[k], SIGKILL);
        return die("memory");
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;  /* no SA_RESTART: wait4 returns EINTR */
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, TICK_MS * 1000}, {0, TICK_MS * 1000}};
    int64_t released = now_ns(CLOCK_MONOTONIC), released_real = now_ns(CLOCK_REALTIME);
    int64_t deadline = released + (int64_t)bound_ms * 1000000;
    close(barrier[1]);
    close(barrier[0]);
    setitimer(ITIMER_REAL, &it, NULL);
    int64_t *end = calloc(n, sizeof *end);
    int *status = calloc(n, sizeof *status);
    struct rusage *ru = calloc(n, sizeof *ru);
    if (!end || !status || !ru) return die("memory");
    int left = n, swept = 0;
    while (left > 0) {
        int orphan = getppid() != parent;
        if (!swept && (orphan || now_ns(CLOCK_MONOTONIC) >= deadline)) {
            for (int i = 0; i < n; i++)
                if (!done[i]) {
                    killed[i] = 1;
                    kill(pids[i], SIGKILL);
                }
            swept = 1;
            if (orphan) {
                fprintf(stderr, "clientspawn: the runner (pid %d) is gone: clients killed\n", (int)parent);
                return 3;
            }
        }
        expired = 0;
        int st;
        struct rusage r;
        pid_t pid = wait4(-1, &st, 0, &r);
        int64_t t = now_ns(CLOCK_MONOTONIC);
        if (pid < 0) {
            if (errno == EINTR) continue;
            if (errno == ECHILD) break;
            return die("wait4");
        }
        for (int i = 0; i < n; i++)
            if (pids[i] == pid && !done[i]) {
                done[i] = 1;
                end[i] = t;
                status[i] = st;
                ru[i] = r;
                left--;
                break;
            }
    }
    printf("released %lld %lld\n", (long long)released, (long long)released_real);
    for (int i = 0; i < n; i++) {
        printf("client %d %d %lld %lld %d %lld %lld %ld %ld %ld %d\n", i, (int)pids[i],
               (long long)(start[i] ? start[i] : released), (long long)(done[i] ? end[i] : 0), status[i],
               (long long)ru[i].ru_utime.tv_sec * 1000000 + ru[i].ru_utime.tv_usec,
               (long long)ru[i].ru_stime.tv_sec * 1000000 + ru[i].ru_stime.tv_usec,
               ru[i].ru_maxrss, ru[i].ru_minflt, ru[i].ru_majflt, killed[i]);
    }
    return fflush(stdout) == 0 ? 0 : 2;
}
