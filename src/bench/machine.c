/*
 * machine.c — what the benchmark reports about where it ran: the machine
 * (cores, CPU model, memory, kernel), the disk's fsync latency, and the
 * CPU time of the processes involved, read from /proc.
 */
#include "bench_int.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

/* utime + stime of /proc/<pid>/stat, in seconds; comm (may be NULL)
 * receives the process name. */
static double stat_cpu(const char *path, char *comm, size_t commcap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[1024];
    size_t n = fread(line, 1, sizeof line - 1, f);
    fclose(f);
    line[n] = '\0';
    char *open = strchr(line, '('), *close = strrchr(line, ')');
    if (!open || !close)
        return -1;
    if (comm) {
        size_t l = (size_t)(close - open - 1);
        if (l >= commcap)
            l = commcap - 1;
        memcpy(comm, open + 1, l);
        comm[l] = '\0';
    }
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime */
    unsigned long long ut = 0, st = 0;
    if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double po_cpu_of_pid(pid_t pid)
{
    char path[64];
    (void)snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    double v = stat_cpu(path, NULL, 0);
    return v < 0 ? 0 : v;
}

double po_cpu_self(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

double po_cpu_of_postgres(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    double sum = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        char path[300], comm[64];
        (void)snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        double v = stat_cpu(path, comm, sizeof comm);
        if (v > 0 && strncmp(comm, "postgres", 8) == 0)
            sum += v;
    }
    closedir(d);
    return sum;
}

/* The first "key : value" line of /proc/<file> whose key is key. */
static void proc_value(const char *file, const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(file, "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0) {
            char *v = strchr(line, ':');
            if (!v)
                continue;
            for (v++; *v == ' ' || *v == '\t'; v++)
                ;
            v[strcspn(v, "\n")] = '\0';
            (void)snprintf(out, cap, "%s", v);
            break;
        }
    fclose(f);
}

static int64_t status_value(pid_t pid, const char *key)
{
    char path[64], v[64];
    (void)snprintf(path, sizeof path, "/proc/%ld/status", (long)pid);
    proc_value(path, key, v, sizeof v);
    return v[0] ? strtoll(v, NULL, 10) : -1;
}

int64_t po_rss_kb_of_pid(pid_t pid)
{
    return status_value(pid, "VmRSS");
}

int po_threads_of_pid(pid_t pid)
{
    return (int)status_value(pid, "Threads");
}

json_t *po_machine_describe(void)
{
    char model[256], mem[64];
    proc_value("/proc/cpuinfo", "model name", model, sizeof model);
    proc_value("/proc/meminfo", "MemTotal", mem, sizeof mem);
    struct utsname u;
    if (uname(&u) != 0)
        memset(&u, 0, sizeof u);
    return json_pack("{s:i, s:s, s:s, s:s}", "cores", (int)sysconf(_SC_NPROCESSORS_ONLN), "cpu",
                     model, "memory", mem, "kernel", u.release);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

po_err po_fsync_latency(const char *dir, double *p50_us, double *p99_us)
{
    enum { ROUNDS = 100 };
    char path[400];
    (void)snprintf(path, sizeof path, "%s/fsync-probe", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return PO_ERR_IO;
    char block[4096];
    memset(block, 'x', sizeof block);
    double lat[ROUNDS];
    po_err rc = PO_OK;
    for (int i = 0; i < ROUNDS && !rc; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (pwrite(fd, block, sizeof block, (off_t)(i % 16) * 4096) != (ssize_t)sizeof block ||
            fdatasync(fd) != 0)
            rc = PO_ERR_IO;
        clock_gettime(CLOCK_MONOTONIC, &b);
        lat[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
    close(fd);
    unlink(path);
    if (rc)
        return rc;
    qsort(lat, ROUNDS, sizeof lat[0], cmp_double);
    *p50_us = lat[ROUNDS / 2];
    *p99_us = lat[ROUNDS * 99 / 100];
    return PO_OK;
}
