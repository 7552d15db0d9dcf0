// Fused per-position logits statistics (the kernel behind `src/model/kernels.rs`).
//
// One thread block per logits row, one pass over the vocabulary: each thread keeps a
// running maximum m, S = Σ e^(x−m), T = Σ e^(x−m)·(x−m) (rescaled whenever m grows)
// and a sorted top-K list in registers; the block then merges the threads' partials in
// a tree through shared memory. The mask token's column is skipped, and logits below
// FLOOR (−∞ and NaN included) count as FLOOR, exactly as the tensor-op reference
// (`engine::signals::device_signals`) does.
//
// Output per row, 2K + 3 floats: the K largest logits (best first; ties keep the lower
// id first; unused slots hold −∞), their ids as floats (exact below 2^24), then m, S, T.

#define K 8
#define THREADS 256
#define FLOOR (-1e30f)

struct Partial {
  float m;  // running maximum
  float s;  // Σ e^(x−m)
  float t;  // Σ e^(x−m)·(x−m)
};

// Rescales a partial to a larger maximum `m2`:
// Σ e^(x−m2)(x−m2) = e^(m−m2) · (T + (m−m2)·S).
__device__ __forceinline__ Partial rebase(Partial p, float m2) {
  if (p.s == 0.0f) {
    Partial q = {m2, 0.0f, 0.0f};
    return q;
  }
  float d = p.m - m2;
  float f = __expf(d);
  Partial q = {m2, p.s * f, (p.t + d * p.s) * f};
  return q;
}

__device__ __forceinline__ Partial combine(Partial a, Partial b) {
  float m = fmaxf(a.m, b.m);
  Partial x = rebase(a, m);
  Partial y = rebase(b, m);
  Partial r = {m, x.s + y.s, x.t + y.t};
  return r;
}

// (va, ia) ranks before (vb, ib): larger value, then lower id.
__device__ __forceinline__ bool before(float va, unsigned ia, float vb, unsigned ib) {
  return va > vb || (va == vb && ia < ib);
}

__device__ __forceinline__ void insert(float* vals, unsigned* ids, float v, unsigned id) {
  if (!before(v, id, vals[K - 1], ids[K - 1])) return;
  int at = K - 1;
  while (at > 0 && before(v, id, vals[at - 1], ids[at - 1])) {
    vals[at] = vals[at - 1];
    ids[at] = ids[at - 1];
    at--;
  }
  vals[at] = v;
  ids[at] = id;
}

extern "C" __global__ void specscope_signals_f32(
    const float* __restrict__ logits,  // (rows, vocab), contiguous
    float* __restrict__ out,           // (rows, 2K + 3)
    const unsigned vocab,
    const unsigned mask_id) {
  __shared__ float s_m[THREADS];
  __shared__ float s_s[THREADS];
  __shared__ float s_t[THREADS];
  __shared__ float s_vals[THREADS * K];
  __shared__ unsigned s_ids[THREADS * K];

  const unsigned row = blockIdx.x;
  const unsigned tid = threadIdx.x;
  const float* x = logits + (size_t)row * vocab;

  float vals[K];
  unsigned ids[K];
  for (int j = 0; j < K; j++) {
    vals[j] = -INFINITY;
    ids[j] = 0xffffffffu;
  }
  Partial p = {FLOOR, 0.0f, 0.0f};
  bool any = false;
  for (unsigned i = tid; i < vocab; i += THREADS) {
    if (i == mask_id) continue;
    float v = fmaxf(x[i], FLOOR);  // fmaxf(NaN, FLOOR) is FLOOR
    if (!any) {
      p.m = v;
      p.s = 1.0f;
      p.t = 0.0f;
      any = true;
    } else if (v > p.m) {
      p = rebase(p, v);
      p.s += 1.0f;
    } else {
      float d = v - p.m;
      float e = __expf(d);
      p.s += e;
      p.t += e * d;
    }
    insert(vals, ids, v, i);
  }
  if (!any) p.m = FLOOR;

  s_m[tid] = p.m;
  s_s[tid] = p.s;
  s_t[tid] = p.t;
  for (int j = 0; j < K; j++) {
    s_vals[tid * K + j] = vals[j];
    s_ids[tid * K + j] = ids[j];
  }
  __syncthreads();

  for (unsigned stride = THREADS / 2; stride > 0; stride >>= 1) {
    if (tid < stride) {
      Partial a = {s_m[tid], s_s[tid], s_t[tid]};
      unsigned o = tid + stride;
      Partial b = {s_m[o], s_s[o], s_t[o]};
      Partial c = combine(a, b);
      s_m[tid] = c.m;
      s_s[tid] = c.s;
      s_t[tid] = c.t;
      // Merge two sorted K-lists into the first.
      float mv[K];
      unsigned mi[K];
      int ia = 0, ib = 0;
      for (int j = 0; j < K; j++) {
        // Only K are taken in all, so at most one list runs out; never read past it.
        float va = ia < K ? s_vals[tid * K + ia] : -INFINITY;
        unsigned da = ia < K ? s_ids[tid * K + ia] : 0xffffffffu;
        float vb = ib < K ? s_vals[o * K + ib] : -INFINITY;
        unsigned db = ib < K ? s_ids[o * K + ib] : 0xffffffffu;
        if (ib >= K || (ia < K && before(va, da, vb, db))) {
          mv[j] = va;
          mi[j] = da;
          ia++;
        } else {
          mv[j] = vb;
          mi[j] = db;
          ib++;
        }
      }
      for (int j = 0; j < K; j++) {
        s_vals[tid * K + j] = mv[j];
        s_ids[tid * K + j] = mi[j];
      }
    }
    __syncthreads();
  }

  if (tid == 0) {
    float* o = out + (size_t)row * (2 * K + 3);
    for (int j = 0; j < K; j++) {
      o[j] = s_vals[j];
      o[K + j] = (float)s_ids[j];
    }
    o[2 * K] = s_m[0];
    o[2 * K + 1] = s_s[0];
    o[2 * K + 2] = s_t[0];
  }
}
