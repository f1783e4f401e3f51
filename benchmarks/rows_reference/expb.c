#include "prelude.h"
#include <stdio.h>
static inline wf_vf vmax(wf_vf a, wf_vf b) { return (wf_vf)_mm512_max_ps((__m512)a, (__m512)b); }
int main() {
  float *in = aligned_alloc(64, 4096*4), *out = aligned_alloc(64, 4096*4);
  for (int i = 0; i < 4096; i++) in[i] = 0.5f + i / 4096.0f;
  long reps = 20000; double best = 1e9;
  for (int t = 0; t < 5; t++) { double s = wfc_now();
    for (long r = 0; r < reps; r++) { for (long i = 0; i < 4096; i += 16) wfc_store_f(out + i, wf_exp(wfc_load_f(in + i))); __asm__ volatile("" ::: "memory"); }
    s = wfc_now() - s; if (s < best) best = s; }
  printf("exp store L1: %.3f ns/vector\n", best / (reps * 256.0) * 1e9);
  best = 1e9;
  for (int t = 0; t < 5; t++) { double s = wfc_now(); wf_vf acc = WF_F(0.0f), a1 = acc, a2 = acc, a3 = acc; wf_vf m = WF_F(0.0f);
    for (long r = 0; r < reps; r++) { for (long i = 0; i < 4096; i += 16) { acc += wf_exp(wfc_load_f(in + i) - m); } __asm__ volatile("" ::: "memory"); }
    s = wfc_now() - s; if (s < best) best = s; out[0] = acc[0]; }
  printf("exp sum 1 chain: %.3f ns/vector\n", best / (reps * 256.0) * 1e9);
  best = 1e9;
  for (int t = 0; t < 5; t++) { double s = wfc_now(); wf_vf acc = WF_F(0.0f); wf_vf m = WF_F(0.0f); wf_vf vm = WF_F(-1e30f);
    for (long r = 0; r < reps; r++) { for (long i = 0; i < 4096; i += 16) { vm = wfc_max_f(vm, wfc_load_f(in + ((i + 16) & 4095))); acc += wf_exp(wfc_load_f(in + i) - m); } __asm__ volatile("" ::: "memory"); }
    s = wfc_now() - s; if (s < best) best = s; out[0] = acc[0] + vm[1]; }
  printf("exp sum + nan-max: %.3f ns/vector\n", best / (reps * 256.0) * 1e9);
  best = 1e9;
  for (int t = 0; t < 5; t++) { double s = wfc_now(); wf_vf acc = WF_F(0.0f); wf_vf m = WF_F(0.0f); wf_vf vm = WF_F(-1e30f);
    for (long r = 0; r < reps; r++) { for (long i = 0; i < 4096; i += 16) { vm = vmax(vm, wfc_load_f(in + ((i + 16) & 4095))); acc += wf_exp(wfc_load_f(in + i) - m); } __asm__ volatile("" ::: "memory"); }
    s = wfc_now() - s; if (s < best) best = s; out[0] = acc[0] + vm[1]; }
  printf("exp sum + vmaxps: %.3f ns/vector\n", best / (reps * 256.0) * 1e9);
  return 0; }
