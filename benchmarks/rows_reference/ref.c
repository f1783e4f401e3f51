/* Hand-written references for the row workloads: what one core can do here.
   cc -O3 -march=native -ffp-contract=fast -fno-math-errno -fopenmp ref.c -o ref -lm */
#include "prelude.h"
#include <stdio.h>

static inline float hsum(wf_vf v) { return _mm512_reduce_add_ps((__m512)v); }
static inline float hmax(wf_vf v) { return _mm512_reduce_max_ps((__m512)v); }
#define PF(p) __builtin_prefetch((p), 0, 3)
#define PFW(p) __builtin_prefetch((p), 1, 3)

/* softmax, one row at a time: max; exp -> out, sum; scale. pf: distance in rows; mode bit0: x[r+pf] in the exp pass, bit1: out[r+pf] (write) in the exp pass, bit2: out[r+pf] in the scale pass */
static void softmax_rows(const float *restrict x, float *restrict y, long rows, long cols, int pf, int mode) {
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * cols; float *yr = y + r * cols;
        const float *xn = xr + (long)pf * cols; float *yn = yr + (long)pf * cols;
        int dopf = pf && r + pf < rows;
        wf_vf m0 = WF_F(-__builtin_inff()), m1 = m0, m2 = m0, m3 = m0;
        for (long j = 0; j < cols; j += 64) {
            m0 = wfc_max_f(m0, wfc_load_f(xr + j)); m1 = wfc_max_f(m1, wfc_load_f(xr + j + 16));
            m2 = wfc_max_f(m2, wfc_load_f(xr + j + 32)); m3 = wfc_max_f(m3, wfc_load_f(xr + j + 48));
        }
        float m = hmax(wfc_max_f(wfc_max_f(m0, m1), wfc_max_f(m2, m3)));
        wf_vf s0 = WF_F(0.0f), s1 = s0, mv = wfc_splat_f(m);
        for (long j = 0; j < cols; j += 32) {
            if (dopf && (mode & 1)) { PF(xn + j); PF(xn + j + 16); }
            if (dopf && (mode & 2)) { PFW(yn + j); PFW(yn + j + 16); }
            wf_vf e0 = wf_exp(wfc_load_f(xr + j) - mv), e1 = wf_exp(wfc_load_f(xr + j + 16) - mv);
            wfc_store_f(yr + j, e0); wfc_store_f(yr + j + 16, e1); s0 += e0; s1 += e1;
        }
        wf_vf inv = wfc_splat_f(1.0f / hsum(s0 + s1));
        for (long j = 0; j < cols; j += 16) { if (dopf && (mode & 4)) PFW(yn + j); wfc_store_f(yr + j, wfc_load_f(yr + j) * inv); }
    }
}

/* layer norm, one row at a time: mean; var from x; out. pf: prefetch next row in the var/out passes */
static void layernorm_rows(const float *restrict x, const float *restrict w, const float *restrict b,
                           float *restrict y, long rows, long cols, int pf) {
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * cols; float *yr = y + r * cols;
        const float *xn = xr + (long)pf * cols; float *yn = yr + (long)pf * cols;
        int dopf = pf && r + pf < rows;
        wf_vf a0 = WF_F(0.0f), a1 = a0, a2 = a0, a3 = a0;
        for (long j = 0; j < cols; j += 64) {
            a0 += wfc_load_f(xr + j); a1 += wfc_load_f(xr + j + 16); a2 += wfc_load_f(xr + j + 32); a3 += wfc_load_f(xr + j + 48);
        }
        float mean = hsum((a0 + a1) + (a2 + a3)) / cols;
        wf_vf mv = wfc_splat_f(mean);
        a0 = a1 = a2 = a3 = WF_F(0.0f);
        for (long j = 0; j < cols; j += 64) {
            if (dopf) { PF(xn + j); PF(xn + j + 16); PF(xn + j + 32); PF(xn + j + 48); }
            wf_vf c0 = wfc_load_f(xr + j) - mv, c1 = wfc_load_f(xr + j + 16) - mv;
            wf_vf c2 = wfc_load_f(xr + j + 32) - mv, c3 = wfc_load_f(xr + j + 48) - mv;
            a0 += c0 * c0; a1 += c1 * c1; a2 += c2 * c2; a3 += c3 * c3;
        }
        float inv = 1.0f / sqrtf(hsum((a0 + a1) + (a2 + a3)) / cols + 1e-5f);
        wf_vf iv = wfc_splat_f(inv);
        for (long j = 0; j < cols; j += 16) {
            if (dopf) PFW(yn + j);
            wfc_store_f(yr + j, (wfc_load_f(xr + j) - mv) * iv * wfc_load_f(w + j) + wfc_load_f(b + j));
        }
    }
}

/* log-sum-exp per row: acc chains, the max a block ahead (as weft.codegen.online_rows) */
static void lse_rows(const float *restrict x, float *restrict out, long rows, long cols, int chains) {
    #pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        const long B = 1024;
        wf_vf vm = WF_F(-__builtin_inff());
        for (long j = 0; j < B; j += 16) vm = wfc_max_f(vm, wfc_load_f(xr + j));
        float ref = hmax(vm);
        wf_vf s[4] = {WF_F(0.0f), WF_F(0.0f), WF_F(0.0f), WF_F(0.0f)};
        for (long jb = B; jb <= cols; jb += B) {
            wf_vf rv = wfc_splat_f(ref);
            vm = WF_F(-__builtin_inff());
            long stop = jb + B < cols ? jb + B : cols;
            long n = jb < cols ? stop - jb : 0;
            const float *p = xr + jb - B;
            if (chains == 4) {
                for (long k = 0; k < B; k += 64) {
                    if (k < n) { vm = wfc_max_f(vm, wfc_load_f(p + B + k)); vm = wfc_max_f(vm, wfc_load_f(p + B + k + 16));
                                 vm = wfc_max_f(vm, wfc_load_f(p + B + k + 32)); vm = wfc_max_f(vm, wfc_load_f(p + B + k + 48)); }
                    s[0] += wf_exp(wfc_load_f(p + k) - rv); s[1] += wf_exp(wfc_load_f(p + k + 16) - rv);
                    s[2] += wf_exp(wfc_load_f(p + k + 32) - rv); s[3] += wf_exp(wfc_load_f(p + k + 48) - rv);
                }
            } else {
                for (long k = 0; k < B; k += 16) {
                    if (k < n) vm = wfc_max_f(vm, wfc_load_f(p + B + k));
                    s[0] += wf_exp(wfc_load_f(p + k) - rv);
                }
            }
            if (n) {
                float nm = hmax(vm);
                if (nm > ref) { wf_vf c = wfc_splat_f(expf(ref - nm)); s[0] *= c; s[1] *= c; s[2] *= c; s[3] *= c; ref = nm; }
            }
        }
        out[r] = ref + logf(hsum((s[0] + s[1]) + (s[2] + s[3])));
    }
}

static double best(void (*f)(void *), void *a, int reps) {
    double b = 1e9;
    for (int i = 0; i < reps; i++) { double t = wfc_now(); f(a); t = wfc_now() - t; if (t < b) b = t; }
    return b;
}
struct A { float *x, *y, *w, *b; long rows, cols; int v; };
static void run_sm(void *p) { struct A *a = p; softmax_rows(a->x, a->y, a->rows, a->cols, a->v & 15, a->v >> 4); }
static void run_ln(void *p) { struct A *a = p; layernorm_rows(a->x, a->w, a->b, a->y, a->rows, a->cols, a->v); }
static void run_lse(void *p) { struct A *a = p; lse_rows(a->x, a->y, a->rows, a->cols, a->v); }
static void run_copy(void *p) { struct A *a = p; 
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < a->rows * a->cols; i += 16) wfc_store_f(a->y + i, wfc_load_f(a->x + i)); }
static void run_read(void *p) { struct A *a = p; long n = a->rows * a->cols; float total = 0;
    #pragma omp parallel for schedule(static) reduction(+:total)
    for (long c = 0; c < n; c += 65536) { wf_vf s = WF_F(0.0f), t = s, u = s, v = s;
      for (long i = c; i < c + 65536 && i < n; i += 64) { s += wfc_load_f(a->x + i); t += wfc_load_f(a->x + i + 16); u += wfc_load_f(a->x + i + 32); v += wfc_load_f(a->x + i + 48); }
      total += hsum(s + t + u + v); }
    a->y[0] = total; }

int main(int argc, char **argv) {
    long rows = 8192, cols = 1024;
    float *x = aligned_alloc(2 << 20, rows * cols * 4), *y = aligned_alloc(2 << 20, rows * cols * 4);
    float *w = aligned_alloc(64, cols * 4), *b = aligned_alloc(64, cols * 4);
    for (long i = 0; i < rows * cols; i++) { x[i] = (float)((i * 2654435761u) % 1000) / 100.0f; y[i] = 0; }
    for (long i = 0; i < cols; i++) { w[i] = 1.0f + i * 1e-3f; b[i] = 0.5f; }
    struct A a = {x, y, w, b, rows, cols, 0};
    printf("copy 8192x1024      %.3f ms\n", best(run_copy, &a, 30) * 1e3);
    int smv[][2] = {{0,0},{1,1},{1,3},{1,5},{2,3},{2,5},{1,2}};
    for (int k = 0; k < 7; k++) { a.v = smv[k][0] | (smv[k][1] << 4); printf("softmax  pf=%d mode=%d %.3f ms\n", smv[k][0], smv[k][1], best(run_sm, &a, 30) * 1e3); }
    for (int pf = 0; pf <= 2; pf++) { a.v = pf; printf("layernorm pf=%d     %.3f ms\n", pf, best(run_ln, &a, 30) * 1e3); }
    long cr = 512, cc = 128000;
    float *lx = aligned_alloc(2 << 20, cr * cc * 4);
    for (long i = 0; i < cr * cc; i++) lx[i] = (float)((i * 2654435761u) % 1000) / 100.0f;
    struct A c = {lx, y, w, b, cr, cc, 0};
    printf("read 512x128000     %.3f ms\n", best(run_read, &c, 5) * 1e3);
    for (int ch = 1; ch <= 4; ch += 3) { c.v = ch; printf("lse chains=%d       %.3f ms\n", ch, best(run_lse, &c, 5) * 1e3); }
    return 0;
}
