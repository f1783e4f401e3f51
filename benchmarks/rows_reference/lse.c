#include "prelude.h"
#include <stdio.h>
#ifndef LOAD
#define LOAD wfc_load_f
#endif
#ifndef OFF
#define OFF 0
#endif
static inline float hsum(wf_vf v) { return _mm512_reduce_add_ps((__m512)v); }
static inline float hmax(wf_vf v) { return _mm512_reduce_max_ps((__m512)v); }
static inline wf_vf pmax(wf_vf a, wf_vf b) { return (wf_vf)_mm512_max_ps((__m512)a, (__m512)b); }
static void lse_rows(const float *restrict x, float *restrict out, long rows, long cols, long pfd) {
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        const long B = 1024;
        wf_vf vm = WF_F(-__builtin_inff());
        for (long j = 0; j < B; j += 16) vm = pmax(vm, wfc_load_f(xr + j));
        float ref = hmax(vm);
        wf_vf s0 = WF_F(0.0f), s1 = s0, s2 = s0, s3 = s0;
        for (long jb = B; jb < cols; jb += B) {
            wf_vf rv = wfc_splat_f(ref);
            vm = WF_F(-__builtin_inff()); wf_vf vm1 = vm;
            const float *p = xr + jb - B;
            for (long k = 0; k < B; k += 64) {
                if (pfd) { __builtin_prefetch(p + B + pfd + k, 0, 3); __builtin_prefetch(p + B + pfd + k + 16, 0, 3); __builtin_prefetch(p + B + pfd + k + 32, 0, 3); __builtin_prefetch(p + B + pfd + k + 48, 0, 3); }
                vm = pmax(vm, LOAD(p + B + k)); vm1 = pmax(vm1, LOAD(p + B + k + 16));
                vm = pmax(vm, LOAD(p + B + k + 32)); vm1 = pmax(vm1, LOAD(p + B + k + 48));
                s0 += wf_exp(LOAD(p + k) - rv); s1 += wf_exp(LOAD(p + k + 16) - rv);
                s2 += wf_exp(LOAD(p + k + 32) - rv); s3 += wf_exp(LOAD(p + k + 48) - rv);
            }
            float nm = hmax(pmax(vm, vm1));
            if (nm > ref) { wf_vf c = wfc_splat_f(expf(ref - nm)); s0 *= c; s1 *= c; s2 *= c; s3 *= c; ref = nm; }
        }
        out[r] = ref + logf(hsum((s0 + s1) + (s2 + s3)));
    }
}
int main() {
    long cr = 512, cc = 128000;   /* 125 blocks exactly */
    float *lx = (float *)aligned_alloc(2 << 20, cr * cc * 4 + 4096) + OFF, out[512];
    for (long i = 0; i < cr * cc; i++) lx[i] = (float)((i * 2654435761u) % 1000) / 100.0f;
    long d[] = {0, 1024, 2048, 4096, 8192, 0};
    for (int round = 0; round < 2; round++)
    for (int k = 0; k < 6; k++) { double b = 1e9; for (int t = 0; t < 6; t++) { double s = wfc_now(); lse_rows(lx, out, cr, cc, d[k]); s = wfc_now() - s; if (s < b) b = s; }
        printf("lse pf distance %5ld floats: %.3f ms (%.2f ns/vector)\n", d[k], b * 1e3, b / (cr * cc / 16.0) * 1e9); }
    return 0; }
