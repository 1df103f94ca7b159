/* Calls a matmul kernel compiled ahead of time by tessera and checks it
 * against a naive loop. The kernel must have been written with the symbol
 * `matmul` (files matmul.o, matmul.h, tessera_runtime.c, tessera_kernels.c;
 * see README.md):
 *
 *   cc -O2 -I<dir> main.c <dir>/tessera_runtime.c <dir>/tessera_kernels.c <dir>/matmul.o \
 *      -lm -lpthread -o matmul_aot
 *   ./matmul_aot
 *
 * Prints the shape, the time of one call and the largest error; exits 0 when
 * the kernel's result matches, 1 when it does not (or memory runs out). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "matmul.h"

#define M MATMUL_A_DIM0
#define K MATMUL_A_DIM1
#define N MATMUL_B_DIM1

#if MATMUL_B_DIM0 != K || MATMUL_C_DIM0 != M || MATMUL_C_DIM1 != N
#error "matmul.h does not describe C[M][N] = A[M][K] * B[K][N]"
#endif

/* Deterministic inputs in [-1, 1). */
static float next_value(uint32_t *state) {
  *state = *state * 1664525u + 1013904223u;
  return (float)(*state >> 8) / (float)(1u << 23) - 1.0f;
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void) {
  float *a = malloc(sizeof(float) * MATMUL_A_SIZE);
  float *b = malloc(sizeof(float) * MATMUL_B_SIZE);
  float *c = malloc(sizeof(float) * MATMUL_C_SIZE);
  if (a == NULL || b == NULL || c == NULL) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  uint32_t state = 42;
  for (long i = 0; i < MATMUL_A_SIZE; i++) a[i] = next_value(&state);
  for (long i = 0; i < MATMUL_B_SIZE; i++) b[i] = next_value(&state);
  for (long i = 0; i < MATMUL_C_SIZE; i++) c[i] = NAN; /* must be overwritten */

  double start = seconds();
  matmul_call(a, b, c);
  double elapsed = seconds() - start;

  /* The reference in double; inputs are in [-1, 1), so |C| <= K and the
   * f32 result is accurate to about K * 2^-24 (allow a wide margin). */
  double max_error = 0.0;
  long not_finite = 0; /* NaN: an element the kernel did not write */
  for (long i = 0; i < M; i++) {
    for (long j = 0; j < N; j++) {
      double want = 0.0;
      for (long k = 0; k < K; k++) want += (double)a[i * K + k] * (double)b[k * N + j];
      double error = fabs((double)c[i * N + j] - want);
      if (isnan(error))
        not_finite++;
      else if (error > max_error)
        max_error = error;
    }
  }
  double tolerance = 1e-5 * (double)K;
  printf("matmul M=%d N=%d K=%d: %.3f ms, %.2f GFLOP/s\n", M, N, K, elapsed * 1e3,
         2.0 * M * N * K / elapsed * 1e-9);
  printf("max error %.3e (tolerance %.3e), %ld elements not finite\n", max_error, tolerance,
         not_finite);
  int ok = not_finite == 0 && max_error <= tolerance;
  puts(ok ? "OK" : "MISMATCH");
  free(a);
  free(b);
  free(c);
  return ok ? 0 : 1;
}
