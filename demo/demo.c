/* The bundled demo: a small CPU-bound program with a known call chain, built by
 * `cargo xtask demo` with -O2 -fomit-frame-pointer -Wa,--gsframe. Its stacks are
 * main -> run -> outer -> middle -> inner (recursive) -> spin.
 * Usage: demo [SECONDS] (default 3). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void spin(unsigned long n) {
    for (unsigned long i = 0; i < n; i++)
        sink += i * 2654435761u;
}

__attribute__((noinline)) static void inner(int depth) {
    if (depth > 0)
        inner(depth - 1);
    else
        spin(200000);
    sink++;
}

__attribute__((noinline)) static void middle(void) {
    volatile char big[4096];
    big[0] = (char)sink;
    inner(8);
    sink += big[0];
}

__attribute__((noinline)) static void outer(void) { middle(); sink++; }

__attribute__((noinline)) static void run(double seconds) {
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
        outer();
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3.0;
    run(seconds);
    printf("demo: done (%lu)\n", sink);
    return 0;
}
